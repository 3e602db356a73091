#include "pg_pool.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <future>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "composer/common/clock.h"
#include "composer/common/log.h"
#include "pg_statements.h"

namespace composer::db::pg {
namespace {

using Steady = std::chrono::steady_clock;

// A name no other writer has had: 128 random bits.
std::string new_writer_id() {
  std::random_device random;
  char out[33];
  std::snprintf(out, sizeof out, "%08x%08x%08x%08x", random(), random(), random(), random());
  return out;
}

int64_t now_ms() { return SystemClock::instance().now_ms(); }

// Whether `f` says the server is out of reach or no longer the primary: worth a new connection
// and another try (kUnavailable; a serialization failure or a deadlock on a live connection is
// the batch's call's own answer).
bool lost(const Failure& f, const std::unique_ptr<Connection>& connection) {
  return f.error().code == ErrorCode::kUnavailable && (!connection || !connection->usable());
}

// 100 ms, doubling to 400 ms: a primary switch takes seconds, and the first write after it
// should not wait long.
std::chrono::milliseconds pause_after(int tries) {
  return std::chrono::milliseconds(100 << std::min(tries, 2));
}

}  // namespace

bool resolve_batch(Connection& connection, const std::string& writer, int64_t number, int64_t now) {
  Transaction transaction(connection);
  Result r = connection.run(kResolveBatch, Params().add(writer).add(now));
  const int64_t committed = r.step() ? r.int64(0) : 0;
  transaction.commit();
  return committed >= number;
}

Writer::Writer(std::string conninfo, std::unique_ptr<Connection> connection,
               std::chrono::milliseconds retry_for)
    : conninfo_(std::move(conninfo)),
      retry_for_(retry_for),
      id_(new_writer_id()),
      connection_(std::move(connection)) {
  connection_->count_round_trips_in(&round_trips_);
  try {
    connection_->run(kForgetWriters, Params().add(now_ms() - int64_t{7} * 24 * 3600 * 1000));
  } catch (const Failure& f) {
    log::warning("store: could not forget old writers", {{"error", f.error().message}});
  }
  thread_ = std::thread([this] { loop(); });
}

Writer::~Writer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Writer::submit(Body body, Done done, Flight flight) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back({std::move(body), std::move(done), Steady::now(), std::move(flight)});
      wake_.notify_all();
      return;
    }
  }
  done(Error(ErrorCode::kUnavailable, "store: the database is closing"));
}

void Writer::submit(Body body, Done done) { submit(std::move(body), std::move(done), Flight()); }

Status Writer::run(Body body) {
  auto answered = std::make_shared<std::promise<Status>>();
  auto answer = answered->get_future();
  submit(std::move(body), [answered](Status s) { answered->set_value(std::move(s)); });
  return answer.get();
}

WriteStats Writer::stats() const {
  std::lock_guard lock(mu_);
  WriteStats out = stats_;
  out.round_trips = round_trips_.load(std::memory_order_relaxed);
  return out;
}

void Writer::connect() {
  connection_ = Connection::open(conninfo_);
  connection_->count_round_trips_in(&round_trips_);
  lease_set_ = false;
  plans_kept_ = false;
}

void Writer::fence(int64_t epoch, int64_t lease_ms) {
  lease_ms_ = lease_ms;
  fence_ = epoch;
}

namespace {

constexpr Sql kHoldsEpoch{"checking that this composerd is still the active one",
                          "SELECT 1 FROM leadership WHERE id = 1 AND epoch = $1 FOR SHARE"};
// The writer's statements look up rows by key (pg_statements.h, kDeviceOwnerLookup), so one
// plan made once serves every call: PostgreSQL's default planned them again for each call, a
// fifth of the server's time for a burst of composes (docs/BENCHMARKS.md, "High
// availability").
constexpr Sql kKeepPlans{"keeping one plan for each of the writer's statements",
                         "SET plan_cache_mode = force_generic_plan"};
constexpr Sql kTransactionTimeout{
    "setting the longest a write transaction may stay idle",
    "SELECT set_config('idle_in_transaction_session_timeout', $1, false)"};

}  // namespace

