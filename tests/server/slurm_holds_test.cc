// composerd's run-time sync of Slurm: the hold reservations of the managed licenses and the
// policy's blockers, planned against what scontrol shows (slurm_holds.h).
#include "slurm_holds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "composer/common/slurm_text.h"
#include "composer/policies/compile_plan.h"
#include "composer/policies/diff_plan.h"
#include "plan_fixture.h"

namespace composer::server {
namespace {

using policies::Action;
using policies::ActionKind;
using policies::compile_plan;
using policies::Plan;
using policies::render_actions;
using policies::TimeZone;
using policies::testing::applied;
using policies::testing::kPool;
using policies::testing::PlanTest;
using ::testing::AllOf;
using ::testing::HasSubstr;

const SyncAction* action_for(const SyncPlan& p, std::string_view object) {
  for (const auto& a : p.actions)
    if (a.action.object == object) return &a;
  return nullptr;
}

TEST(SyncPlanTest, HoldsBackWhatThePoolCannotServe) {
  SlurmState slurm{{{"fabric_gpu", 8}, {"fabric_mem", 512}}, {}};
  // Two of 8 GPUs drained: Slurm may hand out 6.
  const SyncPlan p =
      sync_plan({{"fabric_gpu", 6}, {"fabric_mem", 512}}, {}, slurm, TimeZone::utc());
  EXPECT_TRUE(p.problems.empty());
  ASSERT_TRUE(p.changes());
  const SyncAction* hold = action_for(p, "hold_fabric_gpu");
  ASSERT_NE(hold, nullptr);
  EXPECT_EQ(hold->action.kind, ActionKind::kCreate);
  EXPECT_EQ(hold->action.command,
            "scontrol create reservation ReservationName=hold_fabric_gpu StartTime=now "
            "Duration=infinite Flags=ANY_NODES Licenses=fabric_gpu:2 Users=root");
  EXPECT_EQ(hold->undo, "scontrol delete ReservationName=hold_fabric_gpu");
  EXPECT_TRUE(hold->tightens);
  // Memory is all schedulable: no hold is needed, none is made.
  EXPECT_EQ(action_for(p, "hold_fabric_mem"), nullptr);
}

TEST(SyncPlanTest, AHoldIsUpdatedInPlaceAndDeletedWhenItHoldsNothing) {
  SlurmState slurm{
      {{"fabric_gpu", 8}},
      {{"hold_fabric_gpu", "2026-12-01T21:00:00", -1, {"ANY_NODES"}, {{"fabric_gpu", 2}}, "root"}}};
  // A device failed: one more held back, in place.
  SyncPlan p = sync_plan({{"fabric_gpu", 5}}, {}, slurm, TimeZone::utc());
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].action.kind, ActionKind::kUpdate);
  EXPECT_EQ(p.actions[0].action.command,
            "scontrol update ReservationName=hold_fabric_gpu Licenses=fabric_gpu:3");
  EXPECT_EQ(p.actions[0].undo,
            "scontrol update ReservationName=hold_fabric_gpu Licenses=fabric_gpu:2 Users=root");
  EXPECT_TRUE(p.actions[0].tightens);
  // One resumed: one less, in place.
  p = sync_plan({{"fabric_gpu", 7}}, {}, slurm, TimeZone::utc());
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].action.command,
            "scontrol update ReservationName=hold_fabric_gpu Licenses=fabric_gpu:1");
  EXPECT_FALSE(p.actions[0].tightens);
  // Already right: left alone.
  p = sync_plan({{"fabric_gpu", 6}}, {}, slurm, TimeZone::utc());
  EXPECT_FALSE(p.changes());
  // Everything schedulable again: the hold is deleted (Slurm 26.05 refuses a count of 0), and
  // the undo creates it as it was.
  p = sync_plan({{"fabric_gpu", 8}}, {}, slurm, TimeZone::utc());
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].action.kind, ActionKind::kRemove);
  EXPECT_EQ(p.actions[0].action.command, "scontrol delete ReservationName=hold_fabric_gpu");
  EXPECT_EQ(p.actions[0].undo,
            "scontrol create reservation ReservationName=hold_fabric_gpu StartTime=now "
            "Duration=infinite Flags=ANY_NODES Users=root Licenses=fabric_gpu:2");
  EXPECT_FALSE(p.actions[0].tightens);
  // A hold an older composerd brought to 0 holds nothing: deleted too.
  slurm.reservations[0].licenses[0].count = 0;
  p = sync_plan({{"fabric_gpu", 8}}, {}, slurm, TimeZone::utc());
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].action.kind, ActionKind::kRemove);
  // And when something must be held back again, it is created.
  slurm.reservations.clear();
  p = sync_plan({{"fabric_gpu", 7}}, {}, slurm, TimeZone::utc());
  ASSERT_EQ(p.actions.size(), 1u);
  EXPECT_EQ(p.actions[0].action.kind, ActionKind::kCreate);
  EXPECT_THAT(p.actions[0].action.command, HasSubstr("Licenses=fabric_gpu:1 "));
}

