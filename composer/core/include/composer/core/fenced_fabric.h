// A driver that changes the fabric only while its composerd may (several composerd on one
// PostgreSQL store, one of them active): attach, detach and batches are refused with
// kUnavailable, before they reach the driver, once `may_act` says no; reads pass. Each change
// is also preceded by a durable intent that the store refuses to a composerd that lost its
// leadership; this check covers a change whose intent was written before the loss (a process
// stopped between the two) (fenced_fabric_test).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "composer/core/forwarding_fabric.h"

namespace composer {

class FencedFabric final : public ForwardingFabric {
 public:
  FencedFabric(std::unique_ptr<Fabric> inner, std::function<bool()> may_act)
      : ForwardingFabric(std::move(inner)), may_act_(std::move(may_act)) {}

  Expected<Operation> attach(const std::string& host, const std::vector<std::string>& ids) override;
  Expected<Operation> detach(const std::string& host, const std::vector<std::string>& ids) override;
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override;

 private:
  Status may_change() const;
  std::function<bool()> may_act_;
};

}  // namespace composer