int64_t Writer::fence_epoch() {
  const int64_t epoch = fence_.load();
  if (epoch == 0) {
    fenced_out_ = true;  // a refused write is not tried again
    fail(ErrorCode::kUnavailable, "this composerd is a standby; only the active one writes");
  }
  return epoch;
}

void Writer::fenced(int64_t epoch) {
  fenced_out_ = true;
  fail(ErrorCode::kUnavailable, "another composerd took over (this one held epoch " +
                                    std::to_string(epoch) +
                                    "); this composerd is no longer active and wrote nothing");
}

void Writer::check_fence() {
  fenced_out_ = false;
  const int64_t epoch = fence_epoch();
  if (epoch == kNotFenced) return;
  // FOR SHARE holds the row until COMMIT: a takeover, which updates it, waits for this
  // transaction or makes it fail here (leadership_test, FencedWriteIsRefused).
  Result r = connection_->run(kHoldsEpoch, Params().add(epoch));
  if (!r.step()) fenced(epoch);
}

void Writer::loop() {
  for (;;) {
    std::deque<Job> batch;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything is committed
      batch.swap(queue_);
    }
    run_batch(batch);
  }
}

void Writer::run_alone(Job& job, Status& result) {
  Savepoint savepoint(*connection_);
  try {
    job.body(*connection_);
    savepoint.release();
  } catch (const Failure& f) {
    if (!connection_->usable()) throw;
    result = f.error();
  } catch (const std::exception& e) {
    result = Error(ErrorCode::kInternal, std::string("store: ") + e.what());
  }
}

void Writer::hand_out(Result all, std::deque<Job>& batch, size_t first, size_t after) {
  const int number = all.columns() - 1;
  int from = 0;
  size_t call = first;
  const auto give = [&](int end) {
    batch[call].flight.receive(all.slice(from, end));
    ++call;
    from = end;
  };
  while (all.step()) {
    const int64_t n = all.int64(number);
    const auto at = static_cast<int64_t>(call - first) + 1;  // the number of the call due
    if (n < at || n > static_cast<int64_t>(after - first)) {
      fail(ErrorCode::kInternal, "store: a statement for several calls answered out of order");
    }
    // The calls before this row's have all their rows (or none).
    for (int64_t k = at; k < n; ++k) give(all.row());
  }
  while (call < after) give(all.row());
}