TEST(SyncPlanTest, AHoldOfALicenseNoLongerManagedIsDeleted) {
  SlurmState slurm{{{"fabric_gpu", 8}, {"training_gpu_cap", 8}},
                   {{"hold_training_gpu_cap",
                     "2026-12-01T21:00:00",
                     -1,
                     {"ANY_NODES"},
                     {{"training_gpu_cap", 4}},
                     "root"}}};
  // The policy with the training cap was replaced by one without caps.
  const SyncPlan p = sync_plan({{"fabric_gpu", 8}}, {}, slurm, TimeZone::utc());
  const SyncAction* hold = action_for(p, "hold_training_gpu_cap");
  ASSERT_NE(hold, nullptr);
  EXPECT_EQ(hold->action.kind, ActionKind::kRemove);
  EXPECT_THAT(hold->action.detail, HasSubstr("no longer managed"));
  EXPECT_THAT(hold->undo, HasSubstr("Licenses=training_gpu_cap:4"));
}

TEST(SyncPlanTest, SlurmWithFewerLicensesThanThePoolIsAWarningNotAHold) {
  SlurmState slurm{{{"fabric_gpu", 4}}, {}};
  const SyncPlan p = sync_plan({{"fabric_gpu", 6}}, {}, slurm, TimeZone::utc());
  EXPECT_FALSE(p.changes());
  EXPECT_TRUE(p.problems.empty());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_THAT(p.warnings[0], HasSubstr("fabric_gpu:4 but 6 can be served"));
}

TEST_F(PlanTest, SyncCreatesTheBlockersAndCapHoldsAndRepairsDrift) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));
  // slurm.conf gives every cap license the pool's size; the holds bring them to the highest cap.
  SlurmState slurm = applied(plan);
  for (auto& l : slurm.licenses)
    if (l.name.ends_with("_cap")) l.count = l.name.find("_mem_") != std::string::npos ? 1024 : 16;
  SyncPlan p = sync_plan(plan.licenses, plan.reservations, slurm, tz_);
  EXPECT_TRUE(p.problems.empty());
  const SyncAction* cap = action_for(p, "hold_training_gpu_cap");
  ASSERT_NE(cap, nullptr);
  EXPECT_THAT(cap->action.command, HasSubstr("Licenses=training_gpu_cap:4 "));
  for (const auto& r : plan.reservations) {
    const SyncAction* a = action_for(p, r.name);
    ASSERT_NE(a, nullptr) << r.name;
    EXPECT_EQ(a->action.kind, ActionKind::kLeave) << r.name;
  }
  // A blocker deleted by hand comes back, created (it is gone: nothing to update).
  std::erase_if(slurm.reservations,
                [](const ExistingReservation& e) { return e.name == "day_block_inference"; });
  p = sync_plan(plan.licenses, plan.reservations, slurm, tz_);
  const SyncAction* back = action_for(p, "day_block_inference");
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->action.kind, ActionKind::kCreate);
  EXPECT_EQ(back->undo, "scontrol delete ReservationName=day_block_inference");
}

