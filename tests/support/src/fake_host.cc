#include "composer/test_support/fake_host.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

namespace composer::test_support {
namespace fs = std::filesystem;
namespace {

void put(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

bool says_one(const fs::path& path) {
  const std::string s = slurp(path);
  return !s.empty() && s[0] == '1';
}

bool is_nvidia_gpu(const FakePciFunction& f) {
  return f.vendor == "0x10de" && f.class_code.rfind("0x03", 0) == 0;
}
bool is_nvme(const FakePciFunction& f) { return f.class_code.rfind("0x0108", 0) == 0; }

// "pci0000:40" for "0000:41:00.0": the host bridge above it, as on a real host.
std::string bridge(const std::string& address) {
  return "pci" + address.substr(0, 5) + address.substr(5, 1) + "0";
}

}  // namespace

FakeHost::FakeHost(fs::path root) : root_(std::move(root)) {
  fs::create_directories(root_ / "sys/bus/pci/devices");
  fs::create_directories(root_ / "sys/devices");
  fs::create_directories(root_ / "proc/driver/nvidia/gpus");
  fs::create_directories(root_ / "dev");
  put(root_ / "sys/bus/pci/rescan", "");
  // The majors of the drivers it fakes, as a host with them loaded lists them.
  put(root_ / "proc/devices", "Character devices:\n  1 mem\n  4 tty\n195 nvidia-frontend\n" +
                                  std::to_string(kNvmeMajor) + " nvme\n" +
                                  std::to_string(kNvmeGenericMajor) +
                                  " nvme-generic\n\nBlock devices:\n  8 sd\n" +
                                  std::to_string(kBlockExtMajor) + " blkext\n");
  add_numa_node(0);
  add_numa_node(1);
  thread_ = std::thread([this] { watch(); });
}

FakeHost::~FakeHost() {
  stop_ = true;
  thread_.join();
}

void FakeHost::add_numa_node(int node) {
  fs::create_directories(root_ / "sys/devices/system/node" / ("node" + std::to_string(node)));
}

namespace {

// The name a dax driver's new_id or unbind file was given, which is then emptied.
std::string take_name(const fs::path& file) {
  std::string name = slurp(file);
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
  if (!name.empty()) put(file, "");
  return name;
}

void bind_dax(const fs::path& dax_dir, const std::string& driver) {
  std::error_code ec;
  fs::remove(dax_dir / "driver", ec);
  if (!driver.empty()) {
    fs::create_directory_symlink("../../../../bus/dax/drivers/" + driver, dax_dir / "driver", ec);
  }
}

}  // namespace

void FakeHost::add_dax(const std::string& name, int target_node, uint64_t size_bytes, int blocks) {
  std::lock_guard lock(mu_);
  const fs::path dax_dir = root_ / "sys/bus/dax/devices" / name;
  for (const char* driver : {"device_dax", "kmem"}) {
    for (const char* file : {"new_id", "unbind"}) {
      const fs::path f = root_ / "sys/bus/dax/drivers" / driver / file;
      if (!fs::exists(f)) put(f, "");
    }
  }
  put(dax_dir / "target_node", std::to_string(target_node) + "\n");
  put(dax_dir / "size", std::to_string(size_bytes) + "\n");
  bind_dax(dax_dir, "device_dax");
  dax_[name] = Dax{target_node, blocks, -1};
}

void FakeHost::remove_dax(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = dax_.find(name);
  if (it == dax_.end()) return;
  const Dax& d = it->second;
  std::error_code ec;
  for (int k = d.first_block; d.first_block >= 0 && k < d.first_block + d.blocks; ++k) {
    const std::string b = "memory" + std::to_string(k);
    fs::remove(root_ / "sys/devices/system/node" / ("node" + std::to_string(d.target_node)) / b,
               ec);
    fs::remove_all(root_ / "sys/devices/system/memory" / b, ec);
  }
  fs::remove_all(root_ / "sys/bus/dax/devices" / name, ec);
  const int node = d.target_node;
  dax_.erase(it);
  drop_node_if_empty(node);
}

// Under mu_. A node kmem made for a region goes with its last memory block, as the kernel takes
// a memory-only node offline (and its sysfs folder away) once its memory is hot-removed.
void FakeHost::drop_node_if_empty(int node) {
  if (!memory_only_nodes_.contains(node)) return;
  const fs::path dir = root_ / "sys/devices/system/node" / ("node" + std::to_string(node));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind("memory", 0) == 0) return;
  }
  fs::remove_all(dir, ec);
  memory_only_nodes_.erase(node);
}

