// The plugin's host side against a real host's own sysfs, /proc and /dev (no fake): for each
// NVIDIA GPU the host shows (vendor 0x10de, PCI class 03), it checks that
//   - the NVIDIA driver's UUID is read at its address (HostDevices::gpu_uuid);
//   - DeviceSearch finds it by its UUID alone, without an address and among functions all of
//     which the host showed before (as a GPU the Redfish or Liqid driver reports, attached
//     before another job's rescan showed it), and by its address with its ids checked;
//   - its sysfs directory keeps its inode number from one look to the next (the prolog tells
//     the function it had before from another one at the same address by it: PciFunctions);
//   - its device node is /dev/nvidia<minor> with the numbers HostDevices::device_nodes gives
//     (the numbers the fence denies), and CUDA_VISIBLE_DEVICES for it is its UUID;
//   - with --nvidia-smi FILE (nvidia-smi --query-gpu=pci.bus_id,uuid --format=csv,noheader),
//     each GPU's UUID is the one nvidia-smi gives for its bus id, and no GPU nvidia-smi lists
//     is missing;
//   - NVML (libnvidia-ml.so.1, or --nvml LIBRARY; with --root only when --nvml is given), loaded
//     through the health check's own dlopen path (gpu_health.h), gives each GPU the driver's
//     UUID at its address, and its health is read (printed: a bad GPU is what the check is for,
//     not a failure of it).
// One line per GPU. Exits 0 when every check holds, 1 when one does not, 77 on a host without
// NVIDIA GPUs (ctest: skipped). tests/hardware/check_real_gpu.sh runs it. --root DIR looks at
// DIR/sys, DIR/proc and DIR/dev instead (host_identity_check_test runs it so on a fake host).
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "composer/common/strings.h"
#include "composer/slurm/gpu_health.h"
#include "composer/slurm/host_devices.h"

namespace {

namespace fs = std::filesystem;
using composer::Device;
using composer::DeviceType;
using composer::slurm::DeviceNode;
using composer::slurm::DeviceSearch;
using composer::slurm::HostDevices;
using composer::slurm::PciFunctions;

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(composer::trim(line));
}

// Bus id as sysfs names it, from nvidia-smi's "00000000:41:00.0".
std::string sysfs_address(std::string bus_id) {
  bus_id = composer::lower(composer::trim(bus_id));
  return bus_id.size() > 12 ? bus_id.substr(bus_id.size() - 12) : bus_id;
}

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::cout << "  FAIL: " << what << "\n";
  }
}

