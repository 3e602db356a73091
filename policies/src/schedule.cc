#include "composer/policies/schedule.h"

#include <algorithm>

namespace composer::policies {

namespace {

int64_t at_minute(const TimeZone& tz, int64_t day, int minute) {
  // minute may be 1440 (midnight ending the day): that is 00:00 of the next day.
  CivilTime c = civil_from_days(day + minute / 1440);
  c.hour = minute % 1440 / 60;
  c.minute = minute % 60;
  return tz.to_utc(c);
}

}  // namespace

std::vector<bool> week_minutes(const Window& w) {
  std::vector<bool> out(kWeekMinutes, false);
  for (int d = 0; d < 7; ++d) {
    if (!(w.days & (1u << d))) continue;
    for (int m = 0; m < w.nominal_minutes(); ++m)
      out[(d * 1440 + w.start_min + m) % kWeekMinutes] = true;
  }
  return out;
}

std::vector<int> week_owners(const Policy& policy) {
  std::vector<int> out(kWeekMinutes, -1);
  for (size_t w = policy.windows.size(); w-- > 0;) {
    const auto covered = week_minutes(policy.windows[w]);
    for (int m = 0; m < kWeekMinutes; ++m)
      if (covered[m]) out[m] = static_cast<int>(w);
  }
  return out;
}

int64_t local_day(const TimeZone& tz, int64_t t) {
  const LocalTime l = tz.to_local(t);
  return days_from_civil(l.civil.year, l.civil.month, l.civil.day);
}

std::optional<Occurrence> Schedule::occurrence_on(size_t w, int64_t day) const {
  const Window& win = policy_.windows[w];
  if (!(win.days & (1u << weekday_from_days(day)))) return {};
  const TimeZone& tz = policy_.time_zone;
  const int64_t start = at_minute(tz, day, win.start_min);
  const int64_t end = at_minute(tz, win.crosses_midnight() ? day + 1 : day, win.end_min);
  if (end <= start) return {};  // wholly inside a skipped hour
  return Occurrence{w, start, end};
}

std::optional<Occurrence> Schedule::occurrence_at(size_t w, int64_t t) const {
  const int64_t today = local_day(policy_.time_zone, t);
  for (int64_t d = today - 2; d <= today + 1; ++d) {
    auto o = occurrence_on(w, d);
    if (o && o->start_s <= t && t < o->end_s) return o;
  }
  return {};
}

std::vector<size_t> Schedule::windows_at(int64_t t) const {
  std::vector<size_t> out;
  for (size_t w = 0; w < policy_.windows.size(); ++w)
    if (occurrence_at(w, t)) out.push_back(w);
  return out;
}

std::optional<int64_t> Schedule::next_boundary(int64_t t) const {
  std::optional<int64_t> best;
  const int64_t today = local_day(policy_.time_zone, t);
  for (size_t w = 0; w < policy_.windows.size(); ++w) {
    for (int64_t d = today - 2; d <= today + 8; ++d) {
      auto o = occurrence_on(w, d);
      if (!o) continue;
      for (int64_t b : {o->start_s, o->end_s})
        if (b > t && (!best || b < *best)) best = b;
    }
  }
  return best;
}

std::vector<Occurrence> Schedule::occurrences(int64_t from_s, int64_t to_s) const {
  std::vector<Occurrence> out;
  if (to_s <= from_s) return out;
  const int64_t first = local_day(policy_.time_zone, from_s) - 2;
  const int64_t last = local_day(policy_.time_zone, to_s) + 1;
  for (size_t w = 0; w < policy_.windows.size(); ++w) {
    for (int64_t d = first; d <= last; ++d) {
      auto o = occurrence_on(w, d);
      if (o && o->start_s < to_s && o->end_s > from_s) out.push_back(*o);
    }
  }
  std::sort(out.begin(), out.end(), [](const Occurrence& a, const Occurrence& b) {
    return a.start_s != b.start_s ? a.start_s < b.start_s : a.window < b.window;
  });
  return out;
}

}  // namespace composer::policies
