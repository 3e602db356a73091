// The composition service: compose and release a job's devices on a node, durably.
//
// Every fabric call is preceded by a durable record of the intent (the composition in state
// composing or releasing, with its devices), so after a crash recover() can finish or roll
// back whatever was under way. The in-memory Allocator mirrors the store and is what allocation
// reads; a mutex serialises allocation, while store commits and fabric calls run outside it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/common/work_queue.h"
#include "composer/core/allocator.h"
#include "composer/core/fabric.h"
#include "composer/core/operation_waiter.h"
#include "composer/db/store.h"
#include "composer/model/model.h"

namespace composer {

struct ServiceOptions {
  int64_t compose_timeout_ms = 60000;  // fabric attach, from call to devices reported attached
  int64_t release_timeout_ms = 60000;  // fabric detach
  int64_t poll_interval_ms = 20;       // operation status polling while a fabric call runs
  // Fabric operations (attaches and detaches) running at once per fabric; more wait in a queue
  // (composer.conf's MaxFabricOperations).
  size_t max_fabric_operations = 1024;
  // Threads that carry composes and releases on once their fabric operation ended (record
  // ready, or roll back), and as many that carry them on once a store write is durable.
  size_t completion_threads = 8;
};

struct ComposeInput {
  uint32_t job_id = 0;
  std::string node;
  uint32_t uid = 0;
  std::string user;
  std::string account;
  std::string workload;
  Request request;
};

// What a policy says about one compose call: the workload class the composition counts
// against and the policy window in force; both are recorded with the composition and its events.
struct Admission {
  std::string workload;
  std::string window;
};
// Decides whether `input` may be composed now. `held(workload)` lists the per-node requests of
// that class's live compositions. Runs under the allocation lock, so the check and the
// allocation are one step: it must be quick and must not call back into the service.
using AdmissionCheck = std::function<Expected<Admission>(
    const ComposeInput& input, const std::function<std::vector<Request>(std::string_view)>& held)>;

class CompositionService {
 public:
  CompositionService(db::Store& store, Fabric& fabric, const Clock& clock,
                     ServiceOptions options = {});
  // Tells every fabric change still waited for that composerd is stopping, and waits for the
  // composes and releases under way to answer.
  ~CompositionService();
  CompositionService(const CompositionService&) = delete;
  CompositionService& operator=(const CompositionService&) = delete;

  // Reads the fabric's inventory into the store, then loads the pool and the live
  // compositions from the store. Call once before serving.
  Status start();
  // Installs the policy's compose-time check (set before serving; none by default).
  void set_admission_check(AdmissionCheck check);
  // Finishes or rolls back compositions left in composing/releasing by a previous run.
  // Returns how many it resolved.
  Expected<int> recover();

  // Idempotent: a retry for the same (job, node) and request answers the same composition.
  Expected<Composition> compose(const ComposeInput& input);
  // The same, without holding the caller's thread while the fabric attaches: `done` is called
  // with the answer once, on the caller's thread when it is known at once (a refusal, a repeated
  // request), else on one of the service's completion threads.
  void compose_async(const ComposeInput& input, std::function<void(Expected<Composition>)> done);
  // Idempotent: nullopt when the job never had a composition on the node; the released
  // composition when it is (or already was) released.
  Expected<std::optional<Composition>> release(uint32_t job_id, const std::string& node);
  // The same, without holding the caller's thread while the fabric detaches.
  void release_async(uint32_t job_id, const std::string& node,
                     std::function<void(Expected<std::optional<Composition>>)> done);
  // One job on all of its nodes at once (`input.node` is ignored; the fabric's operations wait
  // their turn in the waiter, not in threads), all or nothing: when a node cannot be composed,
  // what the others got is released again (all at once) and the error of the first such node
  // (in `nodes` order) is returned. Idempotent like compose().
  Expected<std::vector<Composition>> compose_job(const ComposeInput& input,
                                                 const std::vector<std::string>& nodes);
  // The same without holding the caller's thread: `done` is called once, as compose_async's is.
  void compose_job_async(const ComposeInput& input, const std::vector<std::string>& nodes,
                         std::function<void(Expected<std::vector<Composition>>)> done);
  // Releases every live composition of the job, all nodes at once; the released compositions
  // (none when the job has none live: a repeated release). After an error the others were
  // still released; the error names the node.
  Expected<std::vector<Composition>> release_job(uint32_t job_id);
  // The same without holding the caller's thread: every node's detach is started at once and
  // `done` is called once, when the last has ended.
  void release_job_async(uint32_t job_id,
                         std::function<void(Expected<std::vector<Composition>>)> done);

