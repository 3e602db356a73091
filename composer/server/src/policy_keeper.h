// The time-of-day policy inside composerd (policies/README.md): the version in force, kept in
// the store with its history; the caps check at compose time; and what the pool snapshot
// tells job_submit about classes and blockers. Its routes are in policy_routes.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/api/policy_codec.h"
#include "composer/api/snapshot.h"
#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/core/live_pool.h"
#include "composer/db/store.h"
#include "composer/policies/compile_plan.h"
#include "composer/server/auth.h"

namespace composer::server {

class PolicyKeeper {
 public:
  // `workloads`: composer.conf's Workloads= (empty: any); a policy may only name those classes.
  PolicyKeeper(db::Store& store, LivePool& pool, const Clock& clock,
               std::vector<std::string> workloads);
  ~PolicyKeeper();

  // composer.conf's DomainLevels=: the levels Placement lines may name. Before load().
  void set_domain_levels(std::vector<std::string> levels) { domain_levels_ = std::move(levels); }

  // Loads the newest stored version. A stored text that no longer compiles (a time zone
  // removed from tzdata, a pool that shrank below a cap) is logged and not enforced here;
  // Slurm keeps enforcing what was applied to it.
  Status load();

  // A policy compiled into Slurm's objects (plan_at()).
  struct PlanInForce {
    policies::Plan plan;
    policies::TimeZone time_zone;  // the policy's: the blockers' start times are in it
  };
  // Validates `body` against the pool and stores it as a new version, unless it is the text in
  // force (then nothing changes) or a dry run. Errors name every problem of the file.
  // `compiled`, when given, receives the checked policy's plan for now (for the Slurm diff).
  Expected<api::PolicyApplied> apply(const api::PolicyBody& body, const Caller& caller,
                                     std::optional<PlanInForce>* compiled = nullptr);
  Expected<std::optional<PolicyVersion>> current() const;
  Expected<std::vector<PolicyVersion>> history(size_t limit) const;
  // A hypothetical job: totals over all its nodes.
  struct Query {
    std::string workload, partition, qos, account;
    uint64_t gpus = 0, mem_bytes = 0, nvme = 0;
    int64_t time_limit_s = 0;
    int64_t start_s = 0;
  };
  Expected<api::PolicyExplanation> explain(const Query& query) const;

  // The compose-time check: the composition's class may hold at most the cap in force.
  AdmissionCheck admission_check();
  // Fills the snapshot's workload classes (cap licenses, highest caps) and blocker
  // reservations from the policy in force; false (snapshot untouched) without one.
  bool fill_snapshot(api::PoolSnapshot& snapshot) const;

  // The window in force now for each class of the policy in force, in the policy's class
  // order: (class, window), the window being "Default" when none of the class's windows is
  // open. Empty without a policy. For the composer_policy_window metric.
  std::vector<std::pair<std::string, std::string>> windows_in_force() const;

  // The policy in force compiled into Slurm's objects for `now_s` (cap licenses, blockers,
  // a one-off blocker when `now_s` lies in a blocked period), against the pool it was applied
  // with; nullopt without a policy. What slurm_sync.h keeps Slurm in step with.
  std::optional<PlanInForce> plan_at(int64_t now_s) const;

  // The class's reaction to failed devices (OnFailure lines) in the policy in force; notify
  // without a policy or for a class without a line.
  policies::FailureReaction reaction(std::string_view workload) const;

  // The clock the keeper tells time by: the daemon's.
  const Clock& clock() const { return clock_; }

 private:
  struct Active;
  std::shared_ptr<const Active> active() const;
  Expected<std::shared_ptr<const Active>> compile(const PolicyVersion& version) const;

  db::Store& store_;
  LivePool& pool_;
  const Clock& clock_;
  std::vector<std::string> workloads_;
  std::vector<std::string> domain_levels_;
  mutable std::mutex mu_;
  std::mutex apply_mu_;  // one apply at a time: compare with the newest, then append
  std::shared_ptr<const Active> active_;
};

// Lower-case hex SHA-256 (FIPS 180-4) of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace composer::server
