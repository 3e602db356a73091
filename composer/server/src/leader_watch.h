// composerd's leadership with StateBackend=postgresql (db/leadership.h): several composerd with
// the same configuration share one store, and one of them is active.
//
// A standby answers on composerd's addresses as soon as it starts: GET /v1/health and
// GET /metrics say it is a standby, the epoch and who is active since when; every other route
// answers 503 with the usual error body and "active", the active composerd's URL, so that a
// client moves on to it. Meanwhile it tries to take the lock every second. Once it has taken
// over it closes those addresses (composerd opens them again, with every route, once it has
// recovered) and renews the lease on its thread until the process ends.
//
// A composerd that finds its leadership lost exits at once (status 75) rather than turning
// into a standby in place: everything it holds in memory (the allocator's view, operations in
// flight, steps queued) was built as the active one, and ending the process is the one way to
// be sure none of it reaches the fabric again. Its supervisor (systemd's Restart=on-failure)
// starts it again, as a standby (composerd_leadership_test).
// When only the lock's connection broke (a primary switch under Patroni), it is not lost yet:
// the watch takes the lock again under the same epoch once the database answers, and exits
// only when another composerd holds the epoch (leadership_test,
// TheLockIsTakenAgainAfterItsConnectionBroke; tests/ha).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "composer/api/types.h"
#include "composer/common/error.h"
#include "composer/db/leadership.h"
#include "composer/setup/composer_conf.h"
#include "front_door.h"

namespace composer::server {

// The exit status of a composerd that lost its leadership (EX_TEMPFAIL).
inline constexpr int kLeadershipLostExit = 75;

// StateUrl=, or the one line of StateUrlFile= (which follows the rule of every secret file).
Expected<std::string> state_url(const setup::Config& c);

class LeaderWatch {
 public:
  // Opens the lock's connection (kUnavailable when the database cannot be reached).
  static Expected<std::unique_ptr<LeaderWatch>> open(const setup::Config& config);
  ~LeaderWatch();
  LeaderWatch(const LeaderWatch&) = delete;
  LeaderWatch& operator=(const LeaderWatch&) = delete;

  // Serves as a standby until this composerd takes over (the takeover) or stop() (nullopt). An
  // error when composerd's addresses cannot be bound.
  Expected<std::optional<db::Takeover>> wait_until_active();
  // Thread- and signal-thread-safe: a standby stops waiting.
  void stop();

  // Whether this composerd may still act as the active one (db::Leadership::held).
  bool held() const { return lock_->held(); }
  int64_t epoch() const { return lock_->epoch(); }
  int64_t lease_ms() const { return lock_->lease_ms(); }
  // What the takeover changed (after wait_until_active returned it).
  std::optional<db::Takeover> takeover() const {
    std::lock_guard lock(mu_);
    return won_;
  }

  // What /v1/health says of the leadership.
  void describe(api::HealthInfo& health) const;
  // The standby's answer to every route but health and metrics.
  HttpResponse refusal() const;
  // The /metrics lines of the leadership.
  std::string metrics() const;

 private:
  LeaderWatch(setup::Config config, std::unique_ptr<db::Leadership> lock);
  void loop();
  // The active one's heartbeat; ends the process when the leadership is lost.
  void renew();
  // While a standby: writes the active one's pool snapshot (GET /v1/snapshot) to SnapshotFile
  // every ReconcileInterval, so that job_submit on this host reads what the active one
  // publishes (ComposerdLeadership.TheStandbyKeepsACopyOfTheActiveOnesSnapshot).
  void copy_snapshots();
  Status copy_snapshot(const std::string& active) const;

  const setup::Config config_;
  std::unique_ptr<db::Leadership> lock_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  db::Leader seen_;      // the row as last read
  bool looked_ = false;  // the first try at the lock is over (won, read or failed)
  std::optional<db::Takeover> won_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace composer::server