void FakeHost::set_memory_busy(int node, bool busy) {
  std::lock_guard lock(mu_);
  if (busy) {
    busy_nodes_.insert(node);
  } else {
    busy_nodes_.erase(node);
  }
}

std::vector<std::string> FakeHost::memory_states(int node) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, d] : dax_) {
    if (d.target_node != node || d.first_block < 0) continue;
    for (int k = d.first_block; k < d.first_block + d.blocks; ++k) {
      std::string state =
          slurp(root_ / "sys/devices/system/memory" / ("memory" + std::to_string(k)) / "state");
      while (!state.empty() && state.back() == '\n') state.pop_back();
      out.push_back(state);
    }
  }
  return out;
}

// Under mu_: what the dax drivers and the memory blocks were told since the last round.
void FakeHost::follow_dax() {
  if (dax_.empty()) return;
  const fs::path drivers = root_ / "sys/bus/dax/drivers";
  const fs::path memory = root_ / "sys/devices/system/memory";
  const auto block = [&](int k) { return memory / ("memory" + std::to_string(k)); };
  // A driver's unbind lets go only of a device that driver has.
  const auto has = [&](const std::string& name, const char* driver) {
    std::error_code ec;
    return fs::read_symlink(root_ / "sys/bus/dax/devices" / name / "driver", ec).filename() ==
           driver;
  };
  if (std::string name = take_name(drivers / "device_dax/unbind");
      dax_.contains(name) && has(name, "device_dax")) {
    bind_dax(root_ / "sys/bus/dax/devices" / name, "");
  }
  std::string to_kmem = take_name(drivers / "kmem/new_id");
  if (std::string name = take_name(drivers / "kmem/bind"); !name.empty()) to_kmem = name;
  // Only a device no driver has: kmem does not take one from device_dax.
  std::error_code bound_ec;
  if (dax_.contains(to_kmem) &&
      fs::is_symlink(root_ / "sys/bus/dax/devices" / to_kmem / "driver", bound_ec)) {
    to_kmem.clear();
  }
  if (std::string name = to_kmem; dax_.contains(name)) {
    Dax& d = dax_[name];
    if (d.first_block < 0) {
      d.first_block = next_block_;
      next_block_ += d.blocks;
      const std::string node = "node" + std::to_string(d.target_node);
      if (!fs::exists(root_ / "sys/devices/system/node" / node)) {
        add_numa_node(d.target_node);
        memory_only_nodes_.insert(d.target_node);
      }
      for (int k = d.first_block; k < d.first_block + d.blocks; ++k) {
        const std::string b = "memory" + std::to_string(k);
        put(block(k) / "state", "offline\n");
        std::error_code ec;
        fs::create_directory_symlink("../node/" + node, block(k) / node, ec);
        fs::create_directory_symlink("../../memory/" + b,
                                     root_ / "sys/devices/system/node" / node / b, ec);
      }
    }
    // Bound once every block is there, as the driver link follows a finished probe.
    bind_dax(root_ / "sys/bus/dax/devices" / name, "kmem");
  }
  if (std::string name = take_name(drivers / "kmem/unbind"); dax_.contains(name)) {
    Dax& d = dax_[name];
    bool all_offline = true;
    for (int k = d.first_block; d.first_block >= 0 && k < d.first_block + d.blocks; ++k) {
      all_offline = all_offline && slurp(block(k) / "state").rfind("offline", 0) == 0;
    }
    if (all_offline) {
      for (int k = d.first_block; d.first_block >= 0 && k < d.first_block + d.blocks; ++k) {
        std::error_code ec;
        fs::remove(root_ / "sys/devices/system/node" / ("node" + std::to_string(d.target_node)) /
                       ("memory" + std::to_string(k)),
                   ec);
        fs::remove_all(block(k), ec);
      }
      d.first_block = -1;
      drop_node_if_empty(d.target_node);
      bind_dax(root_ / "sys/bus/dax/devices" / name, "");
    }
  }
  if (std::string name = take_name(drivers / "device_dax/new_id"); dax_.contains(name)) {
    bind_dax(root_ / "sys/bus/dax/devices" / name, "device_dax");
  }
  for (const auto& [name, d] : dax_) {
    for (int k = d.first_block; d.first_block >= 0 && k < d.first_block + d.blocks; ++k) {
      // What a block was told is answered with what it became, as the kernel shows it.
      const std::string said = slurp(block(k) / "state");
      if (said == "online\n" || said == "offline\n") continue;
      if (said.rfind("online", 0) == 0) put(block(k) / "state", "online\n");
      if (said.rfind("offline", 0) == 0) {
        put(block(k) / "state", busy_nodes_.contains(d.target_node) ? "online\n" : "offline\n");
      }
    }
  }
}

