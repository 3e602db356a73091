#include "composer/slurm/spank_core.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "composer/common/files.h"
#include "composer/common/strings.h"
#include "composer/slurm/busy_check.h"
#include "composer/slurm/device_fence.h"
#include "composer/slurm/gpu_health.h"
#include "composer/slurm/gpu_stack.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/mem_policy.h"

namespace composer::slurm {
namespace {

constexpr std::chrono::milliseconds kFreePoll{250};
// How often composer-slurmctld asks again while composerd is down (each try is a connect
// with its own retries).
constexpr std::chrono::milliseconds kOutagePoll{1000};
// How long a hook waits for one of the node's HostLocks: the others hold them for a look, a
// rescan, or an epilog's detach.
constexpr std::chrono::seconds kLockWait{30};

// For an epilog or a held composition's release: rescan.lock, shared, from removing devices
// from the host until composerd has detached them. nullopt (and a line) when it cannot be had:
// the hook goes on, as it must not fail for it.
std::optional<HostLock> no_rescan_until_detached(JobContext& ctx, const SpankConfig& config,
                                                 const std::string& said) {
  Expected<HostLock> lock = HostLock::take(config.state_dir, kLockWait, HostLock::kRescan, true);
  if (lock) return std::move(*lock);
  ctx.error(said + lock.error().message + "; a rescan may show the devices again until " +
            "composerd has detached them");
  return std::nullopt;
}

std::string where(uint32_t job_id, const std::string& node) {
  return "job " + std::to_string(job_id) + " on node " + node;
}

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

// "pid 321 holds gpu-00 (/dev/nvidia0), ..."
std::string holder_list(const std::vector<Holder>& holders) {
  std::string who;
  for (const Holder& h : holders) {
    who += (who.empty() ? "" : ", ") + std::string("pid ") + std::to_string(h.pid) + " holds " +
           h.device_id + " (" + h.target + ")";
  }
  return who;
}

// How long a health check listens for XIDs from NVML (which tells only those that come while
// it listens).
constexpr std::chrono::milliseconds kXidWait{200};

// NVML for the health check (gpu_health=nvml), or null: the bus alone (gpu_health=bus, or the
// library does not load here, which `said` logs).
std::unique_ptr<Nvml> nvml_for(JobContext& ctx, const SpankConfig& config,
                               const std::string& said) {
  if (config.gpu_health != GpuHealth::kNvml) return nullptr;
  Expected<std::unique_ptr<Nvml>> loaded = Nvml::load(config.nvml_library);
  if (!loaded) {
    ctx.info(said + loaded.error().message + "; the GPU health check looks at the bus only");
    return nullptr;
  }
  return std::move(*loaded);
}

bool has_gpu(const std::vector<Device>& devices) {
  return std::any_of(devices.begin(), devices.end(), [](const Device& d) {
    return d.type == DeviceType::kGpu && !d.address.empty();
  });
}

// The GPU health check of a job's devices on this node: each bad GPU is reported to composerd,
// which marks it failed (its job gets its class's reaction; the node is not drained). Answers
// how many were bad.
size_t report_bad_gpus(JobContext& ctx, ComposerApi& api, const HostDevices& host, const Nvml* nvml,
                       uint32_t job_id, const std::string& node, const std::vector<Device>& devices,
                       const std::string& said) {
  const std::vector<BadGpu> bad = check_gpus(host, nvml, devices, kXidWait);
  for (const BadGpu& gpu : bad) {
    const std::string why = "the host of node " + node + " found it bad while job " +
                            std::to_string(job_id) + " held it: " + gpu.why;
    if (Status s = api.fail_reported(job_id, node, gpu.device_id, why); !s) {
      ctx.error(said + "composerd was not told that " + gpu.device_id + " is bad (" +
                std::string(to_string(s.error().code)) + "): " + s.error().message + "; " +
                gpu.why);
    } else {
      ctx.error(said + gpu.device_id + " reported failed to composerd: " + gpu.why);
    }
  }
  return bad.size();
}

// The GPU stack told (gpu_stack.h): the DCGM job map rebuilt (`leaving`: a job whose GPUs are
// about to go) and the site's hook run for `event`. Failures are logged; the hook goes on.
void tell_gpu_stack(JobContext& ctx, const SpankConfig& config, const HostDevices& host,
                    std::string_view event, uint32_t job_id, const std::vector<Device>& devices,
                    uint32_t leaving, const std::string& said) {
  if (Status s = write_job_map(config, host, leaving); !s) ctx.error(said + s.error().message);
  if (Status s = run_gpu_hook(config, event, job_id, devices); !s) {
    ctx.error(said + "gpu_hook " + std::string(event) + ": " + s.error().message);
  }
}

}  // namespace

Expected<JobOptions> read_job_options(JobContext& ctx) {
  JobOptions options;
  for (std::string_view name : kAllOptions) {
    if (std::optional<std::string> value = ctx.option(name)) {
      if (Status s = apply_option(name, *value, &options); !s) return s.error();
    }
  }
  if (Status s = check_options(options); !s) return s.error();
  return options;
}

namespace {

// "nvidia3 (c 195:3 rwm), nvme2n1 (b 259:4 rwm)"
std::string node_list(const std::vector<DeviceNode>& nodes) {
  std::string out;
  for (const DeviceNode& n : nodes)
    out += (out.empty() ? "" : ", ") + n.name + " (" + n.rule() + ")";
  return out;
}

// cgroup v2 (UnifiedFence). The first task fenced so on a node records where the job cgroups
// are (<state_dir>/fence-scope: the hierarchy's mount and the scope, one a line), so that
// prologs and epilogs, which do not run in a job's cgroup, keep the program up to date.
constexpr char kFenceScope[] = "fence-scope";
constexpr std::string_view kFenceLock = "fence.lock";

std::optional<UnifiedFence> recorded_unified_fence(const SpankConfig& config) {
  std::ifstream in(config.state_dir + "/" + kFenceScope);
  std::string mount;
  std::string scope;
  if (!std::getline(in, mount) || !std::getline(in, scope) || mount.empty() || scope.empty()) {
    return std::nullopt;
  }
  return UnifiedFence(mount, scope);
}

// The program on `fence`'s scope rebuilt from every state file on the node: each job may open
// the device nodes its file names (`first`'s where two files name one: the job that holds it
// now), no other job may. Nothing is done where no job holds a device node and no task has
// fenced on this node before (no program can be there to remove).
Status refresh_unified_fence(const SpankConfig& config, const UnifiedFence& fence, uint32_t first,
                             bool from_task) {
  Expected<HostLock> lock = HostLock::take(config.state_dir, kLockWait, kFenceLock);
  if (!lock) return lock.error();
  const HostDevices host(config.sysfs_root, config.proc_root, config.dev_root);
  std::map<uint32_t, std::vector<DeviceNode>> held;
  std::set<DeviceNode> taken;
  std::vector<uint32_t> jobs = other_jobs(config.state_dir, first);
  jobs.insert(jobs.begin(), first);
  for (uint32_t job : jobs) {
    Expected<std::optional<JobState>> file = read_job_state(config.state_dir, job);
    if (!file || !file->has_value()) continue;
    for (const DeviceNode& n : host.device_nodes((*file)->devices)) {
      if (taken.insert(n).second) held[job].push_back(n);
    }
  }
  const std::string record = config.state_dir + "/" + kFenceScope;
  std::error_code ec;
  if (held.empty() && !std::filesystem::exists(record, ec)) return Status::Ok();
  if (Status s = fence.apply(held); !s) return s;
  if (!from_task) return Status::Ok();
  // A scope of another name (slurmd restarted under another unit) replaces the one recorded.
  if (const std::optional<UnifiedFence> had = recorded_unified_fence(config);
      !had || had->scope() != fence.scope() || had->mount() != fence.mount()) {
    return write_file_atomically(record, fence.mount() + "\n" + fence.scope() + "\n");
  }
  return Status::Ok();
}

// The prolog's half of the fence (DeviceFence): the job's devices denied in the devices cgroup
// of every other job on the node. Called once the state file names them, so that a job whose
// cgroup comes later reads them there. A rule that cannot be written is logged: the other job
// started before this one, and failing this prolog would not take its access away.
void fence_from_others(JobContext& ctx, const SpankConfig& config, uint32_t job_id,
                       const HostDevices& host, const std::vector<Device>& devices,
                       const std::string& said) {
  if (config.fence == Fence::kOff || config.host_check == HostCheck::kOff) return;
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

// Offlines the CXL memory of `devices` before it is detached, waiting up to `wait` (at least
// host_wait) for pages to move: "" when done, else why the memory is still in use.
std::string offline_memory(const HostDevices& host, const SpankConfig& config,
                           const std::vector<Device>& devices, std::chrono::milliseconds wait) {
  std::string busy;
  for (const Device& d : devices) {
    if (d.type != DeviceType::kMem) continue;
    if (Status s = host.offline_memory(
            d, std::max<std::chrono::milliseconds>(wait, std::chrono::seconds(config.host_wait_s)),
            config.state_dir);
        !s) {
      busy += (busy.empty() ? "" : "; ") + s.error().message;
    }
  }
  return busy;
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

// attempt(), asked again every kFreePoll for up to free_wait_s while it answers kInsufficient,
// and every kOutagePoll for up to outage_wait_s while composerd cannot be reached or answers
// unavailable (a restart: composerd settles what it left unfinished before it listens). Each
// wait has its own bound, counted from the first such answer, and is logged once.
template <typename Attempt>
auto asking_while_short(const Attempt& attempt, uint32_t free_wait_s, uint32_t outage_wait_s,
                        const std::function<void(const std::string&)>& log) {
  using Clock = std::chrono::steady_clock;
  auto answer = attempt();
  std::optional<Clock::time_point> short_since;
  std::optional<Clock::time_point> down_since;
  for (;;) {
    const auto now = Clock::now();
    const bool is_short = !answer && answer.error().code == ErrorCode::kInsufficient;
    const bool is_down = !answer && answer.error().code == ErrorCode::kUnavailable;
    if (!is_down && down_since) {
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - *down_since).count();
      log("composerd answered again after " + std::to_string(ms) + " ms");
      down_since.reset();
    }
    if (!is_short && !is_down) return answer;
    auto& since = is_short ? short_since : down_since;
    const uint32_t bound_s = is_short ? free_wait_s : outage_wait_s;
    const auto poll = is_short ? kFreePoll : kOutagePoll;
    if (!since) {
      if (bound_s == 0) return answer;
      since = now;
      log(answer.error().message + "; asking again for up to " + std::to_string(bound_s) + " s");
    }
    if (now + poll > *since + std::chrono::seconds(bound_s)) return answer;
    std::this_thread::sleep_for(poll);
    answer = attempt();
  }
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

namespace {

// What a release line ends with for the devices of `released` that composerd had marked failed
// while the job held them: "; nvme-3 was lost by the fabric while the job held it and stays
// drained until an admin resumes it" for a device the fabric lost (a drive pulled by surprise),
// "; gpu-2 failed while the job held it (DRAIN REASON)" for one that failed otherwise; "" when
// none did (AnEpilogSaysWhichDevicesWereLostWhenItReleasesThem).
std::string lost_among(const std::optional<Composition>& released) {
  if (!released) return "";
  std::vector<std::string> lost;
  std::vector<std::string> failed;
  for (const Device& d : released->devices) {
    if (d.health != Health::kCritical) continue;
    if (d.drain_reason.starts_with(kLostByTheFabric)) {
      lost.push_back(d.id);
    } else {
      failed.push_back(d.id + " (" +
                       (d.drain_reason.empty() ? "the fabric reports it failed" : d.drain_reason) +
                       ")");
    }
  }
  std::string out;
  if (!lost.empty()) {
    const bool one = lost.size() == 1;
    out += "; " + and_list(lost) + (one ? " was" : " were") +
           " lost by the fabric while the job held " + (one ? "it" : "them") + " and stay" +
           (one ? "s" : "") + " drained until an admin resumes " + (one ? "it" : "them");
  }
  if (!failed.empty()) {
    out += "; " + and_list(failed) + " failed while the job held " +
           (failed.size() == 1 ? "it" : "them");
  }
  return out;
}

// A held composition (an epilog found its devices still in use, JobState::held) is released
// once nothing on the host holds the devices: removed from the host, the hold cleared,
// released; the state file goes. Still in use: left as it is. False when it stays held.
bool release_held(JobContext& ctx, ComposerApi& api, const SpankConfig& config,
                  const JobState& held, const std::string& node, const std::string& said) {
  const uint32_t other = held.job_id;
  const std::string whose = "job " + std::to_string(other) + "'s devices";
  HostDevices host(config.sysfs_root, config.proc_root, config.dev_root);
  if (std::vector<Holder> holders = host.holders(held.devices); !holders.empty()) {
    ctx.info(said + whose + " stay held: " + holder_list(holders));
    return false;
  }
  if (std::string busy = offline_memory(host, config, held.devices, {}); !busy.empty()) {
    ctx.info(said + whose + " stay held: " + busy);
    return false;
  }
  std::optional<HostLock> detaching = no_rescan_until_detached(ctx, config, said);
  if (Status s = host.remove(held.devices); !s) {
    ctx.error(said + "removing " + whose + " from the host: " + s.error().message +
              "; releasing anyway");
  }
  // The removal moved the GPU indices above them; the daemons stopped at its epilog may start.
  if (has_gpu(held.devices)) {
    tell_gpu_stack(ctx, config, host, "detached", other, held.devices, 0, said);
  }
  if (Status s = api.hold(other, node, ""); !s && s.error().code != ErrorCode::kNotFound) {
    ctx.error(said + "clearing the hold on " + whose + " failed (" +
              std::string(to_string(s.error().code)) + "): " + s.error().message);
    return false;
  }
  if (Expected<std::optional<Composition>> released = api.release(other, node); !released) {
    // The hold is cleared: composerd's reconciler releases the ended job's devices.
    ctx.error(said + "releasing " + whose + " failed (" +
              std::string(to_string(released.error().code)) + "): " + released.error().message +
              "; composerd's reconciler will release them");
  } else {
    ctx.info(said + whose + " are no longer in use: released (held since its epilog: " + held.held +
             ")" + lost_among(*released));
  }
  if (Status s = remove_job_state(config.state_dir, other); !s) ctx.error(said + s.error().message);
  return true;
}

// A job whose epilog never ran on this node (the node rebooted under it) leaves its state file,
// which would keep its devices' addresses from every later job (addresses_of_other_jobs). A
// file with devices of a job whose composition on this node composerd no longer holds is
// removed: the devices went back to the pool with it. A file composerd cannot answer for
// stays, and so does one without devices (it keeps nothing from anyone).
void remove_if_stale(JobContext& ctx, ComposerApi& api, const SpankConfig& config,
                     const JobState& file, const std::string& node, const std::string& said) {
  if (file.devices.empty()) return;
  Expected<Composition> held = api.show(file.job_id, node);
  if (!held && held.error().code != ErrorCode::kNotFound) return;
  if (held && is_live(held->state)) return;
  if (Status s = remove_job_state(config.state_dir, file.job_id); !s) {
    ctx.error(said + s.error().message);
    return;
  }
  ctx.info(said + "removed the state file of job " + std::to_string(file.job_id) +
           ", whose composition on this node composerd " + (held ? "released" : "does not hold") +
           " (the node ran no epilog for it)");
}

// The other jobs' state files on the node, each read once: held compositions are released
// once their devices are free (every prolog and epilog), stale files removed (`stale_too`: a
// prolog that composes). Without such files it reads only the state directory.
void tidy_other_jobs(JobContext& ctx, ComposerApi& api, const SpankConfig& config, uint32_t job_id,
                     const std::string& node, const std::string& at, std::string_view hook,
                     bool stale_too) {
  const std::string said = "composer: " + std::string(hook) + ": " + at + ": ";
  for (uint32_t other : other_jobs(config.state_dir, job_id)) {
    Expected<std::optional<JobState>> file = read_job_state(config.state_dir, other);
    if (!file || !file->has_value()) continue;
    if (!(*file)->held.empty()) {
      release_held(ctx, api, config, **file, node, said);
    } else if (stale_too) {
      remove_if_stale(ctx, api, config, **file, node, said);
    }
  }
}

}  // namespace

size_t release_held_on_node(JobContext& ctx, ComposerApi& api, const SpankConfig& config) {
  const std::string said = "composer: node check: node " + ctx.node() + ": ";
  size_t still_held = 0;
  for (uint32_t job : other_jobs(config.state_dir, 0)) {
    Expected<std::optional<JobState>> file = read_job_state(config.state_dir, job);
    if (!file) {
      ctx.error(said + file.error().message);
      continue;
    }
    if (!file->has_value() || (*file)->held.empty()) continue;
    const std::string& node = (*file)->node.empty() ? ctx.node() : (*file)->node;
    if (!release_held(ctx, api, config, **file, node, said)) ++still_held;
  }
  return still_held;
}

size_t check_gpu_health_on_node(JobContext& ctx, ComposerApi& api, const SpankConfig& config) {
  // As in the epilog: only GPUs the prolog found on the host (host_check=wait).
  if (config.gpu_health == GpuHealth::kOff || config.host_check != HostCheck::kWait) return 0;
  const std::string said = "composer: node check: node " + ctx.node() + ": ";
  HostDevices host(config.sysfs_root, config.proc_root, config.dev_root);
  std::unique_ptr<Nvml> nvml;
  bool loaded = false;
  size_t bad = 0;
  for (uint32_t job : other_jobs(config.state_dir, 0)) {
    Expected<std::optional<JobState>> file = read_job_state(config.state_dir, job);
    if (!file || !file->has_value() || !has_gpu((*file)->devices)) continue;
    if (!loaded) {
      nvml = nvml_for(ctx, config, said);
      loaded = true;
    }
    const std::string& node = (*file)->node.empty() ? ctx.node() : (*file)->node;
    bad += report_bad_gpus(ctx, api, host, nvml.get(), job, node, (*file)->devices, said);
  }
  return bad;
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
// `v2`: the task's job cgroup on cgroup v2 (task_unified_cgroup), read once per task.
Status fence_task(JobContext& ctx, const SpankConfig& config, uint32_t job_id,
                  const std::string& at, const std::optional<JobState>& own,
                  const std::optional<UnifiedFence>& v2) {
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
  const std::vector<Device> others = devices_of_other_jobs(config.state_dir, job_id);
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
  if (Status s = fence_task(ctx, config, *job_id, at, own, v2); !s) return s;
  if (own) widen_cpuset(ctx, config, *job_id, at, *own, v2);
  return Status::Ok();
}

namespace {

// The epilog's half of weighted interleave: the node's weights as they were before the job
// (restore_node_weights), under the node's mempolicy lock, which the caller holds until the
// state file no longer names them. A failure is logged: the job has ended either way.
std::optional<HostLock> restore_weights(JobContext& ctx, const SpankConfig& config,
                                        const JobState& state, const std::string& at) {
  if (state.weights_before.empty()) return std::nullopt;
  Expected<HostLock> taken = HostLock::take(config.state_dir, kLockWait, kMempolicyLock);
  Status s = taken ? restore_node_weights(config, state) : Status(taken.error());
  if (!s) {
    ctx.error("composer: epilog: " + at +
              ": restoring the node's weighted interleave weights: " + s.error().message);
  }
  if (!taken) return std::nullopt;
  return std::optional<HostLock>(std::move(*taken));
}

}  // namespace

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

Status job_epilog(JobContext& ctx, ComposerApi& api, const SpankConfig& config) {
  Expected<uint32_t> job_id = ctx.job_id();
  if (!job_id) {
    ctx.error("composer: epilog: cannot get the job id: " + job_id.error().message);
    return job_id.error();
  }
  const std::string node = ctx.node();
  const std::string at = where(*job_id, node);
  tidy_other_jobs(ctx, api, config, *job_id, node, at, "epilog", false);
  Expected<std::optional<JobState>> state = read_job_state(config.state_dir, *job_id);
  if (!state) {
    // Release anyway: composerd knows what it attached.
    ctx.error("composer: epilog: " + at + ": " + state.error().message);
  }
  const bool have_state = state && state->has_value();
  // The mark of the job's other steps goes with the busy check that reads it, or now.
  if (!have_state || config.host_check == HostCheck::kOff) forget_steps(config.state_dir, *job_id);
  if (!have_state) {
    Expected<JobOptions> options = read_job_options(ctx);
    // A job that asked for nothing has nothing to release; one whose options no longer parse
    // may still hold something, so release to be sure.
    if (state && options && !options->composes()) return Status::Ok();
  }

  // The epilog has its devices detached (its release): no rescan from their removal on.
  std::optional<HostLock> detaching;
  // How long the busy check's first look and the release took, for the log (where a short
  // composed job's end goes: docs/BENCHMARKS.md, "Short composed jobs").
  using Clock = std::chrono::steady_clock;
  Clock::duration busy_check{};
  if (have_state && config.host_check != HostCheck::kOff) {
    const std::vector<Device>& devices = (*state)->devices;
    HostDevices host(config.sysfs_root, config.proc_root, config.dev_root);
    const std::string said = "composer: epilog: " + at + ": ";
    if (has_gpu(devices)) {
      // What the job's last moments did to its GPUs, before they go back to the pool.
      // Only where the prolog found the GPUs on the host (host_check=wait): with rescan, an
      // address is the fabric's, which the host need not show.
      if (config.gpu_health != GpuHealth::kOff && config.host_check == HostCheck::kWait) {
        std::unique_ptr<Nvml> nvml = nvml_for(ctx, config, said);
        report_bad_gpus(ctx, api, host, nvml.get(), *job_id, node, devices, said);
      }
      // The GPU daemons let go of the GPUs before the busy check looks for holders.
      tell_gpu_stack(ctx, config, host, "detach", *job_id, devices, *job_id, said);
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(config.busy_wait_s);
    // The first look shares one walk of the host's processes with the epilogs ending beside
    // this one (busy_check.h); the looks while it waits for holders to go are its own.
    const Clock::time_point looking = Clock::now();
    std::vector<Holder> holders = shared_holders(host, config.state_dir, *job_id,
                                                 (*state)->composition_id, devices, kLockWait);
    busy_check = Clock::now() - looking;
    if (!holders.empty() && config.busy_wait_s > 0) {
      ctx.info("composer: epilog: " + at + ": waiting up to " + std::to_string(config.busy_wait_s) +
               " s before releasing: " + holder_list(holders));
    }
    while (!holders.empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      holders = host.holders(devices);
    }
    // Memory goes offline once no process holds the other devices (the kernel moves its pages
    // away; what it cannot move keeps it online).
    const std::string memory_busy =
        holders.empty() ? offline_memory(host, config, devices,
                                         std::chrono::duration_cast<std::chrono::milliseconds>(
                                             deadline - std::chrono::steady_clock::now()))
                        : "";
    if (!holders.empty() || !memory_busy.empty()) {
      // Nothing is detached under a live process. composerd keeps the composition while the
      // node holds it; a later prolog or epilog here releases it once the host is clear.
      const std::string cause = "still in use after " + std::to_string(config.busy_wait_s) +
                                " s: " + (holders.empty() ? memory_busy : holder_list(holders));
      if (Status held = api.hold(*job_id, node, cause); !held) {
        // composerd cannot be told, and would release the ended job's devices: the node is
        // drained instead (a failed epilog), whose compositions composerd keeps.
        const Error e{ErrorCode::kConflict,
                      "composer: epilog: " + at + ": devices " + cause +
                          "; telling composerd to hold them failed (" +
                          std::string(to_string(held.error().code)) + "): " + held.error().message +
                          "; keeping the composition attached, the node needs attention"};
        ctx.error(e.message);
        return e;
      }
      JobState kept = **state;
      kept.held = cause;
      // The job has ended: its weights go back now, not when the devices do.
      std::optional<HostLock> weighing = restore_weights(ctx, config, kept, at);
      kept.weights_before.clear();
      if (Status s = write_job_state(config.state_dir, kept); !s) {
        ctx.error("composer: epilog: " + at + ": cannot record the hold: " + s.error().message);
      }
      ctx.error("composer: epilog: " + at + ": devices " + cause +
                "; composerd keeps them attached (held by this node), and a later prolog or "
                "epilog on this node releases them once nothing holds them");
      return Status::Ok();
    }
    if (!devices.empty()) {
      detaching = no_rescan_until_detached(ctx, config, "composer: epilog: " + at + ": ");
    }
    if (Status s = host.remove(devices); !s) {
      ctx.error("composer: epilog: " + at +
                ": removing devices from the host: " + s.error().message + "; releasing anyway");
    }
  }

  // Under either compose= mode the node's own epilog releases its node once the host side is
  // clear, and so ends after EpilogSlurmctld: Slurm returns a job's licenses when the last of
  // the two ends, and only a node epilog's end starts a scheduling pass at once (an
  // EpilogSlurmctld that ends last leaves the next job to the backfill pass, seconds later:
  // docs/BENCHMARKS.md, "Short composed jobs").
  // A composerd restart meanwhile is ridden out as the prologs do (outage_wait): the devices
  // are not free until composerd has them back, and the job's licenses stay with it until then
  // (EpilogRidesOutAComposerdRestart).
  const Clock::time_point releasing = Clock::now();
  Expected<std::optional<Composition>> released = asking_while_short(
      [&] { return api.release(*job_id, node); }, 0, config.outage_wait_s,
      [&](const std::string& l) { ctx.info("composer: epilog: " + at + ": " + l); });
  if (!released) {
    ctx.error("composer: epilog: " + at + ": release failed (" +
              std::string(to_string(released.error().code)) + "): " + released.error().message +
              "; composerd's reconciler will release it");
  } else if (*released) {
    const auto ms = [](Clock::duration d) {
      return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    };
    ctx.info("composer: epilog: " + at + ": released (busy check " + ms(busy_check) +
             " ms, release " + ms(Clock::now() - releasing) + " ms)" + lost_among(*released));
  }
  std::optional<HostLock> weighing;
  if (have_state) weighing = restore_weights(ctx, config, **state, at);
  if (Status s = remove_job_state(config.state_dir, *job_id); !s) {
    ctx.error("composer: epilog: " + at + ": " + s.error().message);
  }
  weighing.reset();
  // The removal moved the indices of the GPUs above the job's; daemons stopped for the detach
  // may start again.
  if (have_state && has_gpu((*state)->devices) && config.host_check != HostCheck::kOff) {
    HostDevices host(config.sysfs_root, config.proc_root, config.dev_root);
    tell_gpu_stack(ctx, config, host, "detached", *job_id, (*state)->devices, 0,
                   "composer: epilog: " + at + ": ");
  }
  if (std::optional<UnifiedFence> v2 = recorded_unified_fence(config);
      v2 && config.fence != Fence::kOff) {
    if (Status s = refresh_unified_fence(config, *v2, *job_id, false); !s) {
      ctx.error("composer: epilog: " + at +
                ": dropping its devices from the fence (cgroup v2): " + s.error().message);
    }
  }
  return Status::Ok();
}

}  // namespace composer::slurm
