// The health of a job's GPUs as the host sees it, read where it lives: the PCI bus (a GPU whose
// address is gone from <sysfs>/bus/pci/devices fell off it) and NVIDIA's management library,
// loaded at run time (dlopen of libnvidia-ml.so.1: no build or package dependency on NVIDIA).
// What counts as bad is listed in slurm-plugin/README.md ("GPU health"); tests/slurm's fake
// libnvidia-ml scripts it per device (gpu_health_test.cc).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"
#include "composer/slurm/host_devices.h"

namespace composer::slurm {

// The XIDs (NVIDIA driver error codes) that mean the GPU itself is bad, not the program on it:
// 48 double-bit ECC error, 62 internal micro-controller halt, 64 row remapping could not be
// recorded, 74 NVLink error, 79 fallen off the bus, 95 uncontained ECC error, 119 and 120 GSP
// errors, 140 unrecovered ECC error.
bool critical_xid(unsigned long long xid);

// libnvidia-ml, loaded with dlopen and initialised. Only the few entry points used here are
// declared, after NVIDIA's public nvml.h; those a driver lacks (older releases) are skipped.
class Nvml {
 public:
  static constexpr const char* kLibrary = "libnvidia-ml.so.1";
  // kUnavailable, saying why, when the library does not load or nvmlInit_v2 fails (no NVIDIA
  // driver on the host).
  static Expected<std::unique_ptr<Nvml>> load(const std::string& library = kLibrary);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // What NVML says is wrong with the GPU at PCI address `address` ("0000:41:00.0"): the GPU is
  // lost (NVML_ERROR_GPU_IS_LOST), row remapping failed, or uncorrectable ECC errors since the
  // driver loaded. "" when nothing is, or when NVML does not know the GPU (no verdict).
  std::string problem(const std::string& address) const;
  // The UUID NVML gives the GPU at `address` ("GPU-..."), "" when it does not know it: what
  // the hardware check compares with the driver's, to know NVML is asked about the right GPU.
  std::string uuid(const std::string& address) const;
  // The critical XIDs (critical_xid) NVML delivers for the GPUs at `addresses` within `wait`:
  // address -> "XID 79". NVML tells only events from the registration on.
  std::map<std::string, std::string> critical_xids(const std::vector<std::string>& addresses,
                                                   std::chrono::milliseconds wait) const;

 private:
  struct Api;
  Nvml(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

struct BadGpu {
  std::string device_id;
  std::string address;
  std::string why;  // one sentence
};

// The GPUs of `devices` (others are skipped, as are GPUs the prolog found no address for) that
// are bad: gone from the bus, or, with `nvml`, what Nvml::problem and Nvml::critical_xids
// (within `xid_wait`) report.
std::vector<BadGpu> check_gpus(const HostDevices& host, const Nvml* nvml,
                               const std::vector<Device>& devices,
                               std::chrono::milliseconds xid_wait);

}  // namespace composer::slurm
