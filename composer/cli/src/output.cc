#include "composer/cli/output.h"

#include <json/writer.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <map>
#include <tuple>

#include "composer/api/codec.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::cli {
namespace {

// Display width in characters: UTF-8 continuation bytes take no column.
size_t width(std::string_view s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string one_line(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

// The first `n` characters of `s` (UTF-8 sequences kept whole).
std::string first_chars(const std::string& s, size_t n) {
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && chars++ == n) return s.substr(0, i);
  }
  return s;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string id_or_empty(const std::optional<int64_t>& id) {
  return id ? std::to_string(*id) : std::string();
}

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::string& cell : cells) cell = one_line(std::move(cell));
  rows_.push_back(std::move(cells));
}

Status Table::select(std::string_view fields) {
  std::string names;
  for (const Column& c : columns_) names += (names.empty() ? "" : ",") + c.header;
  const auto refuse = [&](const std::string& why) {
    return Error{ErrorCode::kInvalidArgument,
                 "-o/--format: " + why + "; the fields are " + names + " (any case)"};
  };
  std::vector<size_t> picked;
  std::vector<Column> chosen;
  size_t start = 0;
  while (start <= fields.size()) {
    size_t end = fields.find(',', start);
    if (end == std::string_view::npos) end = fields.size();
    const std::string_view item = fields.substr(start, end - start);
    start = end + 1;
    const size_t percent = item.find('%');
    const std::string name = upper(item.substr(0, percent));
    if (name.empty()) return refuse("'" + std::string(fields) + "' has an empty field");
    const auto at = std::find_if(columns_.begin(), columns_.end(),
                                 [&](const Column& c) { return c.header == name; });
    if (at == columns_.end())
      return refuse("no field '" + std::string(item.substr(0, percent)) + "'");
    Column column = *at;
    if (percent != std::string_view::npos) {
      std::string_view spec = item.substr(percent + 1);
      const bool left = spec.starts_with('-');
      if (left) spec.remove_prefix(1);
      size_t width = 0;
      const auto [ptr, ec] = std::from_chars(spec.data(), spec.data() + spec.size(), width);
      if (spec.empty() || ec != std::errc() || ptr != spec.data() + spec.size() || width == 0 ||
          width > 1000) {
        return refuse("'" + std::string(item) +
                      "' has a width that is not %N or %-N with N from 1 to 1000");
      }
      column.width = width;
      column.right_align = !left;
    }
    picked.push_back(static_cast<size_t>(at - columns_.begin()));
    chosen.push_back(std::move(column));
  }
  for (auto& row : rows_) {
    std::vector<std::string> cells;
    for (size_t i : picked) cells.push_back(row[i]);
    row = std::move(cells);
  }
  columns_ = std::move(chosen);
  return Status::Ok();
}

void Table::print(std::ostream& out, Format format, bool header) const {
  std::vector<const std::vector<std::string>*> lines;
  std::vector<std::string> headers;
  for (const Column& c : columns_) headers.push_back(c.header);
  if (header) lines.push_back(&headers);
  for (const auto& row : rows_) lines.push_back(&row);

  if (format != Format::kTable) {
    for (const auto* line : lines) {
      for (size_t i = 0; i < line->size(); ++i) out << (i == 0 ? "" : "|") << (*line)[i];
      out << '\n';
    }
    return;
  }
  std::vector<size_t> widths(columns_.size(), 0);
  for (const auto* line : lines) {
    for (size_t i = 0; i < line->size(); ++i) widths[i] = std::max(widths[i], width((*line)[i]));
  }
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].width > 0) widths[i] = columns_[i].width;
  }
  for (const auto* line : lines) {
    std::string text;
    for (size_t i = 0; i < line->size(); ++i) {
      const std::string cell = first_chars((*line)[i], widths[i]);
      const std::string pad(widths[i] - width(cell), ' ');
      if (i > 0) text += "  ";
      text += columns_[i].right_align ? pad + cell : cell + pad;
    }
    text.erase(text.find_last_not_of(' ') + 1);
    out << text << '\n';
  }
}

