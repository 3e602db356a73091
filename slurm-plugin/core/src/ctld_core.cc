#include "composer/slurm/ctld_core.h"

#include <string_view>

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
  if (Status s = number("SLURM_JOB_ID", &job.job_id); !s) return s.error();
  if (Status s = number("SLURM_JOB_UID", &job.uid); !s) return s.error();
  const std::optional<std::string> nodes = value("SLURM_JOB_NODELIST");
  if (!nodes || nodes->empty()) {
    return bad("SLURM_JOB_NODELIST is not set: not run as Slurm's PrologSlurmctld?");
  }
  Expected<std::vector<std::string>> names = config::expand_hostlist(*nodes);
  if (!names) return bad("SLURM_JOB_NODELIST=" + *nodes + ": " + names.error().message);
  job.nodes = std::move(*names);
  job.user = value("SLURM_JOB_USER").value_or("");
  job.account = value("SLURM_JOB_ACCOUNT").value_or("");
  if (job.account == "(null)") job.account.clear();
  Expected<JobOptions> options = options_from_spank_env(spank_env);
  if (!options) return options.error();
  job.options = std::move(*options);
  return job;
}

Status controller_prolog(const ControllerJob& job, ComposerApi& api, uint32_t free_wait_s,
                         const std::function<void(const std::string&)>& log) {
  if (!job.options.composes()) return Status::Ok();
  std::vector<std::string> composed;
  for (const std::string& node : job.nodes) {
    ComposeCall call;
    call.job_id = job.job_id;
    call.node = node;
    call.uid = job.uid;
    call.user = job.user;
    call.account = job.account;
    call.workload = job.options.workload;
    call.request = job.options.request;
    Expected<Composition> c = compose_waiting(api, call, free_wait_s, [&](const std::string& l) {
      log("composer: prolog_slurmctld: job " + std::to_string(job.job_id) + " on node " + node +
          ": " + l);
    });
    if (!c) {
      const std::string why = "job " + std::to_string(job.job_id) + " on node " + node + ": " +
                              compose_failure(job.options, c.error());
      log("composer: prolog_slurmctld: " + why);
      for (const std::string& done : composed) {
        Expected<bool> released = api.release(job.job_id, done);
        log("composer: prolog_slurmctld: job " + std::to_string(job.job_id) + " on node " + done +
            (released
                 ? ": released"
                 : ": release failed, composerd's reconciler will: " + released.error().message));
      }
      return Error{c.error().code, why};
    }
    composed.push_back(node);
    log("composer: prolog_slurmctld: job " + std::to_string(job.job_id) + " on node " + node +
        ": composition " + std::to_string(c->id) + " ready");
  }
  return Status::Ok();
}

}  // namespace composer::slurm
