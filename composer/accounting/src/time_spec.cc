#include "composer/accounting/time_spec.h"

#include <cctype>
#include <ctime>
#include <optional>
#include <string>

namespace composer::accounting {
namespace {

constexpr char kForms[] =
    "expected now[{+|-}N[seconds|minutes|hours|days|weeks]], YYYY-MM-DD[THH:MM[:SS]], "
    "MM/DD[/YY][-HH:MM[:SS]], MMDD[YY][-HH:MM[:SS]], HH:MM[:SS][AM|PM], today, yesterday, "
    "tomorrow, midnight, noon, elevenses, fika or teatime";

Error bad(std::string_view text, std::string_view why = "") {
  std::string m = "time '" + std::string(text) + "' is not valid";
  if (!why.empty()) m += " (" + std::string(why) + ")";
  return Error{ErrorCode::kInvalidArgument, m + ": " + kForms};
}

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// A left-to-right reader over the lower-cased argument.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }
  std::string_view rest() const { return s_.substr(std::min(i_, s_.size())); }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  bool eat(std::string_view word) {
    if (!rest().starts_with(word)) return false;
    i_ += word.size();
    return true;
  }
  // Between `least` and `most` digits, as many as there are.
  std::optional<int> number(size_t least, size_t most) {
    size_t n = 0;
    int64_t v = 0;
    while (n < most && is_digit(peek())) {
      v = v * 10 + (peek() - '0');
      ++i_;
      ++n;
    }
    if (n < least) return std::nullopt;
    return static_cast<int>(v);
  }
  size_t digits_ahead() const {
    size_t n = 0;
    while (is_digit(peek(n))) ++n;
    return n;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

struct Date {
  int year = -1;  // -1: not given, picked by the direction
  int month = 0;  // 1-12
  int day = 0;
};
struct Clock {
  int hour = 0, minute = 0, second = 0;
};

std::tm local(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

// The local calendar day `days` after the one of `now`, by the calendar rather than 24-hour
// steps: a day with a DST change is 23 or 25 hours long.
Date day_after(const std::tm& now, int days) {
  std::tm tm = now;
  tm.tm_mday += days;
  tm.tm_hour = 12;  // away from any DST gap
  tm.tm_min = tm.tm_sec = 0;
  tm.tm_isdst = -1;
  std::mktime(&tm);
  return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday};
}

// Local date and time to epoch ms; nullopt when the fields name no real moment (Feb 30).
std::optional<int64_t> make(const Date& d, const Clock& c) {
  if (d.month < 1 || d.month > 12 || d.day < 1 || d.day > 31 || c.hour > 23 || c.minute > 59 ||
      c.second > 59) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = d.year - 1900;
  tm.tm_mon = d.month - 1;
  tm.tm_mday = d.day;
  tm.tm_hour = c.hour;
  tm.tm_min = c.minute;
  tm.tm_sec = c.second;
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

// now[{+|-}N[unit]], the cursor just past "now".
Expected<int64_t> relative(Cursor& in, std::string_view text, int64_t now_ms) {
  if (in.done()) return now_ms;
  const char sign = in.peek();
  if (!in.eat('+') && !in.eat('-')) return bad(text, "only + or - may follow now");
  if (in.digits_ahead() > 9) return bad(text, "the count has more than 9 digits");
  const auto count = in.number(1, 9);
  if (!count) return bad(text, "a count of units must follow now+ or now-");
  const auto unit = unit_ms(in.rest());
  if (!unit) return bad(text, "unknown unit '" + std::string(in.rest()) + "'");
  const int64_t delta = int64_t{*count} * *unit;
  if (sign == '+') return now_ms + delta;
  if (delta > now_ms) return bad(text, "that is before 1970");
  return now_ms - delta;
}

// HH:MM[:SS][[ ]am|pm] or a named time of day.
std::optional<Clock> clock_time(Cursor& in) {
  static constexpr std::pair<std::string_view, int> kNamed[] = {
      {"midnight", 0}, {"noon", 12}, {"elevenses", 11}, {"fika", 15}, {"teatime", 16}};
  for (const auto& [word, hour] : kNamed) {
    if (in.eat(word)) return Clock{hour, 0, 0};
  }
  Clock c;
  const auto h = in.number(1, 2);
  if (!h || !in.eat(':')) return std::nullopt;
  const auto m = in.number(2, 2);
  if (!m) return std::nullopt;
  c.hour = *h;
  c.minute = *m;
  if (in.eat(':')) {
    const auto s = in.number(2, 2);
    if (!s) return std::nullopt;
    c.second = *s;
  }
  if (c.hour > 23 || c.minute > 59 || c.second > 59) return std::nullopt;
  const bool space = in.peek() == ' ';
  if (space) in.eat(' ');
  if (in.eat("pm")) {
    // 12:30pm is 12:30; 0:30pm, as Slurm reads it, 12:30.
    if (c.hour > 12) return std::nullopt;
    if (c.hour < 12) c.hour += 12;
  } else if (in.eat("am")) {
    if (c.hour > 12) return std::nullopt;
    if (c.hour == 12) c.hour = 0;
  } else if (space) {
    return std::nullopt;
  }
  return c;
}

// A year of 2 digits is 20YY; of 4, itself.
std::optional<int> year_digits(Cursor& in) {
  const size_t n = in.digits_ahead();
  if (n != 2 && n != 4) return std::nullopt;
  const auto y = in.number(n, n);
  return n == 2 ? 2000 + *y : *y;
}

// YYYY-MM-DD, MM/DD[/YY], MM.DD[.YY] or MMDD[YY]; the named days are read by the caller.
std::optional<Date> calendar_date(Cursor& in) {
  Date d;
  // YYYY-M-D or YYYY-MM-DD, told from MMDD-HH:MM by the second dash.
  const bool iso = in.digits_ahead() == 4 && in.peek(4) == '-' && is_digit(in.peek(5)) &&
                   (in.peek(6) == '-' || (is_digit(in.peek(6)) && in.peek(7) == '-'));
  if (iso) {
    d.year = *in.number(4, 4);
    in.eat('-');
    const auto m = in.number(1, 2);
    if (!m || !in.eat('-')) return std::nullopt;
    const auto day = in.number(1, 2);
    if (!day) return std::nullopt;
    d.month = *m;
    d.day = *day;
    return d;
  }
  const size_t run = in.digits_ahead();
  if (run == 4 || run == 6) {  // MMDD[YY]
    d.month = *in.number(2, 2);
    d.day = *in.number(2, 2);
    if (run == 6) d.year = 2000 + *in.number(2, 2);
    return d;
  }
  const auto m = in.number(1, 2);
  if (!m) return std::nullopt;
  const char sep = in.peek();
  if (sep != '/' && sep != '.') return std::nullopt;
  in.eat(sep);
  const auto day = in.number(1, 2);
  if (!day) return std::nullopt;
  d.month = *m;
  d.day = *day;
  if (in.eat(sep)) {
    const auto y = year_digits(in);
    if (!y) return std::nullopt;
    d.year = *y;
  }
  return d;
}

bool later_in_year(const Date& d, const Clock& c, const std::tm& now) {
  const int asked[] = {d.month, d.day, c.hour, c.minute, c.second};
  const int current[] = {now.tm_mon + 1, now.tm_mday, now.tm_hour, now.tm_min, now.tm_sec};
  for (size_t i = 0; i < 5; ++i) {
    if (asked[i] != current[i]) return asked[i] > current[i];
  }
  return false;
}

}  // namespace

Expected<int64_t> parse_slurm_time(std::string_view text, int64_t now_ms, TimeDirection direction) {
  if (text.empty()) return bad(text, "it is empty");
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  Cursor in(lower);
  if (in.eat("now")) return relative(in, text, now_ms);

  const std::tm now = local(now_ms);
  std::optional<Date> date;
  std::optional<Clock> clock;
  if (in.eat("today")) {
    date = day_after(now, 0);
  } else if (in.eat("yesterday")) {
    date = day_after(now, -1);
  } else if (in.eat("tomorrow")) {
    date = day_after(now, 1);
  } else if (is_digit(in.peek()) && in.peek(1) != ':' && in.peek(2) != ':') {
    date = calendar_date(in);
    if (!date) return bad(text);
  }
  bool time_follows = !date;
  if (date && !in.done()) {
    if (!in.eat('t') && !in.eat('-')) return bad(text);
    time_follows = true;
  }
  if (time_follows) {
    clock = clock_time(in);
    if (!clock) return bad(text);
  }
  if (!in.done()) return bad(text);

  if (!date) {
    const bool passed = !later_in_year(day_after(now, 0), *clock, now);
    date = day_after(now, direction == TimeDirection::kFuture && passed ? 1 : 0);
  }
  const Clock at = clock.value_or(Clock{});
  if (date->year < 0) {
    date->year = now.tm_year + 1900;
    if (direction == TimeDirection::kPast && date->month > now.tm_mon + 1) --date->year;
    if (direction == TimeDirection::kFuture && !later_in_year(*date, at, now)) ++date->year;
  }
  auto v = make(*date, at);
  if (!v) return bad(text, "no such date or time");
  return *v;
}

}  // namespace composer::accounting
