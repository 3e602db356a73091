#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>

#include "composer/db/sqlite.h"
#include "service_fixture.h"

namespace composer::testing {
namespace {

TEST_F(ServiceTest, ComposeAttachesRecordsAndReleaseFrees) {
  auto c = service_->compose(job(7, "n1", Request{.gpus = 2, .mem_bytes = 100 * kGiB}));
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->state, CompositionState::kReady);
  ASSERT_EQ(c->devices.size(), 4u);  // 2 GPUs + 2 memory blocks of 64G
  EXPECT_EQ(free_of(DeviceType::kGpu), 6u);

  auto inv = fabric_->inventory();
  ASSERT_TRUE(inv.ok());
  for (const auto& d : c->devices) EXPECT_EQ(inv->attached.at(d.id), "host-1") << d.id;

  auto r = service_->release(7, "n1");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->state, CompositionState::kReleased);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
  inv = fabric_->inventory();
  EXPECT_TRUE(inv->attached.empty());
  EXPECT_EQ(kinds(7),
            (std::vector<std::string>{"requested", "composing", "ready", "releasing", "released"}));
  // The answer is the composition as the release recorded it: what a read gives afterwards.
  auto stored = store_->composition((*r)->id);
  ASSERT_TRUE(stored.ok()) << stored.error();
  EXPECT_EQ((*r)->updated_ms, stored->updated_ms);
  EXPECT_EQ((*r)->attempts, stored->attempts);
  EXPECT_EQ((*r)->last_error, stored->last_error);
  EXPECT_EQ((*r)->hold, stored->hold);
  EXPECT_EQ((*r)->request, stored->request);
  ASSERT_EQ((*r)->devices.size(), stored->devices.size());
  for (size_t i = 0; i < stored->devices.size(); ++i) {
    const Device& a = (*r)->devices[i];
    const Device& b = stored->devices[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.composition_id, b.composition_id) << a.id;
    EXPECT_EQ(a.node, b.node) << a.id;
    EXPECT_EQ(a.drained, b.drained) << a.id;
    EXPECT_EQ(a.health, b.health) << a.id;
    EXPECT_EQ(a.holder, b.holder) << a.id;
    EXPECT_EQ(a.address, b.address) << a.id;
  }
}

TEST_F(ServiceTest, ComposeIsIdempotentAndRefusesADifferentRequest) {
  const Request r{.gpus = 1};
  auto first = service_->compose(job(8, "n1", r));
  ASSERT_TRUE(first.ok()) << first.error();
  auto again = service_->compose(job(8, "n1", r));
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(again->devices[0].id, first->devices[0].id);
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);

  auto other = service_->compose(job(8, "n1", Request{.gpus = 2}));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kConflict);
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);
}

TEST_F(ServiceTest, SecondReleaseIsANoOpSuccess) {
  ASSERT_TRUE(service_->compose(job(9, "n1", Request{.gpus = 1})).ok());
  auto first = service_->release(9, "n1");
  ASSERT_TRUE(first.ok());
  auto second = service_->release(9, "n1");
  ASSERT_TRUE(second.ok()) << second.error();
  ASSERT_TRUE(second->has_value());
  EXPECT_EQ((*second)->id, (*first)->id);
  EXPECT_EQ((*second)->state, CompositionState::kReleased);
  EXPECT_EQ(kinds(9).size(), 5u);  // nothing written by the second release

  auto never = service_->release(4242, "n1");
  ASSERT_TRUE(never.ok());
  EXPECT_FALSE(never->has_value());
}

TEST_F(ServiceTest, AJobIsComposedOnAllItsNodesAtOnceAndReleasedWithOneCall) {
  auto c = service_->compose_job(job(20, "", Request{.gpus = 2}), {"n1", "n2"});
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[0].node, "n1");
  EXPECT_EQ((*c)[1].node, "n2");
  EXPECT_EQ(free_of(DeviceType::kGpu), 4u);
  // A retry answers the same compositions.
  auto again = service_->compose_job(job(20, "", Request{.gpus = 2}), {"n1", "n2"});
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ((*again)[1].id, (*c)[1].id);
  EXPECT_EQ(free_of(DeviceType::kGpu), 4u);

  auto r = service_->release_job(20);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->size(), 2u);
  for (const auto& done : *r) EXPECT_EQ(done.state, CompositionState::kReleased);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
  auto repeated = service_->release_job(20);
  ASSERT_TRUE(repeated.ok()) << repeated.error();
  EXPECT_TRUE(repeated->empty());
}

