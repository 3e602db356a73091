#include "composer/accounting/report_json.h"

#include <array>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "composer/api/json_reader.h"

namespace composer::accounting {
namespace {

using api::as_int;
using api::JsonObject;

Json::Value i64(int64_t v) { return Json::Value(static_cast<Json::Int64>(v)); }

Json::Value usage_json(const Usage& u) {
  Json::Value v(Json::objectValue);
  v["attached_ms"] = i64(u.attached_ms);
  v["idle_ms"] = i64(u.idle_ms);
  v["drained_ms"] = i64(u.drained_ms);
  v["failed_ms"] = i64(u.failed_ms);
  return v;
}

Json::Value type_ms_json(const TypeMs& ms) {
  Json::Value v(Json::objectValue);
  for (DeviceType t : kAllDeviceTypes) {
    v[std::string(to_string(t))] = i64(ms[static_cast<size_t>(t)]);
  }
  return v;
}

Json::Value group_json(const GroupUsage& g) {
  Json::Value v(Json::objectValue);
  v["name"] = g.name;
  v["device_ms"] = type_ms_json(g.device_ms);
  v["mem_gib_hours"] = g.mem_gib_hours;
  v["jobs"] = g.jobs;
  v["compositions"] = g.compositions;
  return v;
}

template <typename T, typename F>
Json::Value array_of(const std::vector<T>& items, F to) {
  Json::Value a(Json::arrayValue);
  for (const T& item : items) a.append(to(item));
  return a;
}

// --- reading -----------------------------------------------------------------------------

Usage read_usage(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a usage", {"attached_ms", "idle_ms", "drained_ms", "failed_ms"});
  return Usage{.attached_ms = r.integer("attached_ms"),
               .idle_ms = r.integer("idle_ms"),
               .drained_ms = r.integer("drained_ms"),
               .failed_ms = r.integer("failed_ms")};
}

// {"gpu": ..., "mem": ..., "nvme": ...}, each read by `read`.
template <typename T, typename F>
std::array<T, std::size(kAllDeviceTypes)> read_per_type(const Json::Value& v,
                                                        const std::string& path,
                                                        std::string_view what, F read) {
  JsonObject r(v, path, what, {"gpu", "mem", "nvme"});
  std::array<T, std::size(kAllDeviceTypes)> out{};
  for (DeviceType t : kAllDeviceTypes) {
    out[static_cast<size_t>(t)] = r.get(to_string(t), read);
  }
  return out;
}

TypeMs read_type_ms(const Json::Value& v, const std::string& path) {
  return read_per_type<int64_t>(v, path, "device time by type", as_int);
}

GroupUsage read_group(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a group", {"name", "device_ms", "mem_gib_hours", "jobs", "compositions"});
  GroupUsage g;
  g.name = r.string("name");
  g.device_ms = r.get("device_ms", read_type_ms);
  g.mem_gib_hours = r.number("mem_gib_hours");
  g.jobs = r.u32("jobs");
  g.compositions = r.u32("compositions");
  return g;
}

SlotUsage read_slot(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a slot", {"type", "slot", "usage"});
  return SlotUsage{r.string("type"), r.string("slot"), r.get("usage", read_usage)};
}

std::array<std::array<int64_t, 24>, 7> read_grid(const Json::Value& v, const std::string& path) {
  if (!v.isArray() || v.size() != 7) api::refuse(path, "expected 7 rows (Monday first)");
  std::array<std::array<int64_t, 24>, 7> grid{};
  for (Json::ArrayIndex d = 0; d < 7; ++d) {
    const std::string row = api::json_index(path, d);
    if (!v[d].isArray() || v[d].size() != 24) api::refuse(row, "expected 24 hours");
    for (Json::ArrayIndex h = 0; h < 24; ++h) grid[d][h] = as_int(v[d][h], api::json_index(row, h));
  }
  return grid;
}

PoolUsage read_pool(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a pool", {"type", "model", "devices", "capacity_bytes", "usage"});
  PoolUsage u;
  u.type = r.string("type");
  u.model = r.string("model");
  u.devices = r.u32("devices");
  u.capacity_bytes = r.uint("capacity_bytes");
  u.usage = r.get("usage", read_usage);
  return u;
}

HeatMap read_heat_map(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a heat map", {"type", "attached_ms", "available_ms"});
  HeatMap h;
  h.type = r.string("type");
  h.attached_ms = r.get("attached_ms", read_grid);
  h.available_ms = r.get("available_ms", read_grid);
  return h;
}

SeriesPoint read_point(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a point",
               {"start_ms", "length_ms", "available_ms", "attached_ms_by_class"});
  SeriesPoint pt;
  pt.start_ms = r.integer("start_ms");
  pt.length_ms = r.integer("length_ms");
  pt.available_ms = r.integer("available_ms");
  const JsonObject by = JsonObject::map(r.required("attached_ms_by_class"),
                                        r.path("attached_ms_by_class"), "device time by class");
  for (const std::string& name : by.names()) pt.attached_ms_by_class[name] = by.integer(name);
  return pt;
}

Series read_series(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a series", {"type", "points"});
  Series s;
  s.type = r.string("type");
  s.points = r.array("points", read_point);
  return s;
}

JobUsage read_job(const Json::Value& v, const std::string& path) {
  JsonObject r(
      v, path, "a job",
      {"job_id", "user", "account", "workload", "compositions", "device_ms", "mem_gib_hours"});
  JobUsage j;
  j.job_id = r.u32("job_id");
  j.user = r.string("user");
  j.account = r.string("account");
  j.workload = r.string("workload");
  j.compositions = r.u32("compositions");
  j.device_ms = r.get("device_ms", read_type_ms);
  j.mem_gib_hours = r.number("mem_gib_hours");
  return j;
}

WindowUsage read_window(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a window row",
               {"window", "workload", "device_ms", "peak_devices", "compositions", "cap"});
  WindowUsage w;
  w.window = r.string("window");
  w.workload = r.string("workload");
  w.device_ms = r.get("device_ms", read_type_ms);
  w.peak_devices = read_per_type<uint32_t>(r.required("peak_devices"), r.path("peak_devices"),
                                           "devices by type", api::as_u32);
  w.compositions = r.u32("compositions");
  w.cap = read_per_type<std::optional<uint64_t>>(r.required("cap"), r.path("cap"), "caps by type",
                                                 [](const Json::Value& n, const std::string& p) {
                                                   return api::as_nullable(n, p, api::as_u64);
                                                 });
  return w;
}

