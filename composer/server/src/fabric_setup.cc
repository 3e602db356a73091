#include "composer/server/fabric_setup.h"

#include <string>

#include "composer/core/sim_fabric.h"
#include "composer/drivers/credentials.h"
#include "composer/drivers/liqid_fabric.h"
#include "composer/drivers/redfish_fabric.h"

namespace composer::server {
namespace {

std::string label(const Config& c) {
  const FabricConfig& f = c.fabric_config;
  return "Fabric=" + c.fabric + (f.name.empty() ? "" : " (" + f.name + ")");
}

}  // namespace

Expected<std::unique_ptr<Fabric>> make_fabric(const Config& c) {
  const FabricConfig& f = c.fabric_config;
  auto wrap = [&](const Error& e) { return Error{e.code, label(c) + ": " + e.message}; };
  if (c.fabric == "sim") {
    auto sim = SimFabric::create(c.sim);
    if (!sim) return wrap(sim.error());
    return std::unique_ptr<Fabric>(std::move(sim).value());
  }
  if (c.fabric == "redfish") {
    drivers::RedfishOptions o;
    o.base_url = f.url;
    o.credentials_file = f.credentials_file;
    o.auth = f.auth == "basic" ? drivers::RedfishOptions::Auth::kBasic
                               : drivers::RedfishOptions::Auth::kSession;
    o.ca_file = f.ca_file;
    o.verify_tls = f.verify_tls;
    o.connect_timeout_ms = static_cast<long>(f.connect_timeout_ms);
    o.request_timeout_ms = static_cast<long>(f.request_timeout_ms);
    o.poll_interval_ms = static_cast<long>(f.poll_interval_ms);
    o.task_wait_ms = static_cast<long>(f.task_wait_ms);
    o.host_map = f.host_map;
    o.use_host_name = f.use_host_name;
    o.default_slots = f.slots;
    auto r = drivers::RedfishFabric::create(std::move(o));
    if (!r) return wrap(r.error());
    return std::unique_ptr<Fabric>(std::move(r).value());
  }
  if (c.fabric == "liqid") {
    drivers::LiqidOptions o;
    o.base_url = f.url;
    o.credentials_file = f.credentials_file;
    o.auth = f.auth == "basic" ? drivers::LiqidOptions::Auth::kBasic
                               : drivers::LiqidOptions::Auth::kApiKey;
    o.ca_file = f.ca_file;
    o.verify_tls = f.verify_tls;
    o.connect_timeout_ms = static_cast<long>(f.connect_timeout_ms);
    o.request_timeout_ms = static_cast<long>(f.request_timeout_ms);
    o.host_map = f.host_map;
    o.default_slots = f.slots;
    auto l = drivers::LiqidFabric::create(std::move(o));
    if (!l) return wrap(l.error());
    return std::unique_ptr<Fabric>(std::move(l).value());
  }
  return Error{ErrorCode::kInvalidArgument, label(c) + ": unknown driver"};
}

Status check_fabric_files(const Config& c) {
  if (c.fabric == "sim") return Status::Ok();
  std::string user, password;
  if (Status s = drivers::load_fabric_credentials(c.fabric_config.credentials_file, c.fabric, &user,
                                                  &password);
      !s) {
    return Error{s.error().code, label(c) + ": " + s.error().message};
  }
  return Status::Ok();
}

}  // namespace composer::server
