// A driver behind a wall no exception passes: every call that reads a fabric manager's answers
// (inventory, attach, detach, batches, operation states, health) returns the exception a
// malformed answer raised (a JSON value of another type than the driver expects, deep in an
// answer) as a fabric error instead. composerd calls drivers from its reconciler, poller and
// starter threads, where an exception would end the daemon.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "composer/core/fabric.h"

namespace composer {

class GuardedFabric final : public Fabric {
 public:
  explicit GuardedFabric(std::unique_ptr<Fabric> inner) : inner_(std::move(inner)) {}

  std::string_view driver() const override { return inner_->driver(); }
  Expected<FabricInventory> inventory() override;
  Expected<Operation> attach(const std::string& host, const std::vector<std::string>& ids) override;
  Expected<Operation> detach(const std::string& host, const std::vector<std::string>& ids) override;
  std::string lane(const std::string& host) const override { return inner_->lane(host); }
  bool serialises_changes(const std::string& lane) const override {
    return inner_->serialises_changes(lane);
  }
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override;
  Expected<Operation> operation_status(const std::string& id) override;
  Expected<std::vector<std::pair<std::string, Health>>> health() override;

 private:
  std::unique_ptr<Fabric> inner_;
};

}  // namespace composer
