// The controller's side of a composed job, for Slurm's PrologSlurmctld (composer-slurmctld):
// every node of the job composed before it launches, from slurmctld's host, so that a failure
// requeues a batch job (or refuses salloc/srun) instead of draining a node. The node prolog
// then only does the host side (plugstack argument compose=controller), each node's epilog
// clears the host side and releases its node, and EpilogSlurmctld (composer-slurmctld again)
// releases the nodes that ran no epilog (a node that failed under the job).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"
#include "composer/slurm/job_context.h"
#include "composer/slurm/options.h"

namespace composer::slurm {

struct ControllerJob {
  JobOwner owner;  // its workload is the job's --workload (options.workload)
  std::vector<std::string> nodes;
  JobOptions options;
};

// Reads the job from PrologSlurmctld's environment ("NAME=VALUE"): SLURM_JOB_ID,
// SLURM_JOB_NODELIST (a Slurm host list), SLURM_JOB_UID, SLURM_JOB_USER, SLURM_JOB_ACCOUNT
// ("(null)" when none) and the job's options as "SPANK_" + spank_env_name(option) (observed
// on Slurm 22.05). A missing or bad field is refused with a sentence naming it.
Expected<ControllerJob> controller_job(const std::vector<std::string>& environment);

// Composes the job on all of its nodes with one call (composerd composes them at once, all or
// nothing), asked again for up to free_wait_s while the pool is short and for up to
// outage_wait_s while composerd cannot be reached (compose_job_waiting): a composerd restart
// of a few seconds fails no job, so Slurm requeues none. The failure names the node that
// could not be composed. `log` gets one line per step.
Status controller_prolog(const ControllerJob& job, ComposerApi& api, uint32_t free_wait_s,
                         uint32_t outage_wait_s,
                         const std::function<void(const std::string&)>& log);

// What EpilogSlurmctld asks Slurm. EpilogSlurmctld starts when the job ends, beside the node
// epilogs (Slurm 22.05: 43 ms before them), and the job stays COMPLETING until it ends.
struct SlurmProbe {
  // The job's nodes whose epilog has not finished (squeue's %N of a completing job).
  std::function<Expected<std::vector<std::string>>()> completing;
  // Which of `nodes` are drained or draining (an epilog that failed drains its node).
  std::function<Expected<std::vector<std::string>>(const std::vector<std::string>& nodes)> drained;
};

// The nodes of job `job_id` that squeue lists as still completing, from the output of
// `squeue --all -h -t all -j JOB -o %A|%N`. Only the line whose %A is the job itself counts:
// for the task of an array whose id is the array's (the last task to start keeps it), squeue
// -j lists every task of the array.
Expected<std::vector<std::string>> completing_nodes(std::string_view squeue_output,
                                                    uint32_t job_id);

// EpilogSlurmctld: releases the nodes of the job that Slurm no longer lists as completing
// when it starts (a node that failed under the job runs no epilog), one by one, and keeps a
// drained node's composition. It waits for nothing: every other node's epilog releases its own
// node and so ends after this program. Slurm returns a job's licenses when the last of the two
// ends, and starts a scheduling pass at once at a node epilog's end but not at
// EpilogSlurmctld's (22.05): an EpilogSlurmctld that waited for the node epilogs left every
// next job to the backfill pass (docs/BENCHMARKS.md, "Short composed jobs";
// ControllerEpilog.ReleasesOnlyTheNodesThatRunNoEpilogAndWaitsForNone). When Slurm or
// composerd cannot be asked, composerd's reconciler releases what the ended job still holds.
// The failure is for the log only.
Status controller_epilog(const ControllerJob& job, ComposerApi& api, const SlurmProbe& slurm,
                         const std::function<void(const std::string&)>& log);

}  // namespace composer::slurm
