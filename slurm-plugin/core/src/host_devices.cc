#include "composer/slurm/host_devices.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/subprocess.h"
#include "composer/common/units.h"
#include "composer/slurm/job_state.h"

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

// Writes `text` to a sysfs attribute as one write. kInternal names the file and the text.
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

Status write_one(const fs::path& path) { return write_text(path, "1\n"); }

// The whole of a small sysfs attribute ("online\n").
std::string whole(const fs::path& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text, '\0');
  return text;
}

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

// The nvidia driver's minor number for a GPU, or -1.
int nvidia_minor(const std::string& proc_root, const std::string& address) {
  const Expected<uint32_t> minor =
      parse_count(nvidia_information(proc_root, address, "Device Minor"), 1u << 20);
  return minor ? static_cast<int>(*minor) : -1;
}

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

// "ng3n" for controller "nvme3": the prefix of its namespaces' generic character devices.
std::string generic_prefix(const std::string& ctrl) {
  return ctrl.rfind("nvme", 0) == 0 ? "ng" + ctrl.substr(4) + "n" : ctrl + "-generic-n";
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

namespace {

// The file a line of /proc/PID/maps maps, after its five fields (address, permissions,
// offset, device, inode); "" for anonymous memory.
std::string_view mapped_path(std::string_view line) {
  size_t at = 0;
  for (int field = 0; field < 5; ++field) {
    at = line.find_first_not_of(' ', at);
    if (at == std::string_view::npos) return "";
    at = line.find(' ', at);
    if (at == std::string_view::npos) return "";
  }
  at = line.find_first_not_of(' ', at);
  return at == std::string_view::npos ? "" : line.substr(at);
}

// A directory stream that closes itself.
struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

// The directory `name` under the directory `at` is open in, or null.
Dir open_dir_at(int at, const char* name) {
  const int fd = ::openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  Dir dir(::fdopendir(fd));
  if (!dir) ::close(fd);
  return dir;
}

// Calls look(pid, path) for each file a process under `proc` has open (the targets of its
// <pid>/fd links) and each file it maps (<pid>/maps), skipping the process `skip`.
// Each process's directory is opened once and its links and maps read relative to it
// (readlinkat, openat, one read of 64 KiB at a time): a walk that looks each link's whole path
// up and lstats it before reading it took half as long again, and a composed job's epilog
// waits for the walk (docs/BENCHMARKS.md, "Short composed jobs";
// AMappingFarDownALongMapsFileStillCountsAsHeld). Processes come and go while we look: every
// error means "nothing to see here".
template <typename Look>
void each_open_or_mapped(const std::string& proc, int skip, const Look& look) {
  Dir procs(::opendir(proc.c_str()));
  if (!procs) return;
  char target[PATH_MAX];
  std::string carry;  // a line of maps cut by the end of a read
  std::vector<char> chunk(size_t{64} * 1024);
  while (const dirent* e = ::readdir(procs.get())) {
    const std::string_view name = e->d_name;
    int pid = 0;
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit) ||
        std::from_chars(name.data(), name.data() + name.size(), pid).ec != std::errc() ||
        pid == skip) {
      continue;
    }
    const int dir = ::openat(::dirfd(procs.get()), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) continue;
    if (Dir fds = open_dir_at(dir, "fd")) {
      while (const dirent* f = ::readdir(fds.get())) {
        if (f->d_name[0] == '.') continue;
        const ssize_t n = ::readlinkat(::dirfd(fds.get()), f->d_name, target, sizeof target);
        if (n > 0 && static_cast<size_t>(n) < sizeof target) {
          look(pid, std::string_view(target, static_cast<size_t>(n)));
        }
      }
    }
    // A mapping outlives the descriptor it was made from: a CUDA process keeps the GPU's
    // device node mapped, a user-space driver a BAR through sysfs (.../<address>/resource1).
    if (const int maps = ::openat(dir, "maps", O_RDONLY | O_CLOEXEC); maps >= 0) {
      carry.clear();
      for (ssize_t n; (n = ::read(maps, chunk.data(), chunk.size())) > 0;) {
        std::string_view rest(chunk.data(), static_cast<size_t>(n));
        for (size_t end; (end = rest.find('\n')) != std::string_view::npos;) {
          std::string_view line = rest.substr(0, end);
          if (!carry.empty()) {
            carry.append(line);
            line = carry;
          }
          if (std::string_view path = mapped_path(line); !path.empty()) look(pid, path);
          carry.clear();
          rest.remove_prefix(end + 1);
        }
        carry.append(rest);
      }
      if (std::string_view path = mapped_path(carry); !path.empty()) look(pid, path);
      ::close(maps);
    }
    ::close(dir);
  }
}

}  // namespace

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
        p.exact.push_back(dev_ + "/nvidia" + std::to_string(minor));
      }
    } else {
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(sysfs_path(d) + "/nvme", ec)) {
        const std::string ctrl = entry.path().filename().string();
        p.exact.push_back(dev_ + "/" + ctrl);
        p.prefix.push_back(dev_ + "/" + ctrl + "n");
        p.prefix.push_back(dev_ + "/" + generic_prefix(ctrl));
      }
    }
    patterns.push_back(std::move(p));
  }
  std::vector<Holder> found;
  if (patterns.empty()) return found;
  std::set<std::pair<int, std::string>> seen;  // (pid, device): named once
  const auto look = [&](int pid, std::string_view target) {
    for (const Pattern& p : patterns) {
      bool hit = target.find(p.contains) != std::string_view::npos;
      for (const std::string& e : p.exact) hit = hit || target == e;
      for (const std::string& pre : p.prefix) hit = hit || target.starts_with(pre);
      if (hit && seen.emplace(pid, p.device->id).second) {
        found.push_back(Holder{pid, p.device->id, std::string(target)});
      }
    }
  };
  // The process that asks is never the holder it waits for: what it has open of a device's
  // sysfs directory at this moment (an attribute it reads, a `remove` it writes) is its own work.
  // (Only where proc_ is the real procfs, whose `self` names this process.)
  std::error_code self_ec;
  const pid_t me = getpid();
  const int self =
      fs::read_symlink(fs::path(proc_) / "self", self_ec) == std::to_string(me) ? me : -1;
  each_open_or_mapped(proc_, self, look);
  return found;
}

