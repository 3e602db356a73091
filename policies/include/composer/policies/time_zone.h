// IANA time zones from TZif bytes (RFC 8536), and conversions between UTC instants and the
// local wall clock. Pure: the bytes are handed in (see zoneinfo.h for the file loader).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"

namespace composer::policies {

// A calendar date and wall-clock time without a zone. month 1-12, day 1-31.
struct CivilTime {
  int year = 1970;
  int month = 1;
  int day = 1;
  int hour = 0;
  int minute = 0;
  int second = 0;
  bool operator==(const CivilTime&) const = default;
};

// Days since 1970-01-01 of a civil date, and back; weekday of a day number (0 = Monday).
int64_t days_from_civil(int year, int month, int day);
CivilTime civil_from_days(int64_t days);
int weekday_from_days(int64_t days);
// "2024-03-31T02:30:00"
std::string format_civil(const CivilTime& t);

struct LocalTime {
  CivilTime civil;
  int weekday = 0;  // 0 = Monday ... 6 = Sunday
  int32_t utc_offset_s = 0;
  bool is_dst = false;
  std::string abbreviation;  // "CET", "EDT"
};

class TimeZone {
 public:
  // UTC, with no transitions.
  TimeZone();
  static TimeZone utc() { return TimeZone(); }
  // A zone that is always `offset_s` east of UTC.
  static TimeZone fixed(std::string name, int32_t offset_s);
  // Parses a TZif file (versions 1 to 4). From version 2 on, the 64-bit section and the POSIX
  // TZ footer (which gives the rule for instants after the last listed transition) are used.
  static Expected<TimeZone> from_tzif(const std::string& name, std::string_view bytes);
  // A zone given only by a POSIX TZ string such as "CET-1CEST,M3.5.0,M10.5.0/3".
  static Expected<TimeZone> from_posix(std::string name, std::string_view tz);

  const std::string& name() const { return name_; }
  int32_t offset_at(int64_t utc_s) const;
  LocalTime to_local(int64_t utc_s) const;
  // Every instant at which the wall clock shows `local`: none for a time skipped by a
  // spring-forward change, two for a time repeated by a fall-back change.
  std::vector<int64_t> to_utc_all(const CivilTime& local) const;
  // The first instant at which the wall clock shows `local`; a skipped time maps to the moment
  // of the change that skips it (the first instant whose wall clock is later).
  int64_t to_utc(const CivilTime& local) const;
  // The first change of UTC offset strictly after `utc_s`, if the zone ever changes again.
  std::optional<int64_t> next_transition(int64_t utc_s) const;
  // Whether the offset changes at least once in [from_s, to_s).
  bool changes_between(int64_t from_s, int64_t to_s) const;

  struct Rule;  // the POSIX TZ footer, parsed

 private:
  struct Type {
    int32_t offset_s = 0;
    bool is_dst = false;
    std::string abbreviation;
  };
  Type type_at(int64_t utc_s) const;

  std::string name_;
  std::vector<int64_t> transitions_;
  std::vector<uint8_t> transition_types_;
  std::vector<Type> types_;
  std::shared_ptr<const Rule> rule_;  // shared: zones are copied freely and the rule is const
};

}  // namespace composer::policies
