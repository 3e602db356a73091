// Slurm's time arguments, read in a fixed time zone against a fixed "now".
#include "composer/accounting/time_spec.h"

#include <gtest/gtest.h>

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
  static int64_t at(std::string_view text) {
    auto t = parse_slurm_time(text, kNow);
    EXPECT_TRUE(t.ok()) << text << ": " << t.error();
    return t.ok() ? *t : -1;
  }
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
}

TEST_F(TimeSpecTest, NamedTimes) {
  EXPECT_EQ(at("today"), kT0);
  EXPECT_EQ(at("midnight"), kT0);
  EXPECT_EQ(at("noon"), kT0 + 12 * kH);
  EXPECT_EQ(at("teatime"), kT0 + 16 * kH);
  EXPECT_EQ(at("tomorrow"), kT0 + 24 * kH);
  EXPECT_EQ(at("yesterday"), kT0 - 24 * kH);
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
}

TEST_F(TimeSpecTest, RefusesWhatIsNotATime) {
  for (const char* bad :
       {"", "later", "now-", "now-5fortnights", "now*3", "2024-02-30", "2023-02-29", "2024-13-01",
        "2024-01-01T25:00", "2024-01-01 08:00", "13/01", "12345", "99:00", "now-99999999999days"}) {
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
