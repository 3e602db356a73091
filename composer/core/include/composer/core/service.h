// The composition service: compose and release a job's devices on a node, durably, and
// settle what a crash or a timeout left unfinished.
//
// Every fabric call is preceded by a durable record of the intent (the composition in state
// composing or releasing, with its devices), so after a crash recover() can finish or roll
// back whatever was under way. The live pool (live_pool.h) mirrors the store and is what
// allocation reads; its lock serialises allocation, while store commits and fabric calls run
// outside it. Holds, drains and foreign devices are the device administration's
// (device_admin.h), on the same pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/common/work_queue.h"
#include "composer/core/fabric.h"
#include "composer/core/live_pool.h"
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

class CompositionService {
 public:
  // `pool` is shared with the device administration and the readers; it outlives the service.
  CompositionService(db::Store& store, Fabric& fabric, LivePool& pool, const Clock& clock,
                     ServiceOptions options = {});
  // Tells every fabric change still waited for that composerd is stopping, and waits for the
  // composes and releases under way to answer.
  ~CompositionService();
  CompositionService(const CompositionService&) = delete;
  CompositionService& operator=(const CompositionService&) = delete;

  // Reads the fabric's inventory into the store, then loads the pool and the live
  // compositions from the store. Call once before serving.
  Status start();
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

  // A detach outside any composition (DeviceAdmin::adopt), by the fabric's name for the host,
  // waited for and counted like the others.
  Status detach_from_host(const std::string& host, const std::vector<std::string>& ids,
                          int64_t timeout_ms);

  Fabric& fabric() { return fabric_; }
  db::Store& store() { return store_; }
  const ServiceOptions& options() const { return options_; }

 private:
  using Key = LivePool::Key;
  using LiveEntry = LivePool::LiveEntry;

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
                                                         Expected<Composition>&& released);
  // An answer the store gives on its writer's thread, handed to `next` on a step thread
  // (Store::Answer); the service waits for every one of them before it goes.
  template <typename T>
  db::Store::Answer<T> then(std::function<void(Expected<T>)> next);
  Status detach_devices(const std::string& node, const std::vector<std::string>& ids,
                        int64_t timeout_ms);
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

  db::Store& store_;
  Fabric& fabric_;
  LivePool& pool_;
  const Clock& clock_;
  ServiceOptions options_;
  std::atomic<uint64_t> attach_errors_{0};
  std::atomic<uint64_t> detach_errors_{0};

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
