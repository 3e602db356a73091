// The policy compiled into Slurm's licenses and blocker reservations (compile_plan) and that
// plan against what Slurm has (diff_plan). composerd's run-time holds, planned against the same
// fixture, are tested in tests/server/slurm_holds_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "composer/common/slurm_text.h"
#include "composer/common/units.h"
#include "composer/policies/compile_plan.h"
#include "composer/policies/diff_plan.h"
#include "plan_fixture.h"
#include "policy_fixture.h"

namespace composer::policies {
namespace {

using ::testing::AllOf;
using testing::applied;
using ::testing::Contains;
using ::testing::HasSubstr;
using testing::kDayNight;
using testing::kPool;
using testing::parse_ok;
using testing::PlanTest;

const BlockerReservation* find(const Plan& plan, std::string_view name) {
  for (const auto& r : plan.reservations)
    if (r.name == name) return &r;
  return nullptr;
}

std::vector<std::string> names(const Plan& plan) {
  std::vector<std::string> out;
  for (const auto& r : plan.reservations) out.push_back(r.name);
  return out;
}

std::vector<ActionKind> kinds(const std::vector<Action>& actions) {
  std::vector<ActionKind> out;
  for (const auto& a : actions) out.push_back(a.kind);
  return out;
}

TEST_F(PlanTest, LicensesAreThePoolAndEachClassesHighestCap) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));
  EXPECT_EQ(format_licenses(plan.licenses),
            "fabric_gpu:16,fabric_mem:1024,fabric_nvme:8,training_gpu_cap:12,"
            "training_mem_cap:512,training_nvme_cap:8,inference_gpu_cap:12,inference_mem_cap:768");
  EXPECT_EQ(job_licenses(plan, "training", 4, 100 * kGiB + 1, 1),
            "fabric_gpu:4,training_gpu_cap:4,fabric_mem:101,training_mem_cap:101,fabric_nvme:1,"
            "training_nvme_cap:1");
  EXPECT_EQ(job_licenses(plan, "inference", 0, 0, 2), "fabric_nvme:2");
}

// Memory licenses count the pool's blocks: a job asking for 1 GiB of a pool of 64 GiB blocks
// holds 64 of fabric_mem and of its class's cap, as the block it takes is gone for others; a
// cap that is not a whole number of blocks is said to be short of what the policy allows.
TEST_F(PlanTest, MemoryCapsAreChargedInWholeBlocks) {
  PoolSize pool = kPool;
  pool.mem_block_bytes = 64 * kGiB;
  const Plan plan = compile_plan(policy_, pool, berlin(2024, 3, 4, 10));
  EXPECT_EQ(job_licenses(plan, "training", 0, kGiB, 0), "fabric_mem:64,training_mem_cap:64");
  EXPECT_EQ(job_licenses(plan, "training", 0, 65 * kGiB, 0), "fabric_mem:128,training_mem_cap:128");
  // kDayNight's memory caps are 256, 512 and 768 GiB: whole blocks, nothing to say.
  EXPECT_THAT(plan.warnings, ::testing::Not(Contains(HasSubstr("whole number"))));
  const Policy odd = parse_ok(R"(TimeZone=UTC
Class=training
Limit=training Window=Default Mem=100G
)");
  const Plan odd_plan = compile_plan(odd, pool, berlin(2024, 3, 4, 10));
  EXPECT_THAT(odd_plan.warnings,
              Contains("training's memory cap of 100 GiB (in 'Default') is not a whole number of "
                       "the pool's 64 GiB blocks; jobs hold whole blocks, so the class holds at "
                       "most 64 GiB of memory there"));
}

TEST_F(PlanTest, BlockersPerClassAndLowerWindowWithTheRightRecurrence) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));  // Monday, in 'day'
  EXPECT_THAT(
      names(plan),
      ::testing::UnorderedElementsAre(
          "day_block_training_once", "day_block_training", "default_block_training_mon",
          "default_block_training_tue", "default_block_training_wed", "default_block_training_thu",
          "default_block_training_fri", "day_block_inference_once", "day_block_inference"));
  const auto* inf = find(plan, "day_block_inference");
  ASSERT_NE(inf, nullptr);
  EXPECT_EQ(inf->to_slurm(),
            "ReservationName=day_block_inference StartTime=2024-03-05T08:00:00 Duration=720 "
            "Flags=ANY_NODES,WEEKDAY Licenses=inference_gpu_cap:8,inference_mem_cap:512 "
            "Users=root");
  const auto* once = find(plan, "day_block_inference_once");
  ASSERT_NE(once, nullptr);
  EXPECT_EQ(once->to_slurm(),
            "ReservationName=day_block_inference_once StartTime=now Duration=600 "
            "Flags=ANY_NODES Licenses=inference_gpu_cap:8,inference_mem_cap:512 Users=root");
  const auto* training_day = find(plan, "day_block_training");
  ASSERT_NE(training_day, nullptr);
  EXPECT_EQ(format_licenses(training_day->licenses), "training_nvme_cap:4");
  const auto* weekend = find(plan, "default_block_training_fri");
  ASSERT_NE(weekend, nullptr);
  EXPECT_EQ(weekend->recurrence, Recurrence::kWeekly);
  EXPECT_EQ(weekend->start_local, "2024-03-08T20:00:00");
  EXPECT_EQ(weekend->duration_min, 60 * 60);
  EXPECT_EQ(format_licenses(weekend->licenses), "training_gpu_cap:8,training_mem_cap:256");
  EXPECT_EQ(find(plan, "default_block_training_mon")->start_local, "2024-03-04T20:00:00");
  EXPECT_EQ(find(plan, "default_block_training_mon")->duration_min, 720);
}

