// The one logger: logfmt lines (ts=... level=... msg="..." key=value) on stderr or a file.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace composer::log {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

using Field = std::pair<std::string_view, std::string>;

void set_level(Level level);
Level level();
// Empty path: stderr. The same path again reopens the file (a rotated log). Returns false, and
// keeps writing where it wrote before, if the file cannot be opened.
bool set_file(const std::string& path);
// Parses "debug", "info", "warning", "error".
bool parse_level(std::string_view name, Level* out);

void write(Level level, std::string_view msg, std::initializer_list<Field> fields);

inline void debug(std::string_view msg, std::initializer_list<Field> fields = {}) {
  if (level() <= Level::kDebug) write(Level::kDebug, msg, fields);
}
inline void info(std::string_view msg, std::initializer_list<Field> fields = {}) {
  if (level() <= Level::kInfo) write(Level::kInfo, msg, fields);
}
inline void warning(std::string_view msg, std::initializer_list<Field> fields = {}) {
  write(Level::kWarning, msg, fields);
}
inline void error(std::string_view msg, std::initializer_list<Field> fields = {}) {
  write(Level::kError, msg, fields);
}
}  // namespace composer::log
