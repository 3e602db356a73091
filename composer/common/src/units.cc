#include "composer/common/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include "composer/common/strings.h"

namespace composer {
namespace {
std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }
}  // namespace

Expected<uint64_t> parse_size(std::string_view text, ZeroSize zero) {
  // Read as Slurm's --mem reads a size (22.05): binary units, and a B after the unit changes
  // nothing ("64GB" is 64G, 64 GiB), as sbatch --mem=64GB takes it (units_test, ABIsBinary).
  const std::string rule =
      "expected a whole number of at most 1024T with an optional K, M, G or T suffix (binary, "
      "as Slurm's --mem reads them: 64G and 64GB are both 64 GiB; a bare number is megabytes), "
      "for example 64G";
  if (text.empty()) return Error{ErrorCode::kInvalidArgument, "empty size: " + rule};
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  if (digits == 0) {
    return Error{ErrorCode::kInvalidArgument, "bad size " + quoted(text) + ": " + rule};
  }
  uint64_t number = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc() || ptr != text.data() + digits) {
    return Error{ErrorCode::kInvalidArgument, "size " + quoted(text) + " is too large: " + rule};
  }
  std::string suffix;
  for (char c : text.substr(digits))
    suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  uint64_t unit = 0;
  if (suffix.empty()) {
    unit = kMiB;
  } else {
    const char u = suffix[0];
    const std::string rest = suffix.substr(1);
    if (!(rest.empty() || rest == "B" || rest == "IB")) {
      return Error{ErrorCode::kInvalidArgument, "bad size " + quoted(text) + ": " + rule};
    }
    switch (u) {
      case 'K':
        unit = kKiB;
        break;
      case 'M':
        unit = kMiB;
        break;
      case 'G':
        unit = kGiB;
        break;
      case 'T':
        unit = kTiB;
        break;
      default:
        return Error{ErrorCode::kInvalidArgument, "bad size " + quoted(text) + ": " + rule};
    }
  }
  if (number == 0) {
    if (zero == ZeroSize::kNone) return uint64_t{0};
    return Error{ErrorCode::kInvalidArgument,
                 "size " + quoted(text) + " must be greater than zero: " + rule};
  }
  if (number > kMaxMemBytes / unit) {
    return Error{ErrorCode::kInvalidArgument,
                 "size " + quoted(text) + " is larger than the 1024T any pool can hold: " + rule};
  }
  return number * unit;
}

uint64_t gib_rounded_up(uint64_t bytes) { return bytes / kGiB + (bytes % kGiB != 0 ? 1 : 0); }

uint64_t gib_rounded_down(uint64_t bytes) { return bytes / kGiB; }

std::string format_size(uint64_t bytes) {
  if (bytes == 0) return "0";
  struct Unit {
    uint64_t size;
    const char* name;
  };
  for (const Unit& u : {Unit{kTiB, "T"}, Unit{kGiB, "G"}, Unit{kMiB, "M"}, Unit{kKiB, "K"}}) {
    if (bytes % u.size == 0) return std::to_string(bytes / u.size) + u.name;
  }
  return std::to_string(bytes);
}

std::string whole_number_rule(uint64_t min, uint64_t max) {
  return "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
}

Expected<uint64_t> parse_whole_number(std::string_view name, std::string_view text, uint64_t min,
                                      uint64_t max) {
  uint64_t n = 0;
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  const auto [end, ec] = digits ? std::from_chars(text.data(), text.data() + text.size(), n)
                                : std::from_chars_result{text.data(), std::errc::invalid_argument};
  if (ec != std::errc() || end != text.data() + text.size() || n < min || n > max) {
    return Error{ErrorCode::kInvalidArgument, std::string(name) + "=" + printable(text) +
                                                  ": expected " + whole_number_rule(min, max)};
  }
  return n;
}

Expected<uint32_t> parse_count(std::string_view text, uint32_t max) {
  Expected<uint64_t> n = parse_whole_number("count", text, 0, max);
  if (!n) return n.error();
  return static_cast<uint32_t>(*n);
}

Expected<std::optional<int64_t>> parse_slurm_duration(std::string_view text) {
  const std::string t = lower(trim(text));
  if (t.empty() || t == "unlimited" || t == "infinite" || t == "partition_limit" ||
      t == "unknown" || t == "invalid" || t == "none") {
    return std::optional<int64_t>{};
  }
  const Error rule{ErrorCode::kInvalidArgument,
                   "not a duration; use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS "
                   "(numbers of at most 6 digits), or UNLIMITED"};
  auto number = [](std::string_view s) -> std::optional<int64_t> {
    if (s.empty() || s.size() > 6) return std::nullopt;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
  };
  std::string_view rest = t;
  int64_t days = 0;
  const bool has_days = rest.find('-') != std::string_view::npos;
  if (has_days) {
    const auto dash = rest.find('-');
    auto d = number(rest.substr(0, dash));
    if (!d) return rule;
    days = *d;
    rest = rest.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  for (const std::string& p : split(rest, ':')) {
    auto n = number(p);
    if (!n) return rule;
    parts.push_back(*n);
  }
  if (parts.empty() || parts.size() > 3) return rule;
  int64_t s = 0;
  if (has_days) {
    // Slurm's day forms count from hours: D-HH, D-HH:MM, D-HH:MM:SS.
    s = parts[0] * 3600 + (parts.size() > 1 ? parts[1] * 60 : 0) +
        (parts.size() > 2 ? parts[2] : 0);
  } else if (parts.size() == 1) {
    s = parts[0] * 60;
  } else if (parts.size() == 2) {
    s = parts[0] * 60 + parts[1];
  } else {
    s = parts[0] * 3600 + parts[1] * 60 + parts[2];
  }
  return std::optional<int64_t>{days * 86400 + s};
}

}  // namespace composer
