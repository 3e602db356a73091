// Which of several composerd sharing one PostgreSQL store is active (StateBackend=postgresql).
//
// The active one holds a session advisory lock on a connection of its own and the one row of
// the `leadership` table names it: the fencing epoch, its name, the URL it advertises and since
// when. Taking the lock over increments the epoch, and every write transaction of a fenced
// store (Store::fence) commits only while the row still holds the epoch it was given, so a
// composerd that lost the lock can no longer write, and so no longer start a fabric call (each
// is preceded by a durable intent).
//
// The lock connection asks the server to end it when it stays idle longer than the lease
// (idle_session_timeout): a holder that stops (SIGSTOP, a stalled host) loses the lock after
// one lease although its TCP connection lives on. The holder renews well within the lease and
// counts itself active only until the lease since its last renewal started has run out, which
// is before the server can hand the lock to another (leadership_test).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "composer/common/error.h"

namespace composer::db {

namespace pg {
class Connection;
}

// The leadership row: who is (or was last) active.
struct Leader {
  int64_t epoch = 0;  // 0: nobody has been active yet
  std::string holder;
  std::string url;
  int64_t since_ms = 0;
};

// What winning the lock changed.
struct Takeover {
  int64_t old_epoch = 0;
  std::string old_holder;
  Leader now;
};

class Leadership {
 public:
  struct Options {
    std::string conninfo;
    std::string holder;  // a name for logs and the row (host and pid)
    std::string url;     // the URL this composerd advertises
    int64_t lease_ms = 5000;
  };
  // Opens the lock connection and brings the schema up to date (the row lives there).
  // kUnavailable naming no part of the connection string.
  static Expected<std::unique_ptr<Leadership>> open(Options options);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // One try: takes the lock if it is free and increments the epoch. nullopt: another holds it.
  Expected<std::optional<Takeover>> try_take(int64_t now_ms);
  // The row as it stands.
  Expected<Leader> current();
  // The holder's heartbeat: the lock connection is alive and the row still holds our epoch.
  // An error: leadership is lost (and held() is false from then on); regainable() then says
  // whether only the lock's connection was lost, with the row still holding our epoch.
  Status renew();
  // After a renewal failed because the lock's connection broke (the primary died, say): the
  // epoch to take the lock again under, else 0 (taken over, or the lease ran out first).
  int64_t regainable() const { return regain_epoch_.load(); }
  // One try to take the lock again under regainable()'s epoch on a new connection. true: held
  // again, the epoch unchanged, so nobody took over meanwhile; false: another composerd holds
  // the epoch now, leadership is lost for good; an error: not known yet (the database does not
  // answer, or our old session still holds the lock): try again. composerd keeps no fabric
  // change going meanwhile (held() is false) (leadership_test,
  // TheLockIsTakenAgainAfterItsConnectionBroke).
  Expected<bool> regain();
  // Whether this composerd may still act as the active one: it took the lock, has not seen it
  // lost, and its lease since the last renewal began has not run out (a monotonic clock, so a
  // process stopped for longer than the lease finds it ran out the moment it runs again).
  bool held() const;
  int64_t epoch() const { return epoch_.load(); }
  int64_t lease_ms() const { return options_.lease_ms; }

 private:
  Leadership(Options options, std::unique_ptr<pg::Connection> connection);
  // With mu_ held.
  void lose();
  void connect();
  Expected<Leader> read_row();

  const Options options_;
  std::mutex mu_;                               // the connection's
  std::unique_ptr<pg::Connection> connection_;  // the lock's session
  std::atomic<int64_t> epoch_{0};               // 0: not held
  std::atomic<int64_t> valid_until_ns_{0};      // steady_clock, since its epoch
  std::atomic<int64_t> regain_epoch_{0};        // see regainable()
};

}  // namespace composer::db
