#include "composer/core/guarded_fabric.h"

#include <exception>
#include <string_view>

namespace composer {
namespace {

// Runs `call`; an exception it throws becomes the fabric error `what` failed with.
template <typename F>
auto guarded(std::string_view driver, std::string_view what, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    return Error{ErrorCode::kFabric, std::string(driver) + ": " + std::string(what) +
                                         " failed on an answer it could not read: " + e.what()};
  } catch (...) {
    return Error{ErrorCode::kFabric, std::string(driver) + ": " + std::string(what) +
                                         " failed on an answer it could not read"};
  }
}

}  // namespace

Expected<FabricInventory> GuardedFabric::inventory() {
  return guarded(driver(), "reading the inventory", [&] { return inner_.inventory(); });
}

Expected<Operation> GuardedFabric::attach(const std::string& host,
                                          const std::vector<std::string>& ids) {
  return guarded(driver(), "attach", [&] { return inner_.attach(host, ids); });
}

Expected<Operation> GuardedFabric::detach(const std::string& host,
                                          const std::vector<std::string>& ids) {
  return guarded(driver(), "detach", [&] { return inner_.detach(host, ids); });
}

Expected<BatchStarted> GuardedFabric::apply_batch(const std::vector<FabricChange>& changes) {
  return guarded(driver(), "a batch of changes", [&] { return inner_.apply_batch(changes); });
}

Expected<Operation> GuardedFabric::operation_status(const std::string& id) {
  return guarded(driver(), "reading an operation's state",
                 [&] { return inner_.operation_status(id); });
}

Expected<std::vector<std::pair<std::string, Health>>> GuardedFabric::health() {
  return guarded(driver(), "reading health", [&] { return inner_.health(); });
}

}  // namespace composer
