// composer_fake_host: a FakeHost (fake_host.h) for one node of the end-to-end cluster, whose
// kernel follows the fabric: at every rescan the node's prolog makes, the functions of the
// devices composerd shows attached to the node appear, each as the fabric identified it (PCI
// ids, GPU UUID in the NVIDIA driver's information file, drive serial); a device the fabric has
// taken away disappears (a surprise hot-unplug); the real processes that hold one of its device
// files show in its /proc. Devices with a PCI address (the sim's) appear there; others (Redfish)
// at addresses of domain 0001, as a host numbers what it finds. Runs until SIGTERM or SIGINT.
//
//   composer_fake_host --root DIR --node NODE --server URL [--munge-socket PATH]
//
// The plugin is pointed at it with sysfs_root=DIR/sys proc_root=DIR/proc dev_root=DIR/dev.
// DIR/hide-next holding a number N: the next N devices attached to the node never appear (a
// device the host cannot see); the file counts down. While DIR/busy-memory exists, the memory
// blocks of every region shown refuse to go offline (pages that cannot be migrated).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>

#include "composer/client/client.h"
#include "composer/common/log.h"
#include "composer/test_support/fake_host.h"

namespace {

using composer::Device;
using composer::DeviceType;
using composer::test_support::FakeHost;
using composer::test_support::FakePciFunction;

volatile std::sig_atomic_t g_stop = 0;

void on_signal(int) { g_stop = 1; }

// One line of the host's log, stamped (the project's logger), to read beside slurmd's.
void say(const std::string& line) { composer::log::info(line); }

class Kernel {
 public:
  Kernel(FakeHost& host, std::string root, std::string node, composer::client::Client& client)
      : host_(host), root_(std::move(root)), node_(std::move(node)), client_(client) {}

  // The rescan source: every device attached to the node, as a function, less the hidden.
  std::vector<FakePciFunction> attached() {
    std::vector<FakePciFunction> out;
    auto devices = client_.devices(composer::client::DeviceQuery{.node = node_});
    if (!devices) {
      say("cannot ask composerd what is attached: " + devices.error().message);
      return out;
    }
    std::lock_guard lock(mu_);
    std::set<std::string> now;
    for (const Device& d : *devices) {
      if (d.node != node_) continue;
      now.insert(d.id);
      if (hidden_.contains(d.id)) continue;
      if (!shown_ever_.contains(d.id) && take_hidden()) {
        hidden_.insert(d.id);
        say("hiding " + d.id + " (hide-next)");
        continue;
      }
      shown_ever_.insert(d.id);
      if (d.type == DeviceType::kMem) {
        // A region: a dax device in devdax mode, which the prolog brings online. Its node is
        // the fabric's where it names one (the sim's); else one the host gives it (Redfish
        // names none), as a host numbers a CXL region's node itself.
        if (!dax_.contains(d.id)) {
          const int numa =
              d.address.rfind("numa:", 0) == 0 ? std::stoi(d.address.substr(5)) : next_node_++;
          const std::string name = "dax" + std::to_string(numa) + ".0";
          host_.add_dax(name, numa, d.capacity_bytes, 2);
          dax_[d.id] = Region{name, numa, false};
          say("showing " + d.id + " as " + name + " (node " + std::to_string(numa) + ")");
        }
        continue;
      }
      out.push_back(function(d));
    }
    // What the fabric took back may be attached again later: shown afresh, hidden no more.
    std::erase_if(hidden_, [&](const std::string& id) { return !now.contains(id); });
    std::erase_if(shown_ever_, [&](const std::string& id) { return !now.contains(id); });
    return out;
  }

  // DIR/busy-memory: the regions' pages cannot move while it exists.
  void follow_busy_memory() {
    const bool busy = std::ifstream(root_ + "/busy-memory").good();
    std::lock_guard lock(mu_);
    for (auto& [id, region] : dax_) {
      if (region.busy == busy) continue;
      host_.set_memory_busy(region.node, busy);
      region.busy = busy;
      say(id + "'s memory (node " + std::to_string(region.node) + ") is " +
          (busy ? "busy: its pages cannot move" : "free again"));
    }
  }