TEST_F(PlanTest, DailyAndWeekendWindowsMapToDailyAndWeekend) {
  const Policy p = parse_ok(
      "TimeZone=UTC\n"
      "Window=night Start=22:00 End=06:00\n"
      "Window=weekend Days=Sat,Sun Start=10:00 End=18:00\n"
      "Window=odd Days=Tue,Thu Start=07:00 End=08:00\n"
      "Class=a\nDefaultClass=a\n"
      "Limit=a Window=night Gpus=2\nLimit=a Window=weekend Gpus=4\nLimit=a Window=odd Gpus=6\n"
      "Limit=a Window=Default Gpus=8\n");
  const Plan plan = compile_plan(p, kPool, testing::utc(2024, 3, 4, 12));
  ASSERT_NE(find(plan, "night_block_a"), nullptr) << plan.render();
  EXPECT_EQ(find(plan, "night_block_a")->recurrence, Recurrence::kDaily);
  EXPECT_EQ(find(plan, "weekend_block_a")->recurrence, Recurrence::kWeekend);
  EXPECT_EQ(find(plan, "weekend_block_a")->start_local, "2024-03-09T10:00:00");
  EXPECT_EQ(find(plan, "odd_block_a_tue")->recurrence, Recurrence::kWeekly);
  EXPECT_EQ(find(plan, "odd_block_a_thu")->start_local, "2024-03-07T07:00:00");
  EXPECT_EQ(format_licenses(find(plan, "odd_block_a_tue")->licenses), "a_gpu_cap:2");
  // A job crossing from the weekend into the night counts against both blockers.
  EXPECT_THAT(
      plan.warnings,
      Contains(HasSubstr("a job whose run reaches into both 'night' and 'weekend' "
                         "counts against both blockers, so Slurm lets it hold at most 0 "
                         "GPUs although the policy allows 2 GPUs; such a job never starts")));
}

TEST_F(PlanTest, WarnsWhereSlurmCannotFollowThePolicy) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));
  EXPECT_THAT(plan.warnings,
              Contains("training jobs asking for more than 4 GPUs (the cap in 'Default') can "
                       "never start if their time limit is longer than 12h, the longest stretch "
                       "between those periods; job_submit should refuse them"));
  EXPECT_THAT(plan.warnings, Contains(AllOf(HasSubstr("the clocks change on 2024-03-31 at 02:00"),
                                            HasSubstr("inside blocker default_block_training_fri"),
                                            HasSubstr("ends 60 minutes late"))));
  EXPECT_THAT(plan.warnings, Contains(AllOf(HasSubstr("the clocks change on 2024-10-27 at 03:00"),
                                            HasSubstr("ends 60 minutes early"))));
  const std::string text = plan.render();
  EXPECT_THAT(text, HasSubstr("Licenses=fabric_gpu:16,"));
  EXPECT_THAT(text, HasSubstr("# note: Slurm reads StartTime in slurmctld's own time zone: run "
                              "slurmctld with TZ=Europe/Berlin"));
  EXPECT_THAT(text, HasSubstr("# WARNING: training jobs asking for more than 4 GPUs"));
}

TEST_F(PlanTest, ActivationInsideTheWeekendBlocksUntilMonday) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 9, 12));  // Saturday noon
  const auto* once = find(plan, "default_block_training_fri_once");
  ASSERT_NE(once, nullptr) << plan.render();
  EXPECT_EQ(once->duration_min, 44 * 60);  // until Monday 08:00
  EXPECT_EQ(find(plan, "day_block_inference_once"), nullptr);
  EXPECT_EQ(is_blocker_name("default_block_training_fri_once"), true);
  EXPECT_EQ(is_blocker_name("maintenance"), false);
}

TEST_F(PlanTest, EmptySlurmGetsEverythingCreatedLicensesFirst) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));
  const auto actions = diff_plan(plan, SlurmState{}, tz_);
  ASSERT_EQ(actions.size(), plan.reservations.size() + 1);
  EXPECT_EQ(actions[0].kind, ActionKind::kConfigure);
  EXPECT_EQ(actions[0].command, "scontrol reconfigure");
  EXPECT_THAT(actions[0].detail, HasSubstr("set Licenses=fabric_gpu:16,"));
  for (size_t i = 1; i < actions.size(); ++i) {
    EXPECT_EQ(actions[i].kind, ActionKind::kCreate);
    EXPECT_THAT(actions[i].command, HasSubstr("scontrol create reservation ReservationName="));
  }
}

