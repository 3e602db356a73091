// The /v1 HTTP routes (docs/API.md) on an httplib::Server.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "composer/core/service.h"
#include "composer/server/auth.h"

namespace httplib {
class Server;
}

namespace composer::server {

struct ApiContext {
  CompositionService& service;
  const Authenticator& auth;
  std::vector<std::string> workloads;  // allowed classes; empty: any
  std::string fabric;
  std::string version;
  int64_t started_ms = 0;
  const Clock& clock;
  std::function<void()> pool_changed;  // called after drain/resume
  // Counts compose/release outcomes and serves GET /metrics when set (metrics.h).
  class Metrics* metrics = nullptr;
};

void install_routes(httplib::Server& server, ApiContext& ctx);

}  // namespace composer::server
