// The jobs Slurm runs now, as the reconciler compares them with live compositions.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "composer/common/error.h"

namespace composer::server {

// Runs `squeue --noheader --format=%A --states=R,S,CG,CF` (with SLURM_CONF set when
// `slurm_conf` is not empty), bounded by `timeout_ms`. Any failure is an error: the caller
// must then assume every job still runs.
Expected<std::set<uint32_t>> slurm_active_jobs(const std::string& squeue,
                                               const std::string& slurm_conf, int timeout_ms);

// The job ids in squeue's output, one per line. Refuses anything else.
Expected<std::set<uint32_t>> parse_job_ids(const std::string& text);

}  // namespace composer::server