// One look after another until DeviceSearch answers (it bounds itself by its timeout).
std::optional<std::string> found_at(const HostDevices& host, const Device& device,
                                    const PciFunctions& before) {
  DeviceSearch search(host, {device}, before, std::chrono::seconds(3));
  for (;;) {
    auto looked = search.look({});
    if (!looked) {
      std::cout << "  " << looked.error().message << "\n";
      return std::nullopt;
    }
    if (*looked) return (**looked)[0].address;
    std::this_thread::sleep_for(DeviceSearch::kLookAgain);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string smi_file;
  std::string root;
  std::string nvml_library;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--nvidia-smi" && i + 1 < argc) {
      smi_file = argv[++i];
    } else if (std::string(argv[i]) == "--nvml" && i + 1 < argc) {
      nvml_library = argv[++i];
    } else if (std::string(argv[i]) == "--root" && i + 1 < argc) {
      root = argv[++i];
    } else {
      std::cerr << "usage: host_identity_check [--nvidia-smi FILE] [--root DIR] [--nvml LIBRARY]\n";
      return 2;
    }
  }
  const std::string sys = root + "/sys";
  const std::string dev = root + "/dev";
  const HostDevices host(sys, root + "/proc", dev);
  const PciFunctions all = host.pci_functions();
  std::vector<std::string> gpus;
  for (const auto& [address, inode] : all) {
    const fs::path dir = fs::path(sys) / "bus/pci/devices" / address;
    if (first_line(dir / "vendor") == "0x10de" && first_line(dir / "class").rfind("0x03", 0) == 0) {
      gpus.push_back(address);
    }
  }
  if (gpus.empty()) {
    std::cout << "no NVIDIA GPU on this host: nothing to check\n";
    return 77;
  }
  std::map<std::string, std::string> smi;  // address -> UUID
  if (!smi_file.empty()) {
    std::ifstream in(smi_file);
    std::string line;
    while (std::getline(in, line)) {
      const std::vector<std::string> f = composer::split(line, ',', {.trim = true});
      if (f.size() == 2) smi[sysfs_address(f[0])] = f[1];
    }
    check(!smi.empty(), "no GPU in " + smi_file);
  }
  std::unique_ptr<composer::slurm::Nvml> nvml;
  if (root.empty() || !nvml_library.empty()) {
    const std::string library =
        nvml_library.empty() ? composer::slurm::Nvml::kLibrary : nvml_library;
    auto loaded = composer::slurm::Nvml::load(library);
    check(static_cast<bool>(loaded), "NVML: " + (loaded ? std::string() : loaded.error().message));
    if (loaded) nvml = std::move(*loaded);
  }
  for (const std::string& address : gpus) {
    const fs::path dir = fs::path(sys) / "bus/pci/devices" / address;
    const std::string uuid = host.gpu_uuid(address);
    std::cout << address << " " << first_line(dir / "vendor") << ":" << first_line(dir / "device")
              << " uuid " << (uuid.empty() ? "(none)" : uuid) << "\n";
    check(uuid.rfind("GPU-", 0) == 0, address + ": the driver shows no UUID");
    const PciFunctions again = host.pci_functions();
    check(again.contains(address) && again.at(address) == all.at(address),
          address + ": its sysfs directory's inode number changed between two looks");
    if (!smi.empty()) {
      check(smi.count(address) == 1 && smi[address] == uuid,
            address + ": nvidia-smi says " + (smi.count(address) ? smi[address] : "nothing"));
    }
    Device gpu;
    gpu.id = "probe";
    gpu.type = DeviceType::kGpu;
    gpu.identity = {first_line(dir / "vendor"), first_line(dir / "device"), "", uuid};
    const std::optional<std::string> by_uuid = found_at(host, gpu, all);
    check(by_uuid == address, address + ": found by its UUID at " + by_uuid.value_or("(nowhere)"));
    gpu.address = address;
    const std::optional<std::string> by_address = found_at(host, gpu, all);
    check(by_address == address,
          address + ": found by its address at " + by_address.value_or("(nowhere)"));
    gpu.address = address;
    const std::vector<DeviceNode> nodes = host.device_nodes({gpu});
    check(nodes.size() == 1, address + ": " + std::to_string(nodes.size()) + " device nodes");
    for (const DeviceNode& n : nodes) {
      struct stat st {};
      const std::string path = dev + "/" + n.name;
      const bool same = ::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode) &&
                        major(st.st_rdev) == n.major && minor(st.st_rdev) == n.minor;
      std::cout << "  " << path << " " << n.rule() << (same ? "" : " (differs)") << "\n";
      check(same, path + " is not " + n.rule());
    }
    check(host.cuda_visible_devices({gpu}) == uuid,
          address + ": CUDA_VISIBLE_DEVICES=" + host.cuda_visible_devices({gpu}));
    if (nvml) {
      const std::string nvml_uuid = nvml->uuid(address);
      check(nvml_uuid == uuid, address + ": NVML gives UUID " +
                                   (nvml_uuid.empty() ? "(none)" : nvml_uuid) + " at its address");
      const std::vector<composer::slurm::BadGpu> bad =
          composer::slurm::check_gpus(host, nvml.get(), {gpu}, std::chrono::milliseconds(1000));
      std::cout << "  health (NVML and the bus): " << (bad.empty() ? "ok" : "BAD: " + bad[0].why)
                << "\n";
    }
  }
  for (const auto& [address, uuid] : smi) {
    check(std::find(gpus.begin(), gpus.end(), address) != gpus.end(),
          "nvidia-smi lists " + address + " (" + uuid + "), the host's sysfs does not");
  }
  std::cout << (failures == 0 ? "all checks held" : std::to_string(failures) + " failed") << "\n";
  return failures == 0 ? 0 : 1;
}
