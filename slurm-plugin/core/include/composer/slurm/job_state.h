// The per-job state file: the prolog writes what composerd attached, the task hooks of the
// same job on the node read it, the epilog reads it to detach and then deletes it.
// <state_dir>/job-<id>.json, mode 0644 (tasks read it as the job's user).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::slurm {

struct JobState {
  uint32_t job_id = 0;
  std::string node;
  int64_t composition_id = 0;
  // As composerd answered them (the API's Device form), with `address` set to where the
  // prolog found each on the host (DeviceSearch).
  std::vector<Device> devices;
  std::string cuda_visible_devices;  // decided by the prolog, which can read sysfs
  // The drives' block devices (/dev/nvme0n1, ...), found by the prolog. Files of the earlier
  // version have none: their jobs get the drives' ids, as that version gave them.
  std::optional<std::vector<std::string>> nvme_paths;
  // Set when the job must not run (its request could not be served and that is not the
  // node's fault): the task hooks fail the job's steps with this sentence.
  std::string error;
  // Set by the epilog when processes still held the devices after busy_wait: why (the
  // holders). composerd keeps the composition (its hold); a later prolog or epilog on the node
  // releases it once nothing holds the devices, then removes the file.
  std::string held;
  // --compose-mem-policy as the prolog accepted it (to_string(MemPolicy)); "" in files of the
  // earlier version, which is preferred. The task hook applies it (apply_mem_policy).
  std::string mem_policy;
  // What the files of the kernel's weighted_interleave folder the prolog wrote for a weighted
  // policy held before any running job changed them ("node2" -> "1", "auto" -> "true"): the
  // epilog writes them back once no other running job interleaves by weight over that node
  // (restore_node_weights). Empty for other policies and in files of the earlier version.
  std::map<std::string, std::string> weights_before;

  bool operator==(const JobState&) const = default;
};

std::string state_path(const std::string& state_dir, uint32_t job_id);
// Creates state_dir (0755) if needed; writes atomically (temporary file and rename).
Status write_job_state(const std::string& state_dir, const JobState& state);
// nullopt when there is no file for the job. The file is read strictly (api/json_reader.h):
// a missing or unknown field, or a device the API's codec refuses, is kInternal with a sentence
// that names the file and the field.
Expected<std::optional<JobState>> read_job_state(const std::string& state_dir, uint32_t job_id);
Status remove_job_state(const std::string& state_dir, uint32_t job_id);

// The jobs other than `job_id` that have a state file in state_dir, in ascending order.
std::vector<uint32_t> other_jobs(const std::string& state_dir, uint32_t job_id);

// The devices the state files of other jobs than `job_id` in state_dir name, with the
// addresses their prologs found. A file that does not read is skipped.
std::vector<Device> devices_of_other_jobs(const std::string& state_dir, uint32_t job_id);

// The host addresses the state files of other jobs than `job_id` in state_dir hold: devices
// the prolog must never hand to this job. A file that does not read is skipped.
std::set<std::string> addresses_of_other_jobs(const std::string& state_dir, uint32_t job_id);

// The node's locks on its host side (flock on files in state_dir). The kernel drops them with
// the process, so a killed hook never leaves the node locked.
//   host.lock    exclusive: held by a prolog for each look for its devices (DeviceSearch::look),
//                and from the look that found them until its state file names them, so that no
//                other prolog looks among the same new functions before the addresses one
//                prolog claims are in its file.
//   rescan.lock  exclusive for a prolog's rescan; shared by an epilog (and the release of a held
//                composition) from removing its devices from the host until composerd has
//                detached them, so that no rescan in between shows them again at the address a
//                later attach would give them (where a prolog would take them for functions the
//                host had before).
//   busy.lock    exclusive: an epilog's walk of the host's processes for the epilogs that
//                asked, and the reading of its answers (busy_check.h).
//   cxl-region.lock  exclusive: a prolog's choice of CXL memory devices in no region and the
//                making of their regions, and an epilog's destroying of one
//                (HostDevices::kCxlRegionLock).
class HostLock {
 public:
  static constexpr std::string_view kLooks = "host.lock";
  static constexpr std::string_view kRescan = "rescan.lock";
  // kTimeout after `wait` with a sentence naming the file; kInternal when it cannot be opened.
  static Expected<HostLock> take(const std::string& state_dir, std::chrono::milliseconds wait,
                                 std::string_view name = kLooks, bool shared = false);
  HostLock(HostLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  HostLock& operator=(HostLock&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  HostLock(const HostLock&) = delete;
  ~HostLock();

 private:
  explicit HostLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// The variables a task of the job sees, in a fixed order:
//   CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER (only with GPUs), COMPOSER_GPUS,
//   COMPOSER_MEM_NUMA (NUMA node ids only; empty when the fabric gave none),
//   COMPOSER_NVME (nvme_paths), COMPOSER_MEM_POLICY (only with CXL memory: the policy the
//   task hook gave each task, "preferred" when the job named none).
std::vector<std::pair<std::string, std::string>> task_environment(const JobState& state);

}  // namespace composer::slurm
