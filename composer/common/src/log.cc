#include "composer/common/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "composer/common/strings.h"

namespace composer::log {
namespace {
std::atomic<Level> g_level{Level::kInfo};
std::mutex g_mutex;
FILE* g_file = nullptr;  // owned when not stderr

constexpr std::string_view level_name(Level l) {
  switch (l) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "info";
}

// logfmt: quote values with spaces, quotes, '=' or anything printable() escapes; a value
// never carries a raw control character or a byte that is not UTF-8 (a '\r' in a user name
// cannot forge a line).
void append_value(std::string& out, std::string_view v) {
  const std::string shown = printable(v);
  bool quote = v.empty() || shown != v;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=') quote = true;
  }
  if (!quote) {
    out.append(v);
    return;
  }
  out.push_back('"');
  for (char c : shown) {
    if (c == '"') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
}
}  // namespace

void set_level(Level l) { g_level.store(l); }
Level level() { return g_level.load(std::memory_order_relaxed); }

bool parse_level(std::string_view name, Level* out) {
  for (Level l : {Level::kDebug, Level::kInfo, Level::kWarning, Level::kError}) {
    if (name == level_name(l)) {
      *out = l;
      return true;
    }
  }
  return false;
}

bool set_file(const std::string& path) {
  // Opened before the old file is closed: a path that cannot be opened changes nothing, and
  // the same path again reopens it (after logrotate moved it away).
  FILE* opened = nullptr;
  if (!path.empty()) {
    opened = std::fopen(path.c_str(), "ae");
    if (opened == nullptr) return false;
  }
  std::lock_guard lock(g_mutex);
  if (g_file != nullptr) std::fclose(g_file);
  g_file = opened;
  return true;
}

void write(Level l, std::string_view msg, std::initializer_list<Field> fields) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[64];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  std::string line = "ts=";
  line.append(ts);
  line.append(" level=");
  line.append(level_name(l));
  line.append(" msg=");
  append_value(line, msg);
  for (const auto& [key, value] : fields) {
    line.push_back(' ');
    line.append(key);
    line.push_back('=');
    append_value(line, value);
  }
  line.push_back('\n');
  std::lock_guard lock(g_mutex);
  FILE* out = g_file != nullptr ? g_file : stderr;
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

}  // namespace composer::log
