// What spank_composer.so does in each hook, free of Slurm: the plugin's entry points only pick
// the function for the context and hand over a JobContext and a ComposerApi.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/slurm/job_context.h"
#include "composer/slurm/options.h"
#include "composer/slurm/plugin_config.h"

namespace composer::slurm {

// The job's options as the context reports them (a bad value is an error with the sentence).
Expected<JobOptions> read_job_options(JobContext& ctx);

// Job prolog (root, slurmd). Asks composerd to compose when the job asked for anything
// (compose=node; under compose=controller it reads the composition PrologSlurmctld made), makes
// the host see the devices and writes the job's state file. First it removes the state files
// other jobs left with devices whose compositions composerd no longer holds (their epilogs
// never ran here, e.g. the node rebooted under them). Returns an error, and so fails the
// prolog and drains the node, only for a fault of the fabric or of this node (and for a
// composerd unreachable for longer than outage_wait_s under on_unavailable=drain). A request that
// cannot be served for any other reason is recorded in the state file and fails the job's steps
// instead. Logs one line naming the job, the node and the cause for every failure.
Status job_prolog(JobContext& ctx, ComposerApi& api, const SpankConfig& config);

// api.compose, asked again every 0.25 s for up to free_wait_s while composerd answers
// insufficient_resources: Slurm gives a finished job's licenses to the next job before that
// job's epilog has released its devices, so a shortfall at a start is most often a release
// under way. Also asked again every second for up to outage_wait_s while composerd cannot be
// reached or answers unavailable (a restart). `log` gets one line when a wait starts and one
// when composerd answers again after an outage.
Expected<Composition> compose_waiting(ComposerApi& api, const ComposeCall& call,
                                      uint32_t free_wait_s, uint32_t outage_wait_s,
                                      const std::function<void(const std::string&)>& log);
// The same for api.compose_job: the job on all of `nodes` at once.
Expected<std::vector<Composition>> compose_job_waiting(
    ComposerApi& api, const ComposeCall& call, const std::vector<std::string>& nodes,
    uint32_t free_wait_s, uint32_t outage_wait_s,
    const std::function<void(const std::string&)>& log);

// "compose compose-gpus=2 failed (unavailable): ...": how a failed compose is worded, by the
// prolog and by composer-slurmctld alike.
std::string compose_failure(const JobOptions& options, const Error& e);

// Task start (remote context, the job's user). Exports the device variables from the state
// file; fails the step when the prolog recorded that the job cannot get its devices.
Status task_init(JobContext& ctx, const SpankConfig& config);

// Task start, privileged (remote context, root, before the user's program runs): the devices
// the state files of the other jobs on the node name are denied in the job's devices cgroup
// (DeviceFence), never the job's own. Without such a cgroup it logs a line (fence=auto) or
// fails the step (fence=required); nothing to do where no other job holds composed devices.
// The NUMA nodes of the other jobs' CXL memory leave the job's cpuset (narrow_mems; logged, or
// with fence=required the step fails, where it cannot be narrowed). Then the job's cpuset
// (where Slurm made one) is widened to the NUMA nodes of its own CXL memory (widen_mems); a
// cpuset that cannot be widened is logged, and the task runs.
Status task_init_privileged(JobContext& ctx, const SpankConfig& config);

// The node check (composer-node-check, root, outside any job: slurmd's HealthCheckProgram or
// a node health script calls it): each held composition on the node (JobState::held) whose
// devices nothing holds any more is removed from the host and released, as the next prolog or
// epilog on the node would; on an idle node nothing else would. Answers how many stay held
// (their holders logged).
size_t release_held_on_node(JobContext& ctx, ComposerApi& api, const SpankConfig& config);

// The node check's GPU health check (gpu_health.h): the GPUs each state file on the node names
// (running jobs, and held compositions) are checked on the bus and with NVML (gpu_health=);
// each bad one is reported to composerd, which marks it failed and gives the job holding it its
// class's reaction; the node is never drained for it. Answers how many were bad.
size_t check_gpu_health_on_node(JobContext& ctx, ComposerApi& api, const SpankConfig& config);

// Step start (remote context, root, in slurmstepd before the step's processes start): a step
// other than the batch script is recorded for the epilog's busy check (note_step,
// busy_check.h), which removes the record (forget_steps where it makes none). One that cannot
// be recorded fails the step, with the sentence, where the job has a state file on the node,
// and is logged otherwise (StepStartRecordsEveryStepButTheBatchScript).
Status job_step_started(JobContext& ctx, const SpankConfig& config);

// Step end (remote context, root, after Slurm has killed and waited for every process of the
// step): the batch script's end of a job with devices asks for the busy check and walks where
// no walk is under way (ask_at_batch_end), so that its epilog finds the answer waiting; not
// with host_check=off, nor for GPUs where a gpu_hook must first let its daemons go
// (BatchScriptEndAsksForTheBusyCheck). A failure is logged; the epilog then asks alone.
void job_step_ended(JobContext& ctx, const SpankConfig& config);

// Job epilog (root, slurmd). Waits (busy_wait) until no process holds an attached device,
// removes the devices from the host, asks composerd to release its node's composition (under
// either compose= mode: UnderControllerComposeTheEpilogReleasesItsNode) and deletes the state
// file. A device
// still in use after busy_wait is not pulled from under its process: the epilog sets the
// node's hold on the composition (ComposerApi::hold), which composerd's releases respect, and
// a later prolog, epilog or composer-node-check on the node releases it once it is free
// (EpilogHoldsDevicesAProcessStillHoldsAndALaterHookReleasesThem). Fails, and so drains the
// node, only when composerd cannot be asked to hold
// (EpilogFailsWhenComposerdCannotHoldDevicesStillInUse). A failed release is logged and left
// to composerd's reconciler (ReleaseFailureNeverFailsTheEpilog).
Status job_epilog(JobContext& ctx, ComposerApi& api, const SpankConfig& config);

}  // namespace composer::slurm
