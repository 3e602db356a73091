#include "composer/core/operation_waiter.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <thread>
#include <utility>

#include "composer/common/thread_name.h"

namespace composer {
namespace {

// Status reads of one poll round made at once, at most, and the operations that make one more
// reader worth its thread.
constexpr size_t kStatusReaders = 16;
constexpr size_t kStatusesPerReader = 4;

std::string what_of(const FabricChange& c) { return c.attach ? "attach" : "detach"; }

Error stopping(const FabricChange& c) {
  return Error{ErrorCode::kUnavailable,
               "composerd is stopping: fabric " + what_of(c) + " no longer waited for"};
}

// How an operation that ended ended, for every change it carried.
Status ended(const Operation& op, const FabricChange& c) {
  if (op.state == OperationState::kFailed) {
    return Error{ErrorCode::kFabric, "fabric " + what_of(c) + " failed: " + op.error};
  }
  return Status::Ok();
}

}  // namespace

OperationWaiter::OperationWaiter(Fabric& fabric, const Clock& clock, OperationWaiterOptions options)
    : fabric_(fabric), clock_(clock), options_(options) {
  options_.max_in_flight = std::max<size_t>(1, options_.max_in_flight);
  options_.poll_interval_ms = std::max<int64_t>(1, options_.poll_interval_ms);
  const size_t workers = std::max<size_t>(1, options_.completion_threads);
  completers_ = std::make_unique<WorkQueue>(workers, "fabric-finish");
  starters_ = std::make_unique<WorkQueue>(workers, "fabric-start");
  poller_ = std::thread([this] {
    name_this_thread("fabric-poll");
    poll_loop();
  });
}

OperationWaiter::~OperationWaiter() { stop(); }

void OperationWaiter::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  poller_.join();
  readers_.reset();  // idle: a round waits for its readers
  // Starts still waiting are refused (start() sees stopping_); once the starters have ended,
  // nothing adds to running_ (a submit now is refused on its caller's thread).
  starters_.reset();
  std::vector<Waiting> left;  // then every change still waited for gets its answer
  {
    std::lock_guard lock(mu_);
    for (auto& r : running_) {
      for (auto& w : r.waiting) left.push_back(std::move(w));
    }
    running_.clear();
    for (auto& [lane, q] : queued_) {
      for (auto& w : q) left.push_back(std::move(w));
    }
    queued_.clear();
  }
  for (auto& w : left) {
    const Error why = stopping(w.change);
    complete(std::move(w), why);
  }
  completers_.reset();  // runs every completion still to come, then joins
}

void OperationWaiter::submit(FabricChange change, int64_t deadline_ms, Done done) {
  enqueue(Waiting{std::move(change), deadline_ms, std::move(done), false});
}

Status OperationWaiter::wait(FabricChange change, int64_t deadline_ms) {
  auto ended_at = std::make_shared<std::promise<Status>>();
  std::future<Status> result = ended_at->get_future();
  // Told on the poller's thread: a completion thread may be the one waiting here.
  enqueue(Waiting{std::move(change), deadline_ms,
                  [ended_at](Status how) { ended_at->set_value(std::move(how)); }, true});
  return result.get();
}

