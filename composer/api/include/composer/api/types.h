// Bodies of the HTTP API (docs/API.md) that are not domain objects of the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::api {

// Upper bound on GPUs and NVMe drives one job may ask for on one node. No host has more attach
// slots; a larger number is a typo, not a job.
inline constexpr uint32_t kMaxDevicesPerNode = 1024;

// PUT /v1/compositions/{job}/{node} and PUT /v1/compositions/{job}: who the job belongs to
// and what it asks for per node; `nodes` (only in the second, and there required) the job's
// nodes, each composed with `request`. The owner's job_id is the path's {job}: the body's
// JSON neither carries nor reads it.
struct ComposeBody {
  JobOwner owner{};
  Request request;
  std::vector<std::string> nodes{};
  // --compose-mem-policy as the job gave it (to_string(MemPolicy)); empty: not given, so the
  // workload class's default (the policy's MemPolicy line), else preferred.
  std::string mem_policy{};

  bool operator==(const ComposeBody&) const = default;
};

// GET /v1/health.
// status "ok", or "warning" with the sentences in `warnings` (an empty pool, say).
struct HealthInfo {
  std::string status, fabric, version;
  int64_t uptime_s = 0;
  std::vector<std::string> warnings{};
  // "local": the pool's licenses are slurm.conf's; "remote": slurmdbd's, named
  // NAME@license_server (composer.conf's SlurmLicenses=). Absent from older composerd: local.
  std::string slurm_licenses = "local";
  std::string license_server{};
  // StateBackend=postgresql, several composerd on one store: "active" or "standby", the
  // leadership epoch, the URL of the active composerd and since when (ms since the Unix epoch)
  // it is. Empty role (absent from the JSON): one composerd alone, always active (SQLite).
  std::string role{};
  int64_t epoch = 0;
  std::string active{};
  int64_t active_since_ms = 0;

  bool operator==(const HealthInfo&) const = default;
};

// One page of a list (GET /v1/devices, /v1/compositions, /v1/events): `next_cursor` asks for
// the next page (the list's own order: devices by id, compositions newest first, events by
// time), empty on the last page.
template <typename T>
struct Page {
  std::vector<T> items;
  std::string next_cursor{};
};
using DevicePage = Page<Device>;
using CompositionPage = Page<Composition>;
using EventPage = Page<Event>;

// The body of a drain (POST /v1/devices/{id}/drain, and of domains) and of a node's hold on a
// composition: why.
struct DrainBody {
  std::string reason;

  bool operator==(const DrainBody&) const = default;
};

// The body of every 4xx/5xx answer: {"error": {"code": ..., "message": ...}}.
struct ErrorBody {
  Error error;
};

}  // namespace composer::api
