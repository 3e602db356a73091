// What the SPANK hooks share: job options, line wording, GPU checks, the v2 fence, memory offline.
#include "composer/slurm/spank_core.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "composer/common/files.h"
#include "composer/common/strings.h"
#include "composer/slurm/gpu_stack.h"
#include "spank_hooks.h"

namespace composer::slurm {
namespace {

// How long a health check listens for XIDs from NVML (which tells only those that come while
// it listens).
constexpr std::chrono::milliseconds kXidWait{200};

// cgroup v2 (UnifiedFence). The first task fenced so on a node records where the job cgroups
// are (<state_dir>/fence-scope: the hierarchy's mount and the scope, one a line), so that
// prologs and epilogs, which do not run in a job's cgroup, keep the program up to date.
constexpr char kFenceScope[] = "fence-scope";
constexpr std::string_view kFenceLock = "fence.lock";

}  // namespace

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

std::string holder_list(const std::vector<Holder>& holders) {
  std::string who;
  for (const Holder& h : holders) {
    who += (who.empty() ? "" : ", ") + std::string("pid ") + std::to_string(h.pid) + " holds " +
           h.device_id + " (" + h.target + ")";
  }
  return who;
}

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

void tell_gpu_stack(JobContext& ctx, const SpankConfig& config, const HostDevices& host,
                    std::string_view event, uint32_t job_id, const std::vector<Device>& devices,
                    uint32_t leaving, const std::string& said) {
  if (Status s = write_job_map(config, host, leaving); !s) ctx.error(said + s.error().message);
  if (Status s = run_gpu_hook(config, event, job_id, devices); !s) {
    ctx.error(said + "gpu_hook " + std::string(event) + ": " + s.error().message);
  }
}

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

std::string node_list(const std::vector<DeviceNode>& nodes) {
  std::string out;
  for (const DeviceNode& n : nodes)
    out += (out.empty() ? "" : ", ") + n.name + " (" + n.rule() + ")";
  return out;
}

std::optional<UnifiedFence> recorded_unified_fence(const SpankConfig& config) {
  std::ifstream in(config.state_dir + "/" + kFenceScope);
  std::string mount;
  std::string scope;
  if (!std::getline(in, mount) || !std::getline(in, scope) || mount.empty() || scope.empty()) {
    return std::nullopt;
  }
  return UnifiedFence(mount, scope);
}

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

}  // namespace composer::slurm
