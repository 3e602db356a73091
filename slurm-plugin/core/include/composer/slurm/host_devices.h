// The host's side of attach and detach: make the kernel see what the fabric attached, check
// that nothing still uses a device, and remove it before the fabric takes it away.
// Works under configurable roots so tests (and test clusters) run it against a fake tree.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"
#include "composer/slurm/device_fence.h"

namespace composer::slurm {

// The NUMA node a memory device's address names: "2", "node2" and "numa:2" all mean node 2.
// Empty when the address names none.
std::string numa_node(const std::string& address);

// The PCI functions the host shows: address -> the inode number of the function's sysfs
// directory. The kernel numbers each sysfs node anew (kernfs never reuses a number while it
// runs), so where one function went and another came at the same address (the fabric attached
// another device to the same slot), the address shows another number.
using PciFunctions = std::map<std::string, uint64_t>;

// A process that still has a device open.
struct Holder {
  int pid = 0;
  std::string device_id;
  std::string target;  // what its file descriptor points at
};

class HostDevices {
 public:
  HostDevices(std::string sysfs_root, std::string proc_root, std::string dev_root = "/dev")
      : sysfs_(std::move(sysfs_root)), proc_(std::move(proc_root)), dev_(std::move(dev_root)) {}

  // Where the kernel shows the device: <sysfs>/bus/pci/devices/<address> for GPUs and NVMe,
  // <sysfs>/devices/system/node/node<N> for memory. Empty when the device has no address.
  std::string sysfs_path(const Device& device) const;

  // Writes "1" to <sysfs>/bus/pci/rescan.
  Status rescan() const;
  // The PCI functions the host shows now (<sysfs>/bus/pci/devices): the snapshot the prolog
  // takes before its attach (or its rescan).
  PciFunctions pci_functions() const;

  // The NVIDIA driver's UUID of the GPU at `address` ("GPU-..."), "" when it shows none.
  std::string gpu_uuid(const std::string& address) const;
  // The block devices of a drive's namespaces, <dev>/nvme<X>n<Y>, sorted; empty if none.
  std::vector<std::string> nvme_namespaces(const std::string& address) const;
  // The same, polled every 0.1 s for up to `wait` until the drive shows one: the nvme driver
  // shows the controller (and its serial) first and scans its namespaces after the controller
  // is up, so a drive found by its serial may not have its block device yet (tests/kvm showed
  // it on a real kernel; FakeHost's namespace_delay holds the case).
  std::vector<std::string> wait_nvme_namespaces(const std::string& address,
                                                std::chrono::milliseconds wait) const;

  // Processes with an open file on a device. The rule (documented in README.md): a file
  // descriptor under <proc>/<pid>/fd whose link target
  //   - contains the device's PCI address (its sysfs files, e.g. resource0 or config),
  //   - is <dev>/nvidia<minor> for a GPU, the minor read from
  //     <proc>/driver/nvidia/gpus/<address>/information ("Device Minor:"),
  //   - is <dev>/<ctrl> or starts with <dev>/<ctrl>n for an NVMe drive, <ctrl> listed in
  //     <sysfs>/bus/pci/devices/<address>/nvme/.
  // Memory is not checked: the kernel refuses to offline memory that is in use.
  std::vector<Holder> holders(const std::vector<Device>& devices) const;

  // The device nodes through which a process uses `devices` (what DeviceFence denies): for a
  // GPU /dev/nvidia<minor>, a character device of the nvidia driver's major (its line in
  // <proc>/devices, "nvidia-frontend" or "nvidia") and the minor the driver shows for it
  // ("Device Minor:"); for a drive its controller, namespaces and their partitions, as the
  // `dev` files under <sysfs>/bus/pci/devices/<address>/nvme/<ctrl>/ give them (controller:
  // character, namespaces: block). None for memory, for a device without an address, or for
  // one the host does not show.
  std::vector<DeviceNode> device_nodes(const std::vector<Device>& devices) const;

  // CXL memory (the kernel's dax and memory-hotplug interfaces, slurm-plugin/README.md): each
  // of `memory` (the memory devices of one composition) brought online, as `daxctl
  // reconfigure-device --mode=system-ram` does (its dax device unbound from device_dax and
  // bound to kmem), its memory blocks (<sysfs>/devices/system/node/node<N>/memory<K>) onlined
  // movable, waiting up to `timeout` until each says "online". Answers the node each became, in
  // order. A region's dax device is the one whose target_node is the node the fabric names;
  // where it names none, the composition's regions of one capacity take the dax devices in
  // devdax mode of that capacity when the host shows exactly as many, seen so at two looks in
  // a row (which of the job's own regions gets which is all one to it); more than that could
  // include another composition's: kConflict, no guess. Without a dax device for it by
  // `timeout`: the fabric's node (memory the host maps itself; DeviceSearch then says whether
  // the host shows the node), or "" where the fabric names none. kTimeout when the blocks do
  // not come or come online.
  // Capacity in no region yet (CXL memory devices that nothing maps, and no dax device of that
  // capacity) gets its regions made by the host side (README.md, "What the host side was
  // checked against"): the memory devices are chosen and their regions made under the node's
  // kCxlRegionLock in `lock_dir` (HostLock), so that two prologs never pick the same device
  // (TwoPrologsMakingRegionsAtOnceTakeDevicesOfTheirOwn); waited for until `timeout`.
  static constexpr std::string_view kCxlRegionLock = "cxl-region.lock";
  Expected<std::vector<std::string>> online_memory(const std::vector<Device>& memory,
                                                   std::chrono::milliseconds timeout,
                                                   const std::string& lock_dir) const;
  // The blocks of the memory's node offlined (the kernel migrates their pages away), waiting
  // up to `timeout`, then the dax device given back to device_dax, or the region the host side
  // made destroyed (under kCxlRegionLock in `lock_dir`). kConflict, naming the blocks, when
  // pages in use would not move: the memory is left online and must not be detached.
  Status offline_memory(const Device& memory, std::chrono::milliseconds timeout,
                        const std::string& lock_dir) const;