TEST_F(ServiceTest, AJobOneNodeCannotServeGetsNothingAnywhere) {
  ASSERT_TRUE(service_->compose(job(21, "n2", Request{.gpus = 3})).ok());  // z2 keeps one GPU
  auto c = service_->compose_job(job(22, "", Request{.gpus = 2}), {"n1", "n2"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kInsufficient);
  EXPECT_NE(c.error().message.find("job 22 on node n2"), std::string::npos) << c.error();
  // n1's share was released again: only job 21 holds GPUs.
  EXPECT_EQ(free_of(DeviceType::kGpu), 5u);
  auto inv = fabric_->inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->attached.size(), 3u);
  auto nothing = service_->compose_job(job(23, "", Request{.gpus = 1}), {});
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(ServiceTest, ExhaustionIsRefusedAndChangesNothing) {
  ASSERT_TRUE(service_->compose(job(1, "n2", Request{.gpus = 4})).ok());
  auto more = service_->compose(job(2, "n2", Request{.gpus = 1}));  // n2 reaches z2 only
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.error().code, ErrorCode::kInsufficient);
  EXPECT_NE(more.error().message.find("job 2"), std::string::npos) << more.error().message;
  // The ledger keeps only the refusal: no composition, no device moved.
  EXPECT_EQ(kinds(2), std::vector<std::string>{"refused"});
  EXPECT_EQ(free_of(DeviceType::kGpu), 4u);
}

// A prolog asks again every 0.25 s while devices are being freed: the ledger keeps one
// "refused" event for the whole wait, a new one for another reason or after a pause, and the
// episode ends when the job composes.
TEST_F(ServiceTest, OneRefusedEventPerEpisode) {
  ASSERT_TRUE(service_->compose(job(1, "n2", Request{.gpus = 4})).ok());
  auto refused = [this](uint32_t id) {
    const auto k = kinds(id);
    return std::count(k.begin(), k.end(), "refused");
  };
  for (int i = 0; i < 20; ++i) {
    ASSERT_FALSE(service_->compose(job(2, "n2", Request{.gpus = 1})).ok());
    clock_.advance_ms(250);
  }
  EXPECT_EQ(refused(2), 1);
  // Another node of the same job is an episode of its own.
  ASSERT_FALSE(service_->compose(job(2, "nope", Request{.gpus = 1})).ok());
  EXPECT_EQ(refused(2), 2);
  // A pause longer than the episode's gap starts a new one.
  clock_.advance_ms(11000);
  ASSERT_FALSE(service_->compose(job(2, "n2", Request{.gpus = 1})).ok());
  EXPECT_EQ(refused(2), 3);
}