namespace {

constexpr const char* kCxlRoot = "sys/devices/platform/ACPI0017:00/root0";
constexpr const char* kNdBus = "sys/devices/platform/ACPI0017:00/root0/nvdimm-bridge0/ndbus0";
// How long after a libnvdimm region appears its driver's probe shows its seeds.
constexpr std::chrono::milliseconds kNdProbe{150};

std::string hex(uint64_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << v;
  return out.str();
}

uint64_t number_in(const fs::path& path) {
  const std::string s = slurp(path);
  try {
    return std::stoull(s, nullptr, s.rfind("0x", 0) == 0 ? 16 : 10);
  } catch (const std::exception&) {
    return 0;
  }
}

std::string line_in(const fs::path& path) {
  std::string s = slurp(path);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// "32,33" -> {"32", "33"}.
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// <root>/sys/bus/<bus>/devices/<name> -> the device's directory, as the kernel links it.
void bus_link(const fs::path& root, const std::string& bus, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(root / "sys/bus" / bus / "devices", ec);
  fs::create_directory_symlink(fs::path("../../..") / fs::relative(dir, root / "sys"),
                               root / "sys/bus" / bus / "devices" / dir.filename(), ec);
}

}  // namespace

// Under mu_: the host bridge `uid` as the CXL root shows it, made at its first use: root0's
// dport<uid> and the port above its devices (port<N>), their uport, both the bridge's ACPI
// device (on Linux 6.1: root0/dport32 and port1/uport -> ACPI0016:00; tests/kvm).
fs::path FakeHost::host_bridge_port(int uid) {
  if (auto it = bridge_ports_.find(uid); it != bridge_ports_.end()) return it->second;
  const fs::path base = root_ / kCxlRoot;
  const fs::path acpi = root_ / "sys/devices/LNXSYSTM:00/LNXSYBUS:00" /
                        ("ACPI0016:0" + std::to_string(bridge_ports_.size()));
  std::error_code ec;
  fs::create_directories(acpi, ec);
  fs::create_directories(base, ec);
  fs::create_directory_symlink(fs::relative(acpi, base), base / ("dport" + std::to_string(uid)),
                               ec);
  const fs::path port = base / ("port" + std::to_string(next_port_++));
  fs::create_directories(port, ec);
  fs::create_directory_symlink(fs::relative(acpi, port), port / "uport", ec);
  bus_link(root_, "cxl", port);
  bridge_ports_[uid] = port;
  return port;
}

void FakeHost::add_cxl_window(const std::string& decoder, const std::vector<int>& host_bridges,
                              uint64_t size_bytes) {
  std::lock_guard lock(mu_);
  add_window(decoder, host_bridges, size_bytes);
}

// Under mu_.
void FakeHost::add_window(const std::string& decoder, const std::vector<int>& host_bridges,
                          uint64_t size_bytes) {
  const fs::path dir = root_ / kCxlRoot / decoder;
  std::string targets;
  for (int uid : host_bridges) {
    host_bridge_port(uid);
    targets += (targets.empty() ? "" : ",") + std::to_string(uid);
  }
  put(dir / "devtype", "cxl_decoder_root\n");
  put(dir / "cap_pmem", "1\n");
  put(dir / "target_list", targets + "\n");
  put(dir / "interleave_ways", std::to_string(host_bridges.size()) + "\n");
  put(dir / "size", hex(size_bytes) + "\n");
  put(dir / "start", hex(next_window_start_) + "\n");
  put(dir / "delete_region", "");
  bus_link(root_, "cxl", dir);
  next_window_start_ += size_bytes;
  windows_.push_back(decoder);
  offer_region(decoder);
}

void FakeHost::add_cxl_memory(const std::string& memdev, uint64_t size_bytes, int target_node,
                              int blocks, int host_bridge) {
  std::lock_guard lock(mu_);
  if (cxl_.empty()) {
    // QEMU's one fixed memory window (tests/kvm: 4 GiB for host bridge 32), unless the test
    // made its own.
    if (windows_.empty()) add_window("decoder0.0", {32}, uint64_t{4} << 30);
    for (const char* f :
         {"cxl/drivers/cxl_region/bind", "cxl/drivers/cxl_region/unbind",
          "nd/drivers/dax_pmem/bind", "nd/drivers/dax_pmem/unbind", "dax/drivers/device_dax/new_id",
          "dax/drivers/device_dax/unbind", "dax/drivers/kmem/new_id", "dax/drivers/kmem/unbind"}) {
      if (!fs::exists(root_ / "sys/bus" / f)) put(root_ / "sys/bus" / f, "");
    }
    fs::create_directories(root_ / "sys/bus/nd/devices");
    fs::create_directories(root_ / "sys/bus/dax/devices");
  }
  const fs::path mem = root_ / "sys/devices/pci0000:20/0000:20:00.0" / memdev;
  put(mem / "pmem/size", hex(size_bytes) + "\n");
  bus_link(root_, "cxl", mem);
  const std::string port = std::to_string(next_port_++);
  const fs::path endpoint = host_bridge_port(host_bridge) / ("endpoint" + port);
  std::error_code ec;
  fs::create_directories(endpoint, ec);
  fs::create_directory_symlink(fs::relative(mem, endpoint), endpoint / "uport", ec);
  bus_link(root_, "cxl", endpoint);
  // Linux 6.6 and later show the count of committed decoders beside the decoders.
  put(endpoint / "decoders_committed", "0\n");
  const std::string decoder = "decoder" + port + ".0";
  put(endpoint / decoder / "mode", "none\n");
  put(endpoint / decoder / "dpa_size", "0x0\n");
  bus_link(root_, "cxl", endpoint / decoder);
  cxl_[memdev] = CxlMemory{size_bytes, target_node, blocks, decoder, host_bridge};
}

// Under mu_: the root decoder offers the next region's name, its directory ready for it.
void FakeHost::offer_region(const std::string& decoder) {
  const std::string name = "region" + std::to_string(next_region_);
  const fs::path dir = root_ / kCxlRoot / decoder / name;
  for (const char* f : {"uuid", "target0"}) put(dir / f, "\n");
  for (const char* f : {"interleave_ways", "interleave_granularity", "size", "commit"}) {
    put(dir / f, "0\n");
  }
  // Each region at its own place in the window, 1 GiB apart.
  put(dir / "resource",
      hex((uint64_t{0x11} << 28) + (static_cast<uint64_t>(next_region_) << 30)) + "\n");
  bus_link(root_, "cxl", dir);
  put(root_ / kCxlRoot / decoder / "create_pmem_region", name + "\n");
  ++next_region_;
}

// Under mu_: whether the kernel would commit `region` (a directory under its root decoder):
// the window targets the host bridge of the device behind the region's endpoint decoder, and
// has room for it beside the window's regions committed already.
bool FakeHost::window_takes(const fs::path& region) const {
  const fs::path window = region.parent_path();
  const std::string decoder = line_in(region / "target0");
  const CxlMemory* memory = nullptr;
  for (const auto& [memdev, m] : cxl_) {
    if (m.endpoint_decoder == decoder) memory = &m;
  }
  if (memory == nullptr) return false;
  bool targeted = false;
  for (const std::string& t : split_list(line_in(window / "target_list"))) {
    targeted = targeted || t == std::to_string(memory->host_bridge);
  }
  uint64_t used = number_in(region / "size");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(window, ec)) {
    if (e.path().filename().string().rfind("region", 0) == 0 && e.path() != region &&
        says_one(e.path() / "commit")) {
      used += number_in(e.path() / "size");
    }
  }
  return targeted && number_in(window / "interleave_ways") == 1 &&
         used <= number_in(window / "size");
}

