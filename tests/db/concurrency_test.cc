// Many threads composing and releasing at once: no lost writes, an exact ledger.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "store_fixture.h"

namespace composer::db::testing {
namespace {

using S = CompositionState;

TEST_P(BackendTest, EightThreadsTimesTwoHundredCyclesLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int kCycles = 200;
  reopen(/*durable=*/true);
  std::vector<Device> devices;
  for (int t = 0; t < kThreads; ++t) {
    devices.push_back(make_device("gpu-" + std::to_string(t)));
    devices.push_back(make_device("mem-" + std::to_string(t), DeviceType::kMem));
  }
  ASSERT_TRUE(store().upsert_devices(devices, 0).ok());

  std::atomic<int> failures{0};
  std::atomic<bool> stop_reading{false};
  std::atomic<int> reads{0};
  // A reader runs alongside: reads must keep working while the writer commits.
  std::thread reader([&] {
    while (!stop_reading) {
      auto live = store().compositions({.live_only = true});
      if (!live.ok() || live->size() > static_cast<size_t>(kThreads)) ++failures;
      ++reads;
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string node = "node" + std::to_string(t);
      const std::vector<std::string> mine = {"gpu-" + std::to_string(t),
                                             "mem-" + std::to_string(t)};
      for (int i = 0; i < kCycles; ++i) {
        const auto job = static_cast<uint32_t>(t * 1000 + i + 1);
        auto c = store().create_composition(make_composition(job, node, S::kRequested), mine, i);
        if (!c.ok()) {
          ADD_FAILURE() << c.error();
          ++failures;
          return;
        }
        const S path[] = {S::kRequested, S::kComposing, S::kReady, S::kReleasing, S::kReleased};
        for (size_t k = 0; k + 1 < std::size(path); ++k) {
          auto moved = store().transition(c->id, path[k], path[k + 1], "", i, k == 1);
          if (!moved.ok()) {
            ADD_FAILURE() << moved.error();
            ++failures;
            return;
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  stop_reading = true;
  reader.join();
  ASSERT_EQ(failures.load(), 0);
  EXPECT_GT(reads.load(), 0);

  auto all = store().compositions({});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), static_cast<size_t>(kThreads * kCycles));
  for (const auto& c : *all) {
    EXPECT_EQ(c.state, S::kReleased);
    EXPECT_EQ(c.attempts, 1u);
    EXPECT_EQ(c.devices.size(), 2u);
  }
  auto live = store().compositions({.live_only = true});
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->empty());
  auto attached = store().devices({.state = DeviceState::kAttached});
  ASSERT_TRUE(attached.ok());
  EXPECT_TRUE(attached->empty());

  // Exactly five events per cycle, each with both devices, and per job in state order.
  auto events = store().events({});
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), static_cast<size_t>(kThreads * kCycles * 5));
  auto job = store().events({.job_id = 3005});
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->size(), 5u);
  EXPECT_EQ((*job)[4].kind, "released");
  EXPECT_EQ((*job)[4].devices.size(), 2u);

  const WriteStats stats = store().write_stats();
  EXPECT_EQ(stats.failed_calls, 0u);
  EXPECT_GE(stats.calls, static_cast<uint64_t>(kThreads * kCycles * 5));
  EXPECT_LT(stats.transactions, stats.calls);  // group commit did share transactions
}

}  // namespace
}  // namespace composer::db::testing