TEST_F(ServiceTest, EmptyRequestAndUnknownNodeAreRefused) {
  auto empty = service_->compose(job(3, "n1", Request{}));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);
  auto unknown = service_->compose(job(3, "nope", Request{.gpus = 1}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  // The empty request is a caller's error, not a refusal; the unknown node is refused.
  EXPECT_EQ(kinds(3), std::vector<std::string>{"refused"});
}

TEST_F(ServiceTest, FabricFailureRollsBackAndFreesTheDevices) {
  fabric_->fail_next_attaches(1, "PCIe switch port 3 down");
  auto c = service_->compose(job(11, "n1", Request{.gpus = 2}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kFabric);
  EXPECT_NE(c.error().message.find("PCIe switch port 3 down"), std::string::npos);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
  EXPECT_TRUE(fabric_->inventory()->attached.empty());
  EXPECT_EQ(kinds(11), (std::vector<std::string>{"requested", "composing", "failed"}));
  db::CompositionFilter f;
  f.job_id = 11;
  auto list = store_->compositions(f);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().state, CompositionState::kFailed);
  EXPECT_NE(list->front().last_error.find("PCIe switch port 3 down"), std::string::npos);

  // The prolog's retry then succeeds with a new composition.
  auto retry = service_->compose(job(11, "n1", Request{.gpus = 2}));
  ASSERT_TRUE(retry.ok()) << retry.error();
  EXPECT_EQ(free_of(DeviceType::kGpu), 6u);
}

TEST_F(ServiceTest, FailedDetachDuringReleaseKeepsItReleasingUntilRetried) {
  ASSERT_TRUE(service_->compose(job(12, "n1", Request{.gpus = 1})).ok());
  fabric_->fail_next_detaches(1, "switch busy");
  auto r = service_->release(12, "n1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("switch busy"), std::string::npos);
  auto live = store_->live_composition(12, "n1");
  ASSERT_TRUE(live.ok() && live->has_value());
  EXPECT_EQ((*live)->state, CompositionState::kReleasing);
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);  // not handed out while still attached

  auto again = service_->release(12, "n1");
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ((*again)->state, CompositionState::kReleased);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

TEST_F(ServiceTest, StateSurvivesARestartOfTheService) {
  auto c = service_->compose(job(14, "n1", Request{.gpus = 3}));
  ASSERT_TRUE(c.ok());
  open();  // a new service on the same database and fabric, as after a composerd restart
  EXPECT_EQ(free_of(DeviceType::kGpu), 5u);
  auto again = service_->compose(job(14, "n1", Request{.gpus = 3}));
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->id, c->id);
  ASSERT_TRUE(service_->release(14, "n1").ok());
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

// Holds the database's write lock (another connection's write transaction) while alive: the
// store's writer waits for it, as it would for a slow disk.
class WriteLock {
 public:
  explicit WriteLock(const std::string& path)
      : db_(db::sqlite::Connection::open(path, db::sqlite::Connection::Mode::kReadWrite, 5000)) {
    db_->exec({"holding the write lock", "BEGIN IMMEDIATE"});
  }
  void release() {
    if (held_) db_->exec({"letting the write lock go", "ROLLBACK"});
    held_ = false;
  }
  ~WriteLock() { release(); }

 private:
  std::unique_ptr<db::sqlite::Connection> db_;
  bool held_ = true;
};

// compose_async and release_async hand their records to the store's writer and return: the
// caller's thread (an API worker) is not held while a record is written; the answer comes once
// the store has it.
TEST_F(ServiceTest, TheCallerGoesOnWhileTheRecordsAreWritten) {
  WriteLock lock(dir_.file("composer.db"));
  std::promise<Expected<Composition>> composed;
  auto answer = composed.get_future();
  const auto began = std::chrono::steady_clock::now();
  service_->compose_async(job(7, "n1", Request{.gpus = 1}), [&composed](Expected<Composition> c) {
    composed.set_value(std::move(c));
  });
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(1));
  EXPECT_EQ(answer.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  lock.release();
  auto c = answer.get();
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->state, CompositionState::kReady);

  WriteLock again(dir_.file("composer.db"));
  std::promise<Expected<std::optional<Composition>>> released;
  auto gone = released.get_future();
  service_->release_async(7, "n1", [&released](Expected<std::optional<Composition>> r) {
    released.set_value(std::move(r));
  });
  EXPECT_EQ(gone.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  again.release();
  auto r = gone.get();
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->state, CompositionState::kReleased);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

// A service that goes while a compose's record is still being written waits for the write and
// answers the compose (composerd is stopping: nothing is attached, the record says failed).
TEST_F(ServiceTest, AServiceThatGoesAnswersTheComposeItsWriterStillHad) {
  WriteLock lock(dir_.file("composer.db"));
  std::atomic<int> told{0};
  std::optional<Expected<Composition>> answer;
  service_->compose_async(job(7, "n1", Request{.gpus = 1}), [&](Expected<Composition> c) {
    answer = std::move(c);
    ++told;
  });
  std::thread later([&lock] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    lock.release();
  });
  service_.reset();  // returns once the compose has been answered
  later.join();
  EXPECT_EQ(told.load(), 1);
  ASSERT_TRUE(answer.has_value());
  ASSERT_FALSE(answer->ok());
  EXPECT_NE(answer->error().message.find("stopping"), std::string::npos) << answer->error();
  EXPECT_TRUE(fabric_->inventory()->attached.empty());
  auto stored = store_->live_composition(7, "n1");
  ASSERT_TRUE(stored.ok()) << stored.error();
  EXPECT_FALSE(stored->has_value());
}

TEST_F(ServiceTest, ParallelComposesNeverShareADeviceAndThePoolAddsUp) {
  constexpr int kJobs = 40;
  std::atomic<int> ok{0};
  std::atomic<int> insufficient{0};
  std::mutex mu;
  std::vector<Composition> got;
  std::vector<std::thread> threads;
  for (int i = 0; i < kJobs; ++i) {
    threads.emplace_back([&, i] {
      auto c = service_->compose(job(100 + i, i % 2 ? "n1" : "n2", Request{.gpus = 1}));
      if (c.ok()) {
        ++ok;
        std::lock_guard lock(mu);
        got.push_back(*c);
      } else if (c.error().code == ErrorCode::kInsufficient) {
        ++insufficient;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok + insufficient, kJobs);
  EXPECT_EQ(ok.load(), 8);  // exactly the pool
  std::set<std::string> seen;
  for (const auto& c : got) {
    for (const auto& d : c.devices) EXPECT_TRUE(seen.insert(d.id).second) << d.id << " twice";
  }
  EXPECT_EQ(free_of(DeviceType::kGpu), 0u);
  for (const auto& c : got) ASSERT_TRUE(service_->release(c.owner.job_id, c.node).ok());
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

}  // namespace
}  // namespace composer::testing
