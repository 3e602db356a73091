// A driver that passes every call on to another one: the base of the wrappers that change a
// few calls of the driver inside (FencedFabric, GuardedFabric, the metered and host-domain
// fabrics of composerd, test fabrics), so that each overrides only what it changes. It owns the
// driver inside, or borrows one the caller keeps alive.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "composer/core/fabric.h"

namespace composer {

class ForwardingFabric : public Fabric {
 public:
  explicit ForwardingFabric(std::unique_ptr<Fabric> owned)
      : owned_(std::move(owned)), inner_(*owned_) {}
  explicit ForwardingFabric(Fabric& borrowed) : inner_(borrowed) {}

  std::string_view driver() const override { return inner_.driver(); }
  Expected<FabricInventory> inventory() override { return inner_.inventory(); }
  Expected<Operation> attach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    return inner_.attach(host, ids);
  }
  Expected<Operation> detach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    return inner_.detach(host, ids);
  }
  std::string lane(const std::string& host) const override { return inner_.lane(host); }
  bool serialises_changes(const std::string& lane) const override {
    return inner_.serialises_changes(lane);
  }
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override {
    return inner_.apply_batch(changes);
  }
  Expected<Operation> operation_status(const std::string& id) override {
    return inner_.operation_status(id);
  }
  Expected<std::vector<std::pair<std::string, Health>>> health() override {
    return inner_.health();
  }

 private:
  std::unique_ptr<Fabric> owned_;  // empty when borrowed; declared first: inner_ refers to it

 protected:
  Fabric& inner_;
};

}  // namespace composer
