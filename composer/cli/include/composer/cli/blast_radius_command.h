// `composerctl blast-radius DEVICE|DOMAIN`: what a failure, or a planned maintenance, of one
// device or one failure domain would hit now. Computed from the pool's devices and the live
// compositions as composerd answers them (GET /v1/devices, GET /v1/compositions?live=true).
#pragma once

#include <json/value.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "composer/cli/output.h"
#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::cli {

// One live composition that uses the target.
struct BlastHit {
  int64_t composition_id = 0;
  uint32_t job_id = 0;
  std::string node;
  std::string user;
  std::string account;
  std::string workload;
  CompositionState state = CompositionState::kReady;
  std::vector<std::string> devices_hit;  // its devices in the target, sorted
  size_t devices = 0;                    // all its devices
};

// One workload class's running capacity and what of it the target would take. A job is hit
// when any of its compositions uses the target, and it loses all it holds (on every node).
struct ClassShare {
  std::string workload;  // "" for compositions without a class
  uint32_t jobs_hit = 0;
  uint32_t jobs = 0;
  uint32_t devices_hit = 0;  // devices held by the hit jobs
  uint32_t devices = 0;      // devices held by all the class's live jobs
};

struct BlastRadius {
  std::string target;  // the device id, or the domain as LEVEL:NAME
  bool domain = false;
  PoolRow counts;  // the target's devices by state (type, model and zone empty)
  std::vector<BlastHit> hits;
  std::vector<ClassShare> classes;  // every class with live jobs, by name
  std::vector<std::string> users;   // of the hit compositions, sorted
  std::vector<std::string> nodes;
  // The hosts (Slurm nodes) in the target domain, sorted: every composition on them is hit,
  // whatever its devices (a failed switch cuts the host off from all of them).
  std::vector<std::string> hosts;
  // Every device of the target drained, none in a composition: ready for its maintenance.
  bool drained_and_empty() const {
    return counts.total > 0 && counts.drained == counts.total && hits.empty();
  }
};

// `target` is a device id, a domain as LEVEL:NAME, or a domain's bare NAME when one level
// alone has it; the domains are the devices' and the hosts'. kNotFound with a sentence naming
// the pool's domains when it is none of them; kInvalidArgument when a bare name is in several
// levels.
Expected<BlastRadius> blast_radius(std::string_view target, const std::vector<Device>& devices,
                                   const std::vector<Composition>& live,
                                   const std::vector<Host>& hosts = {});

// The hit compositions, one row each (what -P and -o print).
Table blast_table(const BlastRadius& radius);
// The text form: a line on the target's devices, the hit compositions, each class's share,
// and the users and nodes hit.
std::string blast_text(const BlastRadius& radius, const OutputOptions& options);
Json::Value blast_to_json(const BlastRadius& radius);

}  // namespace composer::cli
