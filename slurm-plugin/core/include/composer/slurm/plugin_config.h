// plugstack.conf arguments of spank_composer.so. Strict: an unknown argument or a bad value
// refuses to load the plugin with a sentence naming the argument (see README.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/config/shared_keys.h"

namespace composer::slurm {

enum class HostCheck {
  kWait,    // rescan the PCI bus, then find every attached device on the host (DeviceSearch)
  kRescan,  // rescan only (trees where nothing makes devices appear, e.g. test clusters)
  kOff,     // touch nothing on the host (no rescan, no wait, no busy check, no removal)
};

// Whether the plugin fences jobs from each other's composed devices (DeviceFence).
enum class Fence {
  kAuto,      // where Slurm made the job a cgroup: a devices cgroup (cgroup v1,
              // ConstrainDevices=yes) or a job_<id> cgroup (cgroup v2, task/cgroup)
  kRequired,  // a task of a job whose cgroup is not found, on a node where other jobs hold
              // composed devices, fails (the step does not start)
  kOff,       // never
};

// What the prolog does when composerd cannot be reached after its retries.
enum class OnUnavailable {
  kDrain,    // fail the prolog: Slurm drains the node and requeues the job held
  kFailJob,  // let the prolog succeed and fail the job's steps with the reason
};

// Where a job's devices are composed.
enum class ComposeOn {
  kNode,        // the slurmd prolog of each node composes that node
  kController,  // PrologSlurmctld (composer-slurmctld) composes every node and
                // EpilogSlurmctld releases them; the prolog reads its node's composition
};

// Where the GPU health check (gpu_health.h) looks.
enum class GpuHealth {
  kNvml,  // the bus and NVML (libnvidia-ml loaded at run time; the bus alone where it does not
          // load)
  kBus,   // the bus only
  kOff,   // no check
};

struct SpankConfig {
  // composerd's own default address (composer/config); or a server list, an active composerd
  // and its standbys tried in order (api/server_list.h).
  std::string server = std::string("http://") + config::kDefaultListenAddress + ":" +
                       std::to_string(config::kDefaultListenPort);
  uint32_t connect_timeout_s = 5;
  uint32_t timeout_s = 120;  // per request; composerd bounds the fabric wait itself
  uint32_t retries = 3;
  uint32_t backoff_ms = 1000;
  std::string state_dir = "/run/slurm-composer";
  std::string munge_socket;  // empty: munge's default socket
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  std::string dev_root = "/dev";  // where the device nodes of GPUs and drives are
  HostCheck host_check = HostCheck::kWait;
  Fence fence = Fence::kAuto;
  std::string devices_cgroup = "/sys/fs/cgroup/devices";  // the cgroup v1 devices hierarchy
  std::string cpuset_cgroup = "/sys/fs/cgroup/cpuset";    // the cgroup v1 cpuset hierarchy
  // The cgroup v2 hierarchy; empty: /sys/fs/cgroup when it is one, else /sys/fs/cgroup/unified.
  std::string unified_cgroup;
  uint32_t host_wait_s = 30;
  uint32_t busy_wait_s = 10;
  // How long the prolog asks again while composerd answers insufficient_resources: Slurm hands
  // a finished job's licenses to the next job before that job's epilog has released its
  // devices, so a shortfall at start is most often a release still under way.
  uint32_t free_wait_s = 30;
  // How long composer-slurmctld and the node prolog ask again while composerd cannot be
  // reached (a restart): longer than composerd takes to start, shorter than a job should wait
  // for a composerd that is gone. 0: fail at once (composer-slurmctld: Slurm requeues the
  // job; the node prolog: on_unavailable says).
  uint32_t outage_wait_s = 60;
  // composer-slurmctld's composerd when not `server` (e.g. unix:/run/composer/composerd.sock,
  // composerd's ListenSocket on the controller: no munge round trip); a server list too.
  std::string controller_server;
  // Read and ignored, so that a plugstack line that sets it still parses: EpilogSlurmctld no
  // longer waits for the node epilogs (ctld_core.h, controller_epilog).
  uint32_t epilog_wait_s = 300;
  OnUnavailable on_unavailable = OnUnavailable::kDrain;
  ComposeOn compose_on = ComposeOn::kController;
  GpuHealth gpu_health = GpuHealth::kNvml;
  std::string nvml_library = "libnvidia-ml.so.1";  // a name the loader looks up, or a path
  // DCGM-exporter's HPC job-mapping directory (its --hpc-job-mapping-dir): one file per GPU
  // index naming the job; empty: none written.
  std::string dcgm_job_dir;
  // Run after the prolog found a job's GPUs and before the epilog lets go of them, so that
  // the host's GPU daemons look again: HOOK attach|detach|detached JOB ADDRESS...; empty: none.
  std::string gpu_hook;
};

// Parses "key=value" arguments as SPANK hands them over (argv of the plugstack.conf line).
Expected<SpankConfig> parse_plugstack_args(const std::vector<std::string>& args);

// The settings of the spank_composer.so line in the plugstack file at $COMPOSER_PLUGSTACK, or
// at `installed` when that is unset: for the programs beside the plugin (composer-slurmctld,
// composer-node-check). The error names the file.
Expected<SpankConfig> read_plugstack(const std::string& installed);

// The arguments of the spank_composer.so line in a plugstack.conf file's text (`path` names
// it in the sentences), for programs that share the plugin's settings (composer-slurmctld).
Expected<SpankConfig> parse_plugstack_file(std::string_view text, const std::string& path);

}  // namespace composer::slurm