void OperationWaiter::enqueue(Waiting w) {
  std::string lane = fabric_.lane(w.change.fabric_host);
  {
    std::unique_lock lock(mu_);
    if (stopping_) {
      lock.unlock();
      w.done(Error{ErrorCode::kUnavailable,
                   "composerd is stopping: fabric " + what_of(w.change) + " refused"});
      return;
    }
    size_t& running = running_per_lane_[lane];
    auto& q = queued_[lane];
    // A serialising fabric's change is a whole edit (seconds, inside the call on Liqid): a
    // starter thread makes it, never the caller's, and the poller starts it at once when the
    // lane is idle, with whatever else arrived meanwhile.
    const bool serial = fabric_.serialises_changes(lane);
    if (serial || running >= options_.max_in_flight || !q.empty()) {
      q.push_back(std::move(w));
      lock.unlock();
      if (serial) wake_.notify_all();
      return;
    }
    ++running;
  }
  std::vector<Waiting> group;
  group.push_back(std::move(w));
  start(std::move(lane), std::move(group), false);
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

uint64_t OperationWaiter::batches() const {
  std::lock_guard lock(mu_);
  return batches_;
}

void OperationWaiter::start(std::string lane, std::vector<Waiting> group, bool queued) {
  bool stop = false;
  {
    std::lock_guard lock(mu_);
    stop = stopping_;
  }
  if (stop) {
    // On the caller's thread when it called: stop() may have ended the completion threads
    // since enqueue() let this change through.
    for (Waiting& w : group) {
      const Error why = stopping(w.change);
      if (queued) {
        complete(std::move(w), why);
      } else {
        w.done(why);
      }
    }
    return;
  }
  Running r{std::move(lane), {}, {}};
  // Each change's own answer when the start already decides it (a refusal, an error).
  std::vector<std::pair<Waiting, Status>> decided;
  if (fabric_.serialises_changes(r.lane)) {
    std::vector<FabricChange> changes;
    changes.reserve(group.size());
    for (const Waiting& w : group) changes.push_back(w.change);
    Expected<BatchStarted> started = fabric_.apply_batch(changes);
    {
      std::lock_guard lock(mu_);
      ++batches_;
    }
    for (size_t i = 0; i < group.size(); ++i) {
      if (!started) {
        decided.emplace_back(std::move(group[i]), started.error());
      } else if (auto it = started->refused.find(i); it != started->refused.end()) {
        decided.emplace_back(std::move(group[i]), it->second);
      } else {
        r.waiting.push_back(std::move(group[i]));
      }
    }
    if (started) r.op = std::move(started->operation);
  } else {
    const FabricChange& c = group.front().change;
    Expected<Operation> started = c.attach ? fabric_.attach(c.fabric_host, c.device_ids)
                                           : fabric_.detach(c.fabric_host, c.device_ids);
    if (!started) {
      decided.emplace_back(std::move(group.front()), started.error());
    } else {
      r.op = std::move(started).value();
      r.waiting = std::move(group);
    }
  }
  if (!r.waiting.empty() && r.op.state == OperationState::kRunning && !r.op.id.empty()) {
    bool idle = false;
    {
      std::lock_guard lock(mu_);
      idle = running_.empty();
      running_.push_back(std::move(r));
    }
    if (idle) wake_.notify_all();  // the poller sleeps while it has nothing to follow
  } else {
    for (Waiting& w : r.waiting) {
      const Status how = ended(r.op, w.change);
      decided.emplace_back(std::move(w), how);
    }
    release(r.lane);
  }
  for (auto& [w, how] : decided) {
    if (queued) {
      complete(std::move(w), std::move(how));
    } else {
      w.done(std::move(how));  // ended before submit returned: on its caller's thread
    }
  }
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

void OperationWaiter::complete(Waiting w, Status how) {
  if (w.inline_done) {
    w.done(std::move(how));
    return;
  }
  post([done = std::move(w.done), how = std::move(how)]() mutable { done(std::move(how)); });
}

void OperationWaiter::post(std::function<void()> task, bool start) {
  (start ? starters_ : completers_)->post(std::move(task));
}

void OperationWaiter::poll_loop() {
  for (;;) {
    std::vector<Running> batch;
    std::vector<std::pair<std::string, std::vector<Waiting>>> startable;
    std::vector<Waiting> expired;
    {
      std::unique_lock lock(mu_);
      const auto nothing_queued = [this] {
        return std::all_of(queued_.begin(), queued_.end(),
                           [](const auto& lane) { return lane.second.empty(); });
      };
      if (running_.empty() && nothing_queued()) {
        // Idle: no wake-up every poll interval, only when there is something to follow.
        wake_.wait(lock, [&] { return stopping_ || !running_.empty() || !nothing_queued(); });
      } else {
        wake_.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms));
      }
      if (stopping_) return;
      batch = std::move(running_);
      running_.clear();
      const int64_t now = clock_.now_ms();
      for (auto& [lane, q] : queued_) {
        std::erase_if(q, [&](Waiting& w) {
          if (w.deadline_ms > now) return false;
          expired.push_back(std::move(w));
          return true;
        });
        size_t& running = running_per_lane_[lane];
        const bool serial = fabric_.serialises_changes(lane);
        const size_t cap = serial ? 1 : options_.max_in_flight;
        while (!q.empty() && running < cap) {
          ++running;
          std::vector<Waiting> group;
          // A serialised fabric takes everything waiting in one batch.
          const size_t n = serial ? q.size() : 1;
          for (size_t i = 0; i < n; ++i) {
            group.push_back(std::move(q.front()));
            q.pop_front();
          }
          startable.emplace_back(lane, std::move(group));
        }
      }
    }
    for (auto& w : expired) {
      const Error why{ErrorCode::kTimeout,
                      "fabric " + what_of(w.change) +
                          " did not start in time: the fabric had its most operations in flight "
                          "(MaxFabricOperations=" +
                          std::to_string(options_.max_in_flight) + ")"};
      complete(std::move(w), why);
    }
    // A start is a request to the fabric manager: a starter thread makes it, so that the
    // polling never waits for it.
    for (auto& [lane, group] : startable) {
      auto moved = std::make_shared<std::pair<std::string, std::vector<Waiting>>>(std::move(lane),
                                                                                  std::move(group));
      post([this, moved] { start(std::move(moved->first), std::move(moved->second), true); }, true);
    }
    // Follows one running operation; true while it still runs.
    const auto follow = [this](Running& r) {
      // Changes past their deadline end with a timeout; the operation is followed while any waits.
      const int64_t now = clock_.now_ms();
      std::erase_if(r.waiting, [&](Waiting& w) {
        if (w.deadline_ms > now) return false;
        const Error why{
            ErrorCode::kTimeout,
            "fabric " + what_of(w.change) + " did not finish in time (operation " + r.op.id + ")"};
        complete(std::move(w), why);
        return true;
      });
      if (r.waiting.empty()) {
        release(r.lane);
        return false;
      }
      auto next = fabric_.operation_status(r.op.id);
      if (next && next->state == OperationState::kRunning) return true;
      release(r.lane);
      for (Waiting& w : r.waiting) {
        const Status how = next ? ended(*next, w.change) : Status(next.error());
        complete(std::move(w), how);
      }
      return false;
    };
    // Each status is a request to the fabric manager (a Redfish task monitor is a GET): a
    // thousand in flight, read one after another, would make a round last a thousand
    // round trips. Up to kStatusReaders are read at once, by the waiter's status readers: the
    // threads of a WorkQueue started by the first round that needs them and kept for every
    // round after (operation_waiter_test, PollRoundsStartNoThreads).
    std::vector<char> runs(batch.size(), 0);
    const size_t readers = std::min(kStatusReaders, batch.size() / kStatusesPerReader);
    if (readers <= 1) {
      for (size_t i = 0; i < batch.size(); ++i) runs[i] = follow(batch[i]) ? 1 : 0;
    } else {
      if (!readers_) readers_ = std::make_unique<WorkQueue>(kStatusReaders, "fabric-status");
      std::atomic<size_t> next{0};
      std::latch read(static_cast<std::ptrdiff_t>(readers));
      for (size_t t = 0; t < readers; ++t) {
        readers_->post([&] {
          for (size_t i = next++; i < batch.size(); i = next++) runs[i] = follow(batch[i]) ? 1 : 0;
          read.count_down();
        });
      }
      read.wait();
    }
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (runs[i] != 0) running_.push_back(std::move(batch[i]));
    }
  }
}

}  // namespace composer
