// The host's GPU software stack told about a job's GPUs (slurm-plugin/README.md, "The GPU
// stack"): DCGM-exporter's HPC job mapping, and a hook the site sets for its GPU daemons.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/plugin_config.h"

namespace composer::slurm {

// DCGM-exporter's HPC job mapping in config.dcgm_job_dir (nothing when it is empty): for each
// GPU of a job whose state file on the node names it (not a held composition, whose job has
// ended), the file <dir>/<index> holding the job id and a newline, where <index> is the GPU's
// position in HostDevices::nvidia_gpus() (NVML's and DCGM's index). Rebuilt whole from the state
// files each time, since an attach or a removal at a lower PCI address moves the indices of the
// GPUs above it; a file named by a number that no GPU of a job has now is removed, any other
// file is left alone. `leaving`: a job whose GPUs are about to go (its epilog), left out.
// Each file is written whole (a temporary file renamed), mode 0644.
Status write_job_map(const SpankConfig& config, const HostDevices& host, uint32_t leaving = 0);

// How long the hook may run before it is killed.
constexpr std::chrono::seconds kGpuHookWait{30};
// config.gpu_hook run as `HOOK EVENT JOB ADDRESS...` (the PCI addresses of `gpus` the prolog
// found; nothing is run without one), its output collected; an error with the exit status
// and the output when it fails (kUnavailable), kTimeout after kGpuHookWait.
Status run_gpu_hook(const SpankConfig& config, std::string_view event, uint32_t job_id,
                    const std::vector<Device>& gpus);

}  // namespace composer::slurm