std::vector<std::string> FakeHost::cxl_regions() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ / "sys/bus/cxl/devices", ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("region", 0) == 0 && says_one(e.path() / "commit")) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> FakeHost::dax_names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root_ / "sys/bus/dax/devices", ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Under mu_, after follow_dax (a dax device kmem lets go in one round can leave in the same).
void FakeHost::follow_cxl() {
  if (cxl_.empty()) return;
  const fs::path bus = root_ / "sys/bus";
  const fs::path cxl = bus / "cxl/devices";
  std::error_code ec;
  for (const std::string& name : std::exchange(unbound_dax_, {})) {
    const fs::path dir = bus / "dax/devices" / name;
    if (dax_.contains(name) && !fs::is_symlink(dir / "driver", ec)) bind_dax(dir, "device_dax");
  }
  if (std::string name = take_name(bus / "nd/drivers/dax_pmem/bind"); !name.empty()) {
    const fs::path nd_dax = bus / "nd/devices" / name;
    const std::string ns = line_in(nd_dax / "namespace");
    const fs::path nd_region = fs::canonical(nd_dax, ec).parent_path();
    const uint64_t size = number_in(nd_region / "size");
    std::string region;
    for (const auto& [r, m] : nd_region_of_) {
      if (m == nd_region.filename().string()) region = r;
    }
    const std::string decoder = line_in(cxl / region / "target0");
    const CxlMemory* memory = nullptr;
    for (const auto& [memdev, m] : cxl_) {
      if (m.endpoint_decoder == decoder) memory = &m;
    }
    if (memory != nullptr && !ns.empty() && number_in(bus / "nd/devices" / ns / "size") == size) {
      // The memory map of the device's pages lives on the device (mode pmem), and the rest
      // starts at the next 2 MiB: 526385152 bytes of a 512 MiB region, as the kernel shows.
      const fs::path dax = fs::canonical(nd_dax, ec) / name;
      put(dax / "target_node", std::to_string(memory->target_node) + "\n");
      put(dax / "size", std::to_string(size - size / 64 - (uint64_t{2} << 20)) + "\n");
      // No driver yet: device_dax binds it at the next round, as udev loads the module.
      bus_link(root_, "dax", dax);
      dax_[name] = Dax{memory->target_node, memory->blocks, -1};
      unbound_dax_.insert(name);
    }
  }
  if (std::string name = take_name(bus / "nd/drivers/dax_pmem/unbind"); !name.empty()) {
    if (auto it = dax_.find(name); it != dax_.end() && it->second.first_block < 0) {
      fs::remove(bus / "dax/devices" / name, ec);
      dax_.erase(it);
    }
  }
  // The libnvdimm regions made kNdProbe ago probed: their namespace and dax seeds.
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> probed;
  std::erase_if(unprobed_nd_, [&](const auto& u) {
    if (u.first > now) return false;
    probed.push_back(u.second);
    return true;
  });
  for (const std::string& nd : probed) {
    const fs::path dir = root_ / kNdBus / nd;
    if (!fs::exists(dir, ec)) continue;
    const std::string n = nd.substr(6);
    for (const char* f : {"uuid", "alt_name"}) put(dir / ("namespace" + n + ".0") / f, "\n");
    put(dir / ("namespace" + n + ".0") / "size", "0\n");
    for (const char* f : {"uuid", "namespace"}) put(dir / ("dax" + n + ".0") / f, "\n");
    put(dir / ("dax" + n + ".0") / "mode", "none\n");
    put(dir / ("dax" + n + ".0") / "align", "2097152\n");
    for (const std::string& d : {"namespace" + n + ".0", "dax" + n + ".0"}) {
      bus_link(root_, "nd", dir / d);
    }
    // The seeds last: a seed the host side reads is there.
    put(dir / "namespace_seed", "namespace" + n + ".0\n");
    put(dir / "dax_seed", "dax" + n + ".0\n");
  }
  std::string bound = take_name(bus / "cxl/drivers/cxl_region/bind");
  if (!bound.empty() && says_one(cxl / bound / "commit")) {
    // An endpoint decoder is in one region at a time: the kernel refuses a second region's
    // writes to it (EBUSY). The region stays uncommitted and nothing comes of it.
    const std::string target = line_in(cxl / bound / "target0");
    bool refused = !window_takes(fs::canonical(cxl / bound, ec));
    for (const auto& [r, nd] : nd_region_of_) {
      refused = refused || r == bound || line_in(cxl / r / "target0") == target;
    }
    if (refused) {
      put(cxl / bound / "commit", "0\n");
      bound.clear();
    }
  }
  if (const std::string& name = bound; !name.empty() && says_one(cxl / name / "commit")) {
    const std::string nd = "region" + std::to_string(nd_region_of_.size() + next_region_);
    const fs::path dir = root_ / kNdBus / nd;
    const std::string n = nd.substr(6);
    put(dir / "resource", slurp(cxl / name / "resource"));
    put(dir / "size", std::to_string(number_in(cxl / name / "size")) + "\n");
    // No seeds until the region's driver has probed it, a round later: libnvdimm registers and
    // probes its devices asynchronously (the kvm level's guest on Linux 6.1 showed the region
    // with an empty namespace_seed).
    put(dir / "namespace_seed", "\n");
    put(dir / "dax_seed", "\n");
    bus_link(root_, "nd", dir);
    unprobed_nd_.emplace_back(std::chrono::steady_clock::now() + kNdProbe, nd);
    nd_region_of_[name] = nd;
    offer_region(fs::canonical(cxl / name, ec).parent_path().filename().string());
  }
  if (std::string name = take_name(bus / "cxl/drivers/cxl_region/unbind"); !name.empty()) {
    if (auto it = nd_region_of_.find(name); it != nd_region_of_.end()) {
      const fs::path dir = root_ / kNdBus / it->second;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        fs::remove(bus / "nd/devices" / e.path().filename(), ec);
      }
      fs::remove(bus / "nd/devices" / it->second, ec);
      fs::remove_all(dir, ec);
      nd_region_of_.erase(it);
    }
  }
  for (const std::string& window : windows_) {
    if (std::string name = take_name(root_ / kCxlRoot / window / "delete_region");
        !name.empty() && !says_one(cxl / name / "commit")) {
      fs::remove(cxl / name, ec);
      fs::remove_all(root_ / kCxlRoot / window / name, ec);
    }
  }
}

