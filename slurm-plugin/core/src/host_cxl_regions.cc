// The CXL regions the host side makes itself, and destroys, through the kernel's sysfs.
#include "host_cxl_regions.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <random>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::slurm {
namespace fs = std::filesystem;
namespace {

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

}  // namespace

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

namespace {

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

}  // namespace

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
      if (!bound()) {
        // Refused (EBUSY: 1 guest run of 8 on 2026-12-07, a 25 s boot). No dax_pmem warning
        // came with it, so the refusal was libnvdimm's own for a namespace something has:
        // what that is, where it shows, goes with the sentence.
        std::error_code ec;
        const std::string holder = fs::read_symlink(ndd / ns / "driver", ec).filename().string();
        if (holder.empty()) return s.error();
        return Error{s.error().code,
                     s.error().message + " (" + ns + " is bound to " + holder + ")"};
      }
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

}  // namespace composer::slurm
