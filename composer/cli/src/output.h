// How composerctl prints: aligned tables with upper-case headers (like squeue and sinfo),
// '|'-separated parsable lines (like sacct -P: a header line, no trailing '|'), or the API's
// own JSON objects.
#pragma once

#include <json/value.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "composer/api/types.h"
#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::cli {

enum class Format { kTable, kParsable, kJson };

struct Column {
  std::string header;
  bool right_align = false;  // numbers and sizes
};

class Table {
 public:
  explicit Table(std::vector<Column> columns);

  // One cell per column; a missing cell is printed empty and extra cells are dropped.
  // Line breaks and tabs inside a cell become spaces so each row stays one line.
  void add_row(std::vector<std::string> cells);

  // kTable: each column as wide as its widest cell, two spaces between columns, no trailing
  // spaces. kParsable: cells joined by '|'. `header` false leaves the header line out.
  // kJson is not a table format; it prints like kParsable.
  void print(std::ostream& out, Format format, bool header) const;

  size_t size() const { return rows_.size(); }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// Indented JSON followed by a newline.
void print_json(std::ostream& out, const Json::Value& value);

// Local time as Slurm prints it, "2024-05-01T12:00:00"; 0 prints as "Unknown".
std::string format_time(int64_t ms);
// Seconds as Slurm prints elapsed time: "02:03:04", "1-02:03:04".
std::string format_elapsed(int64_t seconds);
// Reads a time argument: "now", "now-30m" (s, m, h, d; seconds when no unit),
// "YYYY-MM-DD", "YYYY-MM-DDTHH:MM" or "YYYY-MM-DDTHH:MM:SS" in local time.
Expected<int64_t> parse_time(std::string_view text, int64_t now_ms);

Table pool_table(const std::vector<PoolRow>& rows);
Table device_table(const std::vector<Device>& devices);
Table composition_table(const std::vector<Composition>& compositions);
Table event_table(const std::vector<Event>& events);
Table health_table(const api::HealthInfo& health);

}  // namespace composer::cli