void FakeHost::add_present(const FakePciFunction& f) {
  std::lock_guard lock(mu_);
  materialise(f);
}

void FakeHost::attach(FakePciFunction f, std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  pending_.push_back(Pending{std::move(f), delay});
}

void FakeHost::set_rescan_source(std::function<std::vector<FakePciFunction>()> source) {
  std::lock_guard lock(mu_);
  source_ = std::move(source);
}

void FakeHost::unplug_now(const std::string& address) {
  std::lock_guard lock(mu_);
  if (std::find(present_.begin(), present_.end(), address) != present_.end()) unplug(address);
}

std::vector<std::string> FakeHost::present() const {
  std::lock_guard lock(mu_);
  return present_;
}

void FakeHost::mirror_processes() {
  std::lock_guard lock(mu_);
  mirror_ = true;
}

// Under mu_. Mirrors into <root>/proc the real processes' descriptors that point under <root>.
// A mirrored descriptor goes only once the real one is closed (its link in the real /proc is
// gone or points elsewhere): a reader never sees a holder vanish while it still holds.
void FakeHost::mirror() {
  const std::string prefix = root_.string() + "/";
  std::error_code ec;
  for (const auto& proc : fs::directory_iterator("/proc", ec)) {
    const std::string pid = proc.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      const fs::path target = fs::read_symlink(fd.path(), link_ec);
      if (link_ec || !target.string().starts_with(prefix)) continue;
      const fs::path mirrored = root_ / "proc" / pid / "fd" / fd.path().filename();
      if (fs::read_symlink(mirrored, link_ec) == target) continue;
      fs::create_directories(mirrored.parent_path(), link_ec);
      fs::remove(mirrored, link_ec);
      fs::create_symlink(target, mirrored, link_ec);
      mirrored_pids_.insert(pid);
    }
  }
  for (auto pid = mirrored_pids_.begin(); pid != mirrored_pids_.end();) {
    const fs::path dir = root_ / "proc" / *pid / "fd";
    bool left = false;
    std::error_code fd_ec;
    for (const auto& link : fs::directory_iterator(dir, fd_ec)) {
      std::error_code link_ec;
      const fs::path real =
          fs::read_symlink(fs::path("/proc") / *pid / "fd" / link.path().filename(), link_ec);
      if (link_ec || real != fs::read_symlink(link.path(), link_ec)) {
        fs::remove(link.path(), link_ec);
      } else {
        left = true;
      }
    }
    if (left) {
      ++pid;
    } else {
      fs::remove_all(root_ / "proc" / *pid, ec);
      pid = mirrored_pids_.erase(pid);
    }
  }
}

