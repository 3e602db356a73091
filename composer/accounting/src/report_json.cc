#include "composer/accounting/report_json.h"

#include <string>
#include <utility>

namespace composer::accounting {
namespace {

// A field that does not follow the format; caught at the edge of report_from_json.
struct Bad {
  std::string message;
};

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

const Json::Value& field(const Json::Value& obj, const std::string& path, const char* name) {
  if (!obj.isObject()) throw Bad{path + ": expected an object"};
  const Json::Value* v = obj.find(name, name + std::char_traits<char>::length(name));
  if (v == nullptr) throw Bad{(path.empty() ? "" : path + ".") + name + ": missing"};
  return *v;
}

std::string sub(const std::string& path, const char* name) {
  return path.empty() ? std::string(name) : path + "." + name;
}

int64_t get_i64(const Json::Value& obj, const std::string& path, const char* name) {
  const Json::Value& v = field(obj, path, name);
  if (!v.isInt64()) throw Bad{sub(path, name) + ": expected an integer"};
  return v.asInt64();
}
uint64_t get_u64(const Json::Value& obj, const std::string& path, const char* name) {
  const Json::Value& v = field(obj, path, name);
  if (!v.isUInt64()) throw Bad{sub(path, name) + ": expected a whole number, 0 or more"};
  return v.asUInt64();
}
uint32_t get_u32(const Json::Value& obj, const std::string& path, const char* name) {
  const Json::Value& v = field(obj, path, name);
  if (!v.isUInt()) throw Bad{sub(path, name) + ": expected a whole number from 0 to 4294967295"};
  return v.asUInt();
}
double get_double(const Json::Value& obj, const std::string& path, const char* name) {
  const Json::Value& v = field(obj, path, name);
  if (!v.isNumeric()) throw Bad{sub(path, name) + ": expected a number"};
  return v.asDouble();
}
std::string get_string(const Json::Value& obj, const std::string& path, const char* name) {
  const Json::Value& v = field(obj, path, name);
  if (!v.isString()) throw Bad{sub(path, name) + ": expected a string"};
  return v.asString();
}
bool get_bool(const Json::Value& obj, const std::string& path, const char* name) {
  const Json::Value& v = field(obj, path, name);
  if (!v.isBool()) throw Bad{sub(path, name) + ": expected true or false"};
  return v.asBool();
}

template <typename T, typename F>
std::vector<T> get_array(const Json::Value& obj, const std::string& path, const char* name,
                         F read) {
  const Json::Value& v = field(obj, path, name);
  const std::string where = sub(path, name);
  if (!v.isArray()) throw Bad{where + ": expected an array"};
  std::vector<T> out;
  out.reserve(v.size());
  for (Json::ArrayIndex i = 0; i < v.size(); ++i) {
    out.push_back(read(v[i], where + "[" + std::to_string(i) + "]"));
  }
  return out;
}

Usage read_usage(const Json::Value& v, const std::string& path) {
  return Usage{.attached_ms = get_i64(v, path, "attached_ms"),
               .idle_ms = get_i64(v, path, "idle_ms"),
               .drained_ms = get_i64(v, path, "drained_ms"),
               .failed_ms = get_i64(v, path, "failed_ms")};
}

TypeMs read_type_ms(const Json::Value& v, const std::string& path) {
  TypeMs ms{};
  for (DeviceType t : kAllDeviceTypes) {
    const std::string name(to_string(t));
    ms[static_cast<size_t>(t)] = get_i64(v, path, name.c_str());
  }
  return ms;
}

GroupUsage read_group(const Json::Value& v, const std::string& path) {
  GroupUsage g;
  g.name = get_string(v, path, "name");
  g.device_ms = read_type_ms(field(v, path, "device_ms"), sub(path, "device_ms"));
  g.mem_gib_hours = get_double(v, path, "mem_gib_hours");
  g.jobs = get_u32(v, path, "jobs");
  g.compositions = get_u32(v, path, "compositions");
  return g;
}

SlotUsage read_slot(const Json::Value& v, const std::string& path) {
  return SlotUsage{get_string(v, path, "type"), get_string(v, path, "slot"),
                   read_usage(field(v, path, "usage"), sub(path, "usage"))};
}

std::array<std::array<int64_t, 24>, 7> read_grid(const Json::Value& obj, const std::string& path,
                                                 const char* name) {
  const Json::Value& v = field(obj, path, name);
  const std::string where = sub(path, name);
  if (!v.isArray() || v.size() != 7) throw Bad{where + ": expected 7 rows (Monday first)"};
  std::array<std::array<int64_t, 24>, 7> grid{};
  for (Json::ArrayIndex d = 0; d < 7; ++d) {
    const std::string row = where + "[" + std::to_string(d) + "]";
    if (!v[d].isArray() || v[d].size() != 24) throw Bad{row + ": expected 24 hours"};
    for (Json::ArrayIndex h = 0; h < 24; ++h) {
      if (!v[d][h].isInt64()) {
        throw Bad{row + "[" + std::to_string(h) + "]: expected an integer"};
      }
      grid[d][h] = v[d][h].asInt64();
    }
  }
  return grid;
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
  try {
    if (!v.isObject()) throw Bad{"report: expected an object"};
    const std::string root;
    Report r;
    r.start_ms = get_i64(v, root, "start_ms");
    r.end_ms = get_i64(v, root, "end_ms");
    r.time_zone = get_string(v, root, "time_zone");
    r.restricted = get_bool(v, root, "restricted");
    r.pools =
        get_array<PoolUsage>(v, root, "pools", [](const Json::Value& o, const std::string& p) {
          PoolUsage u;
          u.type = get_string(o, p, "type");
          u.model = get_string(o, p, "model");
          u.devices = get_u32(o, p, "devices");
          u.capacity_bytes = get_u64(o, p, "capacity_bytes");
          u.usage = read_usage(field(o, p, "usage"), sub(p, "usage"));
          return u;
        });
    r.by_hour = get_array<SlotUsage>(v, root, "by_hour", read_slot);
    r.by_day = get_array<SlotUsage>(v, root, "by_day", read_slot);
    r.heat_maps =
        get_array<HeatMap>(v, root, "heat_maps", [](const Json::Value& o, const std::string& p) {
          HeatMap h;
          h.type = get_string(o, p, "type");
          h.attached_ms = read_grid(o, p, "attached_ms");
          h.available_ms = read_grid(o, p, "available_ms");
          return h;
        });
    r.series = get_array<Series>(v, root, "series", [](const Json::Value& o, const std::string& p) {
      Series s;
      s.type = get_string(o, p, "type");
      s.points =
          get_array<SeriesPoint>(o, p, "points", [](const Json::Value& q, const std::string& qp) {
            SeriesPoint pt;
            pt.start_ms = get_i64(q, qp, "start_ms");
            pt.length_ms = get_i64(q, qp, "length_ms");
            pt.available_ms = get_i64(q, qp, "available_ms");
            const Json::Value& by = field(q, qp, "attached_ms_by_class");
            const std::string where = sub(qp, "attached_ms_by_class");
            if (!by.isObject()) throw Bad{where + ": expected an object"};
            for (const auto& name : by.getMemberNames()) {
              pt.attached_ms_by_class[name] = get_i64(by, where, name.c_str());
            }
            return pt;
          });
      return s;
    });
    r.by_workload = get_array<GroupUsage>(v, root, "by_workload", read_group);
    r.by_account = get_array<GroupUsage>(v, root, "by_account", read_group);
    r.by_user = get_array<GroupUsage>(v, root, "by_user", read_group);
    r.top_jobs =
        get_array<JobUsage>(v, root, "top_jobs", [](const Json::Value& o, const std::string& p) {
          JobUsage j;
          j.job_id = get_u32(o, p, "job_id");
          j.user = get_string(o, p, "user");
          j.account = get_string(o, p, "account");
          j.workload = get_string(o, p, "workload");
          j.compositions = get_u32(o, p, "compositions");
          j.device_ms = read_type_ms(field(o, p, "device_ms"), sub(p, "device_ms"));
          j.mem_gib_hours = get_double(o, p, "mem_gib_hours");
          return j;
        });
    r.jobs = get_u32(v, root, "jobs");
    r.compositions = get_u32(v, root, "compositions");
    const Json::Value& windows = field(v, root, "by_window");
    r.windows_recorded = get_bool(windows, "by_window", "recorded");
    r.caps_policy_id = get_i64(windows, "by_window", "caps_policy_id");
    r.by_window = get_array<WindowUsage>(
        windows, "by_window", "rows", [](const Json::Value& o, const std::string& p) {
          WindowUsage w;
          w.window = get_string(o, p, "window");
          w.workload = get_string(o, p, "workload");
          w.device_ms = read_type_ms(field(o, p, "device_ms"), sub(p, "device_ms"));
          const Json::Value& peak = field(o, p, "peak_devices");
          for (DeviceType t : kAllDeviceTypes) {
            const std::string name(to_string(t));
            w.peak_devices[static_cast<size_t>(t)] =
                get_u32(peak, sub(p, "peak_devices"), name.c_str());
          }
          w.compositions = get_u32(o, p, "compositions");
          const Json::Value& cap = field(o, p, "cap");
          for (DeviceType t : kAllDeviceTypes) {
            const std::string name(to_string(t));
            if (!field(cap, sub(p, "cap"), name.c_str()).isNull()) {
              w.cap[static_cast<size_t>(t)] = get_u64(cap, sub(p, "cap"), name.c_str());
            }
          }
          return w;
        });
    r.latency =
        get_array<Latency>(v, root, "latency", [](const Json::Value& o, const std::string& p) {
          Latency l;
          l.phase = get_string(o, p, "phase");
          l.count = get_u64(o, p, "count");
          l.p50_ms = get_i64(o, p, "p50_ms");
          l.p90_ms = get_i64(o, p, "p90_ms");
          l.p99_ms = get_i64(o, p, "p99_ms");
          l.max_ms = get_i64(o, p, "max_ms");
          l.mean_ms = get_double(o, p, "mean_ms");
          return l;
        });
    r.failures = get_array<
        Failure>(v, root, "failures", [](const Json::Value& o, const std::string& p) {
      return Failure{get_string(o, p, "phase"), get_string(o, p, "cause"), get_u32(o, p, "count")};
    });
    r.events_read = get_u64(v, root, "events_read");
    r.events_ignored = get_u64(v, root, "events_ignored");
    return r;
  } catch (const Bad& bad) {
    return Error{ErrorCode::kInvalidArgument, bad.message};
  }
}

}  // namespace composer::accounting