  // A node's hold on the job's ready composition there (Composition::hold): `cause` (the
  // processes that still hold its devices after the job) sets it, "" clears it. While it is
  // set, release() answers kConflict, release_job() and the reconciler leave it as it is:
  // nothing is detached under a live holder. kNotFound without a live composition; kConflict
  // when setting it on one that is not ready. `actor` is recorded with the event.
  Expected<Composition> set_hold(uint32_t job_id, const std::string& node, const std::string& cause,
                                 const std::string& actor);
  // A node drains a device of the job's live composition there that its host never showed
  // after the attach, so that no later job gets it before an admin has looked. kNotFound
  // without a live composition; kInvalidArgument for a device the composition does not hold.
  Expected<Device> drain_unseen(uint32_t job_id, const std::string& node,
                                const std::string& device_id, const std::string& reason,
                                const std::string& actor);
  // A node's host found a GPU of the job's live composition there bad (NVML, a critical XID,
  // gone from the bus): the device is marked failed (health critical, so the failure reactor
  // gives the job holding it its class's reaction) and drained with kHostFailed and `reason`
  // (so no later job gets it). The fabric's health does not clear it (the reconciler leaves
  // it), a restart does not either (the drain reason says where it came from): only resume()
  // does. The node is never drained for it. Repeated, it changes nothing. kNotFound without a
  // live composition; kInvalidArgument for a device the composition does not hold.
  static constexpr std::string_view kHostFailed = "failed on its host: ";
  Expected<Device> fail_reported(uint32_t job_id, const std::string& node,
                                 const std::string& device_id, const std::string& reason,
                                 const std::string& actor);
  // Whether the device's failure came from a host (fail_reported) and stands.
  bool host_failed(const std::string& device_id) const;
  Expected<Device> drain(const std::string& device_id, const std::string& reason,
                         const std::string& actor);
  // Lifts a drain; a failure a host reported (fail_reported) goes with it.
  Expected<Device> resume(const std::string& device_id, const std::string& actor);
  // Drains (or resumes) every device of a failure domain at once, all or none, for a planned
  // maintenance: live compositions keep their devices until they end; the log says when the
  // domain's last one has. kNotFound (naming the pool's domains) when no device is in it.
  Expected<std::vector<Device>> set_domain_drained(const FailureDomain& domain, bool drained,
                                                   const std::string& reason,
                                                   const std::string& actor);
  // An admin's decisions about devices held outside composerd, each a ledger event with the
  // actor. adopt: a foreign device composed into one host is detached from it now (the admin
  // vouches that nothing there uses it) and joins the pool. release_foreign: composerd gives up
  // its claim on a device it attached that no live composition owns (the reconciler would
  // take it back); it stays where it is, foreign, until the fabric frees it.
  Expected<Device> adopt(const std::string& device_id, const std::string& actor);
  Expected<Device> release_foreign(const std::string& device_id, const std::string& actor);

  std::vector<PoolRow> pool_summary() const;
  // Per type, every failure domain some device of the type is in, whatever its state.
  std::map<DeviceType, std::set<FailureDomain>> failure_domains() const;
  // The placement rule of each workload class (the policy's Placement lines), for every
  // composition from now on; empty: every class packs (Allocator::set_placement).
  void set_placement(std::map<std::string, policies::PlacementRule, std::less<>> rules);
  std::vector<Host> hosts() const;
  // The pool's current view of one device.
  std::optional<Device> pooled_device(const std::string& id) const;

  // Every live composition as the pool holds it now: the reconciler's rounds, the failure
  // reactor and the metrics read it.
  struct LiveEntry {
    int64_t id = 0;
    uint32_t job_id = 0;
    std::string node;
    CompositionState state = CompositionState::kComposing;
    Request request;
    std::vector<std::string> devices;
    int64_t since_ms = 0;    // entered its current state
    bool busy = false;       // a compose/release call is working on it right now
    std::string workload{};  // the class it counts against (AdmissionCheck)
    std::string hold{};      // Composition::hold
  };
  std::vector<LiveEntry> live() const;
  // A ready composition holding devices that failed (health critical: reported so by the
  // fabric, or lost by it): those devices and the failure domains they are in (sorted, each
  // once). What the failure reactions (server/failure_reactor.h) and the metrics act on.
  struct Impact {
    LiveEntry entry;
    std::vector<std::string> failed;
    std::vector<FailureDomain> domains;
  };
  std::vector<Impact> failure_impacts() const;
  // Every failure domain of the pool with how many of its devices failed (0 included).
  std::map<FailureDomain, uint32_t> failed_by_domain() const;
  // Holders, read from the fabric by the reconciler. begin_holder_round() before reading the
  // inventory, note_holders(inventory) after: a device the fabric shows attached to a host
  // without composerd's claim, or held otherwise (shared, reserved), that no live composition
  // owns, becomes foreign (store, pool, a "foreign" event); one the fabric no longer shows held
  // stops being foreign, and a claim on a device the fabric shows free is dropped. Devices
  // composed or released since begin_holder_round() are left for the next round (the
  // inventory may predate the change). Returns composerd's orphans: claimed devices attached
  // to the claim's host that no live composition owns (device -> fabric host).
  void begin_holder_round();
  Expected<std::map<std::string, std::string>> note_holders(const FabricInventory& inventory);
  // After the reconciler detached an orphan: composerd's claim on it is done.
  Status unclaim(const std::vector<std::string>& device_ids, const std::string& fabric_host);
  // The reconciler found a device's health changed, or the fabric lost an attachment.
  Status mark_health(const std::string& device_id, Health health, const std::string& detail);
  // Resolves an unfinished composition nobody is working on: composing -> finish (the fabric
  // shows every device attached) or roll back; releasing -> retry the detach. `give_up` (the
  // reconciler's timeout): composing rolls back without asking the fabric, and a detach that
  // fails again marks the composition failed and drains its devices instead of waiting for a
  // retry. Used by recover() and the reconciler's timeouts. `inventory`: the fabric's, if the
  // caller has just read it; null: read when needed.
  Status resolve_unfinished(int64_t composition_id, bool give_up,
                            const FabricInventory* inventory = nullptr);

  // Fabric attach/detach operations that failed or timed out since start, for metrics.
  struct FabricErrors {
    uint64_t attach = 0;
    uint64_t detach = 0;
  };
  FabricErrors fabric_errors() const {
    return {attach_errors_.load(std::memory_order_relaxed),
            detach_errors_.load(std::memory_order_relaxed)};
  }

  Fabric& fabric() { return fabric_; }
  db::Store& store() { return store_; }

 private:
  // note_holders of the devices `seen` in an inventory whose `attached` and `held` are given.
  Expected<std::map<std::string, std::string>> note_holders(
      const std::vector<std::string>& seen, const std::map<std::string, std::string>& attached,
      const std::map<std::string, std::string>& held);
  using Key = std::pair<uint32_t, std::string>;

