// The in-memory view of the pool that composerd allocates from, and the allocator itself.
// Kept in step with the store by the composition service; rebuilt from the store at start.
// Not thread-safe: the service serialises access with its own mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"
#include "composer/policies/policy.h"

namespace composer {

class Allocator {
 public:
  Allocator();
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Replaces everything. Devices carry their owner (composition_id, node) if attached. Taken
  // by value: a caller that moves its list in holds the pool once, not twice.
  void load(const std::vector<Host>& hosts, std::vector<Device> devices);
  void upsert_host(const Host& host);
  // Adds or updates a device's static facts and health; keeps drain state and owner.
  void upsert_device(const Device& device);

  const Host* host(std::string_view node) const;
  const Device* device(std::string_view id) const;
  std::vector<Host> hosts() const;
  // The ids of the devices in `domain`, sorted; and, per type, every domain some device of
  // the type is in, whatever its state.
  std::vector<std::string> in_domain(const FailureDomain& domain) const;
  std::map<DeviceType, std::set<FailureDomain>> domains() const;
  // Every failure domain of the pool with how many of its devices failed (health critical),
  // 0 included: one pass over the devices.
  std::map<FailureDomain, uint32_t> failed_by_domain() const;

  // Picks devices for `request` on `node` without changing anything. Deterministic for the
  // same state. All or nothing: GPUs (of request.gpu_model when set), memory blocks whose
  // capacities add up to at least mem_bytes, NVMe drives; only from zones the host reaches,
  // nearest zone first; a job's GPUs in one zone when any one zone can serve them all;
  // never drained, critical, foreign or owned devices; within the host's attach slots (counting
  // what the node already holds). Errors: kNotFound for an unknown node; kInsufficient with a
  // sentence naming the type, what was asked and what is free/allowed.
  //
  // Under placement rules (set_placement), `workload` names the job's class: its rule, and
  // the avoid-shared rules of the other classes, choose among the devices first (see
  // policies::PlacementRule), still all or nothing and deterministically; a request the rules
  // leave short is kInsufficient with the sentence naming the rule, and never placed against
  // it. A class without a rule packs.
  Expected<std::vector<std::string>> allocate(std::string_view node, const Request& request,
                                              std::string_view workload = {}) const;

  // The placement rule of each class; replaces the ones before. Empty: every class packs.
  void set_placement(std::map<std::string, policies::PlacementRule, std::less<>> rules);
  const policies::PlacementRule& placement(std::string_view workload) const;

  // Marks devices owned by composition `composition_id` on `node` (of class `workload`, for
  // the avoid-shared rules) / free again.
  void take(std::string_view node, const std::vector<std::string>& ids, int64_t composition_id,
            std::string_view workload = {});
  void give_back(const std::vector<std::string>& ids);
  void set_drained(std::string_view id, bool drained, std::string_view reason);
  void set_health(std::string_view id, Health health);
  // Who holds the device outside composerd (empty: nobody); a held device is never allocated.
  void set_holder(std::string_view id, std::string_view holder);

  // Requests that could never be served, whatever is attached: larger than the whole
  // reachable pool of the node or than its attach slots, or an unknown GPU model.
  // kInvalidArgument with the sentence; Ok otherwise.
  // Under the placement rule of `workload`: a spread over more domains than the request has
  // devices (or memory attach slots), or than the node reaches; fewer devices in a domain of
  // the rule's level than asked. The sentence names the rule.
  Status check_possible(std::string_view node, const Request& request,
                        std::string_view workload = {}) const;

  // Sorted by type, model, zone.
  std::vector<PoolRow> summary() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer
