// Slurm's time arguments, read in a fixed time zone against a fixed "now".
#include "composer/accounting/time_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ledger.h"

namespace composer::accounting {
namespace {

using testing::kH;
using testing::kT0;

class TimeSpecTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::use_utc(); }
  // 2024-01-01T13:45:30Z
  static constexpr int64_t kNow = kT0 + 13 * kH + 45 * 60000 + 30000;
  static int64_t at(std::string_view text, TimeDirection direction = TimeDirection::kPast) {
    auto t = parse_slurm_time(text, kNow, direction);
    EXPECT_TRUE(t.ok()) << text << ": " << t.error();
    return t.ok() ? *t : -1;
  }
  static int64_t ahead(std::string_view text) { return at(text, TimeDirection::kFuture); }
};

TEST_F(TimeSpecTest, RelativeToNow) {
  EXPECT_EQ(at("now"), kNow);
  EXPECT_EQ(at("now-30"), kNow - 30000);
  EXPECT_EQ(at("now-2hours"), kNow - 2 * kH);
  EXPECT_EQ(at("now-7days"), kNow - 7 * 24 * kH);
  EXPECT_EQ(at("now-1week"), kNow - 7 * 24 * kH);
  EXPECT_EQ(at("now+15minutes"), kNow + 15 * 60000);
  EXPECT_EQ(at("now-3h"), kNow - 3 * kH);
  EXPECT_EQ(at("NOW-1D"), kNow - 24 * kH);
  EXPECT_EQ(at("now-90"), kNow - 90000);
  EXPECT_EQ(at("now-30m"), kNow - 30 * 60000);
  EXPECT_EQ(at("now-2h"), kNow - 2 * kH);
  EXPECT_EQ(at("now+1day"), kNow + 24 * kH);
  EXPECT_EQ(at("now-10seconds"), kNow - 10000);
  EXPECT_EQ(at("now+2weeks"), kNow + 14 * 24 * kH);
  // "now" is the same moment in either direction.
  EXPECT_EQ(ahead("now-1hour"), kNow - kH);
}

TEST_F(TimeSpecTest, NamedTimes) {
  EXPECT_EQ(at("today"), kT0);
  EXPECT_EQ(at("midnight"), kT0);
  EXPECT_EQ(at("noon"), kT0 + 12 * kH);
  EXPECT_EQ(at("teatime"), kT0 + 16 * kH);
  EXPECT_EQ(at("tomorrow"), kT0 + 24 * kH);
  EXPECT_EQ(at("yesterday"), kT0 - 24 * kH);
  EXPECT_EQ(at("elevenses"), kT0 + 11 * kH);
  EXPECT_EQ(at("fika"), kT0 + 15 * kH);
  EXPECT_EQ(at("Noon"), kT0 + 12 * kH);
}

TEST_F(TimeSpecTest, ADateWithATimeOfDay) {
  EXPECT_EQ(at("01/02-08:00"), kT0 + 24 * kH + 8 * kH);
  EXPECT_EQ(at("01/02/24-08:00:05"), kT0 + 32 * kH + 5000);
  EXPECT_EQ(at("0102-16:30"), kT0 + 40 * kH + 30 * 60000);
  EXPECT_EQ(at("010224-16:30"), kT0 + 40 * kH + 30 * 60000);
  EXPECT_EQ(at("2024-01-02T8:00"), kT0 + 32 * kH);
  EXPECT_EQ(at("tomorrow-noon"), kT0 + 36 * kH);
  EXPECT_EQ(at("yesterdayT08:00"), kT0 - 16 * kH);
  EXPECT_EQ(at("today-teatime"), kT0 + 16 * kH);
}

TEST_F(TimeSpecTest, AmAndPm) {
  EXPECT_EQ(at("8:30pm"), kT0 + 20 * kH + 30 * 60000);
  EXPECT_EQ(at("8:30 PM"), kT0 + 20 * kH + 30 * 60000);
  EXPECT_EQ(at("8:30am"), kT0 + 8 * kH + 30 * 60000);
  EXPECT_EQ(at("12:15am"), kT0 + 15 * 60000);
  EXPECT_EQ(at("12:15pm"), kT0 + 12 * kH + 15 * 60000);
  EXPECT_EQ(at("01/02-1:00pm"), kT0 + 37 * kH);
}

// sacct and sreport read times as in the past: a time of day is today's, a date later in the
// year than this month is last year's.
TEST_F(TimeSpecTest, InThePastATimeOfDayIsTodayAndALaterMonthLastYear) {
  EXPECT_EQ(at("20:00"), kT0 + 20 * kH);
  EXPECT_EQ(at("12/25"), kT0 - 7 * 24 * kH);
  EXPECT_EQ(at("1225"), kT0 - 7 * 24 * kH);
  EXPECT_EQ(at("12/25/24"), kT0 + 359 * 24 * kH);
}

// sbatch --begin reads them as the next such moment.
TEST_F(TimeSpecTest, InTheFutureATimeOfDayOrDateAlreadyGoneIsTheNextOne) {
  EXPECT_EQ(ahead("20:00"), kT0 + 20 * kH);
  EXPECT_EQ(ahead("08:00"), kT0 + 32 * kH);
  EXPECT_EQ(ahead("noon"), kT0 + 36 * kH);
  EXPECT_EQ(ahead("teatime"), kT0 + 16 * kH);
  EXPECT_EQ(ahead("midnight"), kT0 + 24 * kH);
  EXPECT_EQ(ahead("12/25"), kT0 + 359 * 24 * kH);
  EXPECT_EQ(ahead("01/01"), kT0 + 366 * 24 * kH);  // 2024 is a leap year
  EXPECT_EQ(ahead("01/01-20:00"), kT0 + 20 * kH);
  EXPECT_EQ(ahead("2024-01-01"), kT0);  // a full date is itself
  EXPECT_EQ(ahead("today"), kT0);
  EXPECT_EQ(ahead("yesterday"), kT0 - 24 * kH);
}

TEST_F(TimeSpecTest, Dates) {
  EXPECT_EQ(at("2024-01-01"), kT0);
  EXPECT_EQ(at("2024-01-01T08:00"), kT0 + 8 * kH);
  EXPECT_EQ(at("2024-01-01T08:00:05"), kT0 + 8 * kH + 5000);
  EXPECT_EQ(at("2024-02-29"), kT0 + 59 * 24 * kH);
  EXPECT_EQ(at("01/02"), kT0 + 24 * kH);
  EXPECT_EQ(at("01/02/24"), kT0 + 24 * kH);
  EXPECT_EQ(at("01.02.2024"), kT0 + 24 * kH);
  EXPECT_EQ(at("0102"), kT0 + 24 * kH);
  EXPECT_EQ(at("010224"), kT0 + 24 * kH);
  EXPECT_EQ(at("08:30"), kT0 + 8 * kH + 30 * 60000);
  EXPECT_EQ(at("08:30:10"), kT0 + 8 * kH + 30 * 60000 + 10000);
  EXPECT_EQ(at("8:30"), kT0 + 8 * kH + 30 * 60000);
  EXPECT_EQ(at("1/2"), kT0 + 24 * kH);
  EXPECT_EQ(at("2024-1-2"), kT0 + 24 * kH);
}

TEST_F(TimeSpecTest, RefusesWhatIsNotATime) {
  std::vector<std::string> bad_ones = {
      "",           "later",      "now-",       "now-5fortnights",    "now*3",
      "2024-02-30", "2023-02-29", "2024-13-01", "2024-01-01T25:00",   "2024-01-01 08:00",
      "13/01",      "12345",      "99:00",      "now-99999999999days"};
  for (const char* more : {"now-5y", "now--5", "now 5", "1704067200", "8:5", "8:30:5", "13:00pm",
                           "8:30 xm", "8:30 ", "01/02/2", "01/02.24", "01/02-", "01/02-25:00"}) {
    bad_ones.push_back(more);
  }
  for (const char* more :
       {"today-", "noon-today", "tomorrowT", "01/02 08:00", "08:00-01/02", "-1", "now-1hour-2"}) {
    bad_ones.push_back(more);
  }
  for (const std::string& bad : bad_ones) {
    auto t = parse_slurm_time(bad, kNow);
    EXPECT_FALSE(t.ok()) << "'" << bad << "' was read as " << (t.ok() ? *t : 0);
    if (!t.ok()) {
      EXPECT_EQ(t.error().code, ErrorCode::kInvalidArgument);
      EXPECT_NE(t.error().message.find("expected now"), std::string::npos) << t.error().message;
    }
  }
}

}  // namespace
}  // namespace composer::accounting
