// The processes that hold a composed device: the walk of the host's open files and mappings.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <filesystem>
#include <memory>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "composer/slurm/host_devices.h"
#include "host_sysfs.h"

namespace composer::slurm {
namespace fs = std::filesystem;

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

}  // namespace composer::slurm
