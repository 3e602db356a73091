#include "composer/policies/time_zone.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "composer/policies/zoneinfo.h"
#include "policy_fixture.h"

namespace composer::policies {
namespace {

using testing::utc;
using testing::zone;

TEST(CivilDates, RoundTripAndWeekdays) {
  EXPECT_EQ(days_from_civil(1970, 1, 1), 0);
  EXPECT_EQ(days_from_civil(2000, 3, 1), 11017);
  EXPECT_EQ(days_from_civil(1969, 12, 31), -1);
  for (int64_t d : {-800000, -1, 0, 59, 11016, 19783, 47482, 2932896}) {
    CivilTime c = civil_from_days(d);
    EXPECT_EQ(days_from_civil(c.year, c.month, c.day), d);
  }
  EXPECT_EQ(weekday_from_days(days_from_civil(2024, 3, 4)), 0);  // a Monday
  EXPECT_EQ(weekday_from_days(days_from_civil(2024, 3, 10)), 6);
  EXPECT_EQ(weekday_from_days(days_from_civil(1969, 12, 28)), 6);
  EXPECT_EQ(format_civil(CivilTime{2024, 3, 31, 2, 30, 0}), "2024-03-31T02:30:00");
}

TEST(TzifFiles, BerlinOffsetsAroundBothChanges) {
  const TimeZone berlin = zone("Europe/Berlin");
  // 2024: CEST from 31 March 01:00 UTC to 27 October 01:00 UTC.
  EXPECT_EQ(berlin.offset_at(utc(2024, 3, 31, 0, 59, 59)), 3600);
  EXPECT_EQ(berlin.offset_at(utc(2024, 3, 31, 1, 0, 0)), 7200);
  EXPECT_EQ(berlin.offset_at(utc(2024, 10, 27, 0, 59, 59)), 7200);
  EXPECT_EQ(berlin.offset_at(utc(2024, 10, 27, 1, 0, 0)), 3600);
  EXPECT_EQ(berlin.to_local(utc(2024, 7, 1, 12)).abbreviation, "CEST");
  EXPECT_TRUE(berlin.to_local(utc(2024, 7, 1, 12)).is_dst);
  EXPECT_EQ(berlin.to_local(utc(2024, 1, 1, 12)).abbreviation, "CET");
  // No summer time in 1970 yet; it returned in 1980 (6 April 01:00 UTC).
  EXPECT_EQ(berlin.offset_at(utc(1970, 7, 1)), 3600);
  EXPECT_EQ(berlin.offset_at(utc(1980, 4, 6, 0, 59)), 3600);
  EXPECT_EQ(berlin.offset_at(utc(1980, 4, 6, 1, 0)), 7200);
}

TEST(TzifFiles, NewYorkOffsetsAroundBothChanges) {
  const TimeZone ny = zone("America/New_York");
  // 2024: EDT from 10 March 07:00 UTC to 3 November 06:00 UTC.
  EXPECT_EQ(ny.offset_at(utc(2024, 3, 10, 6, 59, 59)), -18000);
  EXPECT_EQ(ny.offset_at(utc(2024, 3, 10, 7)), -14400);
  EXPECT_EQ(ny.offset_at(utc(2024, 11, 3, 5, 59, 59)), -14400);
  EXPECT_EQ(ny.offset_at(utc(2024, 11, 3, 6)), -18000);
  EXPECT_EQ(ny.to_local(utc(2024, 11, 3, 6)).abbreviation, "EST");
  // Before 2007 the US changed on the first Sunday of April: 2 April 2006.
  EXPECT_EQ(ny.offset_at(utc(2006, 4, 2, 6, 59)), -18000);
  EXPECT_EQ(ny.offset_at(utc(2006, 4, 2, 7)), -14400);
}

TEST(TzifFiles, FooterRuleCoversTimesPastTheTable) {
  const TimeZone berlin = zone("Europe/Berlin");
  const TimeZone ny = zone("America/New_York");
  // 2100: last Sunday of March is the 28th, last of October the 31st.
  EXPECT_EQ(berlin.offset_at(utc(2100, 3, 28, 0, 59)), 3600);
  EXPECT_EQ(berlin.offset_at(utc(2100, 3, 28, 1, 0)), 7200);
  EXPECT_EQ(berlin.offset_at(utc(2100, 10, 31, 0, 59)), 7200);
  EXPECT_EQ(berlin.offset_at(utc(2100, 10, 31, 1, 0)), 3600);
  // US: second Sunday of March 2100 is the 14th, first Sunday of November the 7th.
  EXPECT_EQ(ny.offset_at(utc(2100, 3, 14, 6, 59)), -18000);
  EXPECT_EQ(ny.offset_at(utc(2100, 3, 14, 7)), -14400);
  EXPECT_EQ(ny.offset_at(utc(2100, 11, 7, 6)), -18000);
}

TEST(TzifFiles, SouthernHemisphereAndFixedZones) {
  const TimeZone sydney = zone("Australia/Sydney");
  EXPECT_EQ(sydney.offset_at(utc(2024, 1, 15)), 39600);
  EXPECT_EQ(sydney.offset_at(utc(2024, 7, 15)), 36000);
  EXPECT_EQ(sydney.offset_at(utc(2090, 1, 15)), 39600);
  EXPECT_EQ(sydney.offset_at(utc(2090, 7, 15)), 36000);
  const TimeZone kolkata = zone("Asia/Kolkata");
  EXPECT_EQ(kolkata.offset_at(utc(2024, 1, 1)), 19800);
  EXPECT_EQ(kolkata.offset_at(utc(2090, 7, 1)), 19800);
  EXPECT_FALSE(kolkata.next_transition(utc(2024, 1, 1)).has_value());
  EXPECT_EQ(zone("UTC").offset_at(utc(2024, 6, 1)), 0);
}

TEST(LocalToUtc, SpringForwardGapMapsToTheChange) {
  const TimeZone berlin = zone("Europe/Berlin");
  EXPECT_TRUE(berlin.to_utc_all(CivilTime{2024, 3, 31, 2, 30, 0}).empty());
  EXPECT_EQ(berlin.to_utc(CivilTime{2024, 3, 31, 2, 30, 0}), utc(2024, 3, 31, 1));
  EXPECT_EQ(berlin.to_utc(CivilTime{2024, 3, 31, 3, 0, 0}), utc(2024, 3, 31, 1));
  EXPECT_EQ(berlin.to_utc(CivilTime{2024, 3, 31, 1, 59, 0}), utc(2024, 3, 31, 0, 59));
  const TimeZone ny = zone("America/New_York");
  EXPECT_EQ(ny.to_utc(CivilTime{2024, 3, 10, 2, 15, 0}), utc(2024, 3, 10, 7));
}

TEST(LocalToUtc, FallBackOverlapHasTwoInstantsAndTakesTheFirst) {
  const TimeZone berlin = zone("Europe/Berlin");
  auto both = berlin.to_utc_all(CivilTime{2024, 10, 27, 2, 30, 0});
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0], utc(2024, 10, 27, 0, 30));
  EXPECT_EQ(both[1], utc(2024, 10, 27, 1, 30));
  EXPECT_EQ(berlin.to_utc(CivilTime{2024, 10, 27, 2, 30, 0}), utc(2024, 10, 27, 0, 30));
  const TimeZone ny = zone("America/New_York");
  EXPECT_EQ(ny.to_utc_all(CivilTime{2024, 11, 3, 1, 30, 0}).size(), 2u);
  EXPECT_EQ(ny.to_utc(CivilTime{2024, 11, 3, 1, 30, 0}), utc(2024, 11, 3, 5, 30));
  // Round trip away from changes.
  const LocalTime l = ny.to_local(utc(2024, 6, 1, 16));
  EXPECT_EQ(l.civil, (CivilTime{2024, 6, 1, 12, 0, 0}));
  EXPECT_EQ(l.weekday, 5);
}

TEST(LocalToUtc, NextTransition) {
  const TimeZone berlin = zone("Europe/Berlin");
  EXPECT_EQ(berlin.next_transition(utc(2024, 1, 1)), utc(2024, 3, 31, 1));
  EXPECT_EQ(berlin.next_transition(utc(2024, 3, 31, 1)), utc(2024, 10, 27, 1));
  EXPECT_EQ(berlin.next_transition(utc(2099, 11, 1)), utc(2100, 3, 28, 1));
  EXPECT_TRUE(berlin.changes_between(utc(2024, 3, 30), utc(2024, 4, 1)));
  EXPECT_FALSE(berlin.changes_between(utc(2024, 4, 1), utc(2024, 5, 1)));
}

TEST(PosixRules, MatchTheTzifFile) {
  auto posix = TimeZone::from_posix("CET", "CET-1CEST,M3.5.0,M10.5.0/3");
  ASSERT_TRUE(posix.ok()) << posix.error();
  const TimeZone berlin = zone("Europe/Berlin");
  for (int64_t t = utc(2030, 1, 1); t < utc(2031, 1, 1); t += 3 * 3600) {
    ASSERT_EQ(posix->offset_at(t), berlin.offset_at(t)) << t;
  }
  auto bad = TimeZone::from_posix("x", "CET-1CEST,M13.5.0,M10.5.0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("start rule"), std::string::npos) << bad.error();
  auto angle = TimeZone::from_posix("x", "<+0330>-3:30");
  ASSERT_TRUE(angle.ok()) << angle.error();
  EXPECT_EQ(angle->offset_at(0), 12600);
  EXPECT_EQ(angle->to_local(0).abbreviation, "+0330");
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TzifFiles, RefusesDamagedBytesWithAReason) {
  auto garbage = TimeZone::from_tzif("x", "hello, this is not a zone file at all, no no no");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message.find("magic 'TZif'"), std::string::npos) << garbage.error();
  const std::string bytes = read_bytes(std::string(kZoneinfoDir) + "/Europe/Berlin");
  ASSERT_GT(bytes.size(), 100u);
  auto cut = TimeZone::from_tzif("Europe/Berlin", bytes.substr(0, bytes.size() / 2));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("cut short"), std::string::npos) << cut.error();
  auto no_footer = TimeZone::from_tzif("Europe/Berlin", bytes.substr(0, bytes.size() - 1));
  ASSERT_FALSE(no_footer.ok());
  EXPECT_NE(no_footer.error().message.find("footer"), std::string::npos) << no_footer.error();
  auto whole = TimeZone::from_tzif("Europe/Berlin", bytes);
  EXPECT_TRUE(whole.ok()) << whole.error();
}

TEST(ZoneinfoLoader, RefusesPathsAndUnknownZones) {
  auto escape = load_time_zone("../../etc/passwd");
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.error().message.find("not an IANA zone name"), std::string::npos);
  auto absolute = load_time_zone("/etc/passwd");
  EXPECT_FALSE(absolute.ok());
  auto unknown = load_time_zone("Europe/Atlantis");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("tzdata"), std::string::npos);
}

}  // namespace
}  // namespace composer::policies