  // Writes "1" to <sysfs>/bus/pci/devices/<address>/remove for each GPU and NVMe drive the
  // host still shows, then waits up to kRemoveWait until the host shows none of them (the
  // kernel's remove is done when the write returns; a host that takes longer is waited for).
  // Devices already gone are skipped.
  static constexpr std::chrono::milliseconds kRemoveWait{5000};
  Status remove(const std::vector<Device>& devices) const;

  // CUDA_VISIBLE_DEVICES for `gpus`: their UUIDs, which CUDA accepts and which no other GPU
  // of the host can be taken for, when each has one: as the NVIDIA driver shows it at the
  // GPU's address (gpu_uuid), else as the fabric reported it (identity.uuid, only in the
  // driver's form GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx); else, under
  // CUDA_DEVICE_ORDER=PCI_BUS_ID, the position of each among all NVIDIA GPUs the host shows
  // (vendor 0x10de, class 0x03xxxx), sorted by PCI address. Else "": where a GPU sits is not
  // known (host_check=rescan or off, no UUID), and a guess could name another job's GPU.
  std::string cuda_visible_devices(const std::vector<Device>& gpus) const;
  // The PCI addresses of every NVIDIA GPU the host shows (vendor 0x10de, class 0x03xxxx),
  // sorted: a GPU's position here is its index under CUDA_DEVICE_ORDER=PCI_BUS_ID, and NVML's
  // (which enumerates in PCI bus order, as DCGM numbers the GPUs it finds).
  std::vector<std::string> nvidia_gpus() const;

 private:
  friend class DeviceSearch;
  std::string sysfs_;
  std::string proc_;
  std::string dev_;
};

// Finds each device of a composition on the host, one look at a time, so that a caller can
// hold a lock for a look and for what it does with what that look found (the prolog,
// spank_prolog.cc, keeps the node's HostLock until the job's state file names the addresses),
// and let go between looks.
// Each device is answered with `address` set to where the host shows it:
//   - a device with an address: the PCI function (memory: the NUMA node) at that address;
//     a function whose vendor or device id differs from the identity's is not it;
//   - a GPU or drive without one, among the functions the host shows that are not `taken`
//     (held by other jobs): the one whose UUID (GPUs: "GPU UUID:" of
//     <proc>/driver/nvidia/gpus/<address>/information) or serial (drives:
//     nvme/<ctrl>/serial) equals the identity's; else, when the identity has no UUID or
//     serial the host can compare, among the functions of its kind (GPU: PCI class 03,
//     drive: 0108) that are new against `before` (an address it did not show, or one where
//     another function came since: PciFunctions) and have the identity's vendor and device ids
//     (any, when the fabric reported none), provided they are exactly as many as the devices
//     sought with those ids (anything else could be another job's device) and two looks in a
//     row saw the same ones (hot-plug is asynchronous); devices without ids take only what the
//     rules before them left;
//   - memory without a NUMA node: nothing to find, answered as it is.
class DeviceSearch {
 public:
  // Between looks, wait this long.
  static constexpr std::chrono::milliseconds kLookAgain{100};

  DeviceSearch(const HostDevices& host, std::vector<Device> devices, PciFunctions before,
               std::chrono::milliseconds timeout);
  // One look: the devices when all are found; nullopt when it is worth looking again
  // kLookAgain later; kTimeout once `timeout` has passed since the search began, with one
  // sentence naming each device not found and what it was looked for by, and in `not_found`,
  // when given, the ids of those the host does not show at all (not those it shows but cannot
  // tell from other functions).
  Expected<std::optional<std::vector<Device>>> look(const std::set<std::string>& taken,
                                                    std::vector<std::string>* not_found = nullptr);

 private:
  const HostDevices& host_;
  std::vector<Device> devices_;
  PciFunctions before_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_;
  int looks_ = 0;
  bool last_look_ = false;
  // The new functions each group of devices matched by ids alone saw at the last look.
  std::map<std::string, std::vector<std::string>> fresh_before_;
};

}  // namespace composer::slurm
