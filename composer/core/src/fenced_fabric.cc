#include "composer/core/fenced_fabric.h"

namespace composer {

Status FencedFabric::may_change() const {
  if (may_act_()) return Status::Ok();
  return Error{ErrorCode::kUnavailable,
               "this composerd is no longer the active one: it changes nothing on the fabric"};
}

Expected<Operation> FencedFabric::attach(const std::string& host,
                                         const std::vector<std::string>& ids) {
  if (Status s = may_change(); !s) return s.error();
  return inner_.attach(host, ids);
}

Expected<Operation> FencedFabric::detach(const std::string& host,
                                         const std::vector<std::string>& ids) {
  if (Status s = may_change(); !s) return s.error();
  return inner_.detach(host, ids);
}

Expected<BatchStarted> FencedFabric::apply_batch(const std::vector<FabricChange>& changes) {
  if (Status s = may_change(); !s) return s.error();
  return inner_.apply_batch(changes);
}

}  // namespace composer
