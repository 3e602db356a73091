#include "composer/policies/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "policy_fixture.h"

namespace composer::policies {
namespace {

using testing::local;
using testing::parse_ok;
using testing::utc;

std::vector<std::string> open_at(const Policy& p, int64_t t) {
  std::vector<std::string> out;
  for (size_t w : Schedule(p).windows_at(t)) out.push_back(p.windows[w].name);
  return out;
}

TEST(Windows, NightCrossesMidnightFromItsListedDaysOnly) {
  const Policy p =
      parse_ok("TimeZone=Europe/Berlin\nWindow=night Days=Mon-Fri Start=20:00 End=08:00\n");
  const TimeZone& tz = p.time_zone;
  using V = std::vector<std::string>;
  EXPECT_EQ(open_at(p, local(tz, 2024, 3, 8, 22, 0)), V{"night"});   // Fri 22:00
  EXPECT_EQ(open_at(p, local(tz, 2024, 3, 9, 7, 59)), V{"night"});   // Sat 07:59, from Friday
  EXPECT_EQ(open_at(p, local(tz, 2024, 3, 9, 8, 0)), V{});           // Sat 08:00: closed
  EXPECT_EQ(open_at(p, local(tz, 2024, 3, 9, 22, 0)), V{});          // Sat night: not listed
  EXPECT_EQ(open_at(p, local(tz, 2024, 3, 11, 7, 0)), V{});          // Mon 07:00: Sunday's night
  EXPECT_EQ(open_at(p, local(tz, 2024, 3, 11, 20, 0)), V{"night"});  // Mon 20:00 exactly
  EXPECT_EQ(open_at(p, local(tz, 2024, 3, 11, 19, 59)), V{});
}

TEST(Windows, WeekdayAndWeekendWindows) {
  const Policy p = parse_ok(
      "TimeZone=America/New_York\n"
      "Window=day Days=Mon-Fri Start=08:00 End=20:00\n"
      "Window=weekend Days=Sat,Sun Start=00:00 End=24:00\n");
  const TimeZone& tz = p.time_zone;
  using V = std::vector<std::string>;
  EXPECT_EQ(open_at(p, local(tz, 2024, 6, 7, 12, 0)), V{"day"});  // Friday noon
  EXPECT_EQ(open_at(p, local(tz, 2024, 6, 7, 21, 0)), V{});       // Friday night: Default
  EXPECT_EQ(open_at(p, local(tz, 2024, 6, 8, 0, 0)), V{"weekend"});
  EXPECT_EQ(open_at(p, local(tz, 2024, 6, 9, 23, 59)), V{"weekend"});
  EXPECT_EQ(open_at(p, local(tz, 2024, 6, 10, 0, 0)), V{});
  const Schedule s(p);
  EXPECT_EQ(s.next_boundary(local(tz, 2024, 6, 7, 12, 0)), local(tz, 2024, 6, 7, 20, 0));
  EXPECT_EQ(s.next_boundary(local(tz, 2024, 6, 7, 20, 0)), local(tz, 2024, 6, 8, 0, 0));
  // Saturday's occurrence ends as Sunday's begins: a boundary, though 'weekend' stays open.
  EXPECT_EQ(s.next_boundary(local(tz, 2024, 6, 8, 0, 0)), local(tz, 2024, 6, 9, 0, 0));
  EXPECT_EQ(s.next_boundary(local(tz, 2024, 6, 9, 0, 0)), local(tz, 2024, 6, 10, 0, 0));
}

struct DstCase {
  const char* zone;
  int spring[3];
  int fall[3];
};

class DaylightSaving : public ::testing::TestWithParam<DstCase> {};

// The rule: a boundary is the first instant the wall clock shows it, or the moment of the
// change when a spring-forward skips it.
TEST_P(DaylightSaving, WindowIsShorterInSpringAndLongerInAutumn) {
  const DstCase c = GetParam();
  const Policy p = parse_ok(std::string("TimeZone=") + c.zone +
                            "\nWindow=early Start=01:00 End=03:00\n"
                            "Window=a Start=00:00 End=01:30\nWindow=b Start=01:30 End=04:00\n");
  const Schedule s(p);
  const int64_t spring = days_from_civil(c.spring[0], c.spring[1], c.spring[2]);
  const int64_t fall = days_from_civil(c.fall[0], c.fall[1], c.fall[2]);
  auto length = [&](size_t w, int64_t day) {
    auto o = s.occurrence_on(w, day);
    EXPECT_TRUE(o.has_value());
    return o ? o->end_s - o->start_s : -1;
  };
  EXPECT_EQ(length(0, spring - 1), 7200);
  EXPECT_EQ(length(0, spring), 3600);
  EXPECT_EQ(length(0, fall), 3 * 3600);
  EXPECT_EQ(length(0, fall + 1), 7200);
  // Windows that meet on the wall clock meet in UTC too, on both nights.
  for (int64_t d : {spring, fall}) {
    auto a = s.occurrence_on(1, d);
    auto b = s.occurrence_on(2, d);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->end_s, b->start_s);
  }
  // Every instant of the change nights is in exactly one of a and b between 00:00 and 04:00.
  for (int64_t d : {spring, fall}) {
    const int64_t from = s.occurrence_on(1, d)->start_s, to = s.occurrence_on(2, d)->end_s;
    for (int64_t t = from; t < to; t += 300) {
      auto open = s.windows_at(t);
      const size_t ab =
          std::count(open.begin(), open.end(), 1u) + std::count(open.begin(), open.end(), 2u);
      ASSERT_EQ(ab, 1u) << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zones, DaylightSaving,
                         ::testing::Values(DstCase{"Europe/Berlin", {2024, 3, 31}, {2024, 10, 27}},
                                           DstCase{
                                               "America/New_York", {2024, 3, 10}, {2024, 11, 3}}));

TEST(Windows, ABoundaryInsideTheSkippedHourMovesToTheChange) {
  const Policy p = parse_ok("TimeZone=Europe/Berlin\nWindow=w Start=02:30 End=05:00\n");
  const Schedule s(p);
  auto o = s.occurrence_on(0, days_from_civil(2024, 3, 31));
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->start_s, utc(2024, 3, 31, 1, 0));  // 03:00 CEST, the change
  EXPECT_EQ(o->end_s, utc(2024, 3, 31, 3, 0));    // 05:00 CEST
}

TEST(Windows, WeekMinutesWrapPastSunday) {
  const Policy p = parse_ok("Window=w Days=Sun Start=22:00 End=02:00\n");
  auto m = week_minutes(p.windows[0]);
  EXPECT_TRUE(m[6 * 1440 + 22 * 60]);
  EXPECT_TRUE(m[0]);
  EXPECT_TRUE(m[119]);
  EXPECT_FALSE(m[120]);
  EXPECT_FALSE(m[6 * 1440]);
}

}  // namespace
}  // namespace composer::policies
