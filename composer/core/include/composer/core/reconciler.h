// The reconciler: keeps composerd's records and the fabric in agreement.
//
// Each pass (run_once) it
//  - settles compositions stuck in composing or releasing past their timeout;
//  - detaches devices the fabric shows attached that no live composition owns, once they
//    have been seen so for the grace period (a fabric-side attach composerd never made, or
//    one left by a rollback that could not finish);
//  - marks failed (health critical) devices recorded as attached that the fabric lost;
//  - copies health changes reported by the fabric into the records;
//  - releases compositions of jobs Slurm no longer runs (a node that rebooted never ran its
//    epilog), when a job source is given.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "composer/common/clock.h"
#include "composer/core/live_pool.h"
#include "composer/core/service.h"

namespace composer {

// The ids of the jobs Slurm has running (or completing) now. An error skips the check for
// that pass: an unreachable slurmctld must never release a running job's devices.
using ActiveJobs = std::function<Expected<std::set<uint32_t>>()>;

struct ReconcilerOptions {
  int64_t interval_ms = 10000;
  int64_t orphan_grace_ms = 60000;
  int64_t stuck_after_ms = 120000;  // composing/releasing longer than this is stuck
  ActiveJobs active_jobs;           // empty: do not compare with Slurm
  // The nodes Slurm shows drained or draining. A composition of an ended job on such a node is
  // kept (an epilog that found its devices still in use drained the node: detaching them now
  // would pull them from under the holder) until the node is resumed, as EpilogSlurmctld keeps
  // it. Empty: no node is drained. Asked only when active_jobs is set; when it fails, no
  // composition of an ended job is released that pass.
  std::function<Expected<std::set<std::string>>()> drained_nodes;
  // Runs at the end of every pass, on the reconciler's thread (the failure reactions); empty:
  // nothing.
  std::function<void()> after_pass;
};

struct ReconcileReport {
  int stuck_settled = 0;
  int orphans_detached = 0;
  int lost_marked_failed = 0;
  int health_changes = 0;
  int ended_jobs_released = 0;
  int errors = 0;
};

class Reconciler {
 public:
  // Settles and releases through `service`; reads and records holders and health in `pool`.
  Reconciler(CompositionService& service, LivePool& pool, const Clock& clock,
             ReconcilerOptions options);
  ~Reconciler();
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  ReconcileReport run_once();
  // Runs passes every interval on a thread of its own until stop() (or destruction).
  void start();
  void stop();

  // Totals since start, for metrics and health.
  ReconcileReport totals() const;

 private:
  CompositionService& service_;
  LivePool& pool_;
  const Clock& clock_;
  ReconcilerOptions options_;
  std::map<std::string, int64_t> orphan_seen_ms_;  // device id -> first seen unowned
  std::map<int64_t, int64_t> gone_seen_ms_;        // composition id -> job first seen gone
  std::set<int64_t> kept_;  // said once: kept while its node is drained or holds them

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  ReconcileReport totals_;
  std::thread thread_;
};

}  // namespace composer
