// Slurm's commands as composerd runs them, and the jobs Slurm runs now, as the reconciler
// compares them with live compositions.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/common/subprocess.h"

namespace composer::server {

// Runs a Slurm command (argv[0]: a path, or a name on PATH) with SLURM_CONF=`slurm_conf`, or
// without SLURM_CONF when it is empty (the command's default, never composerd's own), bounded by
// `timeout_ms`; `with_stderr` folds its standard error into the output.
Expected<RunResult> run_slurm_command(std::vector<std::string> argv, const std::string& slurm_conf,
                                      int timeout_ms, bool with_stderr = false);
// How run_slurm_command runs it, for run_checked.
RunOptions slurm_command(std::vector<std::string> argv, const std::string& slurm_conf,
                         int timeout_ms, bool with_stderr = false);

// Runs `squeue --noheader --format=%A --states=R,S,CG,CF` (with SLURM_CONF set when
// `slurm_conf` is not empty), bounded by `timeout_ms`. Any failure is an error: the caller
// must then assume every job still runs.
Expected<std::set<uint32_t>> slurm_active_jobs(const std::string& squeue,
                                               const std::string& slurm_conf, int timeout_ms);

// Runs `sinfo --all -h -N -o %N|%T`: the nodes Slurm shows drained or draining
// (drained_nodes). Any failure is an error: the caller must then assume every node is drained.
Expected<std::set<std::string>> slurm_drained_nodes(const std::string& sinfo,
                                                    const std::string& slurm_conf, int timeout_ms);

// The job ids in squeue's output, one per line. Refuses anything else.
Expected<std::set<uint32_t>> parse_job_ids(const std::string& text);

}  // namespace composer::server
