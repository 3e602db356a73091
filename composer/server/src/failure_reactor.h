// What composerd does to the running jobs a failed device (or a whole failed domain) hits:
// after each reconciler pass, every job holding a device that failed (health critical: the
// fabric reported it so, or lost its attachment) gets its class's reaction once
// (policies::FailureReaction, the policy's OnFailure lines; notify without a policy):
//   requeue  `scontrol requeue JOB`: Slurm ends the job and its epilog releases its devices;
//            when it starts again it composes anew, away from the failed ones. Bounded: a job
//            already requeued MaxRequeues times for failures is notified instead.
//   notify   `scontrol notify JOB MESSAGE`: the job keeps running, degraded.
//   none     nothing is done to the job.
// Each reaction is one ledger event of the job ("requeued", "degraded" or "failure_ignored")
// naming the failed devices, their domains, the class and what was done; that event is also
// what makes the reaction happen once per composition, across restarts of composerd.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/core/live_pool.h"
#include "composer/db/store.h"
#include "composer/policies/policy.h"

namespace composer::server {

// How the reactor reaches Slurm: by default scontrol (slurm_jobs.h), replaceable in tests.
struct SlurmJobActions {
  std::function<Status(uint32_t job)> requeue;
  std::function<Status(uint32_t job, const std::string& message)> notify;
};
// scontrol requeue / scontrol notify, with SLURM_CONF=`slurm_conf` when given.
SlurmJobActions scontrol_job_actions(const std::string& scontrol, const std::string& slurm_conf,
                                     int timeout_ms);

// For a composerd that does not reach Slurm (SlurmJobCheck=no and SlurmSync=no): every call
// fails saying so, and each reaction is recorded as degraded with that cause.
SlurmJobActions no_slurm_job_actions();

// The class's reaction in the policy in force.
using ReactionOf = std::function<policies::FailureReaction(std::string_view workload)>;

class FailureReactor {
 public:
  FailureReactor(const LivePool& pool, db::Store& store, ReactionOf reaction_of,
                 SlurmJobActions slurm, const Clock& clock);

  struct Report {
    int requeued = 0;
    int notified = 0;  // notify, and requeues turned into notify (bound reached, refused)
    int ignored = 0;
    int errors = 0;  // ledger reads or writes that failed: retried next pass
  };
  // One pass over the jobs failed devices hit (thread-safe; passes never overlap).
  Report run_once();
  // Totals since start, for /metrics.
  Report totals() const;

 private:
  const LivePool& pool_;
  db::Store& store_;
  ReactionOf reaction_of_;
  SlurmJobActions slurm_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::mutex pass_mu_;
  Report totals_;
};

}  // namespace composer::server
