#include "composer/policies/evaluate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "composer/common/units.h"
#include "policy_fixture.h"

namespace composer::policies {
namespace {

using ::testing::HasSubstr;
using testing::kDayNight;
using testing::kPool;
using testing::local;
using testing::parse_ok;

class EvaluatorTest : public ::testing::Test {
 protected:
  EvaluatorTest() : eval_(parse_ok(kDayNight), kPool), tz_(eval_.policy().time_zone) {}
  int64_t berlin(int y, int mo, int d, int h, int mi = 0) const {
    return local(tz_, y, mo, d, h, mi);
  }

  Evaluator eval_;
  const TimeZone& tz_;
};

TEST_F(EvaluatorTest, CapsInForceByDayAndByNight) {
  auto day = eval_.caps_in_force(berlin(2024, 3, 4, 10), "training");  // Monday 10:00
  ASSERT_TRUE(day.ok()) << day.error();
  EXPECT_EQ(day->window, "day");
  EXPECT_EQ(day->caps.get(DeviceType::kGpu), 12u);
  EXPECT_EQ(day->caps.get(DeviceType::kMem), 512u);
  EXPECT_EQ(day->caps.get(DeviceType::kNvme), 4u);
  EXPECT_EQ(day->until_s, berlin(2024, 3, 4, 20));
  auto night = eval_.caps_in_force(berlin(2024, 3, 4, 23), "training");
  ASSERT_TRUE(night.ok());
  EXPECT_EQ(night->window, "Default");
  EXPECT_EQ(night->caps.get(DeviceType::kGpu), 4u);
  EXPECT_FALSE(night->caps.capped[type_index(DeviceType::kNvme)]);
  EXPECT_EQ(night->caps.get(DeviceType::kNvme), 8u);  // uncapped: the pool
  auto weekend = eval_.caps_in_force(berlin(2024, 3, 9, 12), "inference");
  ASSERT_TRUE(weekend.ok());
  EXPECT_EQ(weekend->window, "Default");
  EXPECT_EQ(weekend->caps.get(DeviceType::kGpu), 12u);
  auto unknown = eval_.caps_in_force(0, "video");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message,
            "unknown workload class 'video': the policy defines training, inference");
}

TEST_F(EvaluatorTest, AdmitsAJobThatFitsEveryWindowOfItsRun) {
  JobQuery job{"training", 8, 64 * kGiB, 0, 4 * 3600, berlin(2024, 3, 4, 10)};
  auto a = eval_.admit(job);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_TRUE(a->admitted);
  EXPECT_THAT(a->windows, ::testing::ElementsAre("day"));
  EXPECT_EQ(eval_.explain(job, *a),
            "A training job asking for 8 GPUs, 64 GiB of memory for 4h can start at Mon "
            "2024-03-04 10:00 CET: it fits the training caps of window 'day' for its whole run.");
}

TEST_F(EvaluatorTest, AJobRunningIntoALowerCapWaitsForTheNextOpening) {
  // 8 GPUs by day is fine for training, but 12h from 10:00 reaches the night's cap of 4.
  JobQuery job{"training", 8, 0, 0, 12 * 3600, berlin(2024, 3, 4, 10)};
  auto a = eval_.admit(job);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->admitted);
  ASSERT_TRUE(a->hold.has_value());
  EXPECT_EQ(a->hold->window, "Default");
  EXPECT_EQ(a->hold->cap, 4u);
  EXPECT_EQ(a->hold->from_s, berlin(2024, 3, 4, 20));
  EXPECT_EQ(a->earliest_s, berlin(2024, 3, 5, 8));  // Tuesday's day window fits all 12 hours
  EXPECT_EQ(eval_.explain(job, *a),
            "A training job asking for 8 GPUs for 12h cannot start at Mon 2024-03-04 10:00 CET: "
            "from Mon 2024-03-04 20:00 CET to Tue 2024-03-05 08:00 CET window 'Default' caps "
            "training jobs at 4 GPUs. The earliest start is Tue 2024-03-05 08:00 CET.");
}

TEST_F(EvaluatorTest, InferenceByDayWaitsForTheEvening) {
  JobQuery job{"inference", 6, 0, 0, 3600, berlin(2024, 3, 8, 9)};  // Friday 09:00
  auto a = eval_.admit(job);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->admitted);
  EXPECT_EQ(a->hold->window, "day");
  EXPECT_EQ(a->earliest_s, berlin(2024, 3, 8, 20));
}

TEST_F(EvaluatorTest, AJobTooBigForTheSmallestCapAndLongerThanAWindowNeverStarts) {
  JobQuery job{"training", 10, 0, 0, 13 * 3600, berlin(2024, 3, 4, 7)};
  auto a = eval_.admit(job);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->admitted);
  EXPECT_FALSE(a->earliest_s.has_value());
  EXPECT_THAT(eval_.explain(job, *a), HasSubstr("No start within the next 7 days works"));
}

TEST_F(EvaluatorTest, MoreThanThePoolIsRefusedOutright) {
  JobQuery job{"inference", 0, 2048 * kGiB, 0, 60, berlin(2024, 3, 9, 7)};
  auto a = eval_.admit(job);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->admitted);
  EXPECT_EQ(a->hold->window, "pool");
  EXPECT_THAT(eval_.explain(job, *a),
              HasSubstr("the pool has only 1024 GiB of memory, so it can never run."));
}

TEST_F(EvaluatorTest, BadQueriesAreRefused) {
  auto no_time = eval_.admit(JobQuery{"training", 1, 0, 0, 0, 0});
  ASSERT_FALSE(no_time.ok());
  EXPECT_THAT(no_time.error().message, HasSubstr("time limit must be at least one second"));
  EXPECT_FALSE(eval_.admit(JobQuery{"video", 1, 0, 0, 60, 0}).ok());
  EXPECT_FALSE(eval_.admit(JobQuery{"training", 1, 0, 0, 60, 0}, 0).ok());
}

TEST(EvaluatorDst, TheDayWindowFollowsTheWallClockAcrossTheChange) {
  const Evaluator eval(parse_ok(kDayNight), kPool);
  const TimeZone& tz = eval.policy().time_zone;
  // Friday 29 March 2024 (CET) and Monday 1 April 2024 (CEST): the day window opens at
  // 08:00 local both times, which is 07:00 UTC and then 06:00 UTC.
  auto before = eval.caps_in_force(testing::utc(2024, 3, 29, 7, 0), "training");
  auto after = eval.caps_in_force(testing::utc(2024, 4, 1, 6, 0), "training");
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_EQ(before->window, "day");
  EXPECT_EQ(after->window, "day");
  EXPECT_EQ(eval.caps_in_force(testing::utc(2024, 4, 1, 5, 59), "training")->window, "Default");
  // Over the weekend of the change the Default stretch is one hour shorter.
  const int64_t fri_close = local(tz, 2024, 3, 29, 20), mon_open = local(tz, 2024, 4, 1, 8);
  EXPECT_EQ(mon_open - fri_close, 60 * 3600 - 3600);
  JobQuery job{"training", 8, 0, 0, 2 * 3600, local(tz, 2024, 3, 30, 12)};
  auto a = eval.admit(job);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->earliest_s, mon_open);
}

TEST(Formatting, DurationsAndAmounts) {
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(90 * 60), "1h 30m");
  EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600), "3d 4h");
  EXPECT_EQ(format_amount(DeviceType::kGpu, 1), "1 GPU");
  EXPECT_EQ(format_amount(DeviceType::kNvme, 2), "2 NVMe drives");
}

}  // namespace
}  // namespace composer::policies
