// The PostgreSQL store's connections: one writer thread that group-commits, as GroupWriter
// does for SQLite (each call in its own SAVEPOINT of one transaction, one commit for all, so
// one synchronous replication round trip for the batch), and a pool of reading connections.
//
// A connection found broken is opened again, and the work retried, until `retry_for` has
// passed since the oldest call waiting: the server may have restarted or, under Patroni,
// another host may now be the primary (the connection string lists them all, with
// target_session_attrs=read-write). A batch that broke before its COMMIT was sent is simply
// run again. One whose COMMIT got no answer may or may not have taken effect: each batch also
// writes its number into this writer's row of store_writers, and after reconnecting the
// writer writes that row again (pg::resolve_batch), which waits for a transaction still
// holding it and commits only once a synchronous standby has everything before it; the
// number found there says whether the batch committed. Only then is it answered, or run
// again. A call is never told it succeeded unless its commit is proven.
//
// A call that gives a Flight goes to the server in one flight with the batch's other such
// calls (libpq's pipeline mode): BEGIN, each call, the batch's number and the fence check are
// one round trip, and COMMIT, sent once the fence check has answered, the second. The calls
// of a flight take no savepoint each (two statements and a subtransaction less a call), and
// refusals are rare. Calls next to each other in a flight that do the same write (the same
// Flight::together) go as one statement for all of them, so that the server starts its
// executor, each statement's parts and their triggers once for the run rather than once a
// call (store_test.cc, ABurstOfCompositionsAndStateChangesIsOneStatementOfEach). When the
// server refuses a call of the flight, or the statement of a run of calls, the whole batch is
// rolled back and runs again with each call alone in its savepoint: the refused call's
// savepoint is rolled back, the call runs again on its own (its Body, which says why in its
// own words), and the calls after it go in a new flight, so the others still commit
// (store_test.cc, ABatchWithARefusedWriteIsRunAgainWithoutItAndTheOthersCommit).
#pragma once

#include <atomic>
#include <chrono>
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
  // A call sent without waiting for the answers: one statement, `sql` with `params`, whose
  // rows `receive` reads. The server refuses whatever the call refuses (the statement fails),
  // so that a refusal undoes the call alone; `receive` throws only on an answer it cannot
  // read, which fails the batch. `together`, where given, is the same write for several calls
  // at once: its k-th parameter is the array of each call's k-th parameter (Params::
  // columns_of), its rows are those each call's `sql` gives, in the calls' order, each with
  // the call's number (1 for the first) in its last column, and it is refused where any of
  // the calls would be.
  struct Flight {
    const Sql* sql = nullptr;
    Params params;
    const Sql* together = nullptr;
    std::function<void(Result)> receive;
  };

  static constexpr std::chrono::milliseconds kRetryFor{15000};

  Writer(std::string conninfo, std::unique_ptr<Connection> connection,
         std::chrono::milliseconds retry_for = kRetryFor);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  // Runs and commits everything already submitted, then stops the thread.
  ~Writer();

  // Queues `body`; `done` is handed its status once the change is committed (or refused), on
  // the writer's thread (Store::Answer says what it may do there).
  void submit(Body body, Done done, Flight flight);
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
    std::chrono::steady_clock::time_point since;
    Flight flight;
  };
  // The most calls sent in one flight: what waits unread on either side stays small.
  static constexpr size_t kFlightCalls = 256;
  enum class Outcome { kCommitted, kNotCommitted, kUnknown };
  void loop();
  // A new connection_, counting its round trips.
  void connect();
  void run_batch(std::deque<Job>& batch);
  // One try of the batch under number `number`; `failure` says why when not committed.
  Outcome attempt(std::deque<Job>& batch, std::vector<Status>& results, int64_t number,
                  Error& failure);
  // Runs the batch's calls, its number and the fence check inside the open transaction.
  // `transaction`'s BEGIN is queued in the connection's pipeline; the connection leaves
  // pipeline mode when this returns. A refusal in a flight rolls everything back and runs the
  // batch again in the same transaction's place, each call in a savepoint.
  void run_calls(std::deque<Job>& batch, std::vector<Status>& results, int64_t number,
                 Transaction& transaction);
  // Hands each of the calls `first` to `after` (not included), sent as one statement, its
  // rows of `all`, the statement's answer (Flight::together).
  static void hand_out(Result all, std::deque<Job>& batch, size_t first, size_t after);
  // Runs `job`'s Body in a savepoint of its own; its failure is its result.
  void run_alone(Job& job, Status& result);
  // Throws Failure unless this composerd may commit (fence()).
  void check_fence();
  // The epoch the fence check holds this batch to; kNotFenced when there is none. Throws
  // Failure when this composerd is a standby.
  int64_t fence_epoch();
  // Throws the Failure of a fence check that found another epoch than `epoch`.
  [[noreturn]] void fenced(int64_t epoch);

  static constexpr int64_t kNotFenced = -1;

  const std::string conninfo_;
  const std::chrono::milliseconds retry_for_;
  const std::string id_;  // this writer's row in store_writers
  int64_t number_ = 0;    // the last batch number tried
  std::unique_ptr<Connection> connection_;
  std::atomic<int64_t> fence_{kNotFenced};
  std::atomic<int64_t> lease_ms_{0};
  bool lease_set_ = false;   // on connection_, by the writer's thread
  bool plans_kept_ = false;  // likewise (kKeepPlans)
  bool fenced_out_ = false;  // the last fence check refused: no retry (writer's thread)
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  WriteStats stats_;
  std::atomic<uint64_t> round_trips_{0};
  std::thread thread_;
};

// Whether batch `number` of writer `writer` committed: writes the writer's row again (waiting
// for a transaction that holds it) and commits, synchronously replicated where the server is
// set so. Throws Failure when that cannot be done now.
bool resolve_batch(Connection& connection, const std::string& writer, int64_t number,
                   int64_t now_ms);

class ReaderPool {
 public:
  explicit ReaderPool(std::string conninfo, size_t max_idle = 16,
                      std::chrono::milliseconds retry_for = Writer::kRetryFor)
      : conninfo_(std::move(conninfo)), max_idle_(max_idle), retry_for_(retry_for) {}

  // Runs `read` on an idle connection or a new one. With `snapshot`, inside one read-only
  // transaction, so that several statements see the same database; a read of one statement
  // needs none (the statement is its own snapshot) and saves the round trips. With `retry`,
  // a read that fails on a lost connection runs again on a new one until `retry_for` has
  // passed (`read` must then be safe to run again: it hands nothing out before it returns).
  void with_connection(const std::function<void(Connection&)>& read, bool snapshot,
                       bool retry = false);

 private:
  const std::string conninfo_;
  const size_t max_idle_;
  const std::chrono::milliseconds retry_for_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace composer::db::pg
