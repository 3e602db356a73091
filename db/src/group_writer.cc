#include "composer/db/group_writer.h"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/log.h"
#include "composer/common/thread_name.h"

namespace composer::db {

GroupWriter::GroupWriter(std::unique_ptr<sqlite::Connection> connection)
    : connection_(std::move(connection)) {
  thread_ = std::thread([this] {
    name_this_thread("store-writer");
    loop();
  });
}

GroupWriter::~GroupWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void GroupWriter::submit(Body body, Done done) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) {
      lock.unlock();
      done(Error(ErrorCode::kUnavailable, "store: the database is closing; nothing was written"));
      return;
    }
    queue_.push_back(Job{std::move(body), std::move(done)});
  }
  wake_.notify_one();
}

std::future<Status> GroupWriter::submit(Body body) {
  auto committed = std::make_shared<std::promise<Status>>();
  auto future = committed->get_future();
  submit(std::move(body), [committed](Status s) { committed->set_value(std::move(s)); });
  return future;
}

WriteStats GroupWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void GroupWriter::loop() {
  std::deque<Job> retry;
  for (;;) {
    std::deque<Job> batch = std::move(retry);
    retry.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (batch.empty()) {
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      }
      if (batch.empty() && queue_.empty()) return;  // stopping, and everything is committed
      while (!queue_.empty()) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    retry = run_batch(std::move(batch));
  }
}

std::deque<GroupWriter::Job> GroupWriter::run_batch(std::deque<Job> batch) {
  std::vector<Status> results(batch.size());
  std::deque<Job> retry;
  size_t lost_at = batch.size();  // index of the job that made SQLite abort the transaction
  auto finish = [&](size_t committed) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.transactions += committed;
    stats_.largest_batch = std::max<uint64_t>(stats_.largest_batch, batch.size());
    for (const Status& s : results) {
      ++stats_.calls;
      if (!s.ok()) ++stats_.failed_calls;
    }
  };

  try {
    sqlite::Transaction transaction(*connection_);
    for (size_t i = 0; i < batch.size(); ++i) {
      sqlite::Savepoint savepoint(*connection_);
      try {
        batch[i].body(*connection_);
        savepoint.release();
      } catch (const sqlite::Failure& f) {
        results[i] = f.error();
      } catch (const std::exception& e) {
        results[i] = Error(ErrorCode::kInternal, std::string("store: ") + e.what());
      }
      if (!connection_->in_transaction()) {
        // SQLite rolled back everything (I/O error, disk full): the closures before this one
        // lost their changes too. This one keeps its error; the others are tried again.
        lost_at = i;
        break;
      }
    }
    if (lost_at == batch.size()) transaction.commit();
  } catch (const sqlite::Failure& f) {
    // BEGIN or COMMIT failed: nothing of this batch is durable.
    log::error("store: write transaction failed",
               {{"error", f.error().message}, {"calls", std::to_string(batch.size())}});
    for (Status& s : results) {
      if (s.ok()) s = f.error();
    }
    finish(0);
    for (size_t i = 0; i < batch.size(); ++i) batch[i].done(results[i]);
    return retry;
  }

  if (lost_at != batch.size()) {
    log::error("store: write transaction aborted by SQLite; retrying the other calls",
               {{"error", results[lost_at].error().message}});
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.calls;
      ++stats_.failed_calls;
    }
    batch[lost_at].done(results[lost_at]);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i != lost_at) retry.push_back(std::move(batch[i]));
    }
    return retry;
  }

  finish(1);
  for (size_t i = 0; i < batch.size(); ++i) batch[i].done(results[i]);
  return retry;
}

}  // namespace composer::db
