// The host's devices as sysfs shows them: identity, the match of a composed device, nodes, removal.
#include "composer/slurm/host_devices.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "host_sysfs.h"

namespace composer::slurm {
namespace fs = std::filesystem;

bool is_pci(const Device& d) { return d.type != DeviceType::kMem && !d.address.empty(); }

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) {
    return Error{ErrorCode::kInternal, "cannot open " + path.string() + " for writing"};
  }
  out << text;
  out.flush();
  if (!out) return Error{ErrorCode::kInternal, "cannot write \"" + text + "\" to " + path.string()};
  return Status::Ok();
}

namespace {

Status write_one(const fs::path& path) { return write_text(path, "1\n"); }

// The value of one "Key: value" line of the NVIDIA driver's
// <proc>/driver/nvidia/gpus/<address>/information, trimmed; "" when it shows none.
std::string nvidia_information(const std::string& proc_root, const std::string& address,
                               std::string_view key) {
  std::ifstream in(proc_root + "/driver/nvidia/gpus/" + address + "/information");
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == ':') {
      return std::string(trim(std::string_view(line).substr(key.size() + 1)));
    }
  }
  return "";
}

}  // namespace

int nvidia_minor(const std::string& proc_root, const std::string& address) {
  const Expected<uint32_t> minor =
      parse_count(nvidia_information(proc_root, address, "Device Minor"), 1u << 20);
  return minor ? static_cast<int>(*minor) : -1;
}

namespace {

// The major number <proc>/devices gives a character driver of one of `names`; nullopt if none.
std::optional<uint32_t> char_major(const std::string& proc_root,
                                   std::initializer_list<std::string_view> names) {
  std::ifstream in(proc_root + "/devices");
  std::string line;
  bool chars = false;
  while (std::getline(in, line)) {
    if (line.rfind("Character devices:", 0) == 0) chars = true;
    if (line.rfind("Block devices:", 0) == 0) chars = false;
    if (!chars) continue;
    const std::vector<std::string> words = split(line, ' ', {.trim = true, .skip_empty = true});
    if (words.size() != 2) continue;
    for (std::string_view name : names) {
      if (words[1] != name) continue;
      if (Expected<uint32_t> major = parse_count(words[0], 1u << 12); major) return *major;
    }
  }
  return std::nullopt;
}

// The node a sysfs device directory's `dev` file names, if it has one.
std::optional<DeviceNode> dev_node(const fs::path& dir, char type) {
  const std::vector<uint32_t> number = parse_dev_number(first_line(dir / "dev"));
  if (number.size() != 2) return std::nullopt;
  return DeviceNode{type, number[0], number[1], dir.filename().string()};
}

}  // namespace

std::string generic_prefix(const std::string& ctrl) {
  return ctrl.rfind("nvme", 0) == 0 ? "ng" + ctrl.substr(4) + "n" : ctrl + "-generic-n";
}

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

PciFunctions HostDevices::pci_functions() const {
  PciFunctions out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(sysfs_ + "/bus/pci/devices", ec)) {
    // The link's target, the function's own directory; a function that went meanwhile is not
    // shown.
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0) continue;
    out.emplace(entry.path().filename().string(), static_cast<uint64_t>(st.st_ino));
  }
  return out;
}

std::string HostDevices::gpu_uuid(const std::string& address) const {
  return nvidia_information(proc_, address, "GPU UUID");
}

