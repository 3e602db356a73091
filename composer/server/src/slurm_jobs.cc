#include "composer/server/slurm_jobs.h"

#include <sstream>

#include "composer/common/slurm_text.h"
#include "composer/common/subprocess.h"
#include "composer/common/units.h"

namespace composer::server {

Expected<std::set<uint32_t>> parse_job_ids(const std::string& text) {
  std::set<uint32_t> ids;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto id = parse_count(line, 4294967294U);
    if (!id) return Error{ErrorCode::kInternal, "unexpected line from squeue: '" + line + "'"};
    ids.insert(*id);
  }
  return ids;
}

RunOptions slurm_command(std::vector<std::string> argv, const std::string& slurm_conf,
                         int timeout_ms, bool with_stderr) {
  RunOptions run{.argv = std::move(argv), .with_stderr = with_stderr, .timeout_ms = timeout_ms};
  // Never composerd's own SLURM_CONF: the configured one, else the command's default.
  run.env.push_back(slurm_conf.empty() ? "SLURM_CONF" : "SLURM_CONF=" + slurm_conf);
  return run;
}

Expected<RunResult> run_slurm_command(std::vector<std::string> argv, const std::string& slurm_conf,
                                      int timeout_ms, bool with_stderr) {
  return run_program(slurm_command(std::move(argv), slurm_conf, timeout_ms, with_stderr));
}

Expected<std::set<uint32_t>> slurm_active_jobs(const std::string& squeue,
                                               const std::string& slurm_conf, int timeout_ms) {
  Expected<RunResult> ran = run_slurm_command(
      {squeue, "--all", "--noheader", "--format=%A", "--states=R,S,CG,CF"}, slurm_conf, timeout_ms);
  if (!ran) return ran.error();
  if (ran->status != 0) {
    return Error{ErrorCode::kUnavailable, squeue + " failed (is slurmctld up?)"};
  }
  return parse_job_ids(ran->output);
}

Expected<std::set<std::string>> slurm_drained_nodes(const std::string& sinfo,
                                                    const std::string& slurm_conf, int timeout_ms) {
  Expected<RunResult> ran =
      run_slurm_command({sinfo, "--all", "-h", "-N", "-o", "%N|%T"}, slurm_conf, timeout_ms);
  if (!ran) return ran.error();
  if (ran->status != 0) {
    return Error{ErrorCode::kUnavailable, sinfo + " failed (is slurmctld up?)"};
  }
  const std::vector<std::string> nodes = drained_nodes(ran->output);
  return std::set<std::string>(nodes.begin(), nodes.end());
}

}  // namespace composer::server
