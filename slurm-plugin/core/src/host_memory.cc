// CXL memory on the host: dax devices bound to kmem, their memory blocks onlined and offlined.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/subprocess.h"
#include "composer/common/units.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/job_state.h"
#include "host_cxl_regions.h"
#include "host_sysfs.h"

namespace composer::slurm {
namespace fs = std::filesystem;

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

Status load_driver(const fs::path& dir, const char* module, const std::string& id) {
  if (std::error_code ec; fs::exists(dir, ec)) return Status::Ok();
  // By its path: slurmd runs the prolog without PATH, where only /bin and /usr/bin are searched
  // (kvm_slurm_cxl's prolog could not find modprobe). /sbin/modprobe is the kernel's own choice
  // (/proc/sys/kernel/modprobe) and is there with a merged /usr or without one.
  Expected<std::string> loaded = run_checked(
      RunOptions{.argv = {"/sbin/modprobe", module}, .with_stderr = true, .timeout_ms = 30000});
  if (!loaded) {
    return Error{ErrorCode::kInternal, id + ": the kernel has no " + module + " driver (" +
                                           dir.string() + "): " + loaded.error().message};
  }
  return Status::Ok();
}

namespace {

// The whole of a small sysfs attribute ("online\n").
std::string whole(const fs::path& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text, '\0');
  return text;
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

}  // namespace composer::slurm
