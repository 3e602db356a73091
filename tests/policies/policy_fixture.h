// Shared helpers: real zones from the tzdata package, a classic day/night policy and a pool.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "composer/policies/parser.h"
#include "composer/policies/zoneinfo.h"

namespace composer::policies::testing {

inline ZoneResolver system_zones() {
  return [](std::string_view name) { return load_time_zone(name); };
}

inline TimeZone zone(std::string_view name) {
  auto z = load_time_zone(name);
  EXPECT_TRUE(z.ok()) << z.error();
  return z.ok() ? *z : TimeZone::utc();
}

// Seconds since the epoch of a UTC date and time.
inline int64_t utc(int y, int mo, int d, int h = 0, int mi = 0, int s = 0) {
  return days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
}

// The first instant the wall clock of `tz` shows the given time.
inline int64_t local(const TimeZone& tz, int y, int mo, int d, int h = 0, int mi = 0) {
  return tz.to_utc(CivilTime{y, mo, d, h, mi, 0});
}

inline constexpr PoolSize kPool{16, 1024, 8};

// Training holds most GPUs Mon-Fri 08:00-20:00, inference the rest of the week.
inline constexpr const char* kDayNight = R"(# day/night
TimeZone=Europe/Berlin
Window=day Days=Mon-Fri Start=08:00 End=20:00
Class=training Partitions=train Accounts=ml-research QOS=long
Class=inference Partitions=serve QOS=interactive
DefaultClass=inference
Limit=training Window=day Gpus=75% Mem=50% Nvme=4
Limit=inference Window=day Gpus=25% Mem=25%
Limit=training Window=Default Gpus=25% Mem=25%
Limit=inference Window=Default Gpus=75% Mem=75%
)";

inline Policy parse_ok(std::string_view text, std::string_view file = "test.policy") {
  auto p = parse_policy(text, file, system_zones());
  EXPECT_TRUE(p.ok()) << p.error();
  return p.ok() ? std::move(*p) : Policy{};
}

inline std::string parse_error(std::string_view text, std::string_view file = "test.policy") {
  auto p = parse_policy(text, file, system_zones());
  EXPECT_FALSE(p.ok()) << "parsed although it should not:\n" << text;
  return p.ok() ? std::string() : p.error().message;
}

}  // namespace composer::policies::testing
