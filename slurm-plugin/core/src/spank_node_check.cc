// A node's other jobs: held compositions released, stale state files removed, their GPUs checked.
#include <memory>
#include <optional>

#include "composer/slurm/gpu_health.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/spank_core.h"
#include "spank_hooks.h"

namespace composer::slurm {
namespace {

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

}  // namespace

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

}  // namespace composer::slurm