  // The rest of a release once the fabric's detach ended: record it released (answers the
  // composition as recorded), or (give_up) failed with its devices drained (nullopt), or leave
  // it releasing for a retry (the error).
  Expected<std::optional<Composition>> finish_release(const LiveEntry& entry, const Key& key,
                                                      bool give_up, const Status& detached);
  // The rest of a compose once the fabric's attach ended: record it ready, or roll it back.
  void finish_compose(const LiveEntry& entry, const std::string& host, Status attached,
                      std::function<void(Expected<Composition>)> done);
  // The rest of a release once it is recorded releasing: detach, then record it released
  // (without waiting for the write), or, when the detach failed, finish_release.
  void detach_released(const LiveEntry& entry, const Key& key,
                       std::function<void(Expected<std::optional<Composition>>)> done);
  // A release once the store has (or has not) recorded it released.
  Expected<std::optional<Composition>> recorded_released(const LiveEntry& entry, const Key& key,
                                                         Expected<Composition> released);
  // An answer the store gives on its writer's thread, handed to `next` on a step thread
  // (Store::Answer); the service waits for every one of them before it goes.
  template <typename T>
  db::Store::Answer<T> then(std::function<void(Expected<T>)> next);
  Status detach_devices(const std::string& node, const std::vector<std::string>& ids,
                        int64_t timeout_ms);
  // The same by the fabric's name for the host (a host composerd may not serve).
  Status detach_from_host(const std::string& host, const std::vector<std::string>& ids,
                          int64_t timeout_ms);
  std::string fabric_host(const std::string& node) const;
  // Waits (bounded) while the entry for `key` is busy; returns it or nullopt. Needs mu_.
  std::optional<LiveEntry> wait_idle(std::unique_lock<std::mutex>& lock, const Key& key,
                                     int64_t timeout_ms);
  void forget(const Key& key, const std::vector<std::string>& free_devices);
  // No call works on the entry any more: those waiting for it (wait_idle) go on.
  void unbusy(const Key& key);
  // A write that would settle the entry failed: it stays live as the store still has it
  // (not busy, same state, its devices held), and the failure is logged.
  void keep_unsettled(const Key& key, std::string_view what, const Error& cause);
  // Records a refused compose as a ledger event of kind "refused", once per refusal episode,
  // and returns `why`.
  Error refuse(const ComposeInput& in, Error why);
  Expected<Composition> fail_compose(const LiveEntry& entry, const std::string& host,
                                     const std::string& why);
  // resolve_unfinished() for an entry the caller has already marked busy. `inventory`: the
  // fabric's, already read (recover() reads it once for all); null: read here when needed.
  Status resolve_unfinished_entry(const LiveEntry& entry, const Key& key, bool give_up,
                                  const FabricInventory* inventory);
  // Whether the job's live composition on the node holds the device (the ids a node may
  // drain or report failed): kNotFound, kInvalidArgument, as drain_unseen says.
  Status held_by(uint32_t job_id, const std::string& node, const std::string& device_id) const;
  // Drains devices the fabric may still hold, in the store and the pool, with one reason.
  void drain_devices(const std::vector<std::string>& ids, const std::string& reason);

  db::Store& store_;
  Fabric& fabric_;
  const Clock& clock_;
  ServiceOptions options_;
  AdmissionCheck admission_;
  std::atomic<uint64_t> attach_errors_{0};
  std::atomic<uint64_t> detach_errors_{0};

  mutable std::mutex mu_;
  std::condition_variable changed_;
  Allocator allocator_;
  std::map<Key, LiveEntry> live_;
  // Devices whose failure a host reported (fail_reported) until an admin resumes them.
  std::set<std::string> host_failed_;
  // Devices allocated or given back since begin_holder_round(): their holder waits a round.
  std::set<std::string> touched_;
  // The refusal episode of each (job, node) refused in the last kRefusalEpisodeGapMs: its
  // code and when it was last refused (refuse()).
  struct Refusal {
    ErrorCode code = ErrorCode::kInternal;
    int64_t last_ms = 0;
  };
  static constexpr int64_t kRefusalEpisodeGapMs = 10000;
  std::mutex refusals_mu_;
  std::map<Key, Refusal> refusals_;
  // The steps of composes and releases after a store write (then()), and how many are still
  // to come.
  std::mutex steps_mu_;
  std::condition_variable steps_idle_;
  size_t steps_pending_ = 0;
  std::unique_ptr<WorkQueue> steps_;
  // Last: stopped first, while what its completions use still stands.
  std::unique_ptr<OperationWaiter> waiter_;
};

}  // namespace composer