void Writer::run_calls(std::deque<Job>& batch, std::vector<Status>& results, int64_t number,
                       Transaction& transaction) {
  Connection& db = *connection_;
  bool begin_due = true;    // BEGIN is queued (attempt) and its answer not read yet
  bool savepoints = false;  // each call of a flight in its own savepoint: after a refusal
  size_t next = 0;
  for (;;) {
    // One flight: the calls from `next` that can go in one (all of them, mostly), and, after
    // the batch's last call, its number and the fence check.
    size_t end = next;
    while (end < batch.size() && batch[end].flight.sql != nullptr && end - next < kFlightCalls) {
      ++end;
    }
    const bool last = end == batch.size();
    if (!db.in_pipeline()) db.enter_pipeline();
    // The statements sent, each as the first call it is for and the call after its last:
    // calls next to each other with the same `together` go as one, unless each call is to
    // stand alone in its savepoint.
    std::vector<std::pair<size_t, size_t>> sent;
    for (size_t i = next; i < end;) {
      const Flight& flight = batch[i].flight;
      size_t after = i + 1;
      if (!savepoints && flight.together != nullptr) {
        while (after < end && batch[after].flight.together == flight.together) ++after;
      }
      if (after - i > 1) {
        std::vector<const Params*> calls;
        calls.reserve(after - i);
        for (size_t k = i; k < after; ++k) calls.push_back(&batch[k].flight.params);
        db.send(*flight.together, Params::columns_of(calls));
      } else {
        if (savepoints) db.send_plain(kSavepoint);
        db.send(*flight.sql, flight.params);
        if (savepoints) db.send_plain(kRelease);
      }
      sent.emplace_back(i, after);
      i = after;
    }
    int64_t epoch = kNotFenced;
    if (last) {
      db.send(kMarkBatch, Params().add(id_).add(number).add(now_ms()));
      epoch = fence_epoch();
      if (epoch != kNotFenced) db.send(kHoldsEpoch, Params().add(epoch));
    }
    db.sync();
    if (begin_due) {
      transaction.received();
      begin_due = false;
    }
    size_t refused = end;  // the call the server refused, if one was
    std::optional<Failure> refusal;
    for (const auto& [first, after] : sent) {
      if (refusal) break;
      try {
        const Flight& flight = batch[first].flight;
        if (after - first > 1) {
          hand_out(db.receive(*flight.together), batch, first, after);
        } else {
          if (savepoints) db.receive(kSavepoint);
          flight.receive(db.receive(*flight.sql));
          if (savepoints) db.receive(kRelease);
        }
      } catch (const Failure& f) {
        refused = first;
        refusal = f;
      } catch (const std::exception& e) {
        refused = first;
        refusal = Failure(Error(ErrorCode::kInternal, std::string("store: ") + e.what()));
      }
    }
    if (refusal) {
      db.skip_to_sync();
      // Not the server's refusal: an answer that could not be read, after which the calls
      // behind it went on. The batch fails.
      if (!db.usable() || !db.transaction_failed()) throw *refusal;
      db.leave_pipeline();
      if (savepoints) {
        db.exec(kRollbackTo);
        run_alone(batch[refused], results[refused]);
        next = refused + 1;
      } else {
        // Without savepoints the refusal undid the whole transaction: the batch runs again
        // from its start, each call in its savepoint, in a new one. The calls before the
        // refused one meet the same database as before, so it is refused again.
        db.exec(kRollback);
        db.exec(kBegin);
        // A composerd that lost leadership meets the new one's compositions: it is told of
        // the takeover, not of a conflict
        // (LeadershipTest.AFencedWriteThatAlsoConflictsSaysTheTakeover).
        check_fence();
        std::fill(results.begin(), results.end(), Status::Ok());
        savepoints = true;
        next = 0;
        continue;
      }
    } else {
      bool holds = true;
      if (last) {
        db.receive(kMarkBatch);
        if (epoch != kNotFenced) holds = db.receive(kHoldsEpoch).step();
      }
      db.skip_to_sync();
      if (last) {
        db.leave_pipeline();
        if (!holds) fenced(epoch);
        // fence() changed it meanwhile: held to the new one, before COMMIT.
        if (fence_.load() != epoch) check_fence();
        return;
      }
      next = end;
    }
    for (; next < batch.size() && batch[next].flight.sql == nullptr; ++next) {
      if (db.in_pipeline()) db.leave_pipeline();
      run_alone(batch[next], results[next]);
    }
  }
}

Writer::Outcome Writer::attempt(std::deque<Job>& batch, std::vector<Status>& results,
                                int64_t number, Error& failure) {
  bool commit_sent = false;
  fenced_out_ = false;
  try {
    if (!connection_ || !connection_->usable()) connect();
    if (!plans_kept_) {
      connection_->exec(kKeepPlans);
      plans_kept_ = true;
    }
    if (fence_.load() == 0) check_fence();
    if (fence_.load() != kNotFenced && !lease_set_) {
      connection_->run(kTransactionTimeout, Params().add(std::to_string(lease_ms_.load()) + "ms"));
      lease_set_ = true;
    }
    connection_->enter_pipeline();
    Transaction transaction(*connection_, Transaction::Queued{});
    run_calls(batch, results, number, transaction);
    const uint64_t warnings = connection_->warnings();
    commit_sent = true;
    transaction.commit();
    // A WARNING on COMMIT: the wait for the synchronous standby was cancelled, the commit may
    // be on this server alone (pg.h, Connection::warnings).
    if (connection_->warnings() != warnings) {
      failure = Error(ErrorCode::kUnavailable, "store: the commit was answered with a warning");
      return Outcome::kUnknown;
    }
    return Outcome::kCommitted;
  } catch (const Failure& f) {
    failure = f.error();
    // Answers still due in the pipeline: the connection cannot be used again, and closing it
    // rolls the transaction back.
    if (connection_ && connection_->in_pipeline()) {
      connection_.reset();
      return Outcome::kNotCommitted;
    }
    // The server answered the COMMIT with an error: it did not commit. No answer at all: it
    // may have.
    if (commit_sent && lost(f, connection_)) return Outcome::kUnknown;
    return Outcome::kNotCommitted;
  }
}

