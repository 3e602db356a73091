#include "composer/setup/fabric_setup.h"

#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/core/forwarding_fabric.h"
#include "composer/core/guarded_fabric.h"
#include "composer/drivers/credentials.h"
#include "composer/drivers/liqid_fabric.h"
#include "composer/drivers/multi_fabric.h"
#include "composer/drivers/redfish_fabric.h"
#include "composer/drivers/sim_fabric.h"

namespace composer::setup {
namespace {

// One fabric's driver, whichever way the file declared it.
struct DriverSpec {
  std::string label;  // "Fabric=redfish (name)" or "FabricName=pod-a (Driver=redfish)"
  const std::string& driver;
  const FabricConfig& config;
  const SimConfig& sim;
};

std::vector<DriverSpec> specs(const Config& c) {
  std::vector<DriverSpec> out;
  if (c.fabrics.empty()) {
    const std::string& name = c.fabric_config.name;
    out.push_back({"Fabric=" + c.fabric + (name.empty() ? "" : " (" + name + ")"), c.fabric,
                   c.fabric_config, c.sim});
  }
  for (const FabricSpec& s : c.fabrics) {
    out.push_back(
        {"FabricName=" + s.name + " (Driver=" + s.driver + ")", s.driver, s.config, s.sim});
  }
  return out;
}

// The settings every networked driver shares, from the Fabric* keys.
void fill_manager_options(const FabricConfig& f, drivers::FabricManagerOptions* o) {
  o->base_url = f.url;
  o->credentials_file = f.credentials_file;
  o->ca_file = f.ca_file;
  o->verify_tls = f.verify_tls;
  o->connect_timeout_ms = static_cast<long>(f.connect_timeout_ms);
  o->request_timeout_ms = static_cast<long>(f.request_timeout_ms);
  o->host_map = f.host_map;
  o->default_slots = f.slots;
  o->epoch = f.epoch;
}

Expected<std::unique_ptr<Fabric>> make_driver(const DriverSpec& d) {
  const FabricConfig& f = d.config;
  auto wrap = [&](const Error& e) { return Error{e.code, d.label + ": " + e.message}; };
  if (d.driver == "sim") {
    auto sim = SimFabric::create(d.sim);
    if (!sim) return wrap(sim.error());
    return std::unique_ptr<Fabric>(std::move(sim).value());
  }
  if (d.driver == "redfish") {
    drivers::RedfishOptions o;
    fill_manager_options(f, &o);
    o.auth = f.auth == "basic" ? drivers::RedfishOptions::Auth::kBasic
                               : drivers::RedfishOptions::Auth::kSession;
    o.poll_interval_ms = static_cast<long>(f.poll_interval_ms);
    o.task_wait_ms = static_cast<long>(f.task_wait_ms);
    o.use_host_name = f.use_host_name;
    auto r = guarded_driver([&] { return drivers::RedfishFabric::create(std::move(o)); });
    if (!r) return wrap(r.error());
    return std::move(r).value();
  }
  if (d.driver == "liqid") {
    drivers::LiqidOptions o;
    fill_manager_options(f, &o);
    o.auth = f.auth == "basic" ? drivers::LiqidOptions::Auth::kBasic
                               : drivers::LiqidOptions::Auth::kApiKey;
    auto l = guarded_driver([&] { return drivers::LiqidFabric::create(std::move(o)); });
    if (!l) return wrap(l.error());
    return std::move(l).value();
  }
  return Error{ErrorCode::kInvalidArgument, d.label + ": unknown driver"};
}

// The failure domains of composer.conf's NodeName lines on the hosts of every inventory
// (a fabric manager knows the hosts, not the switch or the power feed each hangs on).
class HostDomainsFabric final : public ForwardingFabric {
 public:
  HostDomainsFabric(std::unique_ptr<Fabric> inner,
                    std::map<std::string, std::vector<FailureDomain>> domains)
      : ForwardingFabric(std::move(inner)), domains_(std::move(domains)) {}
  Expected<FabricInventory> inventory() override {
    auto inv = inner_.inventory();
    if (!inv) return inv;
    for (Host& h : inv->hosts) {
      if (auto it = domains_.find(h.node); it != domains_.end()) h.domains = it->second;
    }
    return inv;
  }