namespace {

// A dax device (<sysfs>/bus/dax/devices/<name>): its target node and size, the driver bound.
struct DaxDevice {
  std::string name;
  std::string target_node;
  uint64_t size = 0;
  std::string driver;  // "device_dax", "kmem", "" when none
};

std::vector<DaxDevice> dax_devices(const std::string& sysfs) {
  std::vector<DaxDevice> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(sysfs) / "bus/dax/devices", ec)) {
    DaxDevice d;
    d.name = e.path().filename().string();
    d.target_node = std::string(trim(first_line(e.path() / "target_node")));
    const std::string size = std::string(trim(first_line(e.path() / "size")));
    std::from_chars(size.data(), size.data() + size.size(), d.size);
    std::error_code link_ec;
    d.driver = fs::read_symlink(e.path() / "driver", link_ec).filename().string();
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

// The memory blocks of NUMA node `node` (<sysfs>/devices/system/node/node<N>/memory<K>).
std::vector<fs::path> memory_blocks(const std::string& sysfs, const std::string& node) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e :
       fs::directory_iterator(fs::path(sysfs) / "devices/system/node" / ("node" + node), ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("memory", 0) == 0 && n.size() > 6 &&
        std::isdigit(static_cast<unsigned char>(n[6]))) {
      out.push_back(fs::path(sysfs) / "devices/system/memory" / n);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Asks each block to go to `want` ("online" or "offline"; onlining asks for online_movable,
// so that the memory can be offlined again) and waits until all say so or `deadline` passes:
// the blocks that did not.
std::vector<std::string> set_blocks(const std::vector<fs::path>& blocks, const std::string& want,
                                    std::chrono::steady_clock::time_point deadline) {
  const std::string ask = want == "online" ? "online_movable" : want;
  std::vector<std::string> stuck;
  for (;;) {
    stuck.clear();
    for (const fs::path& b : blocks) {
      if (whole(b / "state") == want + "\n") continue;
      stuck.push_back(b.filename().string());
      // The kernel refuses an offline it cannot do (EBUSY): asked again at the next round.
      (void)write_text(b / "state", ask);
    }
    if (stuck.empty() || std::chrono::steady_clock::now() >= deadline) return stuck;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

namespace {

// A driver the kernel has as a module that nothing may have loaded yet (kmem: nothing loads it
// before its first use; dax_pmem: udev loads it some time after the first libnvdimm dax device
// appears), loaded as daxctl and ndctl do: `dir` is its directory under <sysfs>/bus/.../drivers.
Status load_driver(const fs::path& dir, const char* module, const std::string& id) {
  if (std::error_code ec; fs::exists(dir, ec)) return Status::Ok();
  Expected<std::string> loaded = run_checked(
      RunOptions{.argv = {"modprobe", module}, .with_stderr = true, .timeout_ms = 30000});
  if (!loaded) {
    return Error{ErrorCode::kInternal, id + ": the kernel has no " + module + " driver (" +
                                           dir.string() + "): " + loaded.error().message};
  }
  return Status::Ok();
}

// A region's dax device bound to kmem (as `daxctl reconfigure-device --mode=system-ram` does)
// and its blocks onlined: the node it became.
Expected<std::string> bring_online(const std::string& sysfs, const std::string& id,
                                   const DaxDevice& dax,
                                   std::chrono::steady_clock::time_point deadline) {
  const fs::path drivers = fs::path(sysfs) / "bus/dax/drivers";
  // The driver bound now, not when the device was listed: device_dax binds a dax device some
  // time after it appears (udev loads the module), also after a look that saw none.
  const auto driver_now = [&] {
    for (const DaxDevice& now : dax_devices(sysfs)) {
      if (now.name == dax.name) return now.driver;
    }
    return std::string();
  };
  std::string driver = driver_now();
  if (driver != "kmem") {
    if (Status s = load_driver(drivers / "kmem", "kmem", id); !s) return s.error();
    if (driver == "device_dax") {
      if (Status s = write_text(drivers / "device_dax/unbind", dax.name); !s) return s.error();
    }
    if (Status s = write_text(drivers / "kmem/new_id", dax.name); !s) return s.error();
  }
  // The kernel shows the driver link once kmem's probe has added every block of the region: a
  // list taken before that may miss blocks still being added (pinned by
  // HostSideTest.MemoryWithoutANodeIsTheDaxDeviceOfItsSize).
  while ((driver = driver_now()) != "kmem" && std::chrono::steady_clock::now() < deadline) {
    // device_dax came first after all
    // (HostSideTest.CxlMemoryInNoRegionGetsARegionMadeAndDestroyed): taken from it, and a device no
    // driver has given to kmem, which knows it from new_id.
    if (driver == "device_dax") {
      (void)write_text(drivers / "device_dax/unbind", dax.name);
      driver.clear();
    }
    if (driver.empty()) (void)write_text(drivers / "kmem/bind", dax.name);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<fs::path> blocks;
  while ((blocks = memory_blocks(sysfs, dax.target_node)).empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (blocks.empty()) {
    return Error{ErrorCode::kTimeout, id + ": " + dax.name + " made no memory blocks on node " +
                                          dax.target_node + " (kmem)"};
  }
  if (std::vector<std::string> stuck = set_blocks(blocks, "online", deadline); !stuck.empty()) {
    return Error{ErrorCode::kTimeout, id + ": " + join(stuck, ", ") + " of node " +
                                          dax.target_node + " did not come online"};
  }
  return dax.target_node;
}

// --- CXL regions the host side makes itself. A CXL Type 3 device whose capacity is there at
// boot but in no region (persistent memory, as QEMU 7.2 offers it; checked in the kvm level's
// kvm_cxl_memory) shows no dax device until someone makes a region of it. The host side does
// what `cxl create-region -t pmem` and `ndctl create-namespace -m devdax` do, through the
// kernel's sysfs (Documentation/ABI/testing/sysfs-bus-cxl and sysfs-bus-nvdimm), and at the
// offline undoes it (`ndctl destroy-namespace`, `cxl destroy-region`). Its namespaces are
// named kRegionName, so that a region an admin made is never destroyed.

constexpr std::string_view kRegionName = "slurm-composer";

// A hexadecimal ("0x20000000") or decimal sysfs number; nullopt if it is neither.
std::optional<uint64_t> sysfs_number(const fs::path& path) {
  std::string text = std::string(trim(first_line(path)));
  int base = 10;
  if (text.rfind("0x", 0) == 0) {
    text = text.substr(2);
    base = 16;
  }
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string random_uuid() {
  std::random_device rd;
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    unsigned b = rd() & 0xffu;
    if (i == 6) b = (b & 0x0fu) | 0x40u;  // version 4
    if (i == 8) b = (b & 0x3fu) | 0x80u;  // RFC 4122 variant
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[b >> 4];
    out += kHex[b & 0xfu];
  }
  return out;
}

// An endpoint decoder of a CXL memory device with no capacity in any region, and the root
// decoder (a host's fixed memory window that takes persistent memory) to make a region in.
struct FreeCxlMemory {
  std::string memdev;
  std::string endpoint_decoder;
  std::string root_decoder;
};

// The CXL memory devices of one capacity that nothing maps, each with a window to make its
// region in; and for those no window takes, one sentence each saying why.
struct CxlChoice {
  std::vector<FreeCxlMemory> free;
  std::vector<std::string> unfit;
};

// The host bridge a CXL endpoint sits under, by the id the root's decoders name it by in their
// target_list: the port directly under the root (root<R>/port<N>) has the host bridge as its
// uport, and the root has it as its dport<ID> (on Linux 6.1: port1/uport and root0/dport32 both
// the ACPI0016 host bridge; tests/kvm). "" when the host does not show it so.
std::string host_bridge_of(const fs::path& endpoint) {
  std::error_code ec;
  fs::path port = fs::canonical(endpoint, ec);
  if (ec) return "";
  while (port.has_parent_path() && port.parent_path() != port &&
         port.parent_path().filename().string().rfind("root", 0) != 0) {
    port = port.parent_path();
  }
  const fs::path root = port.parent_path();
  const fs::path bridge = fs::canonical(port / "uport", ec);
  if (ec) return "";
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code link_ec;
    if (name.rfind("dport", 0) == 0 && fs::canonical(e.path(), link_ec) == bridge) {
      return name.substr(5);
    }
  }
  return "";
}

// A root decoder that takes persistent memory: the host bridges it targets and its room.
struct CxlWindow {
  std::string name;
  std::vector<std::string> targets;
  uint64_t size = 0;
  uint64_t used = 0;  // by its regions
  uint64_t ways = 1;  // host bridges it interleaves across
};

std::vector<CxlWindow> cxl_windows(const fs::path& bus, const std::vector<std::string>& names) {
  std::vector<CxlWindow> out;
  std::error_code ec;
  for (const std::string& n : names) {
    if (first_line(bus / n / "devtype") != "cxl_decoder_root" ||
        first_line(bus / n / "cap_pmem") != "1" ||
        !fs::exists(bus / n / "create_pmem_region", ec)) {
      continue;
    }
    CxlWindow w{n, split(std::string(trim(first_line(bus / n / "target_list"))), ','),
                sysfs_number(bus / n / "size").value_or(0), 0,
                sysfs_number(bus / n / "interleave_ways").value_or(1)};
    // Its regions are its children; the one it offers next has no size yet.
    for (const auto& e : fs::directory_iterator(bus / n, ec)) {
      if (e.path().filename().string().rfind("region", 0) == 0) {
        w.used += sysfs_number(e.path() / "size").value_or(0);
      }
    }
    out.push_back(std::move(w));
  }
  return out;
}

// The CXL memory devices whose persistent capacity is `size` and unused: each with the first
// endpoint decoder of its port that maps nothing, and the first window that targets its host
// bridge and has room for `size` beside its regions and those chosen before it here
// (AMemoryDeviceGetsItsRegionInAWindowThatTargetsItsHostBridge).
CxlChoice free_cxl_memory(const std::string& sysfs, uint64_t size) {
  const fs::path bus = fs::path(sysfs) / "bus/cxl/devices";
  CxlChoice out;
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(bus, ec))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::vector<CxlWindow> windows = cxl_windows(bus, names);
  if (windows.empty()) return out;
  for (const std::string& n : names) {
    if (n.rfind("endpoint", 0) != 0) continue;
    std::error_code link_ec;
    const std::string memdev = fs::read_symlink(bus / n / "uport", link_ec).filename().string();
    if (memdev.empty() || sysfs_number(bus / memdev / "pmem/size") != size) continue;
    // The port's decoders: decoder<port>.<k> in its own directory, beside which Linux 6.6 and
    // later show a file decoders_committed, no decoder (it made every device look in use:
    // the kvm level's guest on 6.12; HostSideTest.CxlMemoryInNoRegionGetsARegionMadeAndDestroyed).
    std::vector<std::string> decoders;
    std::error_code dec_ec;
    for (const auto& d : fs::directory_iterator(bus / n, dec_ec)) {
      const std::string name = d.path().filename().string();
      if (name.rfind("decoder", 0) == 0 && name.size() > 7 && name[7] >= '0' && name[7] <= '9') {
        decoders.push_back(name);
      }
    }
    std::sort(decoders.begin(), decoders.end());
    bool used = false;
    std::string free;
    for (const std::string& d : decoders) {
      const std::optional<uint64_t> dpa = sysfs_number(bus / n / d / "dpa_size");
      if (dpa.value_or(1) != 0) {
        used = true;
      } else if (free.empty()) {
        free = d;
      }
    }
    if (used || free.empty()) continue;
    const std::string bridge = host_bridge_of(bus / n);
    std::vector<std::string> why;
    CxlWindow* fits = nullptr;
    for (CxlWindow& w : windows) {
      if (std::find(w.targets.begin(), w.targets.end(), bridge) == w.targets.end()) {
        why.push_back(w.name + " targets host bridge " + join(w.targets, ","));
      } else if (w.ways != 1) {
        // The regions made here are of one device, which such a window does not take.
        why.push_back(w.name + " interleaves across " + std::to_string(w.ways) + " host bridges");
      } else if (w.size < w.used || w.size - w.used < size) {
        why.push_back(w.name + " has " + format_size(w.size > w.used ? w.size - w.used : 0) +
                      " free of " + format_size(w.size));
      } else {
        fits = &w;
        break;
      }
    }
    if (fits == nullptr) {
      out.unfit.push_back("no CXL window takes " + format_size(size) + " of " + memdev +
                          " (behind host bridge " + (bridge.empty() ? "unknown" : bridge) +
                          "): " + join(why, "; "));
      continue;
    }
    fits->used += size;
    out.free.push_back(FreeCxlMemory{memdev, free, fits->name});
  }
  return out;
}

// Waits for `path` to exist until `deadline`.
bool wait_for(const fs::path& path, std::chrono::steady_clock::time_point deadline) {
  std::error_code ec;
  while (!fs::exists(path, ec)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// The libnvdimm region (<sysfs>/bus/nd/devices/region<N>) of the CXL region that starts at
// host physical address `resource`: "" if none.
std::string nd_region_at(const std::string& sysfs, uint64_t resource) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(sysfs) / "bus/nd/devices", ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind("region", 0) == 0 && sysfs_number(e.path() / "resource") == resource) return n;
  }
  return "";
}

// How long a bind the kernel refused may take to show the driver that probed the device itself.
constexpr std::chrono::milliseconds kDriverSettle{2000};

// A persistent-memory region of `size` on `m`, a namespace named kRegionName over all of it
// and its dax device (devdax): the dax device, ready for bring_online.
Expected<DaxDevice> make_cxl_region(const std::string& sysfs, const std::string& id,
                                    const FreeCxlMemory& m, uint64_t size,
                                    std::chrono::steady_clock::time_point deadline) {
  const fs::path cxl = fs::path(sysfs) / "bus/cxl";
  const fs::path root = cxl / "devices" / m.root_decoder;
  const std::string region = std::string(trim(first_line(root / "create_pmem_region")));
  // Each value ends in a newline, as echo writes it: the kernel takes a region's uuid only
  // with its newline (37 characters), not without.
  auto step = [&](const fs::path& file, const std::string& text) -> Status {
    if (Status s = write_text(file, text.ends_with('\n') ? text : text + "\n"); !s) {
      return Error{ErrorCode::kInternal,
                   id + ": making a CXL region of " + m.memdev + ": " + s.error().message};
    }
    return Status::Ok();
  };
  if (region.empty()) {
    return Error{ErrorCode::kInternal,
                 id + ": " + m.root_decoder + " offers no region name (create_pmem_region)"};
  }
  // Loaded before the region's dax seed exists, so that the driver binds only what it is told.
  if (Status s = load_driver(fs::path(sysfs) / "bus/nd/drivers/dax_pmem", "dax_pmem", id); !s) {
    return s.error();
  }
  const fs::path r = cxl / "devices" / region;
  const fs::path ep = cxl / "devices" / m.endpoint_decoder;
  for (const auto& [file, text] : std::initializer_list<std::pair<fs::path, std::string>>{
           {root / "create_pmem_region", region},
           {r / "uuid", random_uuid()},
           {r / "interleave_granularity", "256"},
           {r / "interleave_ways", "1"},
           {ep / "mode", "pmem"},
           {ep / "dpa_size", std::to_string(size)},
           {r / "size", std::to_string(size)},
           {r / "target0", m.endpoint_decoder},
           {r / "commit", "1"},
           {cxl / "drivers/cxl_region/bind", region}}) {
    if (Status s = step(file, text); !s) return s.error();
  }
  // libnvdimm shows the region as one of its own (cxl_pmem_region), at the same address.
  const std::optional<uint64_t> resource = sysfs_number(r / "resource");
  std::string nd;
  while (resource && (nd = nd_region_at(sysfs, *resource)).empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (nd.empty()) {
    return Error{ErrorCode::kTimeout,
                 id + ": " + region + " of " + m.memdev + " made no libnvdimm region"};
  }
  const fs::path ndd = fs::path(sysfs) / "bus/nd/devices";
  // Its seeds come once its driver has probed it: libnvdimm registers and probes its devices
  // asynchronously, and the region shows before (its namespace_seed empty: the kvm level's
  // guest on Linux 6.1; FakeHost's kNdProbe).
  std::string ns;
  std::string dax;
  for (;;) {
    ns = std::string(trim(first_line(ndd / nd / "namespace_seed")));
    dax = std::string(trim(first_line(ndd / nd / "dax_seed")));
    if ((!ns.empty() && !dax.empty()) || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ns.empty() || dax.empty()) {
    return Error{ErrorCode::kTimeout, id + ": " + nd + " offers no namespace or dax seed"};
  }
  for (const auto& [file, text] : std::initializer_list<std::pair<fs::path, std::string>>{
           {ndd / ns / "uuid", random_uuid()},
           {ndd / ns / "alt_name", std::string(kRegionName)},
           {ndd / ns / "size", std::to_string(size)},
           {ndd / dax / "uuid", random_uuid()},
           {ndd / dax / "mode", "pmem"},
           {ndd / dax / "align", "2097152"},
           {ndd / dax / "namespace", ns}}) {
    if (Status s = step(file, text); !s) return s.error();
  }
  // A driver loaded after the dax seed got its namespace binds it itself, at a moment of its
  // own: a bind refused because that probe was under way (the kernel answers EBUSY) is no
  // failure once the device shows dax_pmem as its driver (seen on the kvm level's guest).
  const auto bound = [&] {
    std::error_code ec;
    return fs::read_symlink(ndd / dax / "driver", ec).filename() == "dax_pmem";
  };
  if (!bound()) {
    if (Status s = step(fs::path(sysfs) / "bus/nd/drivers/dax_pmem/bind", dax); !s) {
      const auto settle = std::min(deadline, std::chrono::steady_clock::now() + kDriverSettle);
      while (!bound() && std::chrono::steady_clock::now() < settle) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!bound()) return s.error();
    }
  }
  if (!wait_for(fs::path(sysfs) / "bus/dax/devices" / dax, deadline)) {
    return Error{ErrorCode::kTimeout, id + ": " + nd + " showed no dax device " + dax};
  }
  for (DaxDevice& d : dax_devices(sysfs)) {
    if (d.name == dax) return std::move(d);
  }
  return Error{ErrorCode::kInternal, id + ": " + dax + " went away"};
}

// Undoes make_cxl_region for the dax device `dax` once kmem let it go: true when it did, false
// for a dax device in no namespace named kRegionName (left as it is).
Expected<bool> destroy_cxl_region(const std::string& sysfs, const std::string& id,
                                  const std::string& dax) {
  std::error_code ec;
  // <...>/ndbus<B>/region<N>/dax<N>.<K>/dax<N>.<K>: the libnvdimm dax device and region.
  const fs::path path = fs::canonical(fs::path(sysfs) / "bus/dax/devices" / dax, ec);
  if (ec) return false;
  const fs::path nd_dax = path.parent_path();
  const fs::path nd_region = nd_dax.parent_path();
  const std::string ns = std::string(trim(first_line(nd_dax / "namespace")));
  const fs::path ndd = fs::path(sysfs) / "bus/nd/devices";
  if (ns.empty() || std::string(trim(first_line(ndd / ns / "alt_name"))) != kRegionName) {
    return false;
  }
  const std::optional<uint64_t> resource = sysfs_number(nd_region / "resource");
  auto step = [&](const fs::path& file, const std::string& text) -> Status {
    if (Status s = write_text(file, text.ends_with('\n') ? text : text + "\n"); !s) {
      return Error{ErrorCode::kInternal,
                   id + ": destroying the CXL region of " + dax + ": " + s.error().message};
    }
    return Status::Ok();
  };
  // The namespace is let go by its dax device before it can be deleted (EBUSY until then).
  for (const auto& [file, text] : std::initializer_list<std::pair<fs::path, std::string>>{
           {fs::path(sysfs) / "bus/nd/drivers/dax_pmem/unbind", nd_dax.filename().string()},
           {nd_dax / "namespace", "\n"},
           {ndd / ns / "size", "0"}}) {
    if (Status s = step(file, text); !s) return s.error();
  }
  const fs::path cxl = fs::path(sysfs) / "bus/cxl";
  for (const auto& e : fs::directory_iterator(cxl / "devices", ec)) {
    const std::string region = e.path().filename().string();
    if (region.rfind("region", 0) != 0 || !resource ||
        sysfs_number(e.path() / "resource") != resource) {
      continue;
    }
    const std::string target = std::string(trim(first_line(e.path() / "target0")));
    // The region's directory is the root decoder's child.
    std::error_code c_ec;
    const std::string root = fs::canonical(e.path(), c_ec).parent_path().filename().string();
    for (const auto& [file, text] : std::initializer_list<std::pair<fs::path, std::string>>{
             {cxl / "drivers/cxl_region/unbind", region},
             {e.path() / "commit", "0"},
             {e.path() / "target0", "\n"},
             {cxl / "devices" / target / "dpa_size", "0"},
             {cxl / "devices" / root / "delete_region", region}}) {
      if (Status s = step(file, text); !s) return s.error();
    }
    break;
  }
  return true;
}

}  // namespace

Expected<std::vector<std::string>> HostDevices::online_memory(const std::vector<Device>& memory,
                                                              std::chrono::milliseconds timeout,
                                                              const std::string& lock_dir) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> nodes(memory.size());
  // Regions without a node from the fabric, by capacity: the positions in `memory`.
  std::map<uint64_t, std::vector<size_t>> nodeless;
  for (size_t i = 0; i < memory.size(); ++i) {
    const Device& d = memory[i];
    const std::string node = numa_node(d.address);
    if (node.empty()) {
      nodeless[d.capacity_bytes].push_back(i);
      continue;
    }
    std::optional<DaxDevice> region;
    for (;;) {
      for (DaxDevice& dax : dax_devices(sysfs_)) {
        if (dax.target_node == node) region = std::move(dax);
      }
      // No region to bring online: memory the host maps itself (its node there already).
      std::error_code ec;
      if (region || fs::exists(sysfs_path(d), ec)) break;
      // The region's dax device appears some time after the attach, as a function does. Not by
      // the deadline: the node as the fabric named it, which the search then does not find.
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    nodes[i] = node;
    if (!region) continue;
    Expected<std::string> online = bring_online(sysfs_, d.id, *region, deadline);
    if (!online) return online.error();
    nodes[i] = *online;
  }
  // Capacity in no region yet: the host makes the regions (make_cxl_region), when it shows no
  // dax device of that capacity and at least as many CXL memory devices of it that nothing maps.
  // The devices are chosen and their regions made under the node's region lock: another
  // prolog choosing meanwhile would see the same devices free until their decoders are set.
  // They are brought online after it, as that takes a while and another prolog's regions need
  // none of it.
  std::error_code cxl_ec;
  if (!nodeless.empty() && fs::exists(fs::path(sysfs_) / "bus/cxl/devices", cxl_ec)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    Expected<HostLock> taken =
        HostLock::take(lock_dir, std::max(left, std::chrono::milliseconds(0)), kCxlRegionLock);
    if (!taken) return taken.error();
    std::optional<HostLock> lock(std::move(*taken));
    std::vector<std::pair<size_t, DaxDevice>> made;
    for (auto it = nodeless.begin(); it != nodeless.end();) {
      const auto& [size, wanted] = *it;
      bool shown = false;
      for (const DaxDevice& dax : dax_devices(sysfs_)) shown = shown || dax.size == size;
      const CxlChoice choice = shown ? CxlChoice{} : free_cxl_memory(sysfs_, size);
      const std::vector<FreeCxlMemory>& free = choice.free;
      if (free.size() < wanted.size()) {
        // Devices of the capacity that no window takes: the region cannot be made, and the
        // job would run without its memory.
        if (!choice.unfit.empty()) {
          return Error{ErrorCode::kConflict,
                       memory[wanted[0]].id + ": " + join(choice.unfit, "; ")};
        }
        ++it;
        continue;
      }
      for (size_t k = 0; k < wanted.size(); ++k) {
        Expected<DaxDevice> dax =
            make_cxl_region(sysfs_, memory[wanted[k]].id, free[k], size, deadline);
        if (!dax) return dax.error();
        made.emplace_back(wanted[k], std::move(*dax));
      }
      it = nodeless.erase(it);
    }
    lock.reset();
    for (const auto& [i, dax] : made) {
      Expected<std::string> online = bring_online(sysfs_, memory[i].id, dax, deadline);
      if (!online) return online.error();
      nodes[i] = *online;
    }
  }
  if (nodeless.empty()) return nodes;
  // The dax devices in devdax mode of each capacity sought: taken when the host shows exactly
  // as many as this composition has regions of that capacity (which of its own regions gets
  // which is all one to the job), seen so at two looks in a row; more could include another
  // composition's, so no guess; none by the deadline: memory the host maps itself.
  std::map<uint64_t, std::vector<DaxDevice>> last;
  for (;;) {
    std::map<uint64_t, std::vector<DaxDevice>> seen;
    for (DaxDevice& dax : dax_devices(sysfs_)) {
      if (dax.driver == "device_dax" && nodeless.contains(dax.size)) {
        seen[dax.size].push_back(std::move(dax));
      }
    }
    auto names = [](const std::vector<DaxDevice>& v) {
      std::vector<std::string> out;
      for (const DaxDevice& d : v) out.push_back(d.name);
      return out;
    };
    bool settled = true;
    for (const auto& [size, wanted] : nodeless) {
      const std::vector<DaxDevice>& now = seen[size];
      settled = settled && now.size() == wanted.size() && names(now) == names(last[size]);
    }
    const bool late = std::chrono::steady_clock::now() >= deadline;
    if (settled || late) {
      for (const auto& [size, wanted] : nodeless) {
        const std::vector<DaxDevice>& now = seen[size];
        if (now.empty()) continue;  // the host maps it itself, or shows it nowhere
        if (now.size() != wanted.size()) {
          return Error{ErrorCode::kConflict,
                       memory[wanted[0]].id + ": " + std::to_string(now.size()) +
                           " dax devices of " + format_size(size) + " in devdax mode (" +
                           join(names(now), ", ") + ") for " + std::to_string(wanted.size()) +
                           " region(s) of this job, and no NUMA node from the fabric to tell "
                           "them apart"};
        }
        for (size_t k = 0; k < wanted.size(); ++k) {
          Expected<std::string> online =
              bring_online(sysfs_, memory[wanted[k]].id, now[k], deadline);
          if (!online) return online.error();
          nodes[wanted[k]] = *online;
        }
      }
      return nodes;
    }
    last = std::move(seen);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status HostDevices::offline_memory(const Device& d, std::chrono::milliseconds timeout,
                                   const std::string& lock_dir) const {
  const std::string node = numa_node(d.address);
  if (node.empty()) return Status::Ok();
  for (const DaxDevice& dax : dax_devices(sysfs_)) {
    if (dax.target_node != node || dax.driver != "kmem") continue;
    const std::vector<std::string> stuck = set_blocks(memory_blocks(sysfs_, node), "offline",
                                                      std::chrono::steady_clock::now() + timeout);
    if (!stuck.empty()) {
      return Error{ErrorCode::kConflict, d.id + ": memory of NUMA node " + node +
                                             " still in use (" + join(stuck, ", ") +
                                             " would not go offline: pages that cannot move)"};
    }
    // Given back to device_dax, as `daxctl reconfigure-device --mode=devdax` does it; a region
    // the host side made is destroyed instead (destroy_cxl_region).
    const fs::path drivers = fs::path(sysfs_) / "bus/dax/drivers";
    if (Status s = write_text(drivers / "kmem/unbind", dax.name); !s) return s;
    std::error_code ec;
    if (fs::exists(fs::path(sysfs_) / "bus/cxl/devices", ec)) {
      // Under the region lock: a prolog choosing devices sees this one in its region or free.
      Expected<HostLock> lock = HostLock::take(lock_dir, timeout, kCxlRegionLock);
      if (!lock) return lock.error();
      Expected<bool> destroyed = destroy_cxl_region(sysfs_, d.id, dax.name);
      if (!destroyed) return destroyed.error();
      if (*destroyed) continue;
    }
    if (Status s = write_text(drivers / "device_dax/new_id", dax.name); !s) return s;
  }
  return Status::Ok();
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