std::vector<std::string> FakeHost::removed() const {
  std::lock_guard lock(mu_);
  return removed_;
}

std::string FakeHost::nvme_controller(const std::string& address) const {
  std::error_code ec;
  for (const auto& e :
       fs::directory_iterator(root_ / "sys/bus/pci/devices" / address / "nvme", ec)) {
    return e.path().filename().string();
  }
  return "";
}

// Under mu_. A function appears whole to whoever looks: its directory is written aside and
// renamed into place, its driver's entries follow, and its link in bus/pci/devices comes last,
// so a reader that finds the link finds everything behind it.
void FakeHost::materialise(const FakePciFunction& f) {
  const fs::path staged = root_ / "staging" / f.address;
  fs::remove_all(staged);
  put(staged / "vendor", f.vendor + "\n");
  put(staged / "device", f.device + "\n");
  put(staged / "class", f.class_code + "\n");
  put(staged / "subsystem_vendor", f.subsystem_vendor + "\n");
  put(staged / "subsystem_device", f.subsystem_device + "\n");
  put(staged / "revision", "0xa1\n");
  put(staged / "numa_node", std::to_string(f.numa_node) + "\n");
  put(staged / "config", std::string(64, '\0'));
  put(staged / "resource0", "");
  put(staged / "remove", "");
  std::string ctrl;
  if (is_nvme(f)) {
    ctrl = "nvme" + std::to_string(next_nvme_++);
    // The 20 bytes of the identify data's serial number, padded with spaces, as the kernel
    // shows them (tests/kvm).
    std::string serial = f.serial;
    if (serial.size() < 20) serial.resize(20, ' ');
    put(staged / "nvme" / ctrl / "serial", serial + "\n");
    put(staged / "nvme" / ctrl / "model", "FAKE NVME\n");
    const std::string n = std::to_string(next_nvme_ - 1);
    put(staged / "nvme" / ctrl / "dev", std::to_string(kNvmeMajor) + ":" + n + "\n");
  }
  const fs::path dir = root_ / "sys/devices" / bridge(f.address) / f.address;
  retire(dir);  // a function seen at this address before is gone for good
  fs::create_directories(dir.parent_path());
  fs::rename(staged, dir);
  if (is_nvidia_gpu(f) && f.nvidia_driver) {
    const int minor = f.nvidia_minor >= 0 ? f.nvidia_minor : next_minor_++;
    next_minor_ = std::max(next_minor_, minor + 1);
    put(root_ / "proc/driver/nvidia/gpus" / f.address / "information",
        "Model: \t\t NVIDIA A100 80GB PCIe\nIRQ:   \t\t 180\nGPU UUID: \t " + f.gpu_uuid +
            "\nVideo BIOS: \t 92.00.25.00.08\nBus Type: \t PCIe\nDMA Size: \t 47 bits\n"
            "DMA Mask: \t 0x7fffffffffff\nBus Location: \t " +
            f.address + "\nDevice Minor: \t " + std::to_string(minor) + "\nGPU Excluded:\t No\n");
    put(root_ / "dev" / ("nvidia" + std::to_string(minor)), "");
  }
  if (!ctrl.empty()) {
    put(root_ / "dev" / ctrl, "");
    if (namespace_delay_.count() == 0) {
      add_namespace(dir / "nvme" / ctrl, ctrl);
    } else {
      namespaces_due_.push_back(
          {std::chrono::steady_clock::now() + namespace_delay_, f.address, ctrl});
    }
  }
  std::error_code ec;
  fs::create_directory_symlink("../../../devices/" + bridge(f.address) + "/" + f.address,
                               root_ / "sys/bus/pci/devices" / f.address, ec);
  present_.push_back(f.address);
}

