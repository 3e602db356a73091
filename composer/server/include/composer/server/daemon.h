// composerd: the store, the fabric driver, the composition service, the reconciler and the
// HTTP API, wired together from a Config.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "composer/api/snapshot.h"
#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/setup/composer_conf.h"

namespace composer::server {

// StateDir as composerd needs it, the active one and a standby alike (a standby keeps its copy
// of the snapshot there): a missing one is created with composerd's mode (StateGroup=), one
// that exists is checked and left as it is.
Status prepare_state(const setup::Config& config);

// Every check Daemon::create makes before it changes anything, without binding the listen
// address or contacting a fabric manager (composerd --check): AdminUsers and StateGroup
// name existing users and a group; composerd's files (composer.conf, StateDir, Database,
// SnapshotFile, LogFile) are distinct; an existing StateDir is a directory others cannot
// write; MungeSocket is a socket; LogFile's directory exists; ListenAddress resolves; the
// credentials file of every real fabric is readable and private. Each refusal names the file
// and the line of the key ("PATH line N: ..."; "PATH: ..." for a default).
Status check_config(const setup::Config& config);

class LeaderWatch;

class Daemon {
 public:
  // Every part tells time by `clock` (the service, the reconciler, the policy, the routes);
  // it must outlive the daemon. With StateBackend=postgresql, `leader` is this composerd's
  // leadership, already taken over (LeaderWatch::wait_until_active); it must outlive the
  // daemon: the store's writes and the fabric's changes are fenced by it.
  static Expected<std::unique_ptr<Daemon>> create(const setup::Config& config,
                                                  const Clock& clock = SystemClock::instance(),
                                                  LeaderWatch* leader = nullptr);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Binds the listen address and serves until stop(). Returns an error if it cannot bind.
  Status run();
  // Thread- and signal-thread-safe: stops accepting, lets running requests finish, stops
  // the reconciler, and commits everything queued before run() returns.
  void stop();

  // Writes the pool snapshot the job_submit plugin reads.
  void publish_snapshot();
  // The snapshot as it would be published now (generated_ms 0).
  api::PoolSnapshot build_snapshot() const;

 private:
  struct Impl;
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::server