void Writer::run_batch(std::deque<Job>& batch) {
  Steady::time_point oldest = batch.front().since;
  for (const Job& j : batch) oldest = std::min(oldest, j.since);
  const Steady::time_point deadline = oldest + retry_for_;
  std::vector<Status> results(batch.size());
  bool committed = false;
  Error failure;
  for (int tries = 0;; ++tries) {
    std::fill(results.begin(), results.end(), Status::Ok());
    const int64_t number = ++number_;
    Outcome outcome = attempt(batch, results, number, failure);
    while (outcome == Outcome::kUnknown) {
      // Until the writer's row says: the batch is either durable on the primary, or can
      // never commit (the write below waited for it).
      try {
        if (!connection_ || !connection_->usable()) connect();
        outcome = resolve_batch(*connection_, id_, number, now_ms()) ? Outcome::kCommitted
                                                                     : Outcome::kNotCommitted;
        log::warning("store: a commit without an answer was found out",
                     {{"batch", std::to_string(number)},
                      {"committed", outcome == Outcome::kCommitted ? "yes" : "no"}});
      } catch (const Failure& f) {
        if (Steady::now() >= deadline) {
          failure = Error(ErrorCode::kUnavailable,
                          "store: the database went away during a commit, and whether it took "
                          "effect cannot be known until it is reachable again: " +
                              f.error().message);
          break;
        }
        std::this_thread::sleep_for(pause_after(tries++));
      }
    }
    if (outcome == Outcome::kCommitted) {
      committed = true;
      break;
    }
    if (outcome == Outcome::kUnknown || failure.code != ErrorCode::kUnavailable || fenced_out_ ||
        Steady::now() >= deadline) {
      break;
    }
    // A new connection for the next try even where this one still answers: a server that
    // became a standby answers every write "read-only", and libpq finds the new primary only
    // when it connects.
    connection_.reset();
    log::warning("store: write transaction failed; trying again",
                 {{"error", failure.message}, {"calls", std::to_string(batch.size())}});
    std::this_thread::sleep_for(pause_after(tries));
  }
  if (!committed) {
    // Nothing of this batch is known to be durable, and every call of it says so.
    log::error("store: write transaction failed",
               {{"error", failure.message}, {"calls", std::to_string(batch.size())}});
    for (Status& s : results) {
      if (s.ok()) s = failure;
    }
  }
  {
    std::lock_guard lock(mu_);
    if (committed) ++stats_.transactions;
    stats_.largest_batch = std::max<uint64_t>(stats_.largest_batch, batch.size());
    for (const Status& s : results) {
      ++stats_.calls;
      if (!s.ok()) ++stats_.failed_calls;
    }
  }
  for (size_t i = 0; i < batch.size(); ++i) batch[i].done(results[i]);
}

void ReaderPool::with_connection(const std::function<void(Connection&)>& read, bool snapshot,
                                 bool retry) {
  const Steady::time_point deadline = Steady::now() + retry_for_;
  for (int tries = 0;; ++tries) {
    std::unique_ptr<Connection> connection;
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        connection = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    try {
      if (!connection || !connection->usable()) connection = Connection::open(conninfo_);
      if (snapshot) {
        Transaction transaction(*connection, true);
        read(*connection);
        transaction.commit();
      } else {
        read(*connection);
      }
    } catch (const Failure& f) {
      if (!retry || !lost(f, connection) || Steady::now() >= deadline) throw;
      // The other idle connections went to the same server: let them go too.
      {
        std::lock_guard lock(mu_);
        idle_.clear();
      }
      if (tries > 0) std::this_thread::sleep_for(pause_after(tries - 1));
      continue;
    }
    std::lock_guard lock(mu_);
    if (idle_.size() < max_idle_) idle_.push_back(std::move(connection));
    return;
  }
}

}  // namespace composer::db::pg
