// What the SPANK hooks' files (spank_*.cc) share, declared once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "composer/common/error.h"
#include "composer/slurm/device_fence.h"
#include "composer/slurm/gpu_health.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/job_context.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/plugin_config.h"

namespace composer::slurm {

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
                                                 const std::string& said);

// "job 42 on node n1", as every line of the hooks names the job.
std::string where(uint32_t job_id, const std::string& node);

// "pid 321 holds gpu-00 (/dev/nvidia0), ..."
std::string holder_list(const std::vector<Holder>& holders);

// NVML for the health check (gpu_health=nvml), or null: the bus alone (gpu_health=bus, or the
// library does not load here, which `said` logs).
std::unique_ptr<Nvml> nvml_for(JobContext& ctx, const SpankConfig& config, const std::string& said);

// Whether `devices` holds a GPU the host shows at an address.
bool has_gpu(const std::vector<Device>& devices);

// The GPU health check of a job's devices on this node: each bad GPU is reported to composerd,
// which marks it failed (its job gets its class's reaction; the node is not drained). Answers
// how many were bad.
size_t report_bad_gpus(JobContext& ctx, ComposerApi& api, const HostDevices& host, const Nvml* nvml,
                       uint32_t job_id, const std::string& node, const std::vector<Device>& devices,
                       const std::string& said);

// The GPU stack told (gpu_stack.h): the DCGM job map rebuilt (`leaving`: a job whose GPUs are
// about to go) and the site's hook run for `event`. Failures are logged; the hook goes on.
void tell_gpu_stack(JobContext& ctx, const SpankConfig& config, const HostDevices& host,
                    std::string_view event, uint32_t job_id, const std::vector<Device>& devices,
                    uint32_t leaving, const std::string& said);

// "nvidia3 (c 195:3 rwm), nvme2n1 (b 259:4 rwm)"
std::string node_list(const std::vector<DeviceNode>& nodes);

// The cgroup v2 fence the first task fenced so on this node recorded; nullopt when none did.
std::optional<UnifiedFence> recorded_unified_fence(const SpankConfig& config);

// The program on `fence`'s scope rebuilt from every state file on the node: each job may open
// the device nodes its file names (`first`'s where two files name one: the job that holds it
// now), no other job may. Nothing is done where no job holds a device node and no task has
// fenced on this node before (no program can be there to remove).
Status refresh_unified_fence(const SpankConfig& config, const UnifiedFence& fence, uint32_t first,
                             bool from_task);

// Offlines the CXL memory of `devices` before it is detached, waiting up to `wait` (at least
// host_wait) for pages to move: "" when done, else why the memory is still in use.
std::string offline_memory(const HostDevices& host, const SpankConfig& config,
                           const std::vector<Device>& devices, std::chrono::milliseconds wait);

// What a release line ends with for the devices of `released` that composerd had marked failed
// while the job held them: "; nvme-3 was lost by the fabric while the job held it and stays
// drained until an admin resumes it" for a device the fabric lost (a drive pulled by surprise),
// "; gpu-2 failed while the job held it (DRAIN REASON)" for one that failed otherwise; "" when
// none did (AnEpilogSaysWhichDevicesWereLostWhenItReleasesThem).
std::string lost_among(const std::optional<Composition>& released);

// The other jobs' state files on the node, each read once: held compositions are released
// once their devices are free (every prolog and epilog), stale files removed (`stale_too`: a
// prolog that composes). Without such files it reads only the state directory.
void tidy_other_jobs(JobContext& ctx, ComposerApi& api, const SpankConfig& config, uint32_t job_id,
                     const std::string& node, const std::string& at, std::string_view hook,
                     bool stale_too);

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

}  // namespace composer::slurm