 private:
  std::map<std::string, std::vector<FailureDomain>> domains_;
};

Expected<std::unique_ptr<Fabric>> make_drivers(const Config& c, const WrapDriver& wrap) {
  auto wrapped = [&wrap](std::unique_ptr<Fabric> driver, const std::string& name,
                         const FabricConfig& f) {
    return wrap ? wrap(std::move(driver), name, f) : std::move(driver);
  };
  if (c.fabrics.empty()) {
    auto driver = make_driver(specs(c).front());
    if (!driver) return driver.error();
    return wrapped(std::move(driver).value(), c.fabric_config.name, c.fabric_config);
  }
  std::vector<MultiFabric::Member> members;
  const auto all = specs(c);
  for (size_t i = 0; i < all.size(); ++i) {
    auto driver = make_driver(all[i]);
    if (!driver) return driver.error();
    members.push_back({c.fabrics[i].name,
                       wrapped(std::move(driver).value(), c.fabrics[i].name, c.fabrics[i].config)});
  }
  auto multi = MultiFabric::create(std::move(members));
  if (!multi) return multi.error();
  return std::unique_ptr<Fabric>(std::move(multi).value());
}

}  // namespace

Expected<std::unique_ptr<Fabric>> make_fabric(const Config& c, const WrapDriver& wrap) {
  auto fabric = make_drivers(c, wrap);
  if (!fabric) return fabric;
  std::map<std::string, std::vector<FailureDomain>> domains;
  for (const Host& h : c.sim.hosts) {
    if (!h.domains.empty()) domains.emplace(h.node, h.domains);
  }
  if (domains.empty()) return fabric;
  return std::unique_ptr<Fabric>(
      std::make_unique<HostDomainsFabric>(std::move(fabric).value(), std::move(domains)));
}

std::string describe_inventory(const FabricInventory& inv) {
  std::ostringstream out;
  out << "hosts (" << inv.hosts.size() << "):\n";
  for (const Host& h : inv.hosts) {
    out << "  " << h.node << "  fabric host " << h.fabric_id << "  zones "
        << (h.zones.empty() ? std::string("(none)") : join(h.zones)) << "  slots gpu "
        << h.gpu_slots << " mem " << h.mem_slots << " nvme " << h.nvme_slots << "\n";
  }
  // Per type, model and zone: how many, how many the fabric shows held, the bytes.
  struct Row {
    uint32_t count = 0, attached = 0, held = 0;
    uint64_t bytes = 0;
  };
  std::map<std::tuple<DeviceType, std::string, std::string>, Row> rows;
  for (const Device& d : inv.devices) {
    Row& r = rows[{d.type, d.model, d.zone}];
    ++r.count;
    r.bytes += d.capacity_bytes;
    if (inv.attached.count(d.id) != 0) ++r.attached;
    if (inv.held.count(d.id) != 0) ++r.held;
  }
  out << "devices (" << inv.devices.size() << "):\n";
  for (const auto& [key, r] : rows) {
    const auto& [type, model, zone] = key;
    out << "  " << to_string(type) << "  " << (model.empty() ? "-" : model) << "  zone " << zone
        << "  " << r.count;
    if (r.bytes > 0) out << " (" << format_size(r.bytes) << ")";
    out << ", attached " << r.attached << ", held " << r.held << "\n";
  }
  if (!inv.attached.empty() || !inv.held.empty()) {
    out << "attached or held on the fabric (composerd's own or foreign: its ledger decides at "
           "start):\n";
    for (const auto& [id, host] : inv.attached)
      out << "  " << id << "  attached to " << host << "\n";
    for (const auto& [id, holder] : inv.held) out << "  " << id << "  " << holder << "\n";
  }
  if (!inv.skipped.empty()) {
    out << "skipped (" << inv.skipped.size() << "):\n";
    for (const auto& why : inv.skipped) out << "  " << why << "\n";
  }
  if (inv.devices.empty()) {
    out << "warning: the fabric shows no device composerd can pool; every compose would be "
           "refused\n";
  }
  return out.str();
}

Status check_fabric_files(const Config& c) {
  for (const DriverSpec& d : specs(c)) {
    if (d.driver == "sim") continue;
    std::string user, password;
    if (Status s =
            drivers::load_fabric_credentials(d.config.credentials_file, d.driver, &user, &password);
        !s) {
      return Error{s.error().code, d.label + ": " + s.error().message};
    }
  }
  return Status::Ok();
}

}  // namespace composer::setup
