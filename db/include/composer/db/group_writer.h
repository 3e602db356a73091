// Group commit: the one writer connection of a database, owned by one thread.
//
// Callers hand in a closure and wait on a future, or leave a callback. The writer takes every
// closure that is pending, runs them in one BEGIN IMMEDIATE transaction, each inside its own
// SAVEPOINT (a closure that throws is rolled back alone and its caller gets its error), commits
// once, then tells every caller. With synchronous=FULL that is one fsync for the whole batch.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "composer/common/error.h"
#include "composer/db/sqlite.h"
#include "composer/db/store.h"

namespace composer::db {

class GroupWriter {
 public:
  // A closure reports failure by throwing sqlite::Failure (or any std::exception, which
  // becomes kInternal). It may run more than once if SQLite aborts the whole transaction
  // because of another closure, so it must only write through the connection and its
  // captured results.
  using Body = std::function<void(sqlite::Connection&)>;

  explicit GroupWriter(std::unique_ptr<sqlite::Connection> connection);
  GroupWriter(const GroupWriter&) = delete;
  GroupWriter& operator=(const GroupWriter&) = delete;
  // Runs and commits everything already submitted, then stops the thread.
  ~GroupWriter();

  // Told once the change is committed (or refused): on the writer's thread, or on the caller's
  // when the database is closing. It must only hand the status on (post it to a thread of the
  // caller's): the writer runs nothing else meanwhile, and a write from it would never end.
  using Done = std::function<void(Status)>;

  // Queues `body`; `done` is called once its change is committed (or refused).
  void submit(Body body, Done done);
  // Queues `body`; the future is ready once its change is committed (or refused).
  std::future<Status> submit(Body body);
  // submit() and wait.
  Status run(Body body) { return submit(std::move(body)).get(); }

  WriteStats stats() const;

 private:
  struct Job {
    Body body;
    Done done;
  };

  void loop();
  // Runs one batch; jobs that must be tried again (their transaction was lost because of
  // another job) are returned.
  std::deque<Job> run_batch(std::deque<Job> batch);

  std::unique_ptr<sqlite::Connection> connection_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  WriteStats stats_;
  std::thread thread_;
};

}  // namespace composer::db