TEST_F(PlanTest, NoOneOffBlockerWhereTheRecurringOneRunsTheOccurrenceAlready) {
  // Monday 10:00, in 'day'. The recurring blockers were made before 08:00, so Slurm runs
  // today's occurrence (StartTime 08:00 today) and a one-off copy would hold the same licenses
  // twice: Slurm refuses that when the two add up to more than a total.
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));
  SlurmState slurm = applied(plan);
  std::erase_if(slurm.reservations,
                [](const ExistingReservation& e) { return e.name.ends_with("_once"); });
  for (auto& e : slurm.reservations)
    if (e.name.starts_with("day_block_")) e.start_local = "2024-03-04T08:00:00";
  SyncPlan p = sync_plan(plan.licenses, plan.reservations, slurm, tz_);
  EXPECT_TRUE(p.problems.empty());
  EXPECT_EQ(action_for(p, "day_block_inference_once"), nullptr);
  EXPECT_EQ(action_for(p, "day_block_training_once"), nullptr);
  EXPECT_FALSE(p.changes()) << render_actions([&] {
    std::vector<Action> a;
    for (const auto& s : p.actions) a.push_back(s.action);
    return a;
  }());
  // Made at 09:00 for the first time, the recurring one starts tomorrow: the one-off covers
  // the rest of today.
  for (auto& e : slurm.reservations)
    if (e.name.starts_with("day_block_")) e.start_local = "2024-03-05T08:00:00";
  p = sync_plan(plan.licenses, plan.reservations, slurm, tz_);
  const SyncAction* once = action_for(p, "day_block_inference_once");
  ASSERT_NE(once, nullptr);
  EXPECT_EQ(once->action.kind, ActionKind::kCreate);
}

TEST_F(PlanTest, SyncRefusesTheWholePlanWhenSlurmLacksACapLicense) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));
  SlurmState slurm{{{"fabric_gpu", 16}, {"fabric_mem", 1024}, {"fabric_nvme", 8}}, {}};
  const SyncPlan p = sync_plan(plan.licenses, plan.reservations, slurm, tz_);
  ASSERT_FALSE(p.problems.empty());
  EXPECT_THAT(p.problems[0],
              AllOf(HasSubstr("Slurm has no license inference_gpu_cap: add inference_gpu_cap:12"),
                    HasSubstr("composerctl slurm-config")));
}

TEST_F(PlanTest, SyncLoosensBeforeItTightens) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));
  SlurmState slurm = applied(plan);
  // The pool shrank (a hold must grow) while a blocker holds more than the policy wants.
  for (auto& r : slurm.reservations)
    if (r.name == "day_block_inference") r.licenses[0].count += 2;
  slurm.reservations.push_back(
      {"hold_fabric_gpu", "2024-03-04T09:00:00", -1, {"ANY_NODES"}, {{"fabric_gpu", 0}}, "root"});
  std::vector<LicenseCount> wanted = plan.licenses;
  wanted[0] = {"fabric_gpu", 12};
  const SyncPlan p = sync_plan(wanted, plan.reservations, slurm, tz_);
  size_t blocker = 0, hold = 0;
  for (size_t i = 0; i < p.actions.size(); ++i) {
    if (p.actions[i].action.object == "day_block_inference") blocker = i;
    if (p.actions[i].action.object == "hold_fabric_gpu") hold = i;
  }
  EXPECT_EQ(p.actions[blocker].action.kind, ActionKind::kUpdate);
  EXPECT_FALSE(p.actions[blocker].tightens);
  EXPECT_TRUE(p.actions[hold].tightens);
  EXPECT_LT(blocker, hold);
}

}  // namespace
}  // namespace composer::server
