// A driver behind a wall no exception passes: every call that reads a fabric manager's answers
// (inventory, attach, detach, batches, operation states, health) returns the exception a
// malformed answer raised (a JSON value of another type than the driver expects, deep in an
// answer) as a fabric error instead. composerd calls drivers from its reconciler, poller and
// starter threads, where an exception would end the daemon.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "composer/core/forwarding_fabric.h"

namespace composer {

class GuardedFabric final : public ForwardingFabric {
 public:
  explicit GuardedFabric(std::unique_ptr<Fabric> inner) : ForwardingFabric(std::move(inner)) {}

  Expected<FabricInventory> inventory() override;
  Expected<Operation> attach(const std::string& host, const std::vector<std::string>& ids) override;
  Expected<Operation> detach(const std::string& host, const std::vector<std::string>& ids) override;
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override;
  Expected<Operation> operation_status(const std::string& id) override;
  Expected<std::vector<std::pair<std::string, Health>>> health() override;
};

// A networked driver made by `create` (its discovery reads the fabric manager's answers as its
// calls do), behind a GuardedFabric; an exception discovery raised is a fabric error.
template <typename Create>
Expected<std::unique_ptr<Fabric>> guarded_driver(Create&& create) {
  try {
    auto made = create();
    if (!made) return made.error();
    return std::unique_ptr<Fabric>(std::make_unique<GuardedFabric>(std::move(made).value()));
  } catch (const std::exception& e) {
    return Error{ErrorCode::kFabric,
                 std::string("discovery failed on an answer it could not read: ") + e.what()};
  }
}

}  // namespace composer
