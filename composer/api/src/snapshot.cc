#include "composer/api/snapshot.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include <json/reader.h>
#include <json/writer.h>

#include "composer/api/json_reader.h"
#include "composer/common/files.h"
#include "composer/policies/policy.h"

namespace composer::api {
namespace {

// The snapshot's objects let fields they do not know be (snapshot.h); the maps keyed by pooled
// type take only the pooled types.
constexpr OtherFields kLater = OtherFields::kIgnore;

template <typename T, typename F>
std::map<std::string, T> read_type_map(const Json::Value& v, const std::string& path, F read) {
  JsonObject r(v, path, "a map of pooled types", {"gpu", "mem", "nvme"});
  std::map<std::string, T> out;
  for (const std::string& type : r.names()) out[type] = r.get(type, read);
  return out;
}

std::vector<std::string> read_names(const Json::Value& v, const std::string& path) {
  return as_array(v, path, as_nonempty_string);
}

TypeCapacity read_pool(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a pool", {}, kLater);
  TypeCapacity p;
  r.get_if("total", &p.total, as_u32);
  r.get_if("total_bytes", &p.total_bytes, as_u64);
  r.get_if("largest_bytes", &p.largest_bytes, as_u64);
  r.get_if("max_node_slots", &p.max_node_slots, as_u32);
  if (const Json::Value* m = r.optional("models")) {
    const JsonObject models = JsonObject::map(*m, r.path("models"), "a map of models to counts");
    for (const std::string& name : models.names()) p.models[name] = models.u32(name);
  }
  if (const Json::Value* m = r.optional("domains")) {
    const JsonObject levels =
        JsonObject::map(*m, r.path("domains"), "a map of failure-domain levels to counts");
    for (const std::string& level : levels.names()) p.domains[level] = levels.u32(level);
  }
  return p;
}

ZoneFree read_zone(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a zone's free counts", {}, kLater);
  ZoneFree z;
  r.get_if("gpus", &z.gpus, as_u32);
  r.get_if("mem_bytes", &z.mem_bytes, as_u64);
  r.get_if("nvme", &z.nvme, as_u32);
  if (const Json::Value* m = r.optional("gpu_models")) {
    const JsonObject models =
        JsonObject::map(*m, r.path("gpu_models"), "a map of models to counts");
    for (const std::string& name : models.names()) z.gpu_models[name] = models.u32(name);
  }
  return z;
}

std::vector<CapStretch> read_stretches(const Json::Value& v, const std::string& path) {
  std::vector<CapStretch> out = as_array(v, path, [](const Json::Value& e, const std::string& at) {
    JsonObject r(e, at, "a stretch", {"cap", "seconds"}, kLater);
    return CapStretch{r.uint("cap"), r.id("seconds")};
  });
  for (size_t i = 1; i < out.size(); ++i) {
    if (out[i].cap <= out[i - 1].cap) {
      refuse(json_path(json_index(path, i), "cap"),
             "must be larger than the cap before it (ascending order)");
    }
  }
  return out;
}

WorkloadClass read_class(const Json::Value& v, const std::string& path) {
  JsonObject r(v, path, "a workload class", {}, kLater);
  WorkloadClass c;
  c.name = r.get("name", as_nonempty_string);
  const auto counts = [](const Json::Value& m, const std::string& at) {
    return read_type_map<uint64_t>(m, at, as_u64);
  };
  r.get_if("cap_licenses", &c.cap_licenses, [](const Json::Value& m, const std::string& at) {
    return read_type_map<std::string>(m, at, as_nonempty_string);
  });
  r.get_if("max", &c.max, counts);
  r.get_if("partitions", &c.partitions, read_names);
  r.get_if("qos", &c.qos, read_names);
  r.get_if("accounts", &c.accounts, read_names);
  r.get_if("min", &c.min, counts);
  r.get_if("stretches", &c.stretches, [](const Json::Value& m, const std::string& at) {
    return read_type_map<std::vector<CapStretch>>(m, at, read_stretches);
  });
  if (const Json::Value* p = r.optional("placement")) {
    JsonObject rule(*p, r.path("placement"), "a placement rule", {"rule", "level"}, kLater);
    c.placement = rule.get("rule", as_nonempty_string);
    if (c.placement != "spread" && c.placement != "avoid-shared") {
      refuse(rule.path("rule"), "expected spread or avoid-shared");
    }
    c.placement_level = rule.get("level", as_nonempty_string);
    rule.get_if("count", &c.placement_count, as_u32);
    rule.get_if("type", &c.placement_type, as_nonempty_string);
    if (!c.placement_type.empty() && !parse_device_type(c.placement_type)) {
      refuse(rule.path("type"), "expected gpu, mem or nvme");
    }
  }
  if (const Json::Value* m = r.optional("mem_policy")) {
    JsonObject mem(*m, r.path("mem_policy"), "a class's memory policy", {"default", "allow"},
                   kLater);
    c.mem_policy_default = mem.get("default", as_string);
    if (!c.mem_policy_default.empty() && !parse_mem_policy_text(c.mem_policy_default)) {
      refuse(mem.path("default"), "expected " + std::string(kMemPolicyForms));
    }
    c.mem_policy_allow = mem.get("allow", read_names);
    for (const std::string& k : c.mem_policy_allow) {
      if (!parse_mem_policy_kind(k))
        refuse(mem.path("allow"),
               "expected preferred, bind, "
               "interleave or weighted");
    }
    c.mem_policy_line = static_cast<int>(mem.get("line", as_u32));
    if (c.mem_policy_line == 0) refuse(mem.path("line"), "expected a line number from 1");
  }
  return c;
}

Json::Value pool_to_json(const TypeCapacity& p) {
  Json::Value v(Json::objectValue);
  v["total"] = p.total;
  v["total_bytes"] = Json::UInt64(p.total_bytes);
  v["largest_bytes"] = Json::UInt64(p.largest_bytes);
  v["max_node_slots"] = p.max_node_slots;
  Json::Value models(Json::objectValue);
  for (const auto& [name, n] : p.models) models[name] = n;
  v["models"] = models;
  Json::Value domains(Json::objectValue);
  for (const auto& [level, n] : p.domains) domains[level] = n;
  v["domains"] = domains;
  return v;
}

Json::Value names_to_json(const std::vector<std::string>& names) {
  Json::Value out(Json::arrayValue);
  for (const std::string& n : names) out.append(n);
  return out;
}

}  // namespace

const TypeCapacity& PoolSnapshot::pool(DeviceType t) const {
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

TypeCapacity& PoolSnapshot::pool(DeviceType t) {
  return const_cast<TypeCapacity&>(static_cast<const PoolSnapshot*>(this)->pool(t));
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
    TypeCapacity& p = s.pool(r.type);
    // What may come back counts (drained devices are resumed, failed ones repaired: a job
    // asking for them waits on Licenses, and composerctl explain says why); what is held
    // outside composerd does not. Bytes by the same share, devices of a row being alike.
    const uint32_t gone = r.foreign;
    const uint32_t usable = r.total >= gone ? r.total - gone : 0;
    p.total += usable;
    p.total_bytes += r.total == 0 ? 0 : r.total_bytes / r.total * usable;
    if (!r.model.empty()) p.models[r.model] += usable;
  }
  for (DeviceType t : kAllDeviceTypes) {
    s.pool(t).largest_bytes = policies::largest_device_bytes(rows, t);
  }
  for (const Host& h : hosts) {
    for (DeviceType t : kAllDeviceTypes) {
      TypeCapacity& p = s.pool(t);
      p.max_node_slots = std::max(p.max_node_slots, h.slots(t));
    }
  }
  // Zones matter to the scheduler only where some node reaches other zones than another.
  std::set<std::set<std::string>> reach;
  for (const Host& h : hosts) reach.insert(std::set<std::string>(h.zones.begin(), h.zones.end()));
  if (reach.size() > 1) {
    for (const Host& h : hosts) s.node_zones[h.node] = h.zones;
    for (const PoolRow& r : rows) {
      ZoneFree& z = s.zones[r.zone];
      switch (r.type) {
        case DeviceType::kGpu:
          z.gpus += r.free;
          if (!r.model.empty()) z.gpu_models[r.model] += r.free;
          break;
        case DeviceType::kMem:
          z.mem_bytes += r.free_bytes;
          break;
        case DeviceType::kNvme:
          z.nvme += r.free;
          break;
      }
    }
  }
  return s;
}

std::vector<std::string> nodes_out_of_reach(const PoolSnapshot& snapshot, const Request& request,
                                            uint32_t nodes) {
  std::vector<std::string> out;
  if (snapshot.node_zones.empty() || request.empty()) return out;
  uint32_t serving = 0;
  for (const auto& [node, zone_list] : snapshot.node_zones) {
    ZoneFree sum;
    for (const std::string& zone : std::set<std::string>(zone_list.begin(), zone_list.end())) {
      const auto z = snapshot.zones.find(zone);
      if (z == snapshot.zones.end()) continue;
      sum.gpus += z->second.gpus;
      if (const auto m = z->second.gpu_models.find(request.gpu_model);
          m != z->second.gpu_models.end()) {
        sum.gpu_models[request.gpu_model] += m->second;
      }
      sum.mem_bytes += z->second.mem_bytes;
      sum.nvme += z->second.nvme;
    }
    const uint32_t gpus = request.gpu_model.empty() ? sum.gpus : sum.gpu_models[request.gpu_model];
    if (gpus >= request.gpus && sum.mem_bytes >= request.mem_bytes && sum.nvme >= request.nvme) {
      ++serving;
    } else {
      out.push_back(node);
    }
  }
  if (serving < std::max<uint32_t>(nodes, 1)) out.clear();
  return out;
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
    if (!c.placement.empty()) {
      Json::Value rule(Json::objectValue);
      rule["rule"] = c.placement;
      rule["level"] = c.placement_level;
      if (c.placement_count > 0) rule["count"] = c.placement_count;
      if (!c.placement_type.empty()) rule["type"] = c.placement_type;
      jc["placement"] = rule;
    }
    if (c.mem_policy_line > 0) {
      Json::Value mem(Json::objectValue);
      mem["default"] = c.mem_policy_default;
      mem["allow"] = names_to_json(c.mem_policy_allow);
      mem["line"] = c.mem_policy_line;
      jc["mem_policy"] = mem;
    }
    classes.append(jc);
  }
  v["workload_classes"] = classes;
  v["policy_id"] = Json::Int64(s.policy_id);
  v["default_class"] = s.default_class;
  Json::Value blockers(Json::arrayValue);
  for (const std::string& b : s.blocker_reservations) blockers.append(b);
  v["blocker_reservations"] = blockers;
  v["model_licenses"] = names_to_json(s.model_licenses);
  v["license_server"] = s.license_server;
  if (!s.node_zones.empty()) {
    Json::Value zones(Json::objectValue);
    for (const auto& [name, z] : s.zones) {
      Json::Value jz(Json::objectValue);
      jz["gpus"] = z.gpus;
      Json::Value models(Json::objectValue);
      for (const auto& [model, n] : z.gpu_models) models[model] = n;
      jz["gpu_models"] = models;
      jz["mem_bytes"] = Json::UInt64(z.mem_bytes);
      jz["nvme"] = z.nvme;
      zones[name] = jz;
    }
    v["zones"] = zones;
    Json::Value reach(Json::objectValue);
    for (const auto& [node, list] : s.node_zones) reach[node] = names_to_json(list);
    v["node_zones"] = reach;
  }
  return v;
}

