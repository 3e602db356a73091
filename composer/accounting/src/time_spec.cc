#include "composer/accounting/time_spec.h"

#include <cctype>
#include <charconv>
#include <ctime>
#include <optional>
#include <string>

namespace composer::accounting {
namespace {

constexpr char kForms[] =
    "expected now, now-N[seconds|minutes|hours|days|weeks], today, midnight, noon, teatime, "
    "tomorrow, yesterday, YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], MMDD[YY] or HH:MM[:SS]";

Error bad(std::string_view text, std::string_view why = "") {
  std::string m = "time '" + std::string(text) + "' is not valid";
  if (!why.empty()) m += " (" + std::string(why) + ")";
  return Error{ErrorCode::kInvalidArgument, m + ": " + kForms};
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

std::optional<int> number(std::string_view s) {
  if (!all_digits(s) || s.size() > 9) return std::nullopt;
  int v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::tm local(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

// Local date and time to epoch ms; nullopt when the fields name no real moment (Feb 30).
std::optional<int64_t> make(int year, int month, int day, int hour, int minute, int second) {
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  tm.tm_isdst = -1;
  const std::tm asked = tm;
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  if (tm.tm_year != asked.tm_year || tm.tm_mon != asked.tm_mon || tm.tm_mday != asked.tm_mday) {
    return std::nullopt;
  }
  return static_cast<int64_t>(t) * 1000;
}

std::optional<int64_t> unit_ms(std::string_view u) {
  if (u.empty() || u == "s" || u == "sec" || u == "secs" || u == "second" || u == "seconds") {
    return 1000;
  }
  if (u == "m" || u == "min" || u == "mins" || u == "minute" || u == "minutes") return 60000;
  if (u == "h" || u == "hour" || u == "hours") return 3600000;
  if (u == "d" || u == "day" || u == "days") return 86400000;
  if (u == "w" || u == "week" || u == "weeks") return 7 * 86400000LL;
  return std::nullopt;
}

// "HH:MM[:SS]" into its fields.
bool clock_time(std::string_view s, int* h, int* m, int* sec) {
  const size_t c1 = s.find(':');
  if (c1 == std::string_view::npos) return false;
  const size_t c2 = s.find(':', c1 + 1);
  const auto hh = number(s.substr(0, c1));
  const auto mm = number(s.substr(c1 + 1, c2 == std::string_view::npos ? s.npos : c2 - c1 - 1));
  std::optional<int> ss = 0;
  if (c2 != std::string_view::npos) ss = number(s.substr(c2 + 1));
  if (!hh || !mm || !ss || s.substr(0, c1).size() > 2) return false;
  *h = *hh;
  *m = *mm;
  *sec = *ss;
  return true;
}

int full_year(int yy, int digits) { return digits == 2 ? 2000 + yy : yy; }

}  // namespace

Expected<int64_t> parse_slurm_time(std::string_view text, int64_t now_ms) {
  if (text.empty()) return bad(text, "it is empty");
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string_view t = lower;
  const std::tm today = local(now_ms);

  if (t == "now") return now_ms;
  if (t.starts_with("now+") || t.starts_with("now-")) {
    std::string_view rest = t.substr(4);
    size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits])) != 0) {
      ++digits;
    }
    const auto count = number(rest.substr(0, digits));
    const auto unit = unit_ms(rest.substr(digits));
    if (!count) return bad(text, "a count of units must follow now+ or now-");
    if (!unit) return bad(text, "unknown unit '" + std::string(rest.substr(digits)) + "'");
    const int64_t delta = int64_t{*count} * *unit;
    if (t[3] == '-') {
      if (delta > now_ms) return bad(text, "that is before 1970");
      return now_ms - delta;
    }
    return now_ms + delta;
  }
  if (t == "today" || t == "midnight") {
    auto v = make(today.tm_year + 1900, today.tm_mon + 1, today.tm_mday, 0, 0, 0);
    if (!v) return bad(text);
    return *v;
  }
  if (t == "noon" || t == "teatime") {
    auto v =
        make(today.tm_year + 1900, today.tm_mon + 1, today.tm_mday, t == "noon" ? 12 : 16, 0, 0);
    if (!v) return bad(text);
    return *v;
  }
  if (t == "tomorrow" || t == "yesterday") {
    // Calendar days, not 24 hours: a day with a DST change is 23 or 25 hours long.
    std::tm tm = today;
    tm.tm_mday += t == "tomorrow" ? 1 : -1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_isdst = -1;
    const std::time_t v = std::mktime(&tm);
    if (v == static_cast<std::time_t>(-1)) return bad(text);
    return static_cast<int64_t>(v) * 1000;
  }

  int h = 0, m = 0, s = 0;
  // YYYY-MM-DD[THH:MM[:SS]]
  if (t.size() >= 10 && t[4] == '-' && t[7] == '-') {
    const auto y = number(t.substr(0, 4)), mo = number(t.substr(5, 2)), d = number(t.substr(8, 2));
    if (!y || !mo || !d) return bad(text);
    if (t.size() > 10) {
      if (t[10] != 't' || !clock_time(t.substr(11), &h, &m, &s)) return bad(text);
    }
    auto v = make(*y, *mo, *d, h, m, s);
    if (!v) return bad(text, "no such date or time");
    return *v;
  }
  // HH:MM[:SS] today
  if (t.find(':') != std::string_view::npos) {
    if (!clock_time(t, &h, &m, &s)) return bad(text);
    auto v = make(today.tm_year + 1900, today.tm_mon + 1, today.tm_mday, h, m, s);
    if (!v) return bad(text, "no such time");
    return *v;
  }
  // MM/DD[/YY] and MM.DD[.YY]
  for (char sep : {'/', '.'}) {
    const size_t a = t.find(sep);
    if (a == std::string_view::npos) continue;
    const size_t b = t.find(sep, a + 1);
    const auto mo = number(t.substr(0, a));
    const auto d = number(t.substr(a + 1, b == std::string_view::npos ? t.npos : b - a - 1));
    int year = today.tm_year + 1900;
    if (b != std::string_view::npos) {
      const std::string_view ys = t.substr(b + 1);
      const auto y = number(ys);
      if (!y || (ys.size() != 2 && ys.size() != 4)) return bad(text);
      year = full_year(*y, static_cast<int>(ys.size()));
    }
    if (!mo || !d) return bad(text);
    auto v = make(year, *mo, *d, 0, 0, 0);
    if (!v) return bad(text, "no such date");
    return *v;
  }
  // MMDD[YY]
  if (all_digits(t) && (t.size() == 4 || t.size() == 6)) {
    const int year = t.size() == 6 ? full_year(*number(t.substr(4, 2)), 2) : today.tm_year + 1900;
    auto v = make(year, *number(t.substr(0, 2)), *number(t.substr(2, 2)), 0, 0, 0);
    if (!v) return bad(text, "no such date");
    return *v;
  }
  return bad(text);
}

}  // namespace composer::accounting
