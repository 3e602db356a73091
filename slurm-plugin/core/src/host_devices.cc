#include "composer/slurm/host_devices.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <thread>

namespace composer::slurm {
namespace fs = std::filesystem;
namespace {

bool is_pci(const Device& d) { return d.type != DeviceType::kMem && !d.address.empty(); }

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

Status write_one(const fs::path& path) {
  std::ofstream out(path);
  if (!out) {
    return Error{ErrorCode::kInternal, "cannot open " + path.string() + " for writing"};
  }
  out << "1\n";
  out.flush();
  if (!out) return Error{ErrorCode::kInternal, "cannot write \"1\" to " + path.string()};
  return Status::Ok();
}

// The nvidia driver's minor number for a GPU, or -1.
int nvidia_minor(const std::string& proc_root, const std::string& address) {
  std::ifstream in(proc_root + "/driver/nvidia/gpus/" + address + "/information");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Device Minor:", 0) == 0) {
      try {
        return std::stoi(line.substr(13));
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

}  // namespace

std::string numa_node(const std::string& address) {
  std::string digits = address;
  for (const char* prefix : {"numa:", "node", "numa"}) {
    if (digits.rfind(prefix, 0) == 0) {
      digits = digits.substr(std::string(prefix).size());
      break;
    }
  }
  if (digits.empty() || digits.size() > 6) return "";
  for (char c : digits) {
    if (c < '0' || c > '9') return "";
  }
  return digits;
}

std::string HostDevices::sysfs_path(const Device& d) const {
  if (d.address.empty()) return "";
  if (d.type == DeviceType::kMem) {
    const std::string n = numa_node(d.address);
    return n.empty() ? "" : sysfs_ + "/devices/system/node/node" + n;
  }
  return sysfs_ + "/bus/pci/devices/" + d.address;
}

Status HostDevices::rescan() const { return write_one(sysfs_ + "/bus/pci/rescan"); }

Status HostDevices::wait_present(const std::vector<Device>& devices,
                                 std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::string missing;
    for (const Device& d : devices) {
      const std::string path = sysfs_path(d);
      std::error_code ec;
      if (!path.empty() && !fs::exists(path, ec)) {
        missing += (missing.empty() ? "" : ", ") + d.id + " (" + path + ")";
      }
    }
    if (missing.empty()) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error{ErrorCode::kTimeout,
                   "the host does not show " + missing + " after " +
                       std::to_string(static_cast<double>(timeout.count()) / 1000.0).substr(0, 4) +
                       " s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<Holder> HostDevices::holders(const std::vector<Device>& devices) const {
  // For each device, the link targets that mean "in use".
  struct Pattern {
    const Device* device;
    std::string contains;             // PCI address anywhere in the target
    std::vector<std::string> exact;   // device nodes
    std::vector<std::string> prefix;  // NVMe namespaces and partitions
  };
  std::vector<Pattern> patterns;
  for (const Device& d : devices) {
    if (!is_pci(d)) continue;
    Pattern p{&d, d.address, {}, {}};
    if (d.type == DeviceType::kGpu) {
      if (int minor = nvidia_minor(proc_, d.address); minor >= 0) {
        p.exact.push_back("/dev/nvidia" + std::to_string(minor));
      }
    } else {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(sysfs_path(d) + "/nvme", ec)) {
        const std::string ctrl = entry.path().filename().string();
        p.exact.push_back("/dev/" + ctrl);
        p.prefix.push_back("/dev/" + ctrl + "n");
      }
    }
    patterns.push_back(std::move(p));
  }
  std::vector<Holder> found;
  if (patterns.empty()) return found;
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator(proc_, ec)) {
    const std::string name = proc.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::error_code fd_ec;
    // Processes come and go while we look: every error means "nothing to see here".
    for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      const std::string target = fs::read_symlink(fd.path(), link_ec).string();
      if (link_ec || target.empty()) continue;
      for (const Pattern& p : patterns) {
        bool hit = target.find(p.contains) != std::string::npos;
        for (const std::string& e : p.exact) hit = hit || target == e;
        for (const std::string& pre : p.prefix) hit = hit || target.rfind(pre, 0) == 0;
        if (hit) found.push_back(Holder{std::stoi(name), p.device->id, target});
      }
    }
  }
  return found;
}

Status HostDevices::remove(const std::vector<Device>& devices) const {
  std::string failed;
  for (const Device& d : devices) {
    if (!is_pci(d)) continue;
    std::error_code ec;
    const fs::path dir = sysfs_path(d);
    if (!fs::exists(dir, ec)) continue;
    if (Status s = write_one(dir / "remove"); !s) {
      failed += (failed.empty() ? "" : "; ") + d.id + ": " + s.error().message;
    }
  }
  if (!failed.empty()) return Error{ErrorCode::kInternal, failed};
  return Status::Ok();
}

std::string HostDevices::cuda_visible_devices(const std::vector<Device>& gpus) const {
  std::vector<std::string> all;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(sysfs_ + "/bus/pci/devices", ec)) {
    if (first_line(entry.path() / "vendor") == "0x10de" &&
        first_line(entry.path() / "class").rfind("0x03", 0) == 0) {
      all.push_back(entry.path().filename().string());
    }
  }
  std::sort(all.begin(), all.end());
  std::string out;
  bool all_found = true;
  for (const Device& g : gpus) {
    auto it = std::find(all.begin(), all.end(), g.address);
    if (it == all.end()) {
      all_found = false;
      break;
    }
    out += (out.empty() ? "" : ",") + std::to_string(it - all.begin());
  }
  if (all_found) return out;
  out.clear();
  for (size_t i = 0; i < gpus.size(); ++i) out += (i == 0 ? "" : ",") + std::to_string(i);
  return out;
}

}  // namespace composer::slurm
