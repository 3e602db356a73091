#include "pg_pool.h"

#include <algorithm>
#include <exception>
#include <future>
#include <string>
#include <utility>

#include "composer/common/log.h"

namespace composer::db::pg {

Writer::Writer(std::string conninfo, std::unique_ptr<Connection> connection)
    : conninfo_(std::move(conninfo)), connection_(std::move(connection)) {
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

void Writer::submit(Body body, Done done) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back({std::move(body), std::move(done)});
      wake_.notify_all();
      return;
    }
  }
  done(Error(ErrorCode::kUnavailable, "store: the database is closing"));
}

Status Writer::run(Body body) {
  auto answered = std::make_shared<std::promise<Status>>();
  auto answer = answered->get_future();
  submit(std::move(body), [answered](Status s) { answered->set_value(std::move(s)); });
  return answer.get();
}

WriteStats Writer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Writer::fence(int64_t epoch, int64_t lease_ms) {
  lease_ms_ = lease_ms;
  fence_ = epoch;
}

namespace {

constexpr Sql kHoldsEpoch{"checking that this composerd is still the active one",
                          "SELECT 1 FROM leadership WHERE id = 1 AND epoch = $1 FOR SHARE"};
constexpr Sql kTransactionTimeout{
    "setting the longest a write transaction may stay idle",
    "SELECT set_config('idle_in_transaction_session_timeout', $1, false)"};

}  // namespace

void Writer::check_fence() {
  const int64_t epoch = fence_.load();
  if (epoch == kNotFenced) return;
  if (epoch == 0) {
    fail(ErrorCode::kUnavailable, "this composerd is a standby; only the active one writes");
  }
  // FOR SHARE holds the row until COMMIT: a takeover, which updates it, waits for this
  // transaction or makes it fail here (leadership_test, FencedWriteIsRefused).
  Result r = connection_->run(kHoldsEpoch, Params().add(epoch));
  if (!r.step()) {
    fail(ErrorCode::kUnavailable, "another composerd took over (this one held epoch " +
                                      std::to_string(epoch) +
                                      "); this composerd is no longer active and wrote nothing");
  }
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

void Writer::run_batch(std::deque<Job>& batch) {
  std::vector<Status> results(batch.size());
  bool committed = false;
  try {
    if (!connection_ || !connection_->usable()) {
      connection_ = Connection::open(conninfo_);
      lease_set_ = false;
    }
    if (fence_.load() == 0) check_fence();
    if (fence_.load() != kNotFenced && !lease_set_) {
      connection_->run(kTransactionTimeout, Params().add(std::to_string(lease_ms_.load()) + "ms"));
      lease_set_ = true;
    }
    Transaction transaction(*connection_);
    for (size_t i = 0; i < batch.size(); ++i) {
      Savepoint savepoint(*connection_);
      try {
        batch[i].body(*connection_);
        savepoint.release();
      } catch (const Failure& f) {
        if (!connection_->usable()) throw;
        results[i] = f.error();
      } catch (const std::exception& e) {
        results[i] = Error(ErrorCode::kInternal, std::string("store: ") + e.what());
      }
    }
    check_fence();
    transaction.commit();
    committed = true;
  } catch (const Failure& f) {
    // BEGIN or COMMIT failed, or the connection broke: nothing of this batch is known to be
    // durable, and every call of it says so.
    log::error("store: write transaction failed",
               {{"error", f.error().message}, {"calls", std::to_string(batch.size())}});
    for (Status& s : results) {
      if (s.ok()) s = f.error();
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

void ReaderPool::with_connection(const std::function<void(Connection&)>& read, bool snapshot) {
  std::unique_ptr<Connection> connection;
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      connection = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!connection || !connection->usable()) connection = Connection::open(conninfo_);
  if (snapshot) {
    Transaction transaction(*connection, true);
    read(*connection);
    transaction.commit();
  } else {
    read(*connection);
  }
  std::lock_guard lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(connection));
}

}  // namespace composer::db::pg