Status print_table(std::ostream& out, Table table, const OutputOptions& options) {
  if (!options.fields.empty()) {
    if (Status s = table.select(options.fields); !s) return s;
  }
  table.print(out, options.format, options.header);
  return Status::Ok();
}

void print_json(std::ostream& out, const Json::Value& value) {
  Json::StreamWriterBuilder builder;
  builder["indentation"] = "  ";
  builder["emitUTF8"] = true;
  out << Json::writeString(builder, value) << '\n';
}

std::string format_time(int64_t ms) {
  if (ms <= 0) return "Unknown";
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm local{};
  if (localtime_r(&seconds, &local) == nullptr) return "Unknown";
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%S", &local);
  return buffer;
}

namespace {

std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

void print_csv(std::ostream& out, const Table& table, bool header) {
  if (header) {
    for (size_t i = 0; i < table.columns().size(); ++i) {
      out << (i == 0 ? "" : ",") << csv_field(table.columns()[i].header);
    }
    out << '\n';
  }
  for (const auto& row : table.rows()) {
    for (size_t i = 0; i < row.size(); ++i) out << (i == 0 ? "" : ",") << csv_field(row[i]);
    out << '\n';
  }
}

std::string format_elapsed(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  const int64_t days = seconds / 86400;
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%02lld:%02lld:%02lld",
                static_cast<long long>(seconds % 86400 / 3600),
                static_cast<long long>(seconds % 3600 / 60), static_cast<long long>(seconds % 60));
  return days > 0 ? std::to_string(days) + "-" + buffer : std::string(buffer);
}

namespace {
// A pool table: the columns saying what is counted (`keys`, one cell each per row), then the
// counts and sizes of the row.
Table counts_table(std::vector<Column> keys,
                   const std::vector<std::pair<std::vector<std::string>, const PoolRow*>>& rows) {
  for (const char* name :
       {"TOTAL", "FREE", "ATTACHED", "DRAINED", "FAILED", "FOREIGN", "TOTAL_SIZE", "FREE_SIZE"}) {
    keys.push_back({name, true});
  }
  Table t(std::move(keys));
  for (const auto& [cells, row] : rows) {
    const PoolRow& r = *row;
    // GPUs have no size; an empty cell says so better than a 0.
    const bool sized = r.type != DeviceType::kGpu;
    std::vector<std::string> all = cells;
    all.insert(all.end(),
               {std::to_string(r.total), std::to_string(r.free), std::to_string(r.attached),
                std::to_string(r.drained), std::to_string(r.failed), std::to_string(r.foreign),
                sized ? format_size(r.total_bytes) : "", sized ? format_size(r.free_bytes) : ""});
    t.add_row(std::move(all));
  }
  return t;
}
}  // namespace

Table pool_table(const std::vector<PoolRow>& rows) {
  std::vector<std::pair<std::vector<std::string>, const PoolRow*>> keyed;
  for (const PoolRow& r : rows)
    keyed.push_back({{std::string(to_string(r.type)), r.model, r.zone}, &r});
  return counts_table({{"TYPE"}, {"MODEL"}, {"ZONE"}}, keyed);
}

Table device_table(const std::vector<Device>& devices) {
  Table t({{"ID"},
           {"TYPE"},
           {"MODEL"},
           {"SIZE", true},
           {"ZONE"},
           {"ADDRESS"},
           {"HEALTH"},
           {"STATE"},
           {"NODE"},
           {"COMPOSITION", true},
           {"HOLDER"},
           {"REASON"},
           {"DOMAINS"}});
  for (const Device& d : devices) {
    t.add_row({d.id, std::string(to_string(d.type)), d.model,
               d.capacity_bytes > 0 ? format_size(d.capacity_bytes) : "", d.zone, d.address,
               std::string(to_string(d.health)), std::string(to_string(d.state())), d.node,
               id_or_empty(d.composition_id), d.holder, d.drain_reason, domain_names(d.domains)});
  }
  return t;
}

