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

// What the command line asked of the output: -P or --json, -n/--noheader, -o/--format.
struct OutputOptions {
  Format format = Format::kTable;
  bool header = true;
  std::string fields;  // -o/--format as given; empty: every column
};

struct Column {
  std::string header;
  bool right_align = false;  // numbers and sizes
  size_t width = 0;          // -o's %N: exactly this many characters, cut to fit; 0: as wide
                             // as the widest cell
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

  // Keeps the columns `fields` names, in its order, as sacct's -o/--format reads it:
  // comma-separated column names in any case, each with an optional %N (N characters wide,
  // right-aligned) or %-N (left-aligned). The widths shape kTable only. kInvalidArgument names
  // a field the table does not have and lists those it has.
  Status select(std::string_view fields);

  size_t size() const { return rows_.size(); }
  const std::vector<Column>& columns() const { return columns_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// `table` with the fields of `options.fields`, as a table or '|'-separated. kInvalidArgument
// (nothing printed) for a field it does not have.
Status print_table(std::ostream& out, Table table, const OutputOptions& options);

// `table` (after -o's field selection, already checked) as RFC 4180 comma-separated values:
// a field with a comma, quote or line break is quoted, quotes doubled.
void print_csv(std::ostream& out, const Table& table, bool header);

// Indented JSON followed by a newline.
void print_json(std::ostream& out, const Json::Value& value);

// Local time as Slurm prints it, "2024-05-01T12:00:00"; 0 prints as "Unknown".
std::string format_time(int64_t ms);
// Seconds as Slurm prints elapsed time: "02:03:04", "1-02:03:04".
std::string format_elapsed(int64_t seconds);

Table pool_table(const std::vector<PoolRow>& rows);
Table device_table(const std::vector<Device>& devices);
Table composition_table(const std::vector<Composition>& compositions);
Table event_table(const std::vector<Event>& events);
Table health_table(const api::HealthInfo& health);

// "appliance:mem-a,power:pdu-1"; empty for none.
std::string domain_names(const std::vector<FailureDomain>& domains);

// `pool --by domain`: one row per failure domain and device type, counted from the device
// list; a device in several domains counts in each. Devices in no domain count in one row of
// level "" and domain kNoDomain.
inline constexpr const char* kNoDomain = "(none)";
struct DomainRow {
  std::string level;
  std::string name;
  PoolRow counts;  // type and counts; model and zone empty
};
// Sorted by level, domain, type.
std::vector<DomainRow> domain_rows(const std::vector<Device>& devices);
Table domain_table(const std::vector<DomainRow>& rows);
// {"domains": [{"level", "domain", and the fields of a pool row but model and zone}]}
Json::Value domain_rows_to_json(const std::vector<DomainRow>& rows);

}  // namespace composer::cli