// Under mu_: a drive's namespace 1, in sysfs under its controller and in /dev.
void FakeHost::add_namespace(const fs::path& ctrl_dir, const std::string& ctrl) {
  // Its generic character device, as the kernel (6.1) shows beside the block device, comes
  // first: whoever sees the block device finds both (support_test,
  // ADrivesNamespaceFollowsItsControllerAfterTheNamespaceDelay).
  const std::string generic = "ng" + ctrl.substr(4) + "n1";
  put(ctrl_dir / generic / "dev", std::to_string(kNvmeGenericMajor) + ":" + ctrl.substr(4) + "\n");
  put(root_ / "dev" / generic, "");
  put(ctrl_dir / (ctrl + "n1") / "dev",
      std::to_string(kBlockExtMajor) + ":" + ctrl.substr(4) + "\n");
  put(root_ / "dev" / (ctrl + "n1"), std::string(kNamespaceBytes, '\0'));
}

void FakeHost::set_namespace_delay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  namespace_delay_ = delay;
}

// Under mu_.
void FakeHost::unplug(const std::string& address) {
  std::error_code ec;
  const fs::path dir = root_ / "sys/devices" / bridge(address) / address;
  for (const auto& e : fs::directory_iterator(dir / "nvme", ec)) {
    const std::string ctrl = e.path().filename().string();
    fs::remove(root_ / "dev" / ctrl, ec);
    // Emptied first: a process that keeps the namespace open reads 0 bytes from now on, with
    // no error, as from a drive pulled under an open file on Linux 6.1 (tests/kvm).
    fs::resize_file(root_ / "dev" / (ctrl + "n1"), 0, ec);
    fs::remove(root_ / "dev" / (ctrl + "n1"), ec);
    fs::remove(root_ / "dev" / ("ng" + ctrl.substr(4) + "n1"), ec);
  }
  const fs::path info = root_ / "proc/driver/nvidia/gpus" / address;
  const std::string text = slurp(info / "information");
  if (size_t at = text.find("Device Minor:"); at != std::string::npos) {
    std::istringstream rest(text.substr(at + 13));
    int minor = -1;
    if (rest >> minor) fs::remove(root_ / "dev" / ("nvidia" + std::to_string(minor)), ec);
  }
  fs::remove_all(info, ec);
  fs::remove(root_ / "sys/bus/pci/devices" / address, ec);
  retire(dir);
  std::erase(present_, address);
  removed_.push_back(address);
}

