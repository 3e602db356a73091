// The controller's side of a composed job, for Slurm's PrologSlurmctld (composer-slurmctld):
// every node of the job composed before it launches, from slurmctld's host, so that a failure
// requeues a batch job (or refuses salloc/srun) instead of draining a node. The node prolog
// then only does the host side (plugstack argument compose=controller) and each node's epilog
// releases its node after the host side is clear, as with compose=node.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/slurm/job_context.h"
#include "composer/slurm/options.h"

namespace composer::slurm {

struct ControllerJob {
  uint32_t job_id = 0;
  std::vector<std::string> nodes;
  uint32_t uid = 0;
  std::string user, account;
  JobOptions options;
};

// Reads the job from PrologSlurmctld's environment ("NAME=VALUE"): SLURM_JOB_ID,
// SLURM_JOB_NODELIST (a Slurm host list), SLURM_JOB_UID, SLURM_JOB_USER, SLURM_JOB_ACCOUNT
// ("(null)" when none) and the job's options as "SPANK_" + spank_env_name(option) (observed
// on Slurm 22.05). A missing or bad field is refused with a sentence naming it.
Expected<ControllerJob> controller_job(const std::vector<std::string>& environment);

// Composes the job on every node, one node after the other, each asked again for up to
// free_wait_s while the pool is short (compose_waiting). When a node fails, releases what this
// call composed and returns the failure, naming the node. `log` gets one line per step.
Status controller_prolog(const ControllerJob& job, ComposerApi& api, uint32_t free_wait_s,
                         const std::function<void(const std::string&)>& log);

}  // namespace composer::slurm
