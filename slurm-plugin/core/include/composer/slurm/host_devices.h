// The host's side of attach and detach: make the kernel see what the fabric attached, check
// that nothing still uses a device, and remove it before the fabric takes it away.
// Works under configurable roots so tests (and test clusters) run it against a fake tree.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::slurm {

// The NUMA node a memory device's address names: "2", "node2" and "numa:2" all mean node 2.
// Empty when the address names none.
std::string numa_node(const std::string& address);

// A process that still has a device open.
struct Holder {
  int pid = 0;
  std::string device_id;
  std::string target;  // what its file descriptor points at
};

class HostDevices {
 public:
  HostDevices(std::string sysfs_root, std::string proc_root)
      : sysfs_(std::move(sysfs_root)), proc_(std::move(proc_root)) {}

  // Where the kernel shows the device: <sysfs>/bus/pci/devices/<address> for GPUs and NVMe,
  // <sysfs>/devices/system/node/node<N> for memory. Empty when the device has no address.
  std::string sysfs_path(const Device& device) const;

  // Writes "1" to <sysfs>/bus/pci/rescan.
  Status rescan() const;
  // Polls until every device with an address is visible, at most `timeout`.
  // kTimeout names the devices still missing.
  Status wait_present(const std::vector<Device>& devices, std::chrono::milliseconds timeout) const;

  // Processes with an open file on a device. The rule (documented in README.md): a file
  // descriptor under <proc>/<pid>/fd whose link target
  //   - contains the device's PCI address (its sysfs files, e.g. resource0 or config),
  //   - is /dev/nvidia<minor> for a GPU, the minor read from
  //     <proc>/driver/nvidia/gpus/<address>/information ("Device Minor:"),
  //   - is /dev/<ctrl> or starts with /dev/<ctrl>n for an NVMe drive, <ctrl> listed in
  //     <sysfs>/bus/pci/devices/<address>/nvme/.
  // Memory is not checked: the kernel refuses to offline memory that is in use.
  std::vector<Holder> holders(const std::vector<Device>& devices) const;

  // Writes "1" to <sysfs>/bus/pci/devices/<address>/remove for each GPU and NVMe drive the
  // host still shows. Devices already gone are skipped.
  Status remove(const std::vector<Device>& devices) const;

  // CUDA_VISIBLE_DEVICES for `gpus` under CUDA_DEVICE_ORDER=PCI_BUS_ID: the position of each
  // among all NVIDIA GPUs the host shows (vendor 0x10de, class 0x03xxxx), sorted by PCI
  // address. When a GPU is not visible in sysfs: 0..n-1 (a node whose only GPUs are the
  // composed ones numbers them so).
  std::string cuda_visible_devices(const std::vector<Device>& gpus) const;

 private:
  std::string sysfs_;
  std::string proc_;
};

}  // namespace composer::slurm
