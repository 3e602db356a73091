#include "composer/drivers/redfish_fabric.h"

#include <memory>
#include <utility>

#include "redfish_driver.h"

namespace composer::drivers {
namespace {

Error bad_option(std::string message) {
  return Error{ErrorCode::kInvalidArgument, "redfish options: " + std::move(message)};
}

}  // namespace

RedfishFabric::RedfishFabric(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedfishFabric::~RedfishFabric() {
  if (impl_) impl_->logout();
}

Expected<std::unique_ptr<RedfishFabric>> RedfishFabric::create(RedfishOptions o) {
  if (Status s = check_fabric_manager_options(&o, "redfish", "/redfish/v1", "system id"); !s) {
    return s.error();
  }
  if (o.poll_interval_ms <= 0 || o.task_wait_ms < 0) {
    return bad_option("the task poll interval must be positive and the task wait 0 or more ms");
  }
  auto impl = std::make_unique<Impl>(std::move(o));
  if (Status s = impl->discover(); !s) {
    impl->logout();
    return s.error();
  }
  return std::unique_ptr<RedfishFabric>(new RedfishFabric(std::move(impl)));
}

Expected<FabricInventory> RedfishFabric::inventory() { return impl_->inventory(); }

Expected<Operation> RedfishFabric::attach(const std::string& fabric_host,
                                          const std::vector<std::string>& device_ids) {
  return impl_->apply(fabric_host, device_ids, true);
}

Expected<Operation> RedfishFabric::detach(const std::string& fabric_host,
                                          const std::vector<std::string>& device_ids) {
  return impl_->apply(fabric_host, device_ids, false);
}

Expected<Operation> RedfishFabric::operation_status(const std::string& operation_id) {
  if (operation_id.empty()) return Operation{"", OperationState::kDone, ""};
  auto steps = Impl::decode(operation_id);
  if (!steps) {
    return Error{ErrorCode::kNotFound, "redfish: unknown operation '" + operation_id +
                                           "' (not an id this driver hands out)"};
  }
  auto op = impl_->settle(std::move(*steps), 0);
  if (op) op->id = operation_id;
  return op;
}

Expected<std::vector<std::pair<std::string, Health>>> RedfishFabric::health() {
  auto inv = impl_->inventory();
  if (!inv) return inv.error();
  std::vector<std::pair<std::string, Health>> out;
  for (const Device& d : inv->devices) out.emplace_back(d.id, d.health);
  return out;
}

}  // namespace composer::drivers