Latency read_latency(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a latency",
               {"phase", "count", "p50_ms", "p90_ms", "p99_ms", "max_ms", "mean_ms"});
  Latency l;
  l.phase = r.string("phase");
  l.count = r.uint("count");
  l.p50_ms = r.integer("p50_ms");
  l.p90_ms = r.integer("p90_ms");
  l.p99_ms = r.integer("p99_ms");
  l.max_ms = r.integer("max_ms");
  l.mean_ms = r.number("mean_ms");
  return l;
}

Failure read_failure(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a failure", {"phase", "cause", "count"});
  return Failure{r.string("phase"), r.string("cause"), r.u32("count")};
}

Json::Value grid_json(const std::array<std::array<int64_t, 24>, 7>& grid) {
  Json::Value rows(Json::arrayValue);
  for (const auto& day : grid) {
    Json::Value row(Json::arrayValue);
    for (int64_t v : day) row.append(i64(v));
    rows.append(row);
  }
  return rows;
}

}  // namespace

Json::Value to_json(const Report& r) {
  Json::Value v(Json::objectValue);
  v["start_ms"] = i64(r.start_ms);
  v["end_ms"] = i64(r.end_ms);
  v["time_zone"] = r.time_zone;
  v["restricted"] = r.restricted;
  v["pools"] = array_of(r.pools, [](const PoolUsage& p) {
    Json::Value o(Json::objectValue);
    o["type"] = p.type;
    o["model"] = p.model;
    o["devices"] = p.devices;
    o["capacity_bytes"] = Json::Value(static_cast<Json::UInt64>(p.capacity_bytes));
    o["usage"] = usage_json(p.usage);
    return o;
  });
  const auto slot = [](const SlotUsage& s) {
    Json::Value o(Json::objectValue);
    o["type"] = s.type;
    o["slot"] = s.slot;
    o["usage"] = usage_json(s.usage);
    return o;
  };
  v["by_hour"] = array_of(r.by_hour, slot);
  v["by_day"] = array_of(r.by_day, slot);
  v["heat_maps"] = array_of(r.heat_maps, [](const HeatMap& h) {
    Json::Value o(Json::objectValue);
    o["type"] = h.type;
    o["attached_ms"] = grid_json(h.attached_ms);
    o["available_ms"] = grid_json(h.available_ms);
    return o;
  });
  v["series"] = array_of(r.series, [](const Series& s) {
    Json::Value o(Json::objectValue);
    o["type"] = s.type;
    o["points"] = array_of(s.points, [](const SeriesPoint& p) {
      Json::Value q(Json::objectValue);
      q["start_ms"] = i64(p.start_ms);
      q["length_ms"] = i64(p.length_ms);
      q["available_ms"] = i64(p.available_ms);
      Json::Value by(Json::objectValue);
      for (const auto& [cls, ms] : p.attached_ms_by_class) by[cls] = i64(ms);
      q["attached_ms_by_class"] = by;
      return q;
    });
    return o;
  });
  v["by_workload"] = array_of(r.by_workload, group_json);
  v["by_account"] = array_of(r.by_account, group_json);
  v["by_user"] = array_of(r.by_user, group_json);
  v["top_jobs"] = array_of(r.top_jobs, [](const JobUsage& j) {
    Json::Value o(Json::objectValue);
    o["job_id"] = j.job_id;
    o["user"] = j.user;
    o["account"] = j.account;
    o["workload"] = j.workload;
    o["compositions"] = j.compositions;
    o["device_ms"] = type_ms_json(j.device_ms);
    o["mem_gib_hours"] = j.mem_gib_hours;
    return o;
  });
  v["jobs"] = r.jobs;
  v["compositions"] = r.compositions;
  Json::Value windows(Json::objectValue);
  windows["recorded"] = r.windows_recorded;
  windows["rows"] = array_of(r.by_window, [](const WindowUsage& w) {
    Json::Value o(Json::objectValue);
    o["window"] = w.window;
    o["workload"] = w.workload;
    o["device_ms"] = type_ms_json(w.device_ms);
    Json::Value peak(Json::objectValue);
    for (DeviceType t : kAllDeviceTypes) {
      peak[std::string(to_string(t))] = w.peak_devices[static_cast<size_t>(t)];
    }
    o["peak_devices"] = peak;
    o["compositions"] = w.compositions;
    Json::Value cap(Json::objectValue);
    for (DeviceType t : kAllDeviceTypes) {
      const auto& c = w.cap[static_cast<size_t>(t)];
      cap[std::string(to_string(t))] = c ? Json::Value(Json::UInt64{*c}) : Json::Value();
    }
    o["cap"] = cap;
    return o;
  });
  windows["caps_policy_id"] = Json::Int64{r.caps_policy_id};
  v["by_window"] = windows;
  v["latency"] = array_of(r.latency, [](const Latency& l) {
    Json::Value o(Json::objectValue);
    o["phase"] = l.phase;
    o["count"] = Json::Value(static_cast<Json::UInt64>(l.count));
    o["p50_ms"] = i64(l.p50_ms);
    o["p90_ms"] = i64(l.p90_ms);
    o["p99_ms"] = i64(l.p99_ms);
    o["max_ms"] = i64(l.max_ms);
    o["mean_ms"] = l.mean_ms;
    return o;
  });
  v["failures"] = array_of(r.failures, [](const Failure& f) {
    Json::Value o(Json::objectValue);
    o["phase"] = f.phase;
    o["cause"] = f.cause;
    o["count"] = f.count;
    return o;
  });
  v["events_read"] = Json::Value(static_cast<Json::UInt64>(r.events_read));
  v["events_ignored"] = Json::Value(static_cast<Json::UInt64>(r.events_ignored));
  return v;
}