// Under mu_. A function's directory that went is moved aside, not deleted: its inode number
// stays taken, so no later function at the address gets it, as the kernel never gives a sysfs
// node's number to another (the prolog tells a new function from an old one by it).
void FakeHost::retire(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  const fs::path gone = root_ / "gone";
  fs::create_directories(gone, ec);
  // A fake host started again on the same root finds the ones before it there.
  while (fs::exists(gone / std::to_string(retired_), ec)) ++retired_;
  fs::rename(dir, gone / std::to_string(retired_++), ec);
  if (ec) fs::remove_all(dir, ec);
}

// Under mu_: the functions whose `remove` was written to go. A rescan written and not yet
// acted on came before (a prolog rescans under its lock, an epilog removes after it; the
// kernel's rescan is done when its write returns): it does not bring them back.
void FakeHost::unplug_removed() {
  const bool rescan_waiting = says_one(root_ / "sys/bus/pci/rescan");
  const std::vector<std::string> shown = present_;
  for (const std::string& address : shown) {
    if (!says_one(root_ / "sys/bus/pci/devices" / address / "remove")) continue;
    unplug(address);
    if (rescan_waiting) removed_after_rescan_.insert(address);
  }
}

void FakeHost::watch() {
  const fs::path rescan = root_ / "sys/bus/pci/rescan";
  auto last_mirror = std::chrono::steady_clock::time_point{};
  while (!stop_) {
    std::function<std::vector<FakePciFunction>()> source;
    // What the rescan acted on now must not bring back: functions removed after it was written.
    std::set<std::string> removed_since;
    size_t removed_before = 0;
    {
      std::lock_guard lock(mu_);
      if (says_one(rescan)) {
        put(rescan, "");
        ++rescans_;
        const auto now = std::chrono::steady_clock::now();
        for (Pending& p : pending_) arriving_.emplace_back(now + p.delay, std::move(p.f));
        pending_.clear();
        source = source_;
        removed_since = std::exchange(removed_after_rescan_, {});
      }
      removed_before = removed_.size();
      // A remove at once: the kernel's is done when the write returns, and the source below
      // may take a while.
      unplug_removed();
    }
    // Asked without the lock: the source may take a while (it asks the fabric).
    std::vector<FakePciFunction> attached = source ? source() : std::vector<FakePciFunction>{};
    {
      std::lock_guard lock(mu_);
      const auto now = std::chrono::steady_clock::now();
      unplug_removed();
      removed_since.insert(removed_.begin() + static_cast<std::ptrdiff_t>(removed_before),
                           removed_.end());
      for (FakePciFunction& f : attached) {
        if (removed_since.contains(f.address)) continue;
        const bool shown = std::find(present_.begin(), present_.end(), f.address) != present_.end();
        const bool coming = std::any_of(arriving_.begin(), arriving_.end(), [&](const auto& a) {
          return a.second.address == f.address;
        });
        if (!shown && !coming) arriving_.emplace_back(now, std::move(f));
      }
      if (mirror_ && now - last_mirror >= std::chrono::milliseconds(100)) {
        mirror();
        last_mirror = now;
      }
      for (auto it = arriving_.begin(); it != arriving_.end();) {
        if (it->first > now) {
          ++it;
          continue;
        }
        materialise(it->second);
        it = arriving_.erase(it);
      }
      for (auto it = namespaces_due_.begin(); it != namespaces_due_.end();) {
        if (it->due > now) {
          ++it;
          continue;
        }
        // Not for a function gone meanwhile, nor one shown again since (another controller).
        const fs::path ctrl_dir = root_ / "sys/bus/pci/devices" / it->address / "nvme" / it->ctrl;
        if (std::error_code ec; fs::exists(ctrl_dir, ec)) add_namespace(ctrl_dir, it->ctrl);
        it = namespaces_due_.erase(it);
      }
      follow_dax();
      follow_cxl();
      unplug_removed();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace composer::test_support
