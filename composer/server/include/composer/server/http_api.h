// composerd's HTTP routes (docs/API.md) on the front door's Router: every route family installed
// from here, each through the one request pipeline (src/route.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "composer/api/snapshot.h"
#include "composer/api/types.h"
#include "composer/core/device_admin.h"
#include "composer/core/live_pool.h"
#include "composer/core/service.h"
#include "composer/server/auth.h"

namespace composer::server {

class Metrics;
class Router;
class PolicyKeeper;
class SlurmSync;

struct ApiContext {
  CompositionService& service;  // compose and release
  DeviceAdmin& admin;           // holds, drains, foreign devices
  const LivePool& pool;         // the pool and hosts it shows
  const Authenticator& auth;
  std::vector<std::string> workloads;  // allowed classes; empty: any
  std::string fabric;
  std::string version;
  // How Slurm's pool licenses are kept (GET /v1/health): "local" (slurm.conf, held down by
  // reservations) or "remote" (slurmdbd's resources NAME@license_server).
  std::string slurm_licenses = "local";
  std::string license_server;
  int64_t started_ms = 0;
  const Clock& clock;
  // Called after a drain, a resume or a new policy version: what the snapshot shows changed.
  std::function<void()> pool_changed;
  // Called when a compose or a release has ended: what each zone has free changed.
  std::function<void()> compositions_changed;
  // The pool snapshot job_submit reads (GET /v1/snapshot), as published now.
  std::function<api::PoolSnapshot()> snapshot;
  // Counts compose/release outcomes and serves GET /metrics when set (metrics.h).
  Metrics* metrics = nullptr;
  // Serves /v1/policy when set (policy_keeper.h).
  PolicyKeeper* policy = nullptr;
  // With SlurmSync=yes: applies a policy to Slurm and shows its plan (slurm_sync.h).
  SlurmSync* slurm = nullptr;
  // With StateBackend=postgresql: adds the leadership to GET /v1/health (leader_watch.h).
  std::function<void(api::HealthInfo&)> leadership{};
};

void install_routes(Router& router, ApiContext& ctx);

}  // namespace composer::server
