// What the host side's files (host_*.cc) share: sysfs attributes, device names, dax devices.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::slurm {

// A GPU or drive with an address: one the host shows as a PCI function.
bool is_pci(const Device& d);

// The first line of a small file (a sysfs attribute); "" when it cannot be read.
std::string first_line(const std::filesystem::path& path);

// Writes `text` to a sysfs attribute as one write. kInternal names the file and the text.
Status write_text(const std::filesystem::path& path, const std::string& text);

// The nvidia driver's minor number for a GPU, or -1.
int nvidia_minor(const std::string& proc_root, const std::string& address);

// "ng3n" for controller "nvme3": the prefix of its namespaces' generic character devices.
std::string generic_prefix(const std::string& ctrl);

// A dax device (<sysfs>/bus/dax/devices/<name>): its target node and size, the driver bound.
struct DaxDevice {
  std::string name;
  std::string target_node;
  uint64_t size = 0;
  std::string driver;  // "device_dax", "kmem", "" when none
};

// The dax devices <sysfs>/bus/dax/devices shows, sorted by name.
std::vector<DaxDevice> dax_devices(const std::string& sysfs);

// A driver the kernel has as a module that nothing may have loaded yet (kmem: nothing loads it
// before its first use; dax_pmem: udev loads it some time after the first libnvdimm dax device
// appears), loaded as daxctl and ndctl do: `dir` is its directory under <sysfs>/bus/.../drivers.
Status load_driver(const std::filesystem::path& dir, const char* module, const std::string& id);

}  // namespace composer::slurm
