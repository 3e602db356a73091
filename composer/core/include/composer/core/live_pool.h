// The live pool: the allocator (the in-memory view of the pool devices are picked from) and the
// live compositions, under one lock, shared by the composition service (compose and release,
// service.h) and the device administration (holds, drains, foreign devices, device_admin.h).
//
// Besides the entries those two work on, it answers the read views the rest of composerd acts
// on (the pool, the live compositions, failure impacts) and keeps the reconciler's holder
// round: which devices the fabric shows held outside composerd. What it changes in memory it
// writes to the store first where the store keeps it (health, holders, claims); the services
// write the compositions themselves.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/core/allocator.h"
#include "composer/core/fabric.h"
#include "composer/db/store.h"
#include "composer/model/model.h"

namespace composer {

struct ComposeInput {
  JobOwner owner{};
  std::string node;
  Request request;
  // The job's --compose-mem-policy (to_string(MemPolicy)); empty: not given.
  std::string mem_policy{};
};

// What a policy says about one compose call: the workload class the composition counts
// against, the policy window in force, and the memory policy its tasks run under (the job's,
// or its class's default: policies::class_mem_policy); all are recorded with the composition.
struct Admission {
  std::string workload;
  std::string window;
  std::string mem_policy{};
};
// Decides whether `input` may be composed now. `held(workload)` lists the per-node requests of
// that class's live compositions. Runs under the allocation lock, so the check and the
// allocation are one step: it must be quick and must not call back into the pool.
using AdmissionCheck = std::function<Expected<Admission>(
    const ComposeInput& input, const std::function<std::vector<Request>(std::string_view)>& held)>;

// "job J on node N", the way every message about a live composition names it.
std::string job_on_node(uint32_t job_id, const std::string& node);

class LivePool {
 public:
  // A live composition: its job and node.
  using Key = std::pair<uint32_t, std::string>;
  // Every live composition as the pool holds it now.
  struct LiveEntry {
    int64_t id = 0;
    uint32_t job_id = 0;
    std::string node;
    CompositionState state = CompositionState::kComposing;
    Request request;
    std::vector<std::string> devices;
    int64_t since_ms = 0;    // entered its current state
    bool busy = false;       // a call is working on it right now
    std::string workload{};  // the class it counts against (AdmissionCheck)
    std::string hold{};      // Composition::hold
  };
  // A ready composition holding devices that failed (health critical: reported so by the
  // fabric, or lost by it): those devices and the failure domains they are in (sorted, each
  // once). What the failure reactions (server/failure_reactor.h) and the metrics act on
  // (live_pool_test, FailureImpactsNameTheReadyCompositionsFailedDevicesHit).
  struct Impact {
    LiveEntry entry;
    std::vector<std::string> failed;
    std::vector<FailureDomain> domains;
  };

  LivePool(db::Store& store, const Clock& clock);
  LivePool(const LivePool&) = delete;
  LivePool& operator=(const LivePool&) = delete;

  // Replaces the pool with the store's hosts, devices and live compositions; `host_failed`:
  // the devices whose failure a host reported (CompositionService::start).
  void load(const std::vector<Host>& hosts, std::vector<Device> devices,
            const std::vector<Composition>& live, const std::vector<std::string>& host_failed);
  // Installs the policy's compose-time check (set before serving; none by default).
  void set_admission_check(AdmissionCheck check);
  // The placement rule of each workload class (the policy's Placement lines), for every
  // composition from now on; empty: every class packs (Allocator::set_placement).
  void set_placement(std::map<std::string, policies::PlacementRule, std::less<>> rules);

  // Read views.
  std::vector<PoolRow> pool_summary() const;
  // Per type, every failure domain some device of the type is in, whatever its state.
  std::map<DeviceType, std::set<FailureDomain>> failure_domains() const;
  std::vector<Host> hosts() const;
  // The pool's current view of one device.
  std::optional<Device> pooled_device(const std::string& id) const;
  // Every device of a failure domain.
  std::vector<std::string> in_domain(const FailureDomain& domain) const;
  // The fabric's name for the node's host (the node's own name when the pool has no such host).
  std::string fabric_host(const std::string& node) const;
  // Every live composition: the reconciler's rounds, the failure reactor and the metrics read it.
  std::vector<LiveEntry> live() const;
  std::vector<Impact> failure_impacts() const;
  // Every failure domain of the pool with how many of its devices failed (0 included).
  std::map<FailureDomain, uint32_t> failed_by_domain() const;
  // Whether the device's failure came from a host (DeviceAdmin::fail_reported) and stands.
  bool host_failed(const std::string& device_id) const;

