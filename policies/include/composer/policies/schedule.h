// When windows are open, in UTC instants.
//
// Daylight-saving rule: a window boundary at wall-clock time T happens at the first instant
// the clock shows T; when a spring-forward change skips T, at the moment of the change. So a
// window 01:00-03:00 lasts one hour on the spring-forward night in Europe/Berlin and three
// hours on the fall-back night, and windows that meet on the wall clock (End of one equals
// Start of the next) also meet in UTC, with no gap and no overlap, on every day.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "composer/policies/policy.h"

namespace composer::policies {

struct Occurrence {
  size_t window = 0;  // index into Policy::windows
  int64_t start_s = 0;
  int64_t end_s = 0;  // exclusive
};

class Schedule {
 public:
  // Keeps a reference: the policy must outlive the schedule.
  explicit Schedule(const Policy& policy) : policy_(policy) {}

  // The occurrence of window `w` that starts on local date `day` (days since 1970-01-01), if
  // the window runs that day and is not entirely skipped by a clock change.
  std::optional<Occurrence> occurrence_on(size_t w, int64_t day) const;
  // Indices of the windows open at `t`, in file order.
  std::vector<size_t> windows_at(int64_t t) const;
  // The occurrence of window `w` open at `t`, if any.
  std::optional<Occurrence> occurrence_at(size_t w, int64_t t) const;
  // The first instant after `t` at which any window opens or closes; none without windows.
  std::optional<int64_t> next_boundary(int64_t t) const;
  // All occurrences of all windows overlapping [from_s, to_s), by start time.
  std::vector<Occurrence> occurrences(int64_t from_s, int64_t to_s) const;

  const Policy& policy() const { return policy_; }

 private:
  const Policy& policy_;
};

// The week on the wall clock, minute by minute: index 0 is Monday 00:00 local time.
inline constexpr int kWeekMinutes = 7 * 1440;
// The minutes of the week a window covers.
std::vector<bool> week_minutes(const Window& w);
// For each minute of the week, the first window in file order that covers it, or -1 where no
// window does (the Default window's time).
std::vector<int> week_owners(const Policy& policy);

// Local date (days since 1970-01-01) of instant t in zone tz.
int64_t local_day(const TimeZone& tz, int64_t t);

}  // namespace composer::policies
