// The task and step hooks (slurmstepd): environment, fence, cpuset, steps for the busy check.
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "composer/slurm/busy_check.h"
#include "composer/slurm/device_fence.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/mem_policy.h"
#include "composer/slurm/spank_core.h"
#include "spank_hooks.h"

namespace composer::slurm {

Status task_init(JobContext& ctx, const SpankConfig& config) {
  Expected<uint32_t> job_id = ctx.job_id();
  if (!job_id) {
    ctx.error("composer: task: cannot get the job id: " + job_id.error().message);
    return job_id.error();
  }
  const std::string at = where(*job_id, ctx.node());
  Expected<std::optional<JobState>> state = read_job_state(config.state_dir, *job_id);
  if (!state) {
    ctx.error("composer: task: " + at + ": " + state.error().message);
    return state.error();
  }
  if (!state->has_value()) {
    Expected<JobOptions> options = read_job_options(ctx);
    if (options && !options->composes()) return Status::Ok();
    const Error e{ErrorCode::kNotFound, "composer: " + at +
                                            " asked for composed devices but the prolog left "
                                            "no record of them in " +
                                            state_path(config.state_dir, *job_id)};
    ctx.error(e.message);
    return e;
  }
  const JobState& s = **state;
  if (!s.error.empty()) {
    const Error e{ErrorCode::kInsufficient, "composer: " + at + " cannot run: " + s.error};
    ctx.error(e.message);
    return e;
  }
  for (const auto& [name, value] : task_environment(s)) {
    if (Status set = ctx.setenv(name, value); !set) {
      ctx.error("composer: task: " + at + ": cannot set " + name + ": " + set.error().message);
      return set;
    }
  }
  // After the privileged hook widened the cpuset to the CXL nodes; what the task executes
  // inherits the policy.
  if (Status placed = apply_mem_policy(config, s); !placed) {
    ctx.error("composer: task: " + at + ": " + placed.error().message);
    return placed;
  }
  return Status::Ok();
}

namespace {

// The cgroup v2 scope above the calling task's job cgroup (UnifiedFence::of_task), from
// <proc_root>/self/cgroup; nullopt when the task is in no job cgroup of Slurm's on cgroup v2.
std::optional<UnifiedFence> task_unified_cgroup(const SpankConfig& config, uint32_t job_id) {
  std::ifstream in(config.proc_root + "/self/cgroup");
  std::string self;
  std::getline(in, self, '\0');
  return UnifiedFence::of_task(unified_mount(config.unified_cgroup), self, job_id);
}

// The task's half of the fence (task_init_privileged).
// `v2`: the task's job cgroup on cgroup v2 (task_unified_cgroup), and `others` the devices the
// other jobs' state files name, each read once per task.
Status fence_task(JobContext& ctx, const SpankConfig& config, uint32_t job_id,
                  const std::string& at, const std::optional<JobState>& own,
                  const std::optional<UnifiedFence>& v2, const std::vector<Device>& others) {
  if (config.fence == Fence::kOff) return Status::Ok();
  const bool required = config.fence == Fence::kRequired;
  // cgroup v2: where the task is in a job cgroup of Slurm's, the node's program is rebuilt.
  if (v2) {
    Status s = refresh_unified_fence(config, *v2, job_id, true);
    if (s) return s;
    const std::string why = "composer: task: " + at +
                            ": fencing the jobs on this node from each other's composed " +
                            "devices (cgroup v2, " + v2->scope() + "): " + s.error().message;
    ctx.error(why + (required ? "; fence=required refuses the step" : ""));
    return required ? Status(Error{ErrorCode::kConflict, why}) : Status::Ok();
  }
  if (others.empty()) return Status::Ok();
  const HostDevices host(config.sysfs_root, config.proc_root, config.dev_root);
  std::vector<DeviceNode> deny = host.device_nodes(others);
  // Never the job's own: a file of another job can name a device only until its release.
  if (own) {
    for (const DeviceNode& mine : host.device_nodes(own->devices)) std::erase(deny, mine);
  }
  if (deny.empty()) return Status::Ok();
  const DeviceFence fence(config.devices_cgroup);
  const std::map<uint32_t, std::vector<std::string>> cgroups = fence.job_cgroups();
  const auto mine = cgroups.find(job_id);
  if (mine == cgroups.end()) {
    const std::string why =
        "composer: task: " + at + ": the composed devices of other jobs on this node (" +
        node_list(deny) + ") are not fenced from it: there is no devices cgroup job_" +
        std::to_string(job_id) + " under " + config.devices_cgroup +
        " (cgroup v1, TaskPlugin=task/cgroup with ConstrainDevices=yes) and its task is in no" +
        " job_" + std::to_string(job_id) + " cgroup v2 (TaskPlugin=task/cgroup)";
    if (!required) {
      ctx.info(why);
      return Status::Ok();
    }
    ctx.error(why + "; fence=required refuses the step");
    return Error{ErrorCode::kConflict, why};
  }
  for (const std::string& cgroup : mine->second) {
    if (Status s = fence.deny(cgroup, deny); !s) {
      const std::string why = "composer: task: " + at + ": fencing it from " + node_list(deny) +
                              ": " + s.error().message;
      ctx.error(why + (required ? "; fence=required refuses the step" : ""));
      if (required) return Error{ErrorCode::kConflict, why};
    }
  }
  return Status::Ok();
}

// The job's cpuset without the NUMA nodes of other jobs' CXL memory (narrow_mems): Slurm gives
// a job every memory node online when it starts, so a job that starts beside one whose CXL
// memory is online could allocate on it (kvm_slurm_cxl). Part of the fence, as its settings say.
Status fence_memory(JobContext& ctx, const SpankConfig& config, uint32_t job_id,
                    const std::string& at, const std::optional<JobState>& own,
                    const std::optional<UnifiedFence>& v2,
                    const std::vector<Device>& other_devices) {
  if (config.fence == Fence::kOff) return Status::Ok();
  std::set<int> others = cxl_nodes(other_devices);
  if (own) {
    for (int mine : cxl_nodes(own->devices)) others.erase(mine);
  }
  if (others.empty()) return Status::Ok();
  std::vector<std::string> cgroups;
  if (v2) {
    cgroups.push_back(v2->scope() + "/job_" + std::to_string(job_id));
  } else {
    const std::map<uint32_t, std::vector<std::string>> all =
        slurm_job_cgroups(config.cpuset_cgroup);
    // No cpuset of its own (ConstrainCores=no): every node with memory is the job's to use.
    if (auto mine = all.find(job_id); mine != all.end()) cgroups = mine->second;
  }
  const bool required = config.fence == Fence::kRequired;
  for (const std::string& cgroup : cgroups) {
    if (Status s = narrow_mems(cgroup, others); !s) {
      const std::string why = "composer: task: " + at + ": fencing it from NUMA node " +
                              node_list_text(others) +
                              " of other jobs' CXL memory: " + s.error().message;
      ctx.error(why + (required ? "; fence=required refuses the step" : ""));
      if (required) return Error{ErrorCode::kConflict, why};
    }
  }
  return Status::Ok();
}

// The job's cpuset widened to the NUMA nodes its CXL memory became (widen_mems).
void widen_cpuset(JobContext& ctx, const SpankConfig& config, uint32_t job_id,
                  const std::string& at, const JobState& own,
                  const std::optional<UnifiedFence>& v2) {
  std::set<int> nodes;
  for (const Device& d : own.devices) {
    if (d.type != DeviceType::kMem) continue;
    if (std::optional<std::set<int>> n = parse_node_list(numa_node(d.address)); n) {
      nodes.insert(n->begin(), n->end());
    }
  }
  if (nodes.empty()) return;
  if (v2) {
    const std::string job = v2->scope() + "/job_" + std::to_string(job_id);
    if (Status s = widen_unified_mems(job, nodes); !s) {
      ctx.error("composer: task: " + at + ": its cpuset does not include NUMA node " +
                node_list_text(nodes) + " of its CXL memory: " + s.error().message);
    }
    return;
  }
  const std::map<uint32_t, std::vector<std::string>> cgroups =
      slurm_job_cgroups(config.cpuset_cgroup);
  const auto mine = cgroups.find(job_id);
  if (mine == cgroups.end()) return;  // no cpuset of its own: every node with memory is allowed
  for (const std::string& cgroup : mine->second) {
    if (Status s = widen_mems(config.cpuset_cgroup, cgroup, nodes); !s) {
      ctx.error("composer: task: " + at + ": its cpuset does not include NUMA node " +
                node_list_text(nodes) + " of its CXL memory: " + s.error().message);
    }
  }
}

}  // namespace

Status task_init_privileged(JobContext& ctx, const SpankConfig& config) {
  if (config.host_check == HostCheck::kOff) return Status::Ok();
  Expected<uint32_t> job_id = ctx.job_id();
  if (!job_id) {
    ctx.error("composer: task: cannot get the job id: " + job_id.error().message);
    return job_id.error();
  }
  const std::string at = where(*job_id, ctx.node());
  std::optional<JobState> own;
  if (Expected<std::optional<JobState>> file = read_job_state(config.state_dir, *job_id); file) {
    own = std::move(*file);
  }
  // Read once for both, and only where one of them may use it.
  std::optional<UnifiedFence> v2;
  if (config.fence != Fence::kOff || own) v2 = task_unified_cgroup(config, *job_id);
  // The other jobs' devices, for both fences (the device fence on cgroup v2 reads the state
  // files itself, to build the node's program).
  const std::vector<Device> others = config.fence == Fence::kOff
                                         ? std::vector<Device>{}
                                         : devices_of_other_jobs(config.state_dir, *job_id);
  if (Status s = fence_task(ctx, config, *job_id, at, own, v2, others); !s) return s;
  if (Status s = fence_memory(ctx, config, *job_id, at, own, v2, others); !s) return s;
  if (own) widen_cpuset(ctx, config, *job_id, at, *own, v2);
  return Status::Ok();
}

Status job_step_started(JobContext& ctx, const SpankConfig& config) {
  if (config.host_check == HostCheck::kOff) return Status::Ok();
  // A step whose id cannot be read counts as another step: its processes may outlive the walk.
  Expected<uint32_t> step = ctx.step_id();
  if (step && *step == kBatchStep) return Status::Ok();
  Expected<uint32_t> job_id = ctx.job_id();
  if (!job_id) {
    ctx.error("composer: step start: cannot get the job id: " + job_id.error().message);
    return job_id.error();
  }
  // Every job's steps, not only those of a job with a state file: under PrologFlags=RunInJob
  // the extern step starts before the prolog writes it.
  if (Status s = note_step(config.state_dir, *job_id); !s) {
    std::error_code ec;
    const bool composed = std::filesystem::exists(state_path(config.state_dir, *job_id), ec);
    const Error e{s.error().code,
                  "composer: step start: " + where(*job_id, ctx.node()) +
                      ": cannot record the step for the epilog's busy check (" + s.error().message +
                      ")" +
                      (composed ? "; the step does not start" : "; the job has no devices here")};
    ctx.error(e.message);
    if (composed) return e;
  }
  return Status::Ok();
}

void job_step_ended(JobContext& ctx, const SpankConfig& config) {
  if (config.host_check == HostCheck::kOff) return;
  Expected<uint32_t> step = ctx.step_id();
  if (!step || *step != kBatchStep) return;
  Expected<uint32_t> job_id = ctx.job_id();
  if (!job_id) return;
  Expected<std::optional<JobState>> state = read_job_state(config.state_dir, *job_id);
  if (!state || !state->has_value() || (*state)->devices.empty()) return;
  // The site's GPU hook lets its daemons go in the epilog, before the walk that counts.
  if (has_gpu((*state)->devices) && !config.gpu_hook.empty()) return;
  const HostDevices host(config.sysfs_root, config.proc_root, config.dev_root);
  if (Status s = ask_at_batch_end(host, config.state_dir, *job_id, (*state)->composition_id); !s) {
    ctx.error("composer: batch script end: " + where(*job_id, ctx.node()) +
              ": cannot ask for the busy check (" + s.error().message + "); the epilog asks alone");
  }
}

}  // namespace composer::slurm
