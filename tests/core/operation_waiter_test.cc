// The operation waiter: many fabric operations in flight followed by one thread, the limit per
// fabric with its queue, deadlines, failures and stopping. The fabric here is a small one whose
// operations end after a real latency and which counts what runs at once on each fabric.
#include "composer/core/operation_waiter.h"

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace composer {
namespace {

using ::testing::HasSubstr;

// Hosts are "LANE:NAME"; an attach runs for `latency_ms`, a host named "LANE:fails" fails its
// operations, "LANE:refuses" refuses to start them.
class TimedFabric final : public Fabric {
 public:
  explicit TimedFabric(int latency_ms) : latency_ms_(latency_ms) {}

  std::string_view driver() const override { return "timed"; }
  Expected<FabricInventory> inventory() override { return FabricInventory{}; }
  Expected<Operation> attach(const std::string& host, const std::vector<std::string>&) override {
    if (host.ends_with(":refuses")) return Error{ErrorCode::kFabric, "refused at the door"};
    std::lock_guard lock(mu_);
    const std::string id = host + "#" + std::to_string(next_++);
    ends_[id] = std::chrono::steady_clock::now() + std::chrono::milliseconds(latency_ms_);
    const std::string lane = lane_of(id);
    max_running_[lane] = std::max(max_running_[lane], ++running_[lane]);
    return Operation{id, OperationState::kRunning, ""};
  }
  Expected<Operation> detach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    return attach(host, ids);
  }
  Expected<Operation> operation_status(const std::string& id) override {
    const int reading = ++status_reads_;
    int most = most_status_reads_.load();
    while (reading > most && !most_status_reads_.compare_exchange_weak(most, reading)) {
    }
    if (status_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(status_ms_));
    --status_reads_;
    std::lock_guard lock(mu_);
    ++polls_;
    status_threads_.insert(gettid());
    auto it = ends_.find(id);
    if (it == ends_.end()) return Error{ErrorCode::kNotFound, "no operation " + id};
    if (std::chrono::steady_clock::now() < it->second) {
      return Operation{id, OperationState::kRunning, ""};
    }
    ends_.erase(it);
    --running_[lane_of(id)];
    if (id.find(":fails#") != std::string::npos) {
      return Operation{id, OperationState::kFailed, "the switch said no"};
    }
    return Operation{id, OperationState::kDone, ""};
  }
  Expected<std::vector<std::pair<std::string, Health>>> health() override {
    return std::vector<std::pair<std::string, Health>>{};
  }
  std::string lane(const std::string& host) const override { return lane_of(host); }
  // The lane "serial" applies one change at a time, many in one batch.
  bool serialises_changes(const std::string& lane) const override { return lane == "serial"; }
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override {
    BatchStarted out;
    std::string host;
    for (size_t i = 0; i < changes.size(); ++i) {
      if (changes[i].fabric_host.ends_with(":refuses")) {
        out.refused.emplace(i, Error{ErrorCode::kConflict, "not that one"});
      } else {
        host = changes[i].fabric_host;
      }
    }
    {
      std::lock_guard lock(mu_);
      batch_sizes_.push_back(changes.size() - out.refused.size());
    }
    if (host.empty()) return out;
    auto op = attach(host, {});
    if (!op) return op.error();
    out.operation = *op;
    return out;
  }
  std::vector<size_t> batch_sizes() {
    std::lock_guard lock(mu_);
    return batch_sizes_;
  }

  int max_running(const std::string& lane) {
    std::lock_guard lock(mu_);
    return max_running_[lane];
  }
  // Each status read takes this long, as a request to a fabric manager does.
  void set_status_ms(int ms) { status_ms_ = ms; }
  int most_status_reads_at_once() const { return most_status_reads_.load(); }
  // Status reads so far, and the threads (kernel ids, never reused this soon) that made them.
  uint64_t polls() {
    std::lock_guard lock(mu_);
    return polls_;
  }
  size_t status_threads() {
    std::lock_guard lock(mu_);
    return status_threads_.size();
  }

 private:
  static std::string lane_of(const std::string& s) { return s.substr(0, s.find(':')); }

  const int latency_ms_;
  std::mutex mu_;
  uint64_t next_ = 0;
  uint64_t polls_ = 0;
  std::map<std::string, std::chrono::steady_clock::time_point> ends_;
  std::map<std::string, int> running_;
  std::map<std::string, int> max_running_;
  std::vector<size_t> batch_sizes_;
  std::set<pid_t> status_threads_;
  std::atomic<int> status_ms_{0};
  std::atomic<int> status_reads_{0};
  std::atomic<int> most_status_reads_{0};
};

FabricChange attach_to(const std::string& host) { return FabricChange{true, host, {"gpu"}}; }

size_t threads_of_this_process() {
  size_t n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

struct Ended {
  std::mutex mu;
  std::vector<Status> all;
  std::promise<void> last;
  size_t expected = 0;

  OperationWaiter::Done done() {
    return [this](Status s) {
      std::lock_guard lock(mu);
      all.push_back(std::move(s));
      if (all.size() == expected) last.set_value();
    };
  }
};

TEST(OperationWaiter, AThousandOperationsInFlightTakeOneLatencyAndNoThreadEach) {
  TimedFabric fabric(300);
  SystemClock clock;
  OperationWaiter waiter(fabric, clock, {.poll_interval_ms = 10, .max_in_flight = 1000});
  Ended ended;
  ended.expected = 1000;
  auto all_done = ended.last.get_future();
  const size_t threads_before = threads_of_this_process();
  const auto began = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    waiter.submit(attach_to("a:host-" + std::to_string(i)), clock.now_ms() + 30000, ended.done());
  }
  EXPECT_EQ(waiter.in_flight(), 1000u);
  // At most the status readers (16, kept for every round); never one per operation.
  EXPECT_LE(threads_of_this_process(), threads_before + 16) << "a thread per operation";
  ASSERT_EQ(all_done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  for (const Status& s : ended.all) EXPECT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(fabric.max_running("a"), 1000);
  // One after another they would take 300 s; a bound far above one latency keeps a loaded
  // machine from failing this.
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(waiter.in_flight(), 0u);
}

// The status of each operation in flight is a request to the fabric manager (a Redfish task
// monitor): a round reads them several at once, never more than 16, so that a thousand in
// flight do not make each round a thousand round trips long.
TEST(OperationWaiter, StatusesOfManyOperationsAreReadSeveralAtOnce) {
  TimedFabric fabric(100);
  fabric.set_status_ms(5);
  SystemClock clock;
  OperationWaiter waiter(fabric, clock, {.poll_interval_ms = 10, .max_in_flight = 1000});
  std::vector<std::future<Status>> done;
  for (int i = 0; i < 200; ++i) {
    auto p = std::make_shared<std::promise<Status>>();
    done.push_back(p->get_future());
    waiter.submit(attach_to("a:h" + std::to_string(i)), clock.now_ms() + 60000,
                  [p](Status s) { p->set_value(std::move(s)); });
  }
  for (auto& f : done) EXPECT_TRUE(f.get().ok());
  EXPECT_GT(fabric.most_status_reads_at_once(), 1);
  EXPECT_LE(fabric.most_status_reads_at_once(), 16);
}

// The status readers are started once and serve every round after: many rounds of 64
// operations in flight read their statuses on the same few threads, none started per round.
TEST(OperationWaiter, PollRoundsStartNoThreads) {
  TimedFabric fabric(400);
  SystemClock clock;
  OperationWaiter waiter(fabric, clock, {.poll_interval_ms = 5, .max_in_flight = 100});
  Ended ended;
  ended.expected = 64;
  auto all_done = ended.last.get_future();
  for (int i = 0; i < 64; ++i) {
    waiter.submit(attach_to("a:h" + std::to_string(i)), clock.now_ms() + 30000, ended.done());
  }
  ASSERT_EQ(all_done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  for (const Status& s : ended.all) EXPECT_TRUE(s.ok()) << s.error();
  // Several rounds ran (each reads all 64), so threads started per round would show here.
  ASSERT_GE(fabric.polls(), 64u * 5);
  // The 16 status readers, and the poller once fewer than 8 are left to read.
  EXPECT_LE(fabric.status_threads(), 16u + 1u);
}

TEST(OperationWaiter, EachFabricRunsAtMostItsLimitAndTheRestWaitTheirTurn) {
  TimedFabric fabric(40);
  SystemClock clock;
  OperationWaiter waiter(fabric, clock, {.poll_interval_ms = 5, .max_in_flight = 4});
  Ended ended;
  ended.expected = 40;
  auto all_done = ended.last.get_future();
  for (int i = 0; i < 40; ++i) {
    const std::string lane = i % 2 ? "pod-a" : "pod-b";
    waiter.submit(attach_to(lane + ":h"), clock.now_ms() + 30000, ended.done());
  }
  EXPECT_EQ(waiter.in_flight(), 8u);
  EXPECT_EQ(waiter.queued(), 32u);
  ASSERT_EQ(all_done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  for (const Status& s : ended.all) EXPECT_TRUE(s.ok()) << s.error();
  EXPECT_EQ(fabric.max_running("pod-a"), 4);
  EXPECT_EQ(fabric.max_running("pod-b"), 4);
}

TEST(OperationWaiter, TheDeadlineBoundsTheQueueAndTheOperation) {
  TimedFabric fabric(400);
  SystemClock clock;
  OperationWaiter waiter(fabric, clock, {.poll_interval_ms = 5, .max_in_flight = 1});
  const Status running = waiter.wait(attach_to("a:h"), clock.now_ms() + 100);
  ASSERT_FALSE(running.ok());
  EXPECT_EQ(running.error().code, ErrorCode::kTimeout);
  EXPECT_THAT(running.error().message, HasSubstr("fabric attach did not finish in time"));

  Ended ended;
  ended.expected = 1;
  auto first = ended.last.get_future();
  waiter.submit(attach_to("a:h"), clock.now_ms() + 5000, ended.done());
  const Status queued = waiter.wait(FabricChange{false, "a:h", {"gpu"}}, clock.now_ms() + 100);
  ASSERT_FALSE(queued.ok());
  EXPECT_EQ(queued.error().code, ErrorCode::kTimeout);
  EXPECT_THAT(queued.error().message,
              HasSubstr("fabric detach did not start in time: the fabric had its most "
                        "operations in flight (MaxFabricOperations=1)"));
  first.wait();
  EXPECT_TRUE(ended.all.at(0).ok());
}

TEST(OperationWaiter, AFailedOrRefusedOperationSaysWhy) {
  TimedFabric fabric(20);
  SystemClock clock;
  OperationWaiter waiter(fabric, clock, {.poll_interval_ms = 5});
  const Status failed = waiter.wait(attach_to("a:fails"), clock.now_ms() + 5000);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kFabric);
  EXPECT_EQ(failed.error().message, "fabric attach failed: the switch said no");
  const Status refused = waiter.wait(attach_to("a:refuses"), clock.now_ms() + 5000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "refused at the door");
  EXPECT_EQ(waiter.in_flight(), 0u);
}

// A fabric that applies one change at a time gets every change waiting in one batch: a burst
// of 100 attaches costs a few fabric changes, not 100, and a change it refuses fails alone.
TEST(OperationWaiter, ASerialisingFabricGetsEveryChangeWaitingInOneBatch) {
  TimedFabric fabric(200);
  SystemClock clock;
  OperationWaiter waiter(fabric, clock, {.poll_interval_ms = 5, .max_in_flight = 256});
  Ended ended;
  ended.expected = 100;
  auto all_done = ended.last.get_future();
  const auto began = std::chrono::steady_clock::now();
  for (int i = 0; i < 100; ++i) {
    waiter.submit(attach_to(i == 50 ? "serial:refuses" : "serial:h" + std::to_string(i)),
                  clock.now_ms() + 30000, ended.done());
  }
  ASSERT_EQ(all_done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  size_t refused = 0;
  for (const Status& s : ended.all) {
    if (!s.ok()) {
      ++refused;
      EXPECT_EQ(s.error().message, "not that one");
    }
  }
  EXPECT_EQ(refused, 1u);
  // However the submits and the poller interleave: a few batches carry all 99.
  const std::vector<size_t> sizes = fabric.batch_sizes();
  EXPECT_LE(sizes.size(), 4u);
  EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), size_t{0}), 99u);
  EXPECT_EQ(waiter.batches(), sizes.size());
  EXPECT_EQ(fabric.max_running("serial"), 1);
  EXPECT_LT(seconds, 10.0);  // 100 changes in a row: 20 s
}

// A completion that waits for another operation (a failed attach undone by a detach) must not
// stop the others, even with one completion thread.
TEST(OperationWaiter, ACompletionMayWaitForAnotherOperation) {
  TimedFabric fabric(30);
  SystemClock clock;
  OperationWaiter waiter(fabric, clock,
                         {.poll_interval_ms = 5, .max_in_flight = 2, .completion_threads = 1});
  Ended ended;
  ended.expected = 6;
  auto all_done = ended.last.get_future();
  for (int i = 0; i < 6; ++i) {
    waiter.submit(attach_to("a:fails"), clock.now_ms() + 10000, [&](Status attached) {
      EXPECT_FALSE(attached.ok());
      const Status undone =
          waiter.wait(FabricChange{false, "a:h", {"gpu"}}, clock.now_ms() + 10000);
      ended.done()(undone);
    });
  }
  ASSERT_EQ(all_done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  for (const Status& s : ended.all) EXPECT_TRUE(s.ok()) << s.error();
}

TEST(OperationWaiter, StoppingTellsEveryoneStillWaiting) {
  TimedFabric fabric(60000);
  SystemClock clock;
  Ended ended;
  ended.expected = 3;
  auto all_done = ended.last.get_future();
  {
    OperationWaiter waiter(fabric, clock, {.poll_interval_ms = 5, .max_in_flight = 1});
    for (int i = 0; i < 3; ++i) {
      waiter.submit(attach_to("a:h"), clock.now_ms() + 120000, ended.done());
    }
  }
  ASSERT_EQ(all_done.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  for (const Status& s : ended.all) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
    EXPECT_THAT(s.error().message, HasSubstr("composerd is stopping"));
  }
}

}  // namespace
}  // namespace composer