  // Functions of devices no longer attached to the node go, as after a surprise removal.
  void follow_detaches() {
    auto devices = client_.devices(composer::client::DeviceQuery{.node = node_});
    if (!devices) return;
    std::set<std::string> attached_addresses;
    std::lock_guard lock(mu_);
    for (const Device& d : *devices) {
      if (d.node != node_) continue;
      if (auto it = address_.find(d.id); it != address_.end())
        attached_addresses.insert(it->second);
    }
    for (const std::string& a : host_.present()) {
      if (!attached_addresses.contains(a) && ours_.contains(a)) {
        say("unplugged " + a + ": the fabric took it away");
        host_.unplug_now(a);
      }
    }
    std::set<std::string> attached_ids;
    for (const Device& d : *devices) {
      if (d.node == node_) attached_ids.insert(d.id);
    }
    for (auto it = dax_.begin(); it != dax_.end();) {
      if (attached_ids.contains(it->first)) {
        ++it;
        continue;
      }
      say("removed " + it->second.name + ": the fabric took " + it->first + " away");
      host_.remove_dax(it->second.name);
      it = dax_.erase(it);
    }
  }

 private:
  // Under mu_.
  bool take_hidden() {
    std::ifstream in(root_ + "/hide-next");
    int n = 0;
    if (!(in >> n) || n <= 0) return false;
    std::ofstream(root_ + "/hide-next") << (n - 1) << "\n";
    return true;
  }

  // Under mu_.
  FakePciFunction function(const Device& d) {
    auto [it, fresh] = address_.try_emplace(d.id, d.address);
    if (fresh && it->second.empty()) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0001:%02x:00.0", next_bus_++ & 0xff);
      it->second = buf;
    }
    ours_.insert(it->second);
    FakePciFunction f;
    f.address = it->second;
    if (!d.identity.pci_vendor.empty()) f.vendor = d.identity.pci_vendor;
    if (!d.identity.pci_device.empty()) f.device = d.identity.pci_device;
    if (d.type == DeviceType::kNvme) {
      f.class_code = "0x010802";
      if (d.identity.pci_vendor.empty()) f.vendor = "0x8086";
      f.serial = d.identity.serial;
    } else {
      const std::string& u = d.identity.uuid;
      f.gpu_uuid = u.empty() || u.rfind("GPU-", 0) == 0 ? u : "GPU-" + u;
      f.nvidia_driver = f.vendor == "0x10de";
    }
    say("showing " + d.id + " at " + f.address + " (PCI " + f.vendor + ":" + f.device +
        (f.gpu_uuid.empty() ? "" : ", UUID " + f.gpu_uuid) +
        (f.serial.empty() ? "" : ", serial " + f.serial) + ")");
    return f;
  }

  FakeHost& host_;
  const std::string root_;
  const std::string node_;
  composer::client::Client& client_;
  std::mutex mu_;
  std::map<std::string, std::string> address_;  // device id -> where the host shows it
  std::set<std::string> ours_;                  // addresses of fabric devices
  std::set<std::string> hidden_;                // attached, never shown (hide-next)
  std::set<std::string> shown_ever_;            // attached and shown since attached
  struct Region {
    std::string name;  // its dax device
    int node = 0;
    bool busy = false;  // as last told to the host
  };
  std::map<std::string, Region> dax_;  // memory device id -> its region
  unsigned next_bus_ = 0x10;
  int next_node_ = 10;  // for regions the fabric names no node for
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A fake compute host whose kernel follows composerd's fabric"};
  std::string root, node, server, munge_socket;
  app.add_option("--root", root, "the host's tree: sys, proc and dev under it")->required();
  app.add_option("--node", node, "the Slurm node it is")->required();
  app.add_option("--server", server, "composerd's URL")->required();
  app.add_option("--munge-socket", munge_socket, "munged's socket");
  CLI11_PARSE(app, argc, argv);

  composer::client::ClientOptions options;
  options.servers = server;
  options.munge_socket = munge_socket;
  options.timeout_ms = 5000;
  options.retries = 1;
  composer::client::Client client(options);
  FakeHost host(root);
  host.mirror_processes();
  Kernel kernel(host, root, node, client);
  host.set_rescan_source([&kernel] { return kernel.attached(); });
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  say("fake host for " + node + " at " + root);
  while (g_stop == 0) {
    kernel.follow_detaches();
    kernel.follow_busy_memory();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  say("stopping");
  return 0;
}
