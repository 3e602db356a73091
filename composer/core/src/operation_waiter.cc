#include "composer/core/operation_waiter.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <utility>

namespace composer {

OperationWaiter::OperationWaiter(Fabric& fabric, const Clock& clock, OperationWaiterOptions options)
    : fabric_(fabric), clock_(clock), options_(options) {
  options_.max_in_flight = std::max<size_t>(1, options_.max_in_flight);
  options_.poll_interval_ms = std::max<int64_t>(1, options_.poll_interval_ms);
  poller_ = std::thread([this] { poll_loop(); });
  for (size_t i = 0; i < std::max<size_t>(1, options_.completion_threads); ++i) {
    completers_.emplace_back([this] { completion_loop(); });
  }
}

OperationWaiter::~OperationWaiter() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  poller_.join();
  std::vector<Pending> left;
  {
    std::lock_guard lock(mu_);
    left = std::move(running_);
    for (auto& [lane, q] : queued_) {
      for (auto& p : q) left.push_back(std::move(p));
    }
    queued_.clear();
  }
  for (auto& p : left) {
    const std::string what = p.what;
    complete(std::move(p), Error{ErrorCode::kUnavailable, "composerd is stopping: fabric " + what +
                                                              " no longer waited for"});
  }
  {
    std::lock_guard lock(mu_);
    completers_stop_ = true;
  }
  completed_.notify_all();
  for (auto& t : completers_) t.join();
  // A start that was under way when the poller stopped.
  for (auto& p : running_) {
    p.done(Error{ErrorCode::kUnavailable,
                 "composerd is stopping: fabric " + p.what + " no longer waited for"});
  }
}

void OperationWaiter::submit(std::string lane, Start start, int64_t deadline_ms, std::string what,
                             Done done) {
  enqueue(
      Pending{std::move(lane), std::move(start), deadline_ms, std::move(what), std::move(done)});
}

void OperationWaiter::enqueue(Pending p) {
  {
    std::unique_lock lock(mu_);
    if (stopping_) {
      lock.unlock();
      p.done(
          Error{ErrorCode::kUnavailable, "composerd is stopping: fabric " + p.what + " refused"});
      return;
    }
    size_t& running = running_per_lane_[p.lane];
    if (running >= options_.max_in_flight) {
      queued_[p.lane].push_back(std::move(p));
      return;
    }
    ++running;
  }
  Status how = Status::Ok();
  if (begin(p, &how)) {
    std::lock_guard lock(mu_);
    running_.push_back(std::move(p));
    return;
  }
  p.done(std::move(how));  // ended at once: on the caller's thread, which is waiting anyway
}

Status OperationWaiter::wait(std::string lane, Start start, int64_t deadline_ms, std::string what) {
  auto ended = std::make_shared<std::promise<Status>>();
  std::future<Status> result = ended->get_future();
  // Told on the poller's thread: a completion thread may be the one waiting here.
  enqueue(Pending{std::move(lane),
                  std::move(start),
                  deadline_ms,
                  std::move(what),
                  [ended](Status how) { ended->set_value(std::move(how)); },
                  {},
                  true});
  return result.get();
}

size_t OperationWaiter::in_flight() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [lane, running] : running_per_lane_) n += running;
  return n;
}

size_t OperationWaiter::queued() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [lane, q] : queued_) n += q.size();
  return n;
}

bool OperationWaiter::begin(Pending& p, Status* how) {
  Expected<Operation> started = p.start();
  if (started && started->state == OperationState::kRunning) {
    p.op = std::move(started).value();
    return true;
  }
  if (!started) {
    *how = started.error();
  } else if (started->state == OperationState::kFailed) {
    *how = Error{ErrorCode::kFabric, "fabric " + p.what + " failed: " + started->error};
  } else {
    *how = Status::Ok();
  }
  release(p.lane);
  return false;
}

