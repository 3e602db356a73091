#include "output.h"

#include <json/writer.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>

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
  for (const auto* line : lines) {
    std::string text;
    for (size_t i = 0; i < line->size(); ++i) {
      const std::string& cell = (*line)[i];
      const std::string pad(widths[i] - width(cell), ' ');
      if (i > 0) text += "  ";
      text += columns_[i].right_align ? pad + cell : cell + pad;
    }
    text.erase(text.find_last_not_of(' ') + 1);
    out << text << '\n';
  }
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

std::string format_elapsed(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  const int64_t days = seconds / 86400;
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%02lld:%02lld:%02lld",
                static_cast<long long>(seconds % 86400 / 3600),
                static_cast<long long>(seconds % 3600 / 60), static_cast<long long>(seconds % 60));
  return days > 0 ? std::to_string(days) + "-" + buffer : std::string(buffer);
}

Expected<int64_t> parse_time(std::string_view text, int64_t now_ms) {
  const std::string rule =
      "expected now, now-N[s|m|h|d], YYYY-MM-DD, YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS";
  const std::string quoted = "'" + std::string(text) + "'";
  if (text == "now") return now_ms;
  if (text.starts_with("now-")) {
    std::string_view rest = text.substr(4);
    int64_t unit = 1000;
    if (!rest.empty() && std::isalpha(static_cast<unsigned char>(rest.back()))) {
      switch (rest.back()) {
        case 's':
          unit = 1000;
          break;
        case 'm':
          unit = 60 * 1000;
          break;
        case 'h':
          unit = 3600 * 1000;
          break;
        case 'd':
          unit = 86400 * 1000;
          break;
        default:
          return Error{ErrorCode::kInvalidArgument, "bad time " + quoted + ": " + rule};
      }
      rest.remove_suffix(1);
    }
    int64_t count = 0;
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), count);
    if (rest.empty() || ec != std::errc() || ptr != rest.data() + rest.size() || count < 0 ||
        count > now_ms / unit) {
      return Error{ErrorCode::kInvalidArgument, "bad time " + quoted + ": " + rule};
    }
    return now_ms - count * unit;
  }
  for (const char* layout : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"}) {
    std::tm tm{};
    const std::string copy(text);
    const char* end = strptime(copy.c_str(), layout, &tm);
    if (end == nullptr || *end != '\0') continue;
    tm.tm_isdst = -1;
    const std::time_t t = std::mktime(&tm);
    if (t == static_cast<std::time_t>(-1)) break;
    return static_cast<int64_t>(t) * 1000;
  }
  return Error{ErrorCode::kInvalidArgument, "bad time " + quoted + ": " + rule};
}

Table pool_table(const std::vector<PoolRow>& rows) {
  Table t({{"TYPE"},
           {"MODEL"},
           {"ZONE"},
           {"TOTAL", true},
           {"FREE", true},
           {"ATTACHED", true},
           {"DRAINED", true},
           {"FAILED", true},
           {"TOTAL_SIZE", true},
           {"FREE_SIZE", true}});
  for (const PoolRow& r : rows) {
    // GPUs have no size; an empty cell says so better than a 0.
    const bool sized = r.type != DeviceType::kGpu;
    t.add_row({std::string(to_string(r.type)), r.model, r.zone, std::to_string(r.total),
               std::to_string(r.free), std::to_string(r.attached), std::to_string(r.drained),
               std::to_string(r.failed), sized ? format_size(r.total_bytes) : "",
               sized ? format_size(r.free_bytes) : ""});
  }
  return t;
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
           {"REASON"}});
  for (const Device& d : devices) {
    t.add_row({d.id, std::string(to_string(d.type)), d.model,
               d.capacity_bytes > 0 ? format_size(d.capacity_bytes) : "", d.zone, d.address,
               std::string(to_string(d.health)), std::string(to_string(d.state())), d.node,
               id_or_empty(d.composition_id), d.drain_reason});
  }
  return t;
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
           {"DEVICES"},
           {"CREATED"},
           {"ERROR"}});
  for (const Composition& c : compositions) {
    std::vector<std::string> ids;
    for (const Device& d : c.devices) ids.push_back(d.id);
    t.add_row({std::to_string(c.id), std::to_string(c.job_id), c.node, c.user, c.account,
               c.workload, std::string(to_string(c.state)), c.request.to_string(), join(ids),
               format_time(c.created_ms), c.last_error});
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
               e.job_id > 0 ? std::to_string(e.job_id) : "", e.node, e.user, e.from_state,
               e.to_state, join(e.devices), e.detail});
  }
  return t;
}

Table health_table(const api::HealthInfo& health) {
  Table t({{"STATUS"}, {"FABRIC"}, {"VERSION"}, {"UPTIME", true}});
  t.add_row({health.status, health.fabric, health.version, format_elapsed(health.uptime_s)});
  return t;
}

}  // namespace composer::cli