std::string domain_names(const std::vector<FailureDomain>& domains) {
  std::vector<std::string> names;
  for (const FailureDomain& d : domains) names.push_back(to_string(d));
  return join(names, ",");
}

std::vector<DomainRow> domain_rows(const std::vector<Device>& devices) {
  std::map<std::tuple<std::string, std::string, DeviceType>, DomainRow> rows;
  auto count = [&rows](const std::string& level, const std::string& name, const Device& d) {
    DomainRow& r = rows[std::make_tuple(level, name, d.type)];
    r.level = level;
    r.name = name;
    r.counts.type = d.type;
    count_device(r.counts, d);
  };
  for (const Device& d : devices) {
    if (d.domains.empty()) count("", kNoDomain, d);
    for (const FailureDomain& dom : d.domains) count(dom.level, dom.name, d);
  }
  std::vector<DomainRow> out;
  for (auto& [key, row] : rows) out.push_back(std::move(row));
  return out;
}

Table domain_table(const std::vector<DomainRow>& rows) {
  std::vector<std::pair<std::vector<std::string>, const PoolRow*>> keyed;
  for (const DomainRow& r : rows) {
    keyed.push_back({{r.level, r.name, std::string(to_string(r.counts.type))}, &r.counts});
  }
  return counts_table({{"LEVEL"}, {"DOMAIN"}, {"TYPE"}}, keyed);
}

Json::Value domain_rows_to_json(const std::vector<DomainRow>& rows) {
  Json::Value list(Json::arrayValue);
  for (const DomainRow& r : rows) {
    // The pool row's object, keyed by the domain instead of model and zone.
    Json::Value v = api::to_json(r.counts);
    v.removeMember("model");
    v.removeMember("zone");
    v["level"] = r.level;
    v["domain"] = r.name;
    list.append(std::move(v));
  }
  Json::Value out(Json::objectValue);
  out["domains"] = std::move(list);
  return out;
}

Table composition_table(const std::vector<Composition>& compositions) {
  Table t({{"ID", true},
           {"JOBID", true},
           {"NODE"},
           {"USER"},
           {"ACCOUNT"},
           {"WORKLOAD"},
           {"STATE"},
           {"REQUEST"},
           {"MEMPOLICY"},
           {"DEVICES"},
           {"CREATED"},
           {"ERROR"},
           {"HOLD"}});
  for (const Composition& c : compositions) {
    std::vector<std::string> ids;
    for (const Device& d : c.devices) ids.push_back(d.id);
    t.add_row({std::to_string(c.id), std::to_string(c.owner.job_id), c.node, c.owner.user,
               c.owner.account, c.owner.workload, std::string(to_string(c.state)),
               c.request.to_string(), c.mem_policy, join(ids), format_time(c.created_ms),
               c.last_error, c.hold});
  }
  return t;
}

Table event_table(const std::vector<Event>& events) {
  Table t({{"ID", true},
           {"TIME"},
           {"KIND"},
           {"JOBID", true},
           {"NODE"},
           {"USER"},
           {"FROM"},
           {"TO"},
           {"DEVICES"},
           {"DETAIL"}});
  for (const Event& e : events) {
    t.add_row({std::to_string(e.id), format_time(e.ts_ms), e.kind,
               e.owner.job_id > 0 ? std::to_string(e.owner.job_id) : "", e.node, e.owner.user,
               e.from_state, e.to_state, join(e.devices), e.detail});
  }
  return t;
}

Table health_table(const api::HealthInfo& health) {
  Table t({{"STATUS"}, {"FABRIC"}, {"VERSION"}, {"UPTIME", true}, {"WARNINGS"}});
  t.add_row({health.status, health.fabric, health.version, format_elapsed(health.uptime_s),
             join(health.warnings, "; ")});
  return t;
}

}  // namespace composer::cli