Expected<Report> report_from_json(const Json::Value& v) {
  return api::read_json([&] {
    JsonObject r(v, "", "a report",
                 {"start_ms",   "end_ms",  "time_zone", "restricted",  "pools",
                  "by_hour",    "by_day",  "heat_maps", "series",      "by_workload",
                  "by_account", "by_user", "top_jobs",  "jobs",        "compositions",
                  "by_window",  "latency", "failures",  "events_read", "events_ignored"});
    Report report;
    report.start_ms = r.integer("start_ms");
    report.end_ms = r.integer("end_ms");
    report.time_zone = r.string("time_zone");
    report.restricted = r.boolean("restricted");
    report.pools = r.array("pools", read_pool);
    report.by_hour = r.array("by_hour", read_slot);
    report.by_day = r.array("by_day", read_slot);
    report.heat_maps = r.array("heat_maps", read_heat_map);
    report.series = r.array("series", read_series);
    report.by_workload = r.array("by_workload", read_group);
    report.by_account = r.array("by_account", read_group);
    report.by_user = r.array("by_user", read_group);
    report.top_jobs = r.array("top_jobs", read_job);
    report.jobs = r.u32("jobs");
    report.compositions = r.u32("compositions");
    const JsonObject windows(r.required("by_window"), r.path("by_window"), "the window usage",
                             {"recorded", "caps_policy_id", "rows"});
    report.windows_recorded = windows.boolean("recorded");
    report.caps_policy_id = windows.integer("caps_policy_id");
    report.by_window = windows.array("rows", read_window);
    report.latency = r.array("latency", read_latency);
    report.failures = r.array("failures", read_failure);
    report.events_read = r.uint("events_read");
    report.events_ignored = r.uint("events_ignored");
    return report;
  });
}

}  // namespace composer::accounting