  // Holders, read from the fabric by the reconciler. begin_holder_round() before reading the
  // inventory, note_holders(inventory) after: a device the fabric shows attached to a host
  // without composerd's claim, or held otherwise (shared, reserved), that no live composition
  // owns, becomes foreign (store, pool, a "foreign" event); one the fabric no longer shows held
  // stops being foreign, and a claim on a device the fabric shows free is dropped. Devices
  // composed or released since begin_holder_round() (touch()) are left for the next round
  // (the inventory may predate the change). Returns composerd's orphans: claimed devices
  // attached to the claim's host that no live composition owns (device -> fabric host).
  // (live_pool_test, TheHolderRoundLeavesWhatChangedSinceItBegan)
  void begin_holder_round();
  Expected<std::map<std::string, std::string>> note_holders(const FabricInventory& inventory);
  // The same for the devices `seen` in an inventory whose `attached` and `held` are given.
  Expected<std::map<std::string, std::string>> note_holders(
      const std::vector<std::string>& seen, const std::map<std::string, std::string>& attached,
      const std::map<std::string, std::string>& held);
  // A device whose holder changes now: the holder round leaves it until the next.
  void touch(const std::string& device_id);
  // After the reconciler detached an orphan: composerd's claim on it is done.
  Status unclaim(const std::vector<std::string>& device_ids, const std::string& fabric_host);
  // The reconciler found a device's health changed, or the fabric lost an attachment.
  Status mark_health(const std::string& device_id, Health health, const std::string& detail);
  // The pool's side of a holder the store already records.
  void set_holder(const std::string& device_id, const std::string& holder);

  // Drains and host-reported failures. set_drained: the pool's side of a drain (or resume)
  // the store already records. drain_devices: composerd's own drain of devices the fabric may
  // still hold, store and pool, one by one (a device the store cannot mark is still kept out).
  void set_drained(const std::vector<std::string>& ids, bool drained, const std::string& reason);
  void drain_devices(const std::vector<std::string>& ids, const std::string& reason);
  // The start of the drain reason of a failure a host reported (DeviceAdmin::fail_reported):
  // what CompositionService::start finds it again by after a restart.
  static constexpr std::string_view kHostFailed = "failed on its host: ";
  void mark_host_failed(const std::string& device_id);
  // Forgets a host-reported failure; whether there was one.
  bool clear_host_failed(const std::string& device_id);

  // The entries the services work on. A call that works on an entry marks it busy, and the
  // others wait for it (bounded) or answer that it is busy.
  //
  // Compose: the (job, node)'s live entry when it has one (`existing`, after waiting while it
  // is busy; nothing is reserved), else the admission check and the allocation in one step:
  // the devices taken for a new busy entry in state composing (`entry`, with the policy
  // window it is composed under). An error is a refusal (admission or allocation), as they
  // word it (live_pool_test, ReserveAdmitsAndAllocatesInOneStep).
  struct Reservation {
    std::optional<LiveEntry> existing;
    LiveEntry entry;
    std::string window;
    std::string mem_policy;  // Admission::mem_policy; empty for a request without memory
  };
  Expected<Reservation> reserve(const ComposeInput& in, int64_t wait_ms);
  // The composition the store created for a reserved entry.
  void record_id(const Key& key, int64_t id);
  // Waits (at most wait_ms) while another call works on the entry, then marks it busy for the
  // caller if `check` passes it. nullopt without a live entry; the entry still busy (not
  // taken) when the wait ran out; check's error, untaken (live_pool_test,
  // AnEntryIsTakenByOneCallAtATime).
  Expected<std::optional<LiveEntry>> take(const Key& key, int64_t wait_ms,
                                          const std::function<Status(const LiveEntry&)>& check);
  // The same by composition id, without waiting: nullopt when it is not live (resolved
  // already); kConflict while another call works on it.
  Expected<std::optional<std::pair<Key, LiveEntry>>> take_id(int64_t composition_id);
  // The ids of the live compositions not ready (left composing or releasing).
  std::vector<int64_t> unfinished() const;
  // The nodes of the job's live compositions, each with its hold ("" when none).
  std::vector<std::pair<std::string, std::string>> job_nodes(uint32_t job_id) const;
  bool contains(const Key& key) const;
  // The entry enters `state` now; `busy` false lets those waiting for it go on.
  void set_state(const Key& key, CompositionState state, bool busy);
  void set_hold(const Key& key, const std::string& hold);
  // No call works on the entry any more: those waiting for it go on.
  void unbusy(const Key& key);
  // The composition ended: its entry goes and `free_devices` go back to the pool (the log says
  // when a drained failure domain has no composition left).
  void forget(const Key& key, const std::vector<std::string>& free_devices);
  // Whether the job's live composition on the node holds the device (the ids a node may drain
  // or report failed): kNotFound without a live composition, kInvalidArgument for a device it
  // does not hold.
  Status held_by(uint32_t job_id, const std::string& node, const std::string& device_id) const;

 private:
  // Waits (bounded) while the entry for `key` is busy; returns it or nullopt. Needs mu_.
  std::optional<LiveEntry> wait_idle(std::unique_lock<std::mutex>& lock, const Key& key,
                                     int64_t timeout_ms);

  db::Store& store_;
  const Clock& clock_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  AdmissionCheck admission_;
  Allocator allocator_;
  std::map<Key, LiveEntry> live_;
  // Devices whose failure a host reported (fail_reported) until an admin resumes them.
  std::set<std::string> host_failed_;
  // Devices allocated or given back since begin_holder_round(): their holder waits a round.
  std::set<std::string> touched_;
};

}  // namespace composer