Expected<PoolSnapshot> snapshot_from_json(const Json::Value& v) {
  return read_json(
      [&] {
        JsonObject r(v, "", "a pool snapshot", {}, kLater);
        PoolSnapshot s;
        s.version = static_cast<int>(r.u32("version", std::numeric_limits<int>::max()));
        if (s.version != kSnapshotVersion) {
          refuse("version", std::to_string(s.version) + " is not supported (this reader knows " +
                                std::to_string(kSnapshotVersion) + ")");
        }
        r.get_if("generated_ms", &s.generated_ms, as_int);
        if (const Json::Value* p = r.optional("pools")) {
          const JsonObject pools(*p, "pools", "the pools", {"gpu", "mem", "nvme"}, kLater);
          for (DeviceType t : kAllDeviceTypes) pools.get_if(to_string(t), &s.pool(t), read_pool);
        }
        r.get_if("workload_classes", &s.workload_classes,
                 [](const Json::Value& a, const std::string& at) {
                   return as_array(a, at, read_class);
                 });
        r.get_if("policy_id", &s.policy_id, as_id);
        r.get_if("default_class", &s.default_class, as_string);
        r.get_if("blocker_reservations", &s.blocker_reservations, as_strings);
        r.get_if("model_licenses", &s.model_licenses, read_names);
        r.get_if("license_server", &s.license_server, as_string);
        if (const Json::Value* z = r.optional("zones")) {
          const JsonObject zones = JsonObject::map(*z, "zones", "a map of zones to free counts");
          for (const std::string& name : zones.names()) {
            s.zones[name] = zones.get(name, read_zone);
          }
        }
        if (const Json::Value* n = r.optional("node_zones")) {
          const JsonObject reach =
              JsonObject::map(*n, "node_zones", "a map of nodes to the zones they reach");
          for (const std::string& node : reach.names()) {
            s.node_zones[node] = reach.get(node, read_names);
          }
        }
        return s;
      },
      "snapshot");
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
