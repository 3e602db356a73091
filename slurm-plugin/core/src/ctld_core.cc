#include "composer/slurm/ctld_core.h"

#include <algorithm>
#include <string_view>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/config/conf_file.h"
#include "composer/slurm/spank_core.h"

namespace composer::slurm {
namespace {

Error bad(const std::string& why) { return Error{ErrorCode::kInvalidArgument, why}; }

}  // namespace

Expected<ControllerJob> controller_job(const std::vector<std::string>& environment) {
  constexpr std::string_view kSpank = "SPANK_";
  std::vector<std::string> spank_env;
  auto value = [&environment](std::string_view name) -> std::optional<std::string> {
    const std::string prefix = std::string(name) + "=";
    for (const std::string& entry : environment) {
      if (entry.starts_with(prefix)) return entry.substr(prefix.size());
    }
    return std::nullopt;
  };
  for (const std::string& entry : environment) {
    if (entry.starts_with(kSpank)) spank_env.push_back(entry.substr(kSpank.size()));
  }
  ControllerJob job;
  auto number = [&value](std::string_view name, uint32_t* out) -> Status {
    std::optional<std::string> text = value(name);
    if (!text) return bad(std::string(name) + " is not set: not run as Slurm's PrologSlurmctld?");
    Expected<uint32_t> n = parse_count(*text, 0xfffffff0U);
    if (!n) return bad(std::string(name) + "=" + *text + ": expected a whole number");
    *out = *n;
    return Status::Ok();
  };
  if (Status s = number("SLURM_JOB_ID", &job.owner.job_id); !s) return s.error();
  if (Status s = number("SLURM_JOB_UID", &job.owner.uid); !s) return s.error();
  const std::optional<std::string> nodes = value("SLURM_JOB_NODELIST");
  if (!nodes || nodes->empty()) {
    return bad("SLURM_JOB_NODELIST is not set: not run as Slurm's PrologSlurmctld?");
  }
  Expected<std::vector<std::string>> names = config::expand_hostlist(*nodes);
  if (!names) return bad("SLURM_JOB_NODELIST=" + *nodes + ": " + names.error().message);
  job.nodes = std::move(*names);
  job.owner.user = value("SLURM_JOB_USER").value_or("");
  job.owner.account = value("SLURM_JOB_ACCOUNT").value_or("");
  if (job.owner.account == "(null)") job.owner.account.clear();
  Expected<JobOptions> options = options_from_spank_env(spank_env);
  if (!options) return options.error();
  job.options = std::move(*options);
  job.owner.workload = job.options.workload;
  return job;
}

Status controller_prolog(const ControllerJob& job, ComposerApi& api, uint32_t free_wait_s,
                         uint32_t outage_wait_s,
                         const std::function<void(const std::string&)>& log) {
  if (!job.options.composes()) return Status::Ok();
  const std::string at =
      "composer: prolog_slurmctld: job " + std::to_string(job.owner.job_id) + ": ";
  ComposeCall call;
  call.owner = job.owner;
  call.request = job.options.request;
  call.mem_policy = job.options.mem_policy;
  Expected<std::vector<Composition>> composed = compose_job_waiting(
      api, call, job.nodes, free_wait_s, outage_wait_s, [&](const std::string& l) { log(at + l); });
  if (!composed) {
    const std::string why = "job " + std::to_string(job.owner.job_id) + ": " +
                            compose_failure(job.options, composed.error());
    log("composer: prolog_slurmctld: " + why);
    return Error{composed.error().code, why};
  }
  std::string ids;
  for (const Composition& c : *composed) {
    ids += (ids.empty() ? "" : ", ") + c.node + " " + std::to_string(c.id);
  }
  log(at + std::to_string(composed->size()) + " node(s) ready (" + ids + ")");
  return Status::Ok();
}

Expected<std::vector<std::string>> completing_nodes(std::string_view squeue_output,
                                                    uint32_t job_id) {
  const std::string id = std::to_string(job_id);
  for (const std::string& line : split(std::string(squeue_output), '\n')) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() != 2 || trim(f[0]) != id) continue;
    const std::string list(trim(f[1]));
    if (list.empty()) return std::vector<std::string>{};
    return config::expand_hostlist(list);
  }
  return std::vector<std::string>{};
}

Status controller_epilog(const ControllerJob& job, ComposerApi& api, const SlurmProbe& slurm,
                         const std::function<void(const std::string&)>& log) {
  if (!job.options.composes()) return Status::Ok();
  const std::string at =
      "composer: epilog_slurmctld: job " + std::to_string(job.owner.job_id) + ": ";
  auto give_up = [&](const Error& e) {
    log(at + e.message + "; composerd's reconciler releases the job once Slurm has ended it");
    return e;
  };
  // Asked once, never waited on: a node still completing releases its own composition at the
  // end of its epilog, which must end after this program (ctld_core.h).
  Expected<std::vector<std::string>> left = slurm.completing();
  if (!left) return give_up(left.error());
  std::vector<std::string> gone;
  for (const std::string& node : job.nodes) {
    if (std::find(left->begin(), left->end(), node) == left->end()) gone.push_back(node);
  }
  if (gone.empty()) return Status::Ok();
  Expected<std::vector<std::string>> drained = slurm.drained(gone);
  if (!drained) return give_up(drained.error());
  if (!drained->empty()) {
    log(at + "keeping the compositions of drained node(s) " + join(*drained, ",") +
        " (an epilog that found its devices in use drains its node)");
  }
  Status out = Status::Ok();
  for (const std::string& node : gone) {
    if (std::find(drained->begin(), drained->end(), node) != drained->end()) continue;
    Expected<std::optional<Composition>> released = api.release(job.owner.job_id, node);
    if (!released) {
      out = give_up(released.error());
    } else if (*released) {
      log(at + node + " released (its node epilog did not)");
    }
  }
  return out;
}

}  // namespace composer::slurm
