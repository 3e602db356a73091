// The job prolog: the compose, or the composition PrologSlurmctld made, and its host side.
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "composer/slurm/device_fence.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/mem_policy.h"
#include "composer/slurm/spank_core.h"
#include "spank_hooks.h"

namespace composer::slurm {
namespace {

// Faults of the fabric or of this node: the only reasons a prolog may drain the node.
bool node_fault(ErrorCode code) {
  return code == ErrorCode::kFabric || code == ErrorCode::kTimeout ||
         code == ErrorCode::kUnauthenticated;
}

std::string device_list(const std::vector<Device>& devices) {
  std::string out;
  for (const Device& d : devices) {
    out += (out.empty() ? "" : ",") + d.id;
    if (!d.address.empty()) out += "@" + d.address;
  }
  return out.empty() ? "no devices" : out;
}

// The job's CXL nodes out of the cpuset of every other job on the node (narrow_mems): a job
// whose task ran after this job's memory came online but before its state file named it got
// the node from Slurm and did not see it to take it out (the task's half, task_init_privileged).
void fence_memory_from_others(JobContext& ctx, const SpankConfig& config, uint32_t job_id,
                              const std::vector<Device>& devices, const std::string& said) {
  const std::set<int> nodes = cxl_nodes(devices);
  if (nodes.empty()) return;
  std::vector<std::string> cgroups;
  for (const auto& [other, in_v1] : slurm_job_cgroups(config.cpuset_cgroup)) {
    if (other != job_id) cgroups.insert(cgroups.end(), in_v1.begin(), in_v1.end());
  }
  if (std::optional<UnifiedFence> v2 = recorded_unified_fence(config); v2) {
    const std::string mine = "job_" + std::to_string(job_id);
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(v2->scope(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.starts_with("job_") && name != mine) cgroups.push_back(e.path().string());
    }
  }
  for (const std::string& cgroup : cgroups) {
    if (Status s = narrow_mems(cgroup, nodes); !s) {
      ctx.error(said + "fencing " + cgroup + " from NUMA node " + node_list_text(nodes) +
                " of its CXL memory: " + s.error().message);
    }
  }
}

// The prolog's half of the fence (DeviceFence): the job's devices denied in the devices cgroup
// of every other job on the node. Called once the state file names them, so that a job whose
// cgroup comes later reads them there. A rule that cannot be written is logged: the other job
// started before this one, and failing this prolog would not take its access away.
void fence_from_others(JobContext& ctx, const SpankConfig& config, uint32_t job_id,
                       const HostDevices& host, const std::vector<Device>& devices,
                       const std::string& said) {
  if (config.fence == Fence::kOff || config.host_check == HostCheck::kOff) return;
  fence_memory_from_others(ctx, config, job_id, devices, said);
  const std::vector<DeviceNode> nodes = host.device_nodes(devices);
  if (nodes.empty()) return;
  const DeviceFence fence(config.devices_cgroup);
  for (const auto& [other, cgroups] : fence.job_cgroups()) {
    if (other == job_id) continue;
    for (const std::string& cgroup : cgroups) {
      if (Status s = fence.deny(cgroup, nodes); !s) {
        ctx.error(said + "fencing job " + std::to_string(other) + " from " + node_list(nodes) +
                  ": " + s.error().message);
      }
    }
  }
  if (std::optional<UnifiedFence> v2 = recorded_unified_fence(config); v2) {
    if (Status s = refresh_unified_fence(config, *v2, job_id, false); !s) {
      ctx.error(said + "fencing the other jobs from " + node_list(nodes) +
                " (cgroup v2): " + s.error().message);
    }
  }
}

// Brings the CXL memory devices of `devices` online on the host (HostDevices::online_memory)
// and records the NUMA node each became as its address ("numa:N").
Status online_memory(const HostDevices& host, const SpankConfig& config,
                     std::vector<Device>& devices) {
  std::vector<Device> memory;
  for (const Device& d : devices) {
    if (d.type == DeviceType::kMem) memory.push_back(d);
  }
  if (memory.empty()) return Status::Ok();
  Expected<std::vector<std::string>> nodes =
      host.online_memory(memory, std::chrono::seconds(config.host_wait_s), config.state_dir);
  if (!nodes) return nodes.error();
  size_t k = 0;
  for (Device& d : devices) {
    if (d.type != DeviceType::kMem) continue;
    if (const std::string& node = (*nodes)[k++]; !node.empty()) d.address = "numa:" + node;
  }
  return Status::Ok();
}

// The host side of a composition the prolog got: find the devices on the host, record what
// the tasks export. Devices the host does not show are given back at once. `before` is what
// the host showed before the attach, when this prolog composed; else what it shows now.
Status host_side(JobContext& ctx, ComposerApi& api, const SpankConfig& config, uint32_t job_id,
                 const std::string& node, const std::string& at, JobState& state,
                 const Composition& composition, std::optional<PciFunctions> before) {
  state.composition_id = composition.id;
  state.devices = composition.devices;

  HostDevices host(config.sysfs_root, config.proc_root, config.dev_root);
  // Held from the look that found the devices until the state file names them (HostLock).
  std::optional<HostLock> lock;
  if (config.host_check != HostCheck::kOff && !state.devices.empty()) {
    // A function the host showed before is no device the fabric just attached, unless its
    // UUID or serial says it is. When the attach came first (compose=controller), another
    // job's rescan may have shown this job's devices already: only their identity finds them.
    if (!before) before = host.pci_functions();
    Status s = Status::Ok();
    if (Expected<HostLock> quiet = HostLock::take(config.state_dir, kLockWait, HostLock::kRescan);
        quiet) {
      s = host.rescan();
    } else {
      s = quiet.error();
    }
    std::vector<std::string> unseen;
    if (s && config.host_check == HostCheck::kWait) {
      // CXL memory first: its NUMA node exists once it is online.
      s = online_memory(host, config, state.devices);
    }
    if (s && config.host_check == HostCheck::kWait) {
      // Each look under the node's lock, with the addresses other prologs have recorded by
      // then; the lock is let go between looks, so a prolog that waits for its own devices
      // never keeps another from recording its own.
      DeviceSearch search(host, state.devices, std::move(*before),
                          std::chrono::seconds(config.host_wait_s));
      for (;;) {
        Expected<HostLock> taken = HostLock::take(config.state_dir, kLockWait);
        if (!taken) {
          s = taken.error();
          break;
        }
        lock.emplace(std::move(*taken));
        Expected<std::optional<std::vector<Device>>> found =
            search.look(addresses_of_other_jobs(config.state_dir, job_id), &unseen);
        if (!found) {
          s = found.error();
          break;
        }
        if (*found) {
          state.devices = std::move(**found);
          break;
        }
        lock.reset();
        std::this_thread::sleep_for(DeviceSearch::kLookAgain);
      }
    }
    if (!s) {
      ctx.error("composer: prolog: " + at + ": composerd attached " + device_list(state.devices) +
                " but the host cannot use them: " + s.error().message);
      // What the host never showed is drained in composerd before it goes back, so that no
      // later job gets it before an admin has looked (composerctl devices resume).
      for (const std::string& id : unseen) {
        const std::string why =
            "the host of node " + node + " never showed it after the attach for job " +
            std::to_string(job_id) + " (host_wait " + std::to_string(config.host_wait_s) + " s)";
        if (Status drained = api.drain_unseen(job_id, node, id, why); !drained) {
          ctx.error("composer: prolog: " + at + ": draining " + id + " failed (" +
                    std::string(to_string(drained.error().code)) + "): " + drained.error().message);
        } else {
          ctx.info("composer: prolog: " + at + ": drained " + id + " in composerd: " + why);
        }
      }
      // Memory this prolog onlined goes offline before it goes back (nothing uses it yet).
      for (const Device& d : state.devices) {
        if (d.type != DeviceType::kMem || d.address.empty()) continue;
        if (Status off =
                host.offline_memory(d, std::chrono::seconds(config.host_wait_s), config.state_dir);
            !off) {
          ctx.error("composer: prolog: " + at + ": " + off.error().message);
        }
      }
      // No task of the job runs yet, so nothing holds them: they go back now. The failed
      // prolog drains the node, and the compositions of a drained node are otherwise kept (as
      // for an epilog that found its devices in use) until an admin resumes it. The state
      // file stays for the epilog, which removes what did appear and releases again.
      if (Expected<std::optional<Composition>> released = api.release(job_id, node); !released) {
        ctx.error("composer: prolog: " + at + ": giving them back failed (" +
                  std::string(to_string(released.error().code)) + "): " + released.error().message);
      } else {
        ctx.info("composer: prolog: " + at + ": gave back " + device_list(state.devices));
      }
      (void)write_job_state(config.state_dir, state);
      return s;
    }
  }
  std::vector<Device> gpus;
  std::vector<std::string> nvme_paths;
  for (const Device& d : state.devices) {
    if (d.type == DeviceType::kGpu) gpus.push_back(d);
    if (d.type == DeviceType::kNvme) {
      // A drive found by its serial may show its namespaces a moment later (the nvme driver
      // scans them once the controller is up): wait for them as for the drive
      // (PrologWaitsForTheNamespaceOfADriveFoundBeforeIt).
      std::vector<std::string> ns =
          d.address.empty() || config.host_check == HostCheck::kOff ? std::vector<std::string>{}
          : config.host_check == HostCheck::kWait
              ? host.wait_nvme_namespaces(d.address, std::chrono::seconds(config.host_wait_s))
              : host.nvme_namespaces(d.address);
      // A drive the host shows no namespace of is named by its id, as before it was found.
      if (ns.empty()) {
        if (config.host_check == HostCheck::kWait) {
          ctx.info("composer: prolog: " + at + ": drive " + d.id + " at " + d.address +
                   " shows no namespace after " + std::to_string(config.host_wait_s) +
                   " s; COMPOSER_NVME names it by its id");
        }
        ns.push_back(d.id);
      }
      nvme_paths.insert(nvme_paths.end(), ns.begin(), ns.end());
    }
  }
  state.cuda_visible_devices = host.cuda_visible_devices(gpus);
  if (!gpus.empty() && state.cuda_visible_devices.empty()) {
    ctx.info("composer: prolog: " + at + ": CUDA_VISIBLE_DEVICES is left empty (no GPU visible " +
             "to CUDA): the host does not show where " + device_list(gpus) +
             " sit and the fabric gave no UUID for each; host_check=wait finds them");
  }
  state.nvme_paths = std::move(nvme_paths);
  // Weighted interleave: the node's weights for the job, checked against the other jobs' and
  // given under the node's mempolicy lock until the state file names them. A job refused here
  // keeps its devices in the file, for its epilog to give back.
  // The policy composerd settled for the composition: the class's default where the job
  // asked for none (a composerd without memory policies names none: the job's own stands).
  if (!composition.mem_policy.empty() && !state.mem_policy.empty()) {
    state.mem_policy = composition.mem_policy;
  }
  std::optional<HostLock> weighing;
  if (Expected<MemPolicy> policy = parse_mem_policy(state.mem_policy);
      policy && policy->kind == MemPolicy::Kind::kWeighted) {
    // A class's weighted default on a node whose kernel lacks it (the job's own request was
    // refused before composing): its steps fail, naming the kernel.
    Status s = check_kernel_for(config, *policy);
    Expected<HostLock> taken = HostLock::take(config.state_dir, kLockWait, kMempolicyLock);
    if (s) s = taken ? give_node_weights(config, state, *policy) : Status(taken.error());
    if (taken) weighing.emplace(std::move(*taken));
    if (!s) {
      state.error = s.error().message;
      ctx.error("composer: prolog: " + at + ": " + state.error + "; the job's steps will fail");
    }
  }
  if (Status s = write_job_state(config.state_dir, state); !s) {
    ctx.error("composer: prolog: " + at + ": cannot write the state file: " + s.error().message);
    return s;
  }
  lock.reset();
  fence_from_others(ctx, config, job_id, host, state.devices, "composer: prolog: " + at + ": ");
  if (has_gpu(state.devices)) {
    tell_gpu_stack(ctx, config, host, "attach", job_id, state.devices, 0,
                   "composer: prolog: " + at + ": ");
  }
  ctx.info("composer: prolog: " + at + ": attached " + device_list(state.devices) +
           " (composition " + std::to_string(state.composition_id) + ")");
  return Status::Ok();
}

}  // namespace

std::string compose_failure(const JobOptions& options, const Error& e) {
  return "compose " + describe(options) + " failed (" + std::string(to_string(e.code)) +
         "): " + e.message;
}

Expected<Composition> compose_waiting(ComposerApi& api, const ComposeCall& call,
                                      uint32_t free_wait_s, uint32_t outage_wait_s,
                                      const std::function<void(const std::string&)>& log) {
  return asking_while_short([&] { return api.compose(call); }, free_wait_s, outage_wait_s, log);
}

Expected<std::vector<Composition>> compose_job_waiting(
    ComposerApi& api, const ComposeCall& call, const std::vector<std::string>& nodes,
    uint32_t free_wait_s, uint32_t outage_wait_s,
    const std::function<void(const std::string&)>& log) {
  return asking_while_short([&] { return api.compose_job(call, nodes); }, free_wait_s,
                            outage_wait_s, log);
}

Status job_prolog(JobContext& ctx, ComposerApi& api, const SpankConfig& config) {
  Expected<uint32_t> job_id = ctx.job_id();
  if (!job_id) {
    ctx.error("composer: prolog: cannot get the job id: " + job_id.error().message);
    return job_id.error();
  }
  const std::string node = ctx.node();
  const std::string at = where(*job_id, node);
  JobState state;
  state.job_id = *job_id;
  state.node = node;

  // Records why the job cannot run; the prolog itself succeeds (not the node's fault).
  auto fail_job = [&](const std::string& why) -> Status {
    state.error = why;
    ctx.error("composer: prolog: " + at + ": " + why + "; the job's steps will fail");
    if (Status s = write_job_state(config.state_dir, state); !s) {
      ctx.error("composer: prolog: " + at + ": cannot record the failure: " + s.error().message);
      return s;
    }
    return Status::Ok();
  };

  Expected<JobOptions> options = read_job_options(ctx);
  tidy_other_jobs(ctx, api, config, *job_id, node, at, "prolog", options && options->composes());
  if (!options) return fail_job("bad option: " + options.error().message);
  if (!options->composes()) return Status::Ok();
  // What the job asked for; the composition names the policy composerd settled (the class's
  // default where the job asked for none), which host_side takes.
  if (options->request.mem_bytes > 0) {
    state.mem_policy = to_string(options->mem_policy.value_or(MemPolicy{}));
  }
  // Known only here, on the node: nothing is composed for a job its kernel cannot serve.
  if (Status s = check_kernel_for(config, options->mem_policy.value_or(MemPolicy{})); !s) {
    return fail_job(s.error().message);
  }

  if (config.compose_on == ComposeOn::kController) {
    // PrologSlurmctld composed every node of the job before it launched: only the host side.
    // A composerd restarting now is waited for, as composer-slurmctld waits for it, rather
    // than drained for (SpankCoreTest.TheControllerPrologRidesOutAComposerdRestart).
    Expected<Composition> composed = asking_while_short(
        [&] { return api.show(*job_id, node); }, 0, config.outage_wait_s,
        [&](const std::string& line) { ctx.info("composer: prolog: " + at + ": " + line); });
    if (!composed) {
      const Error& e = composed.error();
      if (e.code == ErrorCode::kNotFound) {
        return fail_job(
            "composerd holds no composition for it (compose=controller: is "
            "PrologSlurmctld=composer-slurmctld set in slurm.conf?)");
      }
      ctx.error("composer: prolog: " + at + ": reading the composition failed (" +
                std::string(to_string(e.code)) + "): " + e.message);
      return e.code == ErrorCode::kUnavailable || node_fault(e.code) ? e : fail_job(e.message);
    }
    if (composed->state != CompositionState::kReady) {
      return fail_job("its composition is " + std::string(to_string(composed->state)) +
                      ", not ready");
    }
    return host_side(ctx, api, config, *job_id, node, at, state, *composed, std::nullopt);
  }

  Expected<uint32_t> uid = ctx.uid();
  if (!uid) {
    ctx.error("composer: prolog: " + at + ": cannot get the job's uid: " + uid.error().message);
    return uid.error();
  }
  ComposeCall call;
  call.owner.job_id = *job_id;
  call.node = node;
  call.owner.uid = *uid;
  call.owner.user = ctx.getenv("SLURM_JOB_USER").value_or("");
  call.owner.account = ctx.getenv("SLURM_JOB_ACCOUNT").value_or("");
  call.owner.workload = options->workload;
  call.request = options->request;
  call.mem_policy = options->mem_policy;

  // What the host shows before the attach: the functions the attach brings are new against it
  // whenever they appear (this prolog's rescan, another's, or the kernel's own hot-plug), also
  // at an address where another job's device was shown then (PciFunctions): the compose may
  // wait for free devices, and a device freed meanwhile leaves the slot the next one may take.
  std::optional<PciFunctions> before;
  if (config.host_check == HostCheck::kWait) {
    before = HostDevices(config.sysfs_root, config.proc_root, config.dev_root).pci_functions();
  }
  Expected<Composition> composition = compose_waiting(
      api, call, config.free_wait_s, config.outage_wait_s,
      [&](const std::string& line) { ctx.info("composer: prolog: " + at + ": " + line); });
  if (!composition) {
    const Error& e = composition.error();
    const std::string cause = compose_failure(*options, e);
    if (e.code == ErrorCode::kUnavailable) {
      if (config.on_unavailable == OnUnavailable::kFailJob) {
        return fail_job(cause + " (composerd unreachable; outage_wait=" +
                        std::to_string(config.outage_wait_s) + " s, on_unavailable=fail_job)");
      }
      ctx.error("composer: prolog: " + at + ": " + cause + " (composerd unreachable; outage_wait=" +
                std::to_string(config.outage_wait_s) + " s, on_unavailable=drain)");
      return e;
    }
    if (node_fault(e.code)) {
      ctx.error("composer: prolog: " + at + ": " + cause);
      return e;
    }
    return fail_job(cause);
  }
  return host_side(ctx, api, config, *job_id, node, at, state, *composition, std::move(before));
}

}  // namespace composer::slurm
