#include "composer/api/snapshot.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include <json/reader.h>
#include <json/writer.h>

#include "composer/common/files.h"

namespace composer::api {
namespace {

Error bad(const std::string& field, const std::string& rule) {
  return Error{ErrorCode::kInvalidArgument, "snapshot: " + field + " " + rule};
}

// Reads an unsigned field if present; leaves *out unchanged when absent.
Status get_uint(const Json::Value& obj, const char* key, const std::string& where, uint64_t max,
                uint64_t* out) {
  if (!obj.isMember(key)) return Status::Ok();
  const Json::Value& v = obj[key];
  if (!v.isUInt64() || v.asUInt64() > max) {
    return bad(where + "." + key, "must be a whole number from 0 to " + std::to_string(max));
  }
  *out = v.asUInt64();
  return Status::Ok();
}

Status get_u32(const Json::Value& obj, const char* key, const std::string& where, uint32_t* out) {
  uint64_t v = *out;
  if (Status s = get_uint(obj, key, where, UINT32_MAX, &v); !s) return s;
  *out = static_cast<uint32_t>(v);
  return Status::Ok();
}

// Reads an array of non-empty strings if present.
Status get_names(const Json::Value& obj, const char* key, const std::string& where,
                 std::vector<std::string>* out) {
  if (!obj.isMember(key)) return Status::Ok();
  const Json::Value& v = obj[key];
  if (!v.isArray()) return bad(where + "." + key, "must be an array of names");
  for (const Json::Value& n : v) {
    if (!n.isString() || n.asString().empty()) {
      return bad(where + "." + key, "must hold only non-empty strings");
    }
    out->push_back(n.asString());
  }
  return Status::Ok();
}

Expected<SnapshotPool> pool_from_json(const Json::Value& v, const std::string& where) {
  SnapshotPool p;
  if (!v.isObject()) return bad(where, "must be an object");
  if (Status s = get_u32(v, "total", where, &p.total); !s) return s.error();
  if (Status s = get_uint(v, "total_bytes", where, UINT64_MAX, &p.total_bytes); !s)
    return s.error();
  if (Status s = get_uint(v, "largest_bytes", where, UINT64_MAX, &p.largest_bytes); !s)
    return s.error();
  if (Status s = get_u32(v, "max_node_slots", where, &p.max_node_slots); !s) return s.error();
  if (v.isMember("models")) {
    const Json::Value& m = v["models"];
    if (!m.isObject()) return bad(where + ".models", "must be an object of model -> count");
    for (const std::string& name : m.getMemberNames()) {
      uint32_t n = 0;
      if (Status s = get_u32(m, name.c_str(), where + ".models", &n); !s) return s.error();
      p.models[name] = n;
    }
  }
  return p;
}

Json::Value pool_to_json(const SnapshotPool& p) {
  Json::Value v(Json::objectValue);
  v["total"] = p.total;
  v["total_bytes"] = Json::UInt64(p.total_bytes);
  v["largest_bytes"] = Json::UInt64(p.largest_bytes);
  v["max_node_slots"] = p.max_node_slots;
  Json::Value models(Json::objectValue);
  for (const auto& [name, n] : p.models) models[name] = n;
  v["models"] = models;
  return v;
}

Expected<WorkloadClass> class_from_json(const Json::Value& v, const std::string& where) {
  if (!v.isObject()) return bad(where, "must be an object");
  WorkloadClass c;
  if (!v["name"].isString() || v["name"].asString().empty()) {
    return bad(where + ".name", "must be a non-empty string");
  }
  c.name = v["name"].asString();
  if (v.isMember("cap_licenses")) {
    const Json::Value& l = v["cap_licenses"];
    if (!l.isObject()) return bad(where + ".cap_licenses", "must be an object of type -> name");
    for (const std::string& type : l.getMemberNames()) {
      if (!parse_device_type(type)) {
        return bad(where + ".cap_licenses." + type, "is not a pooled type (gpu, mem, nvme)");
      }
      if (!l[type].isString() || l[type].asString().empty()) {
        return bad(where + ".cap_licenses." + type, "must be a non-empty license name");
      }
      c.cap_licenses[type] = l[type].asString();
    }
  }
  if (v.isMember("max")) {
    const Json::Value& m = v["max"];
    if (!m.isObject()) return bad(where + ".max", "must be an object of type -> number");
    for (const std::string& type : m.getMemberNames()) {
      if (!parse_device_type(type)) {
        return bad(where + ".max." + type, "is not a pooled type (gpu, mem, nvme)");
      }
      uint64_t n = 0;
      if (Status s = get_uint(m, type.c_str(), where + ".max", UINT64_MAX, &n); !s) {
        return s.error();
      }
      c.max[type] = n;
    }
  }
  for (auto [key, list] : {std::pair{"partitions", &c.partitions}, std::pair{"qos", &c.qos},
                           std::pair{"accounts", &c.accounts}}) {
    if (Status s = get_names(v, key, where, list); !s) return s.error();
  }
  if (v.isMember("min")) {
    const Json::Value& m = v["min"];
    if (!m.isObject()) return bad(where + ".min", "must be an object of type -> number");
    for (const std::string& type : m.getMemberNames()) {
      if (!parse_device_type(type)) {
        return bad(where + ".min." + type, "is not a pooled type (gpu, mem, nvme)");
      }
      uint64_t n = 0;
      if (Status s = get_uint(m, type.c_str(), where + ".min", UINT64_MAX, &n); !s) {
        return s.error();
      }
      c.min[type] = n;
    }
  }
  if (v.isMember("stretches")) {
    const Json::Value& m = v["stretches"];
    if (!m.isObject()) {
      return bad(where + ".stretches", "must be an object of type -> [{cap, seconds}]");
    }
    for (const std::string& type : m.getMemberNames()) {
      const std::string at = where + ".stretches." + type;
      if (!parse_device_type(type)) return bad(at, "is not a pooled type (gpu, mem, nvme)");
      if (!m[type].isArray()) return bad(at, "must be an array of {cap, seconds}");
      std::vector<CapStretch>& out = c.stretches[type];
      for (Json::ArrayIndex i = 0; i < m[type].size(); ++i) {
        const Json::Value& e = m[type][i];
        const std::string ei = at + "[" + std::to_string(i) + "]";
        if (!e.isObject() || !e.isMember("cap") || !e.isMember("seconds")) {
          return bad(ei, "must be an object with cap and seconds");
        }
        CapStretch st;
        uint64_t seconds = 0;
        if (Status s = get_uint(e, "cap", ei, UINT64_MAX, &st.cap); !s) return s.error();
        if (Status s = get_uint(e, "seconds", ei, INT64_MAX, &seconds); !s) return s.error();
        st.seconds = static_cast<int64_t>(seconds);
        if (!out.empty() && st.cap <= out.back().cap) {
          return bad(ei + ".cap", "must be larger than the cap before it (ascending order)");
        }
        out.push_back(st);
      }
    }
  }
  return c;
}

Json::Value names_to_json(const std::vector<std::string>& names) {
  Json::Value out(Json::arrayValue);
  for (const std::string& n : names) out.append(n);
  return out;
}

}  // namespace

const SnapshotPool& PoolSnapshot::pool(DeviceType t) const {
  switch (t) {
    case DeviceType::kGpu:
      return gpu;
    case DeviceType::kMem:
      return mem;
    case DeviceType::kNvme:
      return nvme;
  }
  return gpu;
}

SnapshotPool& PoolSnapshot::pool(DeviceType t) {
  return const_cast<SnapshotPool&>(static_cast<const PoolSnapshot*>(this)->pool(t));
}

const WorkloadClass* PoolSnapshot::workload_class(std::string_view name) const {
  for (const WorkloadClass& c : workload_classes) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

PoolSnapshot make_snapshot(const std::vector<PoolRow>& rows, const std::vector<Host>& hosts,
                           int64_t now_ms) {
  PoolSnapshot s;
  s.generated_ms = now_ms;
  for (const PoolRow& r : rows) {
    SnapshotPool& p = s.pool(r.type);
    const uint32_t usable = r.total >= r.failed ? r.total - r.failed : 0;
    p.total += usable;
    p.total_bytes += r.total_bytes;
    if (usable > 0 && r.total > 0) {
      // Rows group devices of one model and zone; their sizes are alike, so the mean is
      // the size of one device.
      p.largest_bytes = std::max(p.largest_bytes, r.total_bytes / r.total);
    }
    if (!r.model.empty()) p.models[r.model] += usable;
  }
  for (const Host& h : hosts) {
    for (DeviceType t : kAllDeviceTypes) {
      SnapshotPool& p = s.pool(t);
      p.max_node_slots = std::max(p.max_node_slots, h.slots(t));
    }
  }
  return s;
}

Json::Value to_json(const PoolSnapshot& s) {
  Json::Value v(Json::objectValue);
  v["version"] = s.version;
  v["generated_ms"] = Json::Int64(s.generated_ms);
  Json::Value pools(Json::objectValue);
  for (DeviceType t : kAllDeviceTypes) pools[std::string(to_string(t))] = pool_to_json(s.pool(t));
  v["pools"] = pools;
  Json::Value classes(Json::arrayValue);
  for (const WorkloadClass& c : s.workload_classes) {
    Json::Value jc(Json::objectValue);
    jc["name"] = c.name;
    Json::Value lic(Json::objectValue);
    for (const auto& [type, name] : c.cap_licenses) lic[type] = name;
    jc["cap_licenses"] = lic;
    Json::Value max(Json::objectValue);
    for (const auto& [type, n] : c.max) max[type] = Json::UInt64(n);
    jc["max"] = max;
    jc["partitions"] = names_to_json(c.partitions);
    jc["qos"] = names_to_json(c.qos);
    jc["accounts"] = names_to_json(c.accounts);
    Json::Value min(Json::objectValue);
    for (const auto& [type, n] : c.min) min[type] = Json::UInt64(n);
    jc["min"] = min;
    Json::Value stretches(Json::objectValue);
    for (const auto& [type, list] : c.stretches) {
      Json::Value a(Json::arrayValue);
      for (const CapStretch& st : list) {
        Json::Value e(Json::objectValue);
        e["cap"] = Json::UInt64(st.cap);
        e["seconds"] = Json::Int64(st.seconds);
        a.append(e);
      }
      stretches[type] = a;
    }
    jc["stretches"] = stretches;
    classes.append(jc);
  }
  v["workload_classes"] = classes;
  v["policy_id"] = Json::Int64(s.policy_id);
  v["default_class"] = s.default_class;
  Json::Value blockers(Json::arrayValue);
  for (const std::string& b : s.blocker_reservations) blockers.append(b);
  v["blocker_reservations"] = blockers;
  return v;
}

Expected<PoolSnapshot> snapshot_from_json(const Json::Value& v) {
  if (!v.isObject()) return bad("document", "must be a JSON object");
  PoolSnapshot s;
  if (!v["version"].isInt()) return bad("version", "must be a whole number");
  s.version = v["version"].asInt();
  if (s.version != kSnapshotVersion) {
    return bad("version", std::to_string(s.version) + " is not supported (this reader knows " +
                              std::to_string(kSnapshotVersion) + ")");
  }
  if (v.isMember("generated_ms")) {
    if (!v["generated_ms"].isInt64()) return bad("generated_ms", "must be a whole number");
    s.generated_ms = v["generated_ms"].asInt64();
  }
  if (v.isMember("pools")) {
    const Json::Value& pools = v["pools"];
    if (!pools.isObject()) return bad("pools", "must be an object");
    for (DeviceType t : kAllDeviceTypes) {
      const std::string name(to_string(t));
      if (!pools.isMember(name)) continue;
      Expected<SnapshotPool> p = pool_from_json(pools[name], "pools." + name);
      if (!p) return p.error();
      s.pool(t) = std::move(*p);
    }
  }
  if (v.isMember("workload_classes")) {
    const Json::Value& classes = v["workload_classes"];
    if (!classes.isArray()) return bad("workload_classes", "must be an array");
    for (Json::ArrayIndex i = 0; i < classes.size(); ++i) {
      Expected<WorkloadClass> c =
          class_from_json(classes[i], "workload_classes[" + std::to_string(i) + "]");
      if (!c) return c.error();
      s.workload_classes.push_back(std::move(*c));
    }
  }
  if (v.isMember("policy_id")) {
    if (!v["policy_id"].isInt64() || v["policy_id"].asInt64() < 0) {
      return bad("policy_id", "must be a whole number, 0 or more");
    }
    s.policy_id = v["policy_id"].asInt64();
  }
  if (v.isMember("default_class")) {
    if (!v["default_class"].isString()) return bad("default_class", "must be a string");
    s.default_class = v["default_class"].asString();
  }
  if (v.isMember("blocker_reservations")) {
    const Json::Value& b = v["blocker_reservations"];
    if (!b.isArray()) return bad("blocker_reservations", "must be an array of names");
    for (const Json::Value& name : b) {
      if (!name.isString()) return bad("blocker_reservations", "must hold only strings");
      s.blocker_reservations.push_back(name.asString());
    }
  }
  return s;
}

Expected<PoolSnapshot> read_snapshot(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    return Error{err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kUnavailable,
                 "snapshot " + path + ": cannot open: " + std::strerror(err)};
  }
  Json::CharReaderBuilder builder;
  builder["collectComments"] = false;
  Json::Value root;
  std::string errs;
  if (!Json::parseFromStream(builder, in, &root, &errs)) {
    return Error{ErrorCode::kInvalidArgument, "snapshot " + path + ": not valid JSON: " + errs};
  }
  Expected<PoolSnapshot> s = snapshot_from_json(root);
  if (!s) return Error{s.error().code, s.error().message + " (in " + path + ")"};
  return s;
}

Status write_snapshot(const std::string& path, const PoolSnapshot& snapshot) {
  Json::StreamWriterBuilder builder;
  builder["indentation"] = "  ";
  const std::string text = Json::writeString(builder, to_json(snapshot)) + "\n";
  // 0644: slurmctld must be able to read the file.
  if (Status s = write_file_atomically(path, text, 0644); !s) {
    return Error{s.error().code, "snapshot " + path + ": " + s.error().message};
  }
  return Status::Ok();
}

}  // namespace composer::api
