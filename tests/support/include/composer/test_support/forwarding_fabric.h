// A Fabric that passes every call on to another one it does not own: lets a test hand a
// harness's fabric to something that wants to own one (a MultiFabric), or change one call of
// a real fabric while the others stay real. Header-only; the test links composer::core.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "composer/core/fabric.h"

namespace composer::test_support {

class ForwardingFabric : public Fabric {
 public:
  explicit ForwardingFabric(Fabric& to) : to_(to) {}
  std::string_view driver() const override { return to_.driver(); }
  Expected<FabricInventory> inventory() override { return to_.inventory(); }
  Expected<Operation> attach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    return to_.attach(host, ids);
  }
  Expected<Operation> detach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    return to_.detach(host, ids);
  }
  std::string lane(const std::string& host) const override { return to_.lane(host); }
  bool serialises_changes(const std::string& lane) const override {
    return to_.serialises_changes(lane);
  }
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override {
    return to_.apply_batch(changes);
  }
  Expected<Operation> operation_status(const std::string& id) override {
    return to_.operation_status(id);
  }
  Expected<std::vector<std::pair<std::string, Health>>> health() override { return to_.health(); }

 protected:
  Fabric& to_;
};

}  // namespace composer::test_support