void OperationWaiter::release(const std::string& lane) {
  bool waiting = false;
  {
    std::lock_guard lock(mu_);
    auto it = running_per_lane_.find(lane);
    if (it != running_per_lane_.end() && it->second > 0) --it->second;
    auto q = queued_.find(lane);
    waiting = q != queued_.end() && !q->second.empty();
  }
  if (waiting) wake_.notify_all();  // room on the lane: the poller starts the next one
}

void OperationWaiter::complete(Pending p, Status how) {
  if (p.inline_done) {
    p.done(std::move(how));
    return;
  }
  post([done = std::move(p.done), how = std::move(how)]() mutable { done(std::move(how)); });
}

void OperationWaiter::post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  completed_.notify_one();
}

void OperationWaiter::start_queued(Pending p) {
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    stopping = stopping_;
  }
  if (stopping) {
    p.done(Error{ErrorCode::kUnavailable, "composerd is stopping: fabric " + p.what + " refused"});
    return;
  }
  Status how = Status::Ok();
  if (begin(p, &how)) {
    std::lock_guard lock(mu_);
    running_.push_back(std::move(p));
    return;
  }
  p.done(std::move(how));
}

void OperationWaiter::poll_loop() {
  for (;;) {
    std::vector<Pending> batch;
    std::vector<Pending> startable;
    std::vector<Pending> expired;
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms));
      if (stopping_) return;
      batch = std::move(running_);
      running_.clear();
      const int64_t now = clock_.now_ms();
      for (auto& [lane, q] : queued_) {
        size_t& running = running_per_lane_[lane];
        while (!q.empty() && (q.front().deadline_ms <= now || running < options_.max_in_flight)) {
          if (q.front().deadline_ms <= now) {
            expired.push_back(std::move(q.front()));
          } else {
            ++running;
            startable.push_back(std::move(q.front()));
          }
          q.pop_front();
        }
      }
    }
    for (auto& p : expired) {
      const std::string what = p.what;
      complete(std::move(p), Error{ErrorCode::kTimeout,
                                   "fabric " + what + " did not start in time: the fabric had " +
                                       std::to_string(options_.max_in_flight) +
                                       " operations in flight (FabricMaxOperations)"});
    }
    // A start is one request to the fabric manager; it runs on a completion thread so that the
    // polling never waits for it. What wait() waits for starts here: a completion thread may be
    // the one waiting.
    std::vector<Pending> still;
    for (auto& p : startable) {
      if (!p.inline_done) {
        post([this, p = std::make_shared<Pending>(std::move(p))] { start_queued(std::move(*p)); });
        continue;
      }
      Status how = Status::Ok();
      if (begin(p, &how)) {
        still.push_back(std::move(p));
      } else {
        complete(std::move(p), std::move(how));
      }
    }
    for (auto& p : batch) {
      Status how = Status::Ok();
      if (clock_.now_ms() >= p.deadline_ms) {
        how = Error{ErrorCode::kTimeout,
                    "fabric " + p.what + " did not finish in time (operation " + p.op.id + ")"};
      } else if (auto next = fabric_.operation_status(p.op.id); !next) {
        how = next.error();
      } else if (next->state == OperationState::kRunning) {
        still.push_back(std::move(p));
        continue;
      } else if (next->state == OperationState::kFailed) {
        how = Error{ErrorCode::kFabric, "fabric " + p.what + " failed: " + next->error};
      }
      release(p.lane);
      complete(std::move(p), std::move(how));
    }
    std::lock_guard lock(mu_);
    for (auto& p : still) running_.push_back(std::move(p));
  }
}

void OperationWaiter::completion_loop() {
  for (;;) {
    std::function<void()> next;
    {
      std::unique_lock lock(mu_);
      completed_.wait(lock, [this] { return !tasks_.empty() || completers_stop_; });
      if (tasks_.empty()) return;  // stopping, and nothing left to do
      next = std::move(tasks_.front());
      tasks_.pop_front();
    }
    next();
  }
}

}  // namespace composer
