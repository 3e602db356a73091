#include "composer/policies/time_zone.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

namespace composer::policies {

namespace {

constexpr int64_t kDay = 86400;

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int64_t civil_seconds(const CivilTime& t) {
  return days_from_civil(t.year, t.month, t.day) * kDay + int64_t{t.hour} * 3600 +
         int64_t{t.minute} * 60 + t.second;
}

Error bad_tzif(const std::string& name, const std::string& what) {
  return Error{ErrorCode::kInvalidArgument,
               "time zone " + name + ": not a valid TZif file (RFC 8536): " + what};
}

// Big-endian reader over the TZif bytes that never reads past the end.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool has(size_t n) const { return b_.size() - pos_ >= n; }
  size_t pos() const { return pos_; }
  void skip(size_t n) { pos_ += n; }
  uint64_t be(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b_[pos_ + i]);
    pos_ += n;
    return v;
  }
  std::string_view rest() const { return b_.substr(pos_); }
  std::string_view take(size_t n) {
    auto s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

struct Header {
  char version = 0;
  uint32_t isutcnt = 0, isstdcnt = 0, leapcnt = 0, timecnt = 0, typecnt = 0, charcnt = 0;
  size_t data_size(size_t time_size) const {
    return timecnt * time_size + timecnt + size_t{typecnt} * 6 + charcnt +
           leapcnt * (time_size + 4) + isstdcnt + isutcnt;
  }
};

Expected<Header> read_header(Reader& r, const std::string& name) {
  if (!r.has(44)) return bad_tzif(name, "the header is cut short");
  if (r.take(4) != "TZif") return bad_tzif(name, "it does not start with the magic 'TZif'");
  Header h;
  h.version = static_cast<char>(r.be(1));
  if (h.version != 0 && (h.version < '2' || h.version > '9')) {
    return bad_tzif(name, "unknown version byte");
  }
  r.skip(15);
  h.isutcnt = static_cast<uint32_t>(r.be(4));
  h.isstdcnt = static_cast<uint32_t>(r.be(4));
  h.leapcnt = static_cast<uint32_t>(r.be(4));
  h.timecnt = static_cast<uint32_t>(r.be(4));
  h.typecnt = static_cast<uint32_t>(r.be(4));
  h.charcnt = static_cast<uint32_t>(r.be(4));
  if (h.typecnt == 0 || h.typecnt > 256) return bad_tzif(name, "typecnt must be 1 to 256");
  if (h.charcnt == 0) return bad_tzif(name, "charcnt must not be zero");
  if ((h.isutcnt != 0 && h.isutcnt != h.typecnt) || (h.isstdcnt != 0 && h.isstdcnt != h.typecnt)) {
    return bad_tzif(name, "isutcnt and isstdcnt must be zero or equal to typecnt");
  }
  if (h.timecnt > 1000000 || h.charcnt > 100000 || h.leapcnt > 100000) {
    return bad_tzif(name, "counts are implausibly large");
  }
  return h;
}

// --- POSIX TZ strings -------------------------------------------------------------------------

struct RuleDate {
  enum class Kind { kJulian1, kZeroBased, kMonthWeekDay } kind = Kind::kMonthWeekDay;
  int a = 0, b = 0, c = 0;  // Jn: a=n; n: a=n; Mm.w.d: a=m, b=w, c=d (0 = Sunday)
  int32_t time_s = 7200;    // local time of day of the change, may be negative or > 24h
};

class PosixParser {
 public:
  explicit PosixParser(std::string_view s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  char peek() const { return done() ? '\0' : s_[i_]; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  std::optional<std::string> abbreviation() {
    std::string out;
    if (eat('<')) {
      while (!done() && peek() != '>') {
        char c = s_[i_++];
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-')) return {};
        out += c;
      }
      if (!eat('>')) return {};
    } else {
      while (!done() && std::isalpha(static_cast<unsigned char>(peek()))) out += s_[i_++];
    }
    if (out.size() < 3) return {};
    return out;
  }
  std::optional<int64_t> number(int max_digits) {
    int64_t v = 0;
    int digits = 0;
    while (!done() && std::isdigit(static_cast<unsigned char>(peek())) && digits < max_digits) {
      v = v * 10 + (s_[i_++] - '0');
      ++digits;
    }
    if (digits == 0) return {};
    return v;
  }
  // [+-]hh[:mm[:ss]] as seconds; `max_hours` bounds hh.
  std::optional<int32_t> hms(int max_hours) {
    int sign = 1;
    if (eat('-')) {
      sign = -1;
    } else {
      eat('+');
    }
    auto h = number(3);
    if (!h || *h > max_hours) return {};
    int64_t total = *h * 3600;
    if (eat(':')) {
      auto m = number(2);
      if (!m || *m > 59) return {};
      total += *m * 60;
      if (eat(':')) {
        auto sec = number(2);
        if (!sec || *sec > 59) return {};
        total += *sec;
      }
    }
    return static_cast<int32_t>(sign * total);
  }
  std::optional<RuleDate> date() {
    RuleDate d;
    if (eat('J')) {
      auto n = number(3);
      if (!n || *n < 1 || *n > 365) return {};
      d.kind = RuleDate::Kind::kJulian1;
      d.a = static_cast<int>(*n);
    } else if (eat('M')) {
      auto m = number(2);
      if (!m || *m < 1 || *m > 12 || !eat('.')) return {};
      auto w = number(1);
      if (!w || *w < 1 || *w > 5 || !eat('.')) return {};
      auto wd = number(1);
      if (!wd || *wd > 6) return {};
      d.kind = RuleDate::Kind::kMonthWeekDay;
      d.a = static_cast<int>(*m);
      d.b = static_cast<int>(*w);
      d.c = static_cast<int>(*wd);
    } else {
      auto n = number(3);
      if (!n || *n > 365) return {};
      d.kind = RuleDate::Kind::kZeroBased;
      d.a = static_cast<int>(*n);
    }
    if (eat('/')) {
      auto t = hms(167);
      if (!t) return {};
      d.time_s = *t;
    }
    return d;
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

int64_t rule_day(const RuleDate& d, int64_t year) {
  const int64_t jan1 = days_from_civil(static_cast<int>(year), 1, 1);
  switch (d.kind) {
    case RuleDate::Kind::kJulian1:
      return jan1 + d.a - 1 + ((is_leap(year) && d.a >= 60) ? 1 : 0);
    case RuleDate::Kind::kZeroBased:
      return jan1 + d.a;
    case RuleDate::Kind::kMonthWeekDay:
      break;
  }
  const int64_t first = days_from_civil(static_cast<int>(year), d.a, 1);
  const int64_t next_month = d.a == 12 ? days_from_civil(static_cast<int>(year) + 1, 1, 1)
                                       : days_from_civil(static_cast<int>(year), d.a + 1, 1);
  const int want = (d.c + 6) % 7;  // POSIX counts from Sunday, we from Monday
  int64_t day = first + (want - weekday_from_days(first) + 7) % 7 + int64_t{7} * (d.b - 1);
  while (day >= next_month) day -= 7;
  return day;
}

}  // namespace

struct TimeZone::Rule {
  std::string std_abbr;
  int32_t std_offset_s = 0;  // east of UTC
  bool has_dst = false;
  std::string dst_abbr;
  int32_t dst_offset_s = 0;
  RuleDate start, end;

  // UTC instants at which daylight time starts and ends in `year`.
  std::pair<int64_t, int64_t> changes(int64_t year) const {
    return {rule_day(start, year) * kDay + start.time_s - std_offset_s,
            rule_day(end, year) * kDay + end.time_s - dst_offset_s};
  }
  bool dst_at(int64_t utc_s) const {
    if (!has_dst) return false;
    const int64_t year = civil_from_days(floor_div(utc_s + std_offset_s, kDay)).year;
    auto [s, e] = changes(year);
    if (s < e) return s <= utc_s && utc_s < e;
    return !(e <= utc_s && utc_s < s);
  }
  std::optional<int64_t> next_change(int64_t utc_s) const {
    if (!has_dst) return {};
    const int64_t year = civil_from_days(floor_div(utc_s + std_offset_s, kDay)).year;
    std::optional<int64_t> best;
    for (int64_t y = year - 1; y <= year + 1; ++y) {
      auto [s, e] = changes(y);
      for (int64_t c : {s, e}) {
        if (c > utc_s && (!best || c < *best)) best = c;
      }
    }
    return best;
  }
};

static Expected<std::shared_ptr<const TimeZone::Rule>> parse_rule(const std::string& name,
                                                                  std::string_view tz) {
  const auto bad = [&](const std::string& what) {
    return Error{ErrorCode::kInvalidArgument,
                 "time zone " + name + ": bad POSIX TZ string '" + std::string(tz) + "': " + what};
  };
  PosixParser p(tz);
  auto rule = std::make_shared<TimeZone::Rule>();
  auto std_abbr = p.abbreviation();
  if (!std_abbr) return bad("the standard-time name must be 3 or more letters or <...>");
  rule->std_abbr = *std_abbr;
  auto std_off = p.hms(24);
  if (!std_off) return bad("the standard-time offset must be [+-]hh[:mm[:ss]]");
  rule->std_offset_s = -*std_off;  // POSIX counts hours west of Greenwich
  if (p.done()) return std::shared_ptr<const TimeZone::Rule>(rule);
  auto dst_abbr = p.abbreviation();
  if (!dst_abbr) return bad("the daylight-time name must be 3 or more letters or <...>");
  rule->has_dst = true;
  rule->dst_abbr = *dst_abbr;
  rule->dst_offset_s = rule->std_offset_s + 3600;
  if (p.peek() != ',' && !p.done()) {
    auto dst_off = p.hms(24);
    if (!dst_off) return bad("the daylight-time offset must be [+-]hh[:mm[:ss]]");
    rule->dst_offset_s = -*dst_off;
  }
  if (p.done()) {
    // No rule given: POSIX leaves it to the implementation; the US rule is the usual choice.
    rule->start = RuleDate{RuleDate::Kind::kMonthWeekDay, 3, 2, 0, 7200};
    rule->end = RuleDate{RuleDate::Kind::kMonthWeekDay, 11, 1, 0, 7200};
    return std::shared_ptr<const TimeZone::Rule>(rule);
  }
  if (!p.eat(',')) return bad("expected ',' before the daylight-time start rule");
  auto start = p.date();
  if (!start || !p.eat(',')) return bad("the start rule must be Jn, n or Mm.w.d[/time]");
  auto end = p.date();
  if (!end || !p.done()) return bad("the end rule must be Jn, n or Mm.w.d[/time]");
  rule->start = *start;
  rule->end = *end;
  return std::shared_ptr<const TimeZone::Rule>(rule);
}

// --- civil dates -------------------------------------------------------------------------------

int64_t days_from_civil(int year, int month, int day) {
  // Count from 1 March so that the leap day is the last day of the counted year.
  const int64_t y = static_cast<int64_t>(year) - (month <= 2 ? 1 : 0);
  const int64_t era = floor_div(y, 400);
  const int64_t year_of_era = y - era * 400;
  const int64_t m = (month + 9) % 12;  // March = 0
  const int64_t day_of_year = (153 * m + 2) / 5 + day - 1;
  const int64_t day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;  // 719468 days from 0000-03-01 to 1970-01-01
}

CivilTime civil_from_days(int64_t days) {
  const int64_t z = days + 719468;
  const int64_t era = floor_div(z, 146097);
  const int64_t day_of_era = z - era * 146097;
  const int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const int64_t mp = (5 * day_of_year + 2) / 153;
  CivilTime c;
  c.day = static_cast<int>(day_of_year - (153 * mp + 2) / 5 + 1);
  c.month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.year = static_cast<int>(year_of_era + era * 400 + (c.month <= 2 ? 1 : 0));
  return c;
}

int weekday_from_days(int64_t days) {
  // 1970-01-01 was a Thursday (3 when Monday is 0).
  return static_cast<int>(((days % 7) + 7 + 3) % 7);
}

std::string format_civil(const CivilTime& t) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", t.year, t.month, t.day, t.hour,
                t.minute, t.second);
  return buf;
}

// --- TimeZone ----------------------------------------------------------------------------------

TimeZone::TimeZone() : name_("UTC"), types_{Type{0, false, "UTC"}} {}

TimeZone TimeZone::fixed(std::string name, int32_t offset_s) {
  TimeZone z;
  z.name_ = std::move(name);
  z.types_ = {Type{offset_s, false, z.name_}};
  return z;
}

Expected<TimeZone> TimeZone::from_posix(std::string name, std::string_view tz) {
  auto rule = parse_rule(name, tz);
  if (!rule) return rule.error();
  TimeZone z;
  z.name_ = std::move(name);
  z.types_ = {Type{(*rule)->std_offset_s, false, (*rule)->std_abbr}};
  z.rule_ = *rule;
  return z;
}

Expected<TimeZone> TimeZone::from_tzif(const std::string& name, std::string_view bytes) {
  Reader r(bytes);
  auto h1 = read_header(r, name);
  if (!h1) return h1.error();
  Header h = *h1;
  size_t time_size = 4;
  if (h.version >= '2') {
    // Skip the 32-bit block: the second header and the 64-bit data follow it.
    if (!r.has(h.data_size(4))) return bad_tzif(name, "the version 1 data block is cut short");
    r.skip(h.data_size(4));
    auto h2 = read_header(r, name);
    if (!h2) return h2.error();
    h = *h2;
    time_size = 8;
  }
  if (!r.has(h.data_size(time_size))) return bad_tzif(name, "the data block is cut short");
  if (h.leapcnt != 0) {
    return Error{
        ErrorCode::kInvalidArgument,
        "time zone " + name + " counts leap seconds (a 'right/' zone); use the zone without them"};
  }
  TimeZone z;
  z.name_ = name;
  z.types_.clear();  // the default constructor's UTC type
  z.transitions_.reserve(h.timecnt);
  for (uint32_t i = 0; i < h.timecnt; ++i) {
    uint64_t raw = r.be(time_size);
    int64_t t = time_size == 8 ? static_cast<int64_t>(raw)
                               : static_cast<int64_t>(static_cast<int32_t>(raw));
    if (!z.transitions_.empty() && t <= z.transitions_.back()) {
      return bad_tzif(name, "transition times are not in ascending order");
    }
    z.transitions_.push_back(t);
  }
  z.transition_types_.reserve(h.timecnt);
  for (uint32_t i = 0; i < h.timecnt; ++i) {
    auto idx = static_cast<uint8_t>(r.be(1));
    if (idx >= h.typecnt) return bad_tzif(name, "a transition names a type that does not exist");
    z.transition_types_.push_back(idx);
  }
  std::vector<std::pair<Type, uint8_t>> raw_types;
  for (uint32_t i = 0; i < h.typecnt; ++i) {
    auto off = static_cast<int32_t>(static_cast<uint32_t>(r.be(4)));
    auto dst = r.be(1);
    auto abbr_idx = static_cast<uint8_t>(r.be(1));
    if (off < -89999 || off > 93599) return bad_tzif(name, "a UTC offset is out of range");
    if (dst > 1) return bad_tzif(name, "a type's DST flag is neither 0 nor 1");
    if (abbr_idx >= h.charcnt) return bad_tzif(name, "an abbreviation index is out of range");
    raw_types.push_back({Type{off, dst == 1, ""}, abbr_idx});
  }
  std::string_view chars = r.take(h.charcnt);
  for (auto& [type, idx] : raw_types) {
    auto end = chars.find('\0', idx);
    type.abbreviation = std::string(
        chars.substr(idx, end == std::string_view::npos ? chars.size() - idx : end - idx));
    z.types_.push_back(type);
  }
  r.skip(h.leapcnt * (time_size + 4) + h.isstdcnt + h.isutcnt);
  if (h.version >= '2') {
    std::string_view footer = r.rest();
    if (footer.size() < 2 || footer[0] != '\n')
      return bad_tzif(name, "the TZ string footer is missing");
    auto end = footer.find('\n', 1);
    if (end == std::string_view::npos) return bad_tzif(name, "the TZ string footer is not closed");
    std::string_view tz = footer.substr(1, end - 1);
    if (!tz.empty()) {
      auto rule = parse_rule(name, tz);
      if (!rule) return rule.error();
      z.rule_ = *rule;
    }
  }
  return z;
}

TimeZone::Type TimeZone::type_at(int64_t utc_s) const {
  if (rule_ && (transitions_.empty() || utc_s >= transitions_.back())) {
    const bool dst = rule_->dst_at(utc_s);
    return dst ? Type{rule_->dst_offset_s, true, rule_->dst_abbr}
               : Type{rule_->std_offset_s, false, rule_->std_abbr};
  }
  if (transitions_.empty() || utc_s < transitions_.front()) return types_.front();
  auto it = std::upper_bound(transitions_.begin(), transitions_.end(), utc_s);
  return types_[transition_types_[static_cast<size_t>(it - transitions_.begin()) - 1]];
}

int32_t TimeZone::offset_at(int64_t utc_s) const { return type_at(utc_s).offset_s; }

LocalTime TimeZone::to_local(int64_t utc_s) const {
  const Type t = type_at(utc_s);
  const int64_t local = utc_s + t.offset_s;
  const int64_t days = floor_div(local, kDay);
  const int64_t secs = local - days * kDay;
  LocalTime out;
  out.civil = civil_from_days(days);
  out.civil.hour = static_cast<int>(secs / 3600);
  out.civil.minute = static_cast<int>(secs % 3600 / 60);
  out.civil.second = static_cast<int>(secs % 60);
  out.weekday = weekday_from_days(days);
  out.utc_offset_s = t.offset_s;
  out.is_dst = t.is_dst;
  out.abbreviation = t.abbreviation;
  return out;
}

std::vector<int64_t> TimeZone::to_utc_all(const CivilTime& local) const {
  const int64_t wall = civil_seconds(local);
  std::vector<int32_t> offsets;
  for (int k = -2; k <= 2; ++k) offsets.push_back(offset_at(wall + k * kDay));
  std::sort(offsets.begin(), offsets.end());
  offsets.erase(std::unique(offsets.begin(), offsets.end()), offsets.end());
  std::vector<int64_t> out;
  for (int32_t o : offsets) {
    const int64_t u = wall - o;
    if (offset_at(u) == o) out.push_back(u);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t TimeZone::to_utc(const CivilTime& local) const {
  auto all = to_utc_all(local);
  if (!all.empty()) return all.front();
  // Skipped wall time: find the change, the first instant whose wall clock is past `local`.
  const int64_t wall = civil_seconds(local);
  int32_t lo_off = std::numeric_limits<int32_t>::max(),
          hi_off = std::numeric_limits<int32_t>::min();
  for (int k = -2; k <= 2; ++k) {
    int32_t o = offset_at(wall + k * kDay);
    lo_off = std::min(lo_off, o);
    hi_off = std::max(hi_off, o);
  }
  int64_t lo = wall - hi_off, hi = wall - lo_off;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (mid + offset_at(mid) >= wall) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

std::optional<int64_t> TimeZone::next_transition(int64_t utc_s) const {
  int64_t t = utc_s;
  for (int guard = 0; guard < 10000; ++guard) {
    std::optional<int64_t> next;
    if (!transitions_.empty() && t < transitions_.back()) {
      next = *std::upper_bound(transitions_.begin(), transitions_.end(), t);
    } else if (rule_) {
      next = rule_->next_change(t);
    }
    if (!next) return {};
    if (offset_at(*next) != offset_at(*next - 1)) return next;
    t = *next;
  }
  return {};
}

bool TimeZone::changes_between(int64_t from_s, int64_t to_s) const {
  auto n = next_transition(from_s);
  return n && *n < to_s;
}

}  // namespace composer::policies