TEST_F(PlanTest, TheSamePolicyTwiceChangesNothing) {
  const Plan first = compile_plan(policy_, kPool, berlin(2024, 3, 4, 10));
  const SlurmState state = applied(first, {{"matlab", 10}});
  for (int64_t later : {berlin(2024, 3, 4, 10), berlin(2024, 3, 4, 11, 30)}) {
    const Plan again = compile_plan(policy_, kPool, later);
    const auto actions = diff_plan(again, state, tz_);
    for (const auto& a : actions) {
      EXPECT_EQ(a.kind, ActionKind::kLeave) << render_actions(actions);
      EXPECT_TRUE(a.command.empty());
    }
  }
}

TEST_F(PlanTest, AChangedCapUpdatesInPlaceAndNeverRecreates) {
  const SlurmState state =
      applied(compile_plan(policy_, kPool, berlin(2024, 3, 4, 10)), {{"matlab", 10}});
  std::string text = kDayNight;
  text.replace(text.find("Limit=inference Window=day Gpus=25%"), 35,
               "Limit=inference Window=day Gpus=50%");
  const Policy changed = parse_ok(text);
  const auto actions = diff_plan(compile_plan(changed, kPool, berlin(2024, 3, 4, 12)), state, tz_);
  std::vector<std::string> updates;
  for (const auto& a : actions) {
    EXPECT_NE(a.kind, ActionKind::kCreate);
    EXPECT_NE(a.kind, ActionKind::kRemove);
    if (a.kind == ActionKind::kUpdate) updates.push_back(a.command);
  }
  EXPECT_THAT(updates, ::testing::UnorderedElementsAre(
                           "scontrol update ReservationName=day_block_inference "
                           "Licenses=inference_gpu_cap:4,inference_mem_cap:512",
                           "scontrol update ReservationName=day_block_inference_once "
                           "Licenses=inference_gpu_cap:4,inference_mem_cap:512"));
}

TEST_F(PlanTest, DiffFixesDriftAndRemovesOnlyStaleBlockers) {
  const Plan plan = compile_plan(policy_, kPool, berlin(2024, 3, 5, 9));  // Tuesday 09:00
  SlurmState state = applied(compile_plan(policy_, kPool, berlin(2024, 3, 4, 10)));
  for (auto& r : state.reservations) {
    if (r.name == "day_block_inference") {
      r.flags = {"ANY_NODES", "DAILY"};
      r.duration_min = 700;
    }
  }
  state.reservations.push_back({"night_block_training",
                                "2024-03-04T20:00:00",
                                720,
                                {"ANY_NODES", "DAILY"},
                                {{"training_gpu_cap", 8}},
                                "root"});
  state.reservations.push_back({"maintenance", "2024-03-06T08:00:00", 60, {"MAINT"}, {}, "root"});
  const auto actions = diff_plan(plan, state, tz_);
  const std::string text = render_actions(actions);
  EXPECT_THAT(text, HasSubstr("update  day_block_inference  duration 700 -> 720 min; drop flag "
                              "DAILY; add flag WEEKDAY: scontrol update "
                              "ReservationName=day_block_inference Duration=720 Flags-=DAILY "
                              "Flags+=WEEKDAY"));
  // Yesterday's one-off ended at 20:00; today the recurring blocker runs the occurrence
  // (it started at 08:00), so no one-off is wanted and the stale one goes.
  EXPECT_THAT(text, HasSubstr("remove  day_block_inference_once  blocker the policy no longer "
                              "has: scontrol delete ReservationName=day_block_inference_once"));
  EXPECT_THAT(text, HasSubstr("remove  night_block_training  blocker the policy no longer has: "
                              "scontrol delete ReservationName=night_block_training"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("maintenance")));
  EXPECT_THAT(kinds(actions), ::testing::Not(Contains(ActionKind::kCreate)));
}

TEST_F(PlanTest, ShrinkingLicensesGoLastAndKeepForeignOnes) {
  const SlurmState state =
      applied(compile_plan(policy_, kPool, berlin(2024, 3, 4, 10)), {{"matlab", 10}});
  const PoolSize smaller{12, 1024, 8};
  const auto actions =
      diff_plan(compile_plan(policy_, smaller, berlin(2024, 3, 4, 10)), state, tz_);
  ASSERT_FALSE(actions.empty());
  EXPECT_EQ(actions.back().kind, ActionKind::kConfigure);
  EXPECT_THAT(actions.back().detail, HasSubstr("fabric_gpu 16 -> 12"));
  EXPECT_THAT(actions.back().detail, HasSubstr("set Licenses=matlab:10,fabric_gpu:12,"));
}

}  // namespace
}  // namespace composer::policies