std::vector<std::string> HostDevices::nvme_namespaces(const std::string& address) const {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path dir = fs::path(sysfs_) / "bus/pci/devices" / address / "nvme";
  for (const auto& ctrl : fs::directory_iterator(dir, ec)) {
    const std::string c = ctrl.path().filename().string();
    std::error_code ns_ec;
    for (const auto& ns : fs::directory_iterator(ctrl.path(), ns_ec)) {
      const std::string n = ns.path().filename().string();
      if (n.rfind(c + "n", 0) == 0 && n.size() > c.size() + 1) out.push_back(dev_ + "/" + n);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> HostDevices::wait_nvme_namespaces(const std::string& address,
                                                           std::chrono::milliseconds wait) const {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::vector<std::string> out = nvme_namespaces(address);
    if (!out.empty() || std::chrono::steady_clock::now() >= deadline) return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<DeviceNode> HostDevices::device_nodes(const std::vector<Device>& devices) const {
  std::vector<DeviceNode> out;
  std::optional<uint32_t> nvidia;
  bool asked_nvidia = false;
  for (const Device& d : devices) {
    if (!is_pci(d)) continue;
    if (d.type == DeviceType::kGpu) {
      const int minor = nvidia_minor(proc_, d.address);
      if (minor < 0) continue;
      if (!asked_nvidia) {
        nvidia = char_major(proc_, {"nvidia-frontend", "nvidia"});
        asked_nvidia = true;
      }
      if (nvidia) {
        out.push_back(DeviceNode{'c', *nvidia, static_cast<uint32_t>(minor),
                                 "nvidia" + std::to_string(minor)});
      }
      continue;
    }
    std::error_code ec;
    for (const auto& ctrl :
         fs::directory_iterator(fs::path(sysfs_) / "bus/pci/devices" / d.address / "nvme", ec)) {
      const std::string c = ctrl.path().filename().string();
      if (std::optional<DeviceNode> n = dev_node(ctrl.path(), 'c')) out.push_back(*n);
      std::error_code ns_ec;
      for (const auto& ns : fs::directory_iterator(ctrl.path(), ns_ec)) {
        const std::string name = ns.path().filename().string();
        // A namespace's generic character device (ng<X>n<Y>, the kernel's NVMe passthrough
        // node beside the block device nvme<X>n<Y>): a job that opens it reaches the drive too.
        if (name.rfind(generic_prefix(c), 0) == 0 && name.size() > generic_prefix(c).size()) {
          if (std::optional<DeviceNode> n = dev_node(ns.path(), 'c')) out.push_back(*n);
          continue;
        }
        if (name.rfind(c + "n", 0) != 0 || name.size() <= c.size() + 1) continue;
        if (std::optional<DeviceNode> n = dev_node(ns.path(), 'b')) out.push_back(*n);
        std::error_code part_ec;
        for (const auto& part : fs::directory_iterator(ns.path(), part_ec)) {
          if (part.path().filename().string().rfind(name + "p", 0) != 0) continue;
          if (std::optional<DeviceNode> n = dev_node(part.path(), 'b')) out.push_back(*n);
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

// What the host shows of one PCI function, for matching.
struct Seen {
  std::string address;
  bool fresh = false;  // not a function the host showed before the attach
  std::string vendor;
  std::string device;
  std::string uuid;    // NVIDIA driver's
  std::string serial;  // NVMe controller's
  std::string cls;     // PCI class, "0x030200"
};

// A function of the device's kind: a display or 3D controller (class 03) for a GPU, an NVMe
// controller (class 0108) for a drive.
bool same_kind(const Device& d, const Seen& f) {
  if (d.type == DeviceType::kGpu) return f.cls.rfind("0x03", 0) == 0;
  if (d.type == DeviceType::kNvme) return f.cls.rfind("0x0108", 0) == 0;
  return true;
}

bool same_ids(const DeviceIdentity& id, const Seen& f) {
  return (id.pci_vendor.empty() || id.pci_vendor == f.vendor) &&
         (id.pci_device.empty() || id.pci_device == f.device);
}

// The UUID or serial decides when both sides have it: true (it is), false (it is not), or
// nullopt (nothing to compare).
std::optional<bool> strong_match(const Device& d, const Seen& f) {
  auto bare = [](std::string_view u) {
    std::string l = lower(trim(u));
    return l.rfind("gpu-", 0) == 0 ? l.substr(4) : l;
  };
  if (!d.identity.uuid.empty() && !f.uuid.empty()) return bare(d.identity.uuid) == bare(f.uuid);
  if (!d.identity.serial.empty() && !f.serial.empty()) {
    return trim(d.identity.serial) == trim(f.serial);
  }
  return std::nullopt;
}

// "0x10de:0x20b5", "any" for an id the fabric did not report.
std::string pci_of(const Device& d) {
  return (d.identity.pci_vendor.empty() ? "any" : d.identity.pci_vendor) + ":" +
         (d.identity.pci_device.empty() ? "any" : d.identity.pci_device);
}

std::string looked_for(const Device& d) {
  std::vector<std::string> what;
  if (!d.address.empty()) what.push_back("address " + d.address);
  if (!d.identity.pci_vendor.empty() || !d.identity.pci_device.empty()) {
    what.push_back("PCI " + pci_of(d));
  }
  if (!d.identity.uuid.empty()) what.push_back("UUID " + d.identity.uuid);
  if (!d.identity.serial.empty()) what.push_back("serial " + d.identity.serial);
  return what.empty() ? (d.type == DeviceType::kGpu ? "any GPU: the fabric reported nothing more"
                                                    : "any drive: the fabric reported nothing more")
                      : join(what, ", ");
}

}  // namespace

DeviceSearch::DeviceSearch(const HostDevices& host, std::vector<Device> devices,
                           PciFunctions before, std::chrono::milliseconds timeout)
    : host_(host),
      devices_(std::move(devices)),
      before_(std::move(before)),
      timeout_(timeout),
      deadline_(std::chrono::steady_clock::now() + timeout) {}

Expected<std::optional<std::vector<Device>>> DeviceSearch::look(
    const std::set<std::string>& taken, std::vector<std::string>* not_found) {
  const std::vector<Device>& devices = devices_;
  auto& fresh_before = fresh_before_;
  const int look = looks_++;
  {
    std::vector<Seen> seen;
    for (const auto& [a, inode] : host_.pci_functions()) {
      const fs::path dir = fs::path(host_.sysfs_) / "bus/pci/devices" / a;
      // New against the snapshot: an address it did not show, or another function there now.
      const auto old = before_.find(a);
      Seen f{a,
             old == before_.end() || old->second != inode,
             normal_pci_id(first_line(dir / "vendor")).value_or(""),
             normal_pci_id(first_line(dir / "device")).value_or(""),
             host_.gpu_uuid(a),
             "",
             first_line(dir / "class")};
      std::error_code ec;
      for (const auto& ctrl : fs::directory_iterator(dir / "nvme", ec)) {
        f.serial = std::string(trim(first_line(ctrl.path() / "serial")));
        break;
      }
      seen.push_back(std::move(f));
    }
    std::vector<Device> out = devices;
    std::set<std::string> claimed;
    std::vector<std::string> missing;
    // The devices the host does not show at all (not those it shows but cannot tell apart).
    std::vector<std::string> missing_ids;
    // Devices with an address, then those found by UUID or serial, then by ids alone: the
    // weakest rule only runs on what no stronger one explains.
    std::vector<size_t> weak;
    for (size_t i = 0; i < out.size(); ++i) {
      Device& d = out[i];
      if (!d.address.empty()) {
        const std::string path = host_.sysfs_path(d);
        std::error_code ec;
        if (path.empty() || !fs::exists(path, ec)) {
          missing.push_back(d.id + " (" + (path.empty() ? d.address : path) + ")");
          missing_ids.push_back(d.id);
          continue;
        }
        if (d.type != DeviceType::kMem) {
          auto f = std::find_if(seen.begin(), seen.end(),
                                [&](const Seen& s) { return s.address == d.address; });
          if (f != seen.end() && !same_ids(d.identity, *f)) {
            missing_ids.push_back(d.id);
            missing.push_back(d.id + " (" + d.address + " is PCI " + f->vendor + ":" + f->device +
                              ", not the PCI " + pci_of(d) + " the fabric reported)");
            continue;
          }
          claimed.insert(d.address);
        }
        continue;
      }
      if (d.type == DeviceType::kMem) continue;
      std::vector<const Seen*> strong;
      bool comparable = false;
      for (const Seen& f : seen) {
        if (taken.contains(f.address) || !same_ids(d.identity, f)) continue;
        std::optional<bool> m = strong_match(d, f);
        comparable = comparable || m.has_value();
        if (m.value_or(false)) strong.push_back(&f);
      }
      if (strong.size() == 1 && !claimed.contains(strong[0]->address)) {
        d.address = strong[0]->address;
        claimed.insert(d.address);
      } else if (strong.size() > 1) {
        missing.push_back(d.id + " (" + std::to_string(strong.size()) +
                          " functions of the host match " + looked_for(d) + ")");
      } else if (!comparable) {
        weak.push_back(i);
      } else {
        missing.push_back(d.id + " (" + looked_for(d) + ")");
        missing_ids.push_back(d.id);
      }
    }
    // By ids alone: the new functions of the device's kind with those ids must be exactly the
    // devices sought. Devices the fabric reported no ids for come last: any new function of
    // their kind that no other rule explains.
    std::stable_sort(weak.begin(), weak.end(), [&](size_t a, size_t b) {
      auto no_ids = [&](size_t k) {
        return out[k].identity.pci_vendor.empty() && out[k].identity.pci_device.empty();
      };
      return !no_ids(a) && no_ids(b);
    });
    std::set<size_t> done;
    bool pending = false;  // a match by ids waits for a second look
    for (size_t i : weak) {
      if (done.contains(i)) continue;
      std::vector<size_t> group;
      for (size_t j : weak) {
        if (out[j].type == out[i].type &&
            out[j].identity.pci_vendor == out[i].identity.pci_vendor &&
            out[j].identity.pci_device == out[i].identity.pci_device) {
          group.push_back(j);
        }
      }
      std::vector<std::string> fresh;
      for (const Seen& f : seen) {
        if (f.fresh && !taken.contains(f.address) && !claimed.contains(f.address) &&
            same_ids(out[i].identity, f) && same_kind(out[i], f)) {
          fresh.push_back(f.address);
        }
      }
      for (size_t j : group) done.insert(j);
      const std::string ids = std::string(to_string(out[i].type)) + ":" +
                              out[i].identity.pci_vendor + ":" + out[i].identity.pci_device;
      std::sort(fresh.begin(), fresh.end());
      const bool steady = fresh_before[ids] == fresh;
      fresh_before[ids] = fresh;
      if (fresh.size() == group.size() && !steady) {
        pending = true;
        continue;
      }
      if (fresh.size() == group.size()) {
        for (size_t k = 0; k < group.size(); ++k) out[group[k]].address = fresh[k];
        claimed.insert(fresh.begin(), fresh.end());
        continue;
      }
      for (size_t j : group) {
        if (fresh.empty()) missing_ids.push_back(out[j].id);
        missing.push_back(
            out[j].id + " (" + looked_for(out[j]) + "; " + std::to_string(fresh.size()) +
            " new function" + (fresh.size() == 1 ? "" : "s") + " with these ids for " +
            std::to_string(group.size()) + " device" + (group.size() == 1 ? "" : "s") +
            ", and no UUID or serial to tell them apart)");
      }
    }
    if (missing.empty() && !pending) return std::optional<std::vector<Device>>(std::move(out));
    if (std::chrono::steady_clock::now() >= deadline_ && look > 0) {
      // One more look may settle a pending match; new functions that keep changing do not.
      if (missing.empty() && !last_look_) {
        last_look_ = true;
        return std::optional<std::vector<Device>>();
      }
      if (missing.empty()) missing.push_back("the new PCI functions, which kept changing");
      if (not_found != nullptr) *not_found = missing_ids;
      return Error{ErrorCode::kTimeout,
                   "the host does not show " + join(missing, ", ") + " after " +
                       std::to_string(static_cast<double>(timeout_.count()) / 1000.0).substr(0, 4) +
                       " s"};
    }
    return std::optional<std::vector<Device>>();
  }
}

Status HostDevices::remove(const std::vector<Device>& devices) const {
  std::string failed;
  std::vector<std::pair<std::string, fs::path>> removing;
  for (const Device& d : devices) {
    if (!is_pci(d)) continue;
    std::error_code ec;
    const fs::path dir = sysfs_path(d);
    if (!fs::exists(dir, ec)) continue;
    if (Status s = write_one(dir / "remove"); !s) {
      failed += (failed.empty() ? "" : "; ") + d.id + ": " + s.error().message;
    } else {
      removing.emplace_back(d.id, dir);
    }
  }
  // Until the host no longer shows them: a snapshot taken after this returns must not hold a
  // function on its way out (the next prolog would take it, shown again after its rescan, for
  // one the host had before).
  const auto deadline = std::chrono::steady_clock::now() + kRemoveWait;
  for (;;) {
    std::erase_if(removing, [](const auto& r) {
      std::error_code ec;
      return !fs::exists(r.second, ec);
    });
    if (removing.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& [id, dir] : removing) {
    failed += (failed.empty() ? "" : "; ") + id + ": " + dir.string() + " still there " +
              std::to_string(kRemoveWait.count()) + " ms after its remove";
  }
  if (!failed.empty()) return Error{ErrorCode::kInternal, failed};
  return Status::Ok();
}

namespace {

// A GPU UUID in the form the NVIDIA driver prints and CUDA_VISIBLE_DEVICES takes:
// "GPU-" and 8-4-4-4-12 hex digits.
bool driver_form_uuid(std::string_view u) {
  constexpr std::string_view kPrefix = "GPU-";
  if (u.size() != kPrefix.size() + 36 || u.substr(0, kPrefix.size()) != kPrefix) return false;
  u.remove_prefix(kPrefix.size());
  for (size_t i = 0; i < u.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? u[i] != '-' : std::isxdigit(static_cast<unsigned char>(u[i])) == 0) return false;
  }
  return true;
}

}  // namespace

std::string HostDevices::cuda_visible_devices(const std::vector<Device>& gpus) const {
  if (gpus.empty()) return "";
  std::vector<std::string> uuids;
  for (const Device& g : gpus) {
    std::string u = g.address.empty() ? "" : gpu_uuid(g.address);
    if (u.empty() && driver_form_uuid(g.identity.uuid)) u = g.identity.uuid;
    if (u.empty()) break;
    uuids.push_back(std::move(u));
  }
  if (uuids.size() == gpus.size()) return join(uuids);
  const std::vector<std::string> all = nvidia_gpus();
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
  return all_found ? out : "";
}

std::vector<std::string> HostDevices::nvidia_gpus() const {
  std::vector<std::string> all;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(sysfs_ + "/bus/pci/devices", ec)) {
    if (first_line(entry.path() / "vendor") == "0x10de" &&
        first_line(entry.path() / "class").rfind("0x03", 0) == 0) {
      all.push_back(entry.path().filename().string());
    }
  }
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace composer::slurm
