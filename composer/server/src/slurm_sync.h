// composerd keeps Slurm's run-time objects in step with the pool and the policy
// (docs/ADMIN.md "Slurm follows the pool"): every reconcile round, at start, and right after
// a policy change or a pool change (drain, fail, foreign), it reads `scontrol -o show
// licenses` and `show reservations`, computes what Slurm should have (sync_plan, slurm_holds.h:
// one hold reservation per managed license, sized to what the pool cannot serve, and the
// policy's blocker reservations) and applies the difference with scontrol. The plan of a
// round is applied whole or not at all: a license Slurm lacks refuses it before anything
// runs, and when a command fails the ones already run are undone; the log says which. After
// each round of its loop it also steers pending jobs by zone (steer_zones).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/core/live_pool.h"
#include "composer/setup/composer_conf.h"
#include "policy_keeper.h"
#include "remote_licenses.h"
#include "slurm_holds.h"

namespace composer::server {

struct SlurmSyncOptions {
  std::string scontrol = "scontrol";  // SlurmScontrol=; looked up on PATH without a '/'
  std::string slurm_conf;             // SlurmConf=: SLURM_CONF for scontrol; empty: its default
  int64_t interval_ms = 10000;        // ReconcileInterval=
  int timeout_ms = 10000;             // per scontrol or sacctmgr call
  // SlurmLicenses=remote: the pool's and the models' licenses are slurmdbd resources
  // NAME@license_server given to `cluster`, their counts set with `sacctmgr`
  // (remote_license_plan, remote_licenses.h); no hold reservations for them.
  bool remote_licenses = false;
  std::string license_server = "composer";  // SlurmLicenseServer=
  std::string cluster;                      // SlurmCluster=
  std::string sacctmgr = "sacctmgr";        // SlurmSacctmgr=
};

// What one round found and did.
struct SyncReport {
  SyncPlan plan;
  bool applied = false;      // every change ran (or there was none)
  bool rolled_back = false;  // a command failed and the earlier ones were undone
  std::string error;         // why not applied: Slurm unreadable, a problem, a failed command
};

class SlurmSync {
 public:
  SlurmSync(const LivePool& pool, const PolicyKeeper& keeper, const Clock& clock,
            SlurmSyncOptions options);
  ~SlurmSync();
  SlurmSync(const SlurmSync&) = delete;
  SlurmSync& operator=(const SlurmSync&) = delete;

  // Runs a first round now, then one per interval and one soon after each poke().
  void start();
  void stop();
  // A policy or pool change: run a round now rather than at the end of the interval.
  void poke();

  // One round (thread-safe; rounds never overlap). `apply` false: read and compute only.
  // `first`, when given, runs under the round's lock before Slurm is read (a policy being
  // stored), so no other round comes between it and this one; when it fails, nothing else
  // runs and the report's error is its message.
  SyncReport round(bool apply = true, const std::function<Status()>& first = {});
  // What a round would do with `plan` in force instead of the keeper's (policy apply
  // --dry-run); nullopt: without a policy.
  Expected<SyncPlan> preview(const std::optional<PolicyKeeper::PlanInForce>& plan);

  // For /metrics. Drift: reservations composerd keeps that a round found deleted outside
  // composerd (and created again) or changed (and updated in place), since it started.
  uint64_t drift_recreated() const { return drift_recreated_.load(); }
  uint64_t drift_updated() const { return drift_updated_.load(); }
  // The last applying round: 1 when it left Slurm as the pool and the policy say (nothing to
  // change, or every change made), 0 when it could not; -1 before the first one.
  int in_step() const { return in_step_.load(); }
  // The per-model GPU licenses (policies::model_license_name) Slurm had at the last round, of
  // the models the pool holds: those job_submit may add (the snapshot's model_licenses).
  std::vector<std::string> model_licenses() const;

 private:
  // Runs scontrol or sacctmgr (`program`, the first word of a plan's command) with `args`.
  Expected<std::string> slurm(const std::string& program,
                              const std::vector<std::string>& args) const;
  Expected<std::string> scontrol(const std::vector<std::string>& args) const {
    return slurm("scontrol", args);
  }
  // Slurm's licenses and reservations, and with remote licenses slurmdbd's resources.
  struct SlurmRead {
    SlurmState state;
    std::vector<RemoteLicense> remote;
  };
  Expected<SlurmRead> read_state() const;
  // The plan for the pool as `rows` show it (read once per round).
  SyncPlan compute(const std::optional<PolicyKeeper::PlanInForce>& plan, const SlurmRead& read,
                   const std::vector<PoolRow>& rows) const;
  // The name Slurm gives one of the licenses composerd counts: NAME, or NAME@SERVER.
  std::string slurm_name(const std::string& license) const;
  void loop();
  // Zones in the scheduler: each pending composed job's excluded nodes brought to what the
  // zones can serve now (zone_steering.h). Runs after each round of the loop.
  void steer_zones();

  const LivePool& pool_;
  const PolicyKeeper& keeper_;
  const Clock& clock_;
  SlurmSyncOptions options_;
  std::mutex round_mu_;
  // The reservations composerd manages that Slurm had last round, each with what it held
  // (licenses, users, length); empty where that round changed it, so it is read afresh.
  std::map<std::string, std::string> known_;
  std::string last_error_;        // logged once until it changes
  std::string last_warnings_;     // the same for the plan's warnings
  std::string last_steer_error_;  // the same for steer_zones()
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::string> model_licenses_;  // under mu_
  bool poked_ = false;
  bool stopping_ = false;
  std::atomic<uint64_t> drift_recreated_{0};
  std::atomic<uint64_t> drift_updated_{0};
  std::atomic<int> in_step_{-1};
  std::thread thread_;
};

// composerd --check: SlurmScontrol (and with SlurmLicenses=remote SlurmSacctmgr) names an
// executable file (when SlurmSync=yes).
Status check_slurm_sync(const setup::Config& config);

}  // namespace composer::server
