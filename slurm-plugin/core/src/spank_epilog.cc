// The job epilog: the busy check, a hold on devices still in use, their removal and release.
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "composer/slurm/busy_check.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/mem_policy.h"
#include "composer/slurm/spank_core.h"
#include "spank_hooks.h"

namespace composer::slurm {

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
