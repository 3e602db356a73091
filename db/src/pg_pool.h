// The PostgreSQL store's connections: one writer thread that group-commits, as GroupWriter
// does for SQLite (each call in its own SAVEPOINT of one transaction, one commit for all, so
// one synchronous replication round trip for the batch), and a pool of reading connections.
// A connection found broken is opened again on its next use: the server may have restarted
// or, under Patroni, another host may now be the primary.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "composer/common/error.h"
#include "composer/db/pg.h"
#include "composer/db/store.h"

namespace composer::db::pg {

class Writer {
 public:
  // A call reports failure by throwing Failure (or any std::exception: kInternal).
  using Body = std::function<void(Connection&)>;
  using Done = std::function<void(Status)>;

  Writer(std::string conninfo, std::unique_ptr<Connection> connection);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  // Runs and commits everything already submitted, then stops the thread.
  ~Writer();

  // Queues `body`; `done` is handed its status once the change is committed (or refused), on
  // the writer's thread (Store::Answer says what it may do there).
  void submit(Body body, Done done);
  Status run(Body body);
  WriteStats stats() const;
  // Store::fence: every batch commits only while the leadership row holds `epoch` (0: none
  // commits).
  void fence(int64_t epoch, int64_t lease_ms);

 private:
  struct Job {
    Body body;
    Done done;
  };
  void loop();
  void run_batch(std::deque<Job>& batch);
  // Throws Failure unless this composerd may commit (fence()).
  void check_fence();

  static constexpr int64_t kNotFenced = -1;

  const std::string conninfo_;
  std::unique_ptr<Connection> connection_;
  std::atomic<int64_t> fence_{kNotFenced};
  std::atomic<int64_t> lease_ms_{0};
  bool lease_set_ = false;  // on connection_, by the writer's thread
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  WriteStats stats_;
  std::thread thread_;
};

class ReaderPool {
 public:
  explicit ReaderPool(std::string conninfo, size_t max_idle = 16)
      : conninfo_(std::move(conninfo)), max_idle_(max_idle) {}

  // Runs `read` on an idle connection or a new one. With `snapshot`, inside one read-only
  // transaction, so that several statements see the same database; a read of one statement
  // needs none (the statement is its own snapshot) and saves the round trips.
  void with_connection(const std::function<void(Connection&)>& read, bool snapshot);

 private:
  const std::string conninfo_;
  const size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace composer::db::pg
