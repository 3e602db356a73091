// The live pool the composition service and the device administration share, driven directly:
// the admission check and the allocation as one step, an entry one call works on at a time,
// devices going back, the holder round, and the failure views. The pool here is the one the
// service loaded at start.
#include <string>
#include <vector>

#include "service_fixture.h"

namespace composer::testing {
namespace {

using LivePoolTest = ServiceTest;

ComposeInput input(uint32_t job_id, const std::string& node, Request r, std::string workload) {
  return ComposeInput{.owner = {.job_id = job_id,
                                .uid = 1000,
                                .user = "alice",
                                .account = "physics",
                                .workload = std::move(workload)},
                      .node = node,
                      .request = r};
}

// The policy's check sees what the class holds at the moment of the allocation, and names the
// class and window the entry counts against; a refusal takes nothing.
TEST_F(LivePoolTest, ReserveAdmitsAndAllocatesInOneStep) {
  pool_->set_admission_check([](const ComposeInput& in, const auto& held) -> Expected<Admission> {
    if (in.owner.workload == "capped" && !held("capped").empty()) {
      return Error{ErrorCode::kInsufficient, "cap reached"};
    }
    return Admission{.workload = in.owner.workload, .window = "night"};
  });
  auto first = pool_->reserve(input(1, "n1", Request{.gpus = 2}, "capped"), 0);
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_FALSE(first->existing.has_value());
  EXPECT_EQ(first->window, "night");
  EXPECT_EQ(first->entry.state, CompositionState::kComposing);
  EXPECT_TRUE(first->entry.busy);
  EXPECT_EQ(first->entry.devices.size(), 2u);
  EXPECT_EQ(free_of(DeviceType::kGpu), 6u);

  auto refused = pool_->reserve(input(2, "n1", Request{.gpus = 1}, "capped"), 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "cap reached");
  EXPECT_EQ(free_of(DeviceType::kGpu), 6u);
  EXPECT_TRUE(pool_->reserve(input(2, "n1", Request{.gpus = 1}, "other"), 0).ok());

  // The same (job, node) again is the entry already there, still busy: nothing more is taken.
  auto again = pool_->reserve(input(1, "n1", Request{.gpus = 2}, "capped"), 0);
  ASSERT_TRUE(again.ok()) << again.error();
  ASSERT_TRUE(again->existing.has_value());
  EXPECT_TRUE(again->existing->busy);
  EXPECT_EQ(free_of(DeviceType::kGpu), 5u);
}

// One call works on an entry at a time: another finds it busy once its wait ran out, a check
// that fails leaves it free, and forgetting it gives its devices back.
TEST_F(LivePoolTest, AnEntryIsTakenByOneCallAtATime) {
  auto reserved = pool_->reserve(input(3, "n2", Request{.gpus = 1}, "training"), 0);
  ASSERT_TRUE(reserved.ok()) << reserved.error();
  const LivePool::Key key{3, "n2"};
  const auto ok = [](const LivePool::LiveEntry&) { return Status::Ok(); };

  auto busy = pool_->take(key, 0, ok);
  ASSERT_TRUE(busy.ok() && busy->has_value());
  EXPECT_TRUE((*busy)->busy);
  pool_->unbusy(key);
  auto refused = pool_->take(key, 0, [](const LivePool::LiveEntry&) -> Status {
    return Error{ErrorCode::kConflict, "not now"};
  });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  auto taken = pool_->take(key, 0, ok);
  ASSERT_TRUE(taken.ok() && taken->has_value());
  EXPECT_FALSE((*taken)->busy);
  auto second = pool_->take(key, 0, ok);
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_TRUE((*second)->busy) << "taken twice";
  EXPECT_EQ(pool_->take_id(0).error().code, ErrorCode::kConflict);

  EXPECT_FALSE(pool_->take({3, "n1"}, 0, ok)->has_value());
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);
  pool_->forget(key, (*taken)->devices);
  EXPECT_FALSE(pool_->contains(key));
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

// A device the fabric shows on a host without composerd's claim becomes foreign at the round's
// end, unless it changed hands since the round began (the inventory may predate that); once
// the fabric frees it, it is pooled again.
TEST_F(LivePoolTest, TheHolderRoundLeavesWhatChangedSinceItBegan) {
  ASSERT_TRUE(fabric_->attach_behind_back("gpu-a-0", "host-1").ok());
  pool_->begin_holder_round();
  pool_->touch("gpu-a-0");
  auto inventory = fabric_->inventory();
  ASSERT_TRUE(inventory.ok()) << inventory.error();
  ASSERT_TRUE(pool_->note_holders(*inventory).ok());
  EXPECT_EQ(pool_->pooled_device("gpu-a-0")->state(), DeviceState::kFree);

  pool_->begin_holder_round();
  auto orphans = pool_->note_holders(*inventory);
  ASSERT_TRUE(orphans.ok()) << orphans.error();
  EXPECT_TRUE(orphans->empty()) << "composerd never claimed it";
  EXPECT_EQ(pool_->pooled_device("gpu-a-0")->state(), DeviceState::kForeign);
  EXPECT_EQ(store_->device("gpu-a-0")->holder, "host host-1");

  ASSERT_TRUE(fabric_->detach("host-1", {"gpu-a-0"}).ok());
  pool_->begin_holder_round();
  ASSERT_TRUE(pool_->note_holders(*fabric_->inventory()).ok());
  EXPECT_EQ(pool_->pooled_device("gpu-a-0")->state(), DeviceState::kFree);
}

// What the failure reactions and the metrics read: a ready composition with a device the
// fabric reports failed, with that device's domains; a composing one is not acted on yet.
TEST_F(LivePoolTest, FailureImpactsNameTheReadyCompositionsFailedDevicesHit) {
  auto c = service_->compose(job(4, "n1", Request{.gpus = 1}));
  ASSERT_TRUE(c.ok()) << c.error();
  auto composing = pool_->reserve(input(5, "n1", Request{.gpus = 1}, "training"), 0);
  ASSERT_TRUE(composing.ok()) << composing.error();
  const std::string hit = c->devices[0].id;
  ASSERT_TRUE(pool_->mark_health(hit, Health::kCritical, "reported by the fabric").ok());
  ASSERT_TRUE(
      pool_->mark_health(composing->entry.devices[0], Health::kCritical, "reported by the fabric")
          .ok());

  auto impacts = pool_->failure_impacts();
  ASSERT_EQ(impacts.size(), 1u);
  EXPECT_EQ(impacts[0].entry.job_id, 4u);
  EXPECT_EQ(impacts[0].failed, std::vector<std::string>{hit});
  EXPECT_EQ(store_->device(hit)->health, Health::kCritical);
  EXPECT_EQ(pool_->live().size(), 2u);
}

}  // namespace
}  // namespace composer::testing
