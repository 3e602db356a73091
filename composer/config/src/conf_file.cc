#include "composer/config/conf_file.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "composer/common/names.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::config {
namespace {

Error invalid(const std::string& why) { return Error{ErrorCode::kInvalidArgument, why}; }

bool space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// One line: whitespace-separated Key=Value pairs. As in slurm.conf, whitespace may stand around
// the '=' ("StateDir = /srv"); a value is one word, and a word holding '=' after "Key= " is
// the next pair, not the value.
Expected<std::vector<Pair>> split_pairs(std::string_view line) {
  std::vector<Pair> pairs;
  size_t i = 0;
  const size_t n = line.size();
  auto skip = [&](size_t at) {
    while (at < n && space(line[at])) ++at;
    return at;
  };
  auto word_end = [&](size_t at) {
    while (at < n && !space(line[at])) ++at;
    return at;
  };
  for (i = skip(i); i < n; i = skip(i)) {
    const size_t start = i;
    while (i < n && !space(line[i]) && line[i] != '=') ++i;
    const size_t eq = skip(i);
    if (i == start || eq == n || line[eq] != '=') {
      return invalid("'" + std::string(line.substr(start, word_end(start) - start)) +
                     "' is not of the form Key=Value");
    }
    Pair p{std::string(line.substr(start, i - start)), ""};
    i = eq + 1;
    if (i < n && space(line[i])) {
      const size_t next = skip(i);
      const std::string_view word = line.substr(next, word_end(next) - next);
      if (word.find('=') == std::string_view::npos) i = next;
    }
    const size_t end = word_end(i);
    p.value = std::string(line.substr(i, end - i));
    i = end;
    pairs.push_back(std::move(p));
  }
  return pairs;
}

}  // namespace

std::string path_from_environment() {
  const char* env = std::getenv("COMPOSER_CONF");
  return env != nullptr && env[0] != '\0' ? env : kDefaultPath;
}

Error at(const std::string& path, int line, const std::string& why) {
  return invalid(path + (line > 0 ? " line " + std::to_string(line) : std::string()) + ": " + why);
}

Status read_lines(std::string_view text, const std::string& path,
                  const std::function<Status(const Line&)>& each) {
  std::istringstream in{std::string(text)};
  std::string raw;
  Line line;
  while (std::getline(in, raw)) {
    ++line.number;
    if (auto hash = raw.find('#'); hash != std::string::npos) raw.resize(hash);
    if (trim(raw).empty()) continue;
    auto pairs = split_pairs(raw);
    if (!pairs) return at(path, line.number, pairs.error().message);
    line.pairs = std::move(*pairs);
    line.key = lower(line.pairs.front().key);
    if (Status s = each(line); !s) return at(path, line.number, s.error().message);
  }
  return Status::Ok();
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    return Error{err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kUnavailable,
                 "cannot read " + path + ": " + std::strerror(err)};
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

Status single_setting(const Line& line, std::set<std::string>& seen) {
  if (line.pairs.size() > 1) {
    return invalid("'" + line.written_key() +
                   "' takes one value; put other settings on their own line");
  }
  if (!seen.insert(line.key).second) return invalid("'" + line.written_key() + "' is set twice");
  return Status::Ok();
}

Expected<int64_t> whole_number(const std::string& key, const std::string& value, int64_t min,
                               int64_t max) {
  // common's one reader, over the whole range the sentence names (a maximum above UINT32_MAX
  // was once refused under a sentence that allowed it: config_test,
  // ConfFile.AWholeNumberReachesTheMaximumItsSentenceNames).
  const auto low = static_cast<uint64_t>(min);
  const auto high = static_cast<uint64_t>(max);
  Expected<uint64_t> n = parse_whole_number(key, value, low, high);
  if (!n) return n.error();  // its sentence is this file's: "KEY=VALUE: expected ..."
  return static_cast<int64_t>(*n);
}

Expected<bool> yes_no(const std::string& key, const std::string& value) {
  const std::string v = lower(value);
  if (v == "yes" || v == "true" || v == "1" || v == "on") return true;
  if (v == "no" || v == "false" || v == "0" || v == "off") return false;
  return invalid(key + "=" + value + ": expected yes or no");
}

Expected<int64_t> duration_ms(const std::string& key, const std::string& value, int64_t min_ms,
                              int64_t max_ms) {
  size_t digits = 0;
  while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) {
    ++digits;
  }
  const std::string unit = lower(value.substr(digits));
  const int64_t scale = unit == "ms"                  ? 1
                        : unit == "s" || unit.empty() ? 1000
                        : unit == "m"                 ? 60000
                                                      : 0;
  int64_t ms = -1;
  if (digits <= 9 && scale > 0) {
    if (auto n = parse_whole_number(key, value.substr(0, digits), 0, 999999999)) {
      ms = static_cast<int64_t>(*n) * scale;
    }
  }
  if (ms < min_ms || ms > max_ms) {
    return invalid(key + "=" + value + ": expected a duration such as 500ms, 10s or 2m, from " +
                   std::to_string(min_ms) + "ms to " + std::to_string(max_ms / 1000) + "s");
  }
  return ms;
}

Status name(const std::string& key, const std::string& value) {
  if (value.empty()) return invalid(key + " needs a value");
  if (!valid_name(value, value.size())) {
    return invalid(key + "=" + value + ": names may hold only letters, digits, '-', '_' and '.'");
  }
  return Status::Ok();
}

Expected<std::vector<std::string>> name_list(const std::string& key, const std::string& value) {
  std::vector<std::string> names = split(value, ',', {.trim = true});
  for (const std::string& n : names) {
    if (Status s = name(key, n); !s) return s.error();
  }
  return names;
}

Status absolute_path(const std::string& key, const std::string& value) {
  if (value.empty() || value[0] != '/') {
    return invalid(key + "=" + value + ": expected an absolute path");
  }
  return Status::Ok();
}

Expected<std::vector<std::string>> expand_hostlist(std::string_view expr) {
  std::vector<std::string> out;
  // Split on commas outside brackets.
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : expr) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  const std::string rule = "expected names like node1 or node[01-04,07]";
  for (const auto& p : parts) {
    auto open = p.find('[');
    if (open == std::string::npos) {
      if (auto s = name("NodeName", p); !s) return s.error();
      out.push_back(p);
      continue;
    }
    auto close = p.find(']', open);
    if (close == std::string::npos || close != p.size() - 1 || open == 0) {
      return Error{ErrorCode::kInvalidArgument, "'" + p + "': " + rule};
    }
    const std::string prefix = p.substr(0, open);
    for (const auto& range : split(p.substr(open + 1, close - open - 1), ',', {.trim = true})) {
      auto dash = range.find('-');
      const std::string lo_s = range.substr(0, dash);
      const std::string hi_s = dash == std::string::npos ? lo_s : range.substr(dash + 1);
      auto lo = parse_count(lo_s, 1000000);
      auto hi = parse_count(hi_s, 1000000);
      if (!lo || !hi || *hi < *lo || *hi - *lo > 100000) {
        return Error{ErrorCode::kInvalidArgument, "'" + p + "': " + rule};
      }
      for (uint32_t i = *lo; i <= *hi; ++i) {
        std::string num = std::to_string(i);
        if (num.size() < lo_s.size()) num.insert(0, lo_s.size() - num.size(), '0');
        out.push_back(prefix + num);
      }
    }
  }
  return out;
}

}  // namespace composer::config
