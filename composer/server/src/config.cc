#include "composer/server/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "composer/common/names.h"
#include "composer/common/units.h"

namespace composer::server {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(trim(cur));
  return out;
}

struct Pair {
  std::string key;  // as written
  std::string value;
};

// One line: whitespace-separated Key=Value pairs.
Expected<std::vector<Pair>> split_pairs(std::string_view line) {
  std::vector<Pair> pairs;
  std::istringstream in{std::string(line)};
  std::string word;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Error{ErrorCode::kInvalidArgument, "'" + word + "' is not of the form Key=Value"};
    }
    pairs.push_back({word.substr(0, eq), word.substr(eq + 1)});
  }
  return pairs;
}

Expected<int64_t> parse_int(const std::string& key, const std::string& value, int64_t min,
                            int64_t max) {
  auto n = parse_count(value, static_cast<uint32_t>(std::min<int64_t>(max, UINT32_MAX)));
  if (!n || *n < min) {
    return Error{ErrorCode::kInvalidArgument,
                 key + "=" + value + ": expected a whole number from " + std::to_string(min) +
                     " to " + std::to_string(max)};
  }
  return static_cast<int64_t>(*n);
}

Expected<bool> parse_bool(const std::string& key, const std::string& value) {
  const std::string v = lower(value);
  if (v == "yes" || v == "true" || v == "1" || v == "on") return true;
  if (v == "no" || v == "false" || v == "0" || v == "off") return false;
  return Error{ErrorCode::kInvalidArgument, key + "=" + value + ": expected yes or no"};
}

// "500ms", "2s", "1m" or a bare number of seconds, within [min_ms, max_ms].
Expected<int64_t> parse_duration(const std::string& key, const std::string& value, int64_t min_ms,
                                 int64_t max_ms) {
  size_t digits = 0;
  while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) {
    ++digits;
  }
  const std::string unit = lower(value.substr(digits));
  const int64_t scale = unit == "ms"                  ? 1
                        : unit == "s" || unit.empty() ? 1000
                        : unit == "m"                 ? 60000
                                                      : 0;
  int64_t ms = -1;
  if (digits > 0 && digits <= 9 && scale > 0) ms = std::stoll(value.substr(0, digits)) * scale;
  if (ms < min_ms || ms > max_ms) {
    return Error{ErrorCode::kInvalidArgument,
                 key + "=" + value + ": expected a duration such as 500ms, 10s or 2m, from " +
                     std::to_string(min_ms) + "ms to " + std::to_string(max_ms / 1000) + "s"};
  }
  return ms;
}

Status check_name(const std::string& key, const std::string& value) {
  if (value.empty()) return Error{ErrorCode::kInvalidArgument, key + " needs a value"};
  if (!valid_name(value, value.size())) {
    return Error{ErrorCode::kInvalidArgument,
                 key + "=" + value + ": names may hold only letters, digits, '-', '_' and '.'"};
  }
  return Status::Ok();
}

// What a NodeName line gave, to check it against the fabric once the whole file is read
// (Fabric= may come after the NodeName lines).
struct NodeLine {
  int line = 0;
  std::string expr;
  bool zones = false;
  bool slots = false;
  std::string fabric;     // Fabric=: one of the FabricName lines
  size_t first_host = 0;  // its hosts in cfg.sim.hosts
  size_t host_count = 0;
};

// What a DeviceGroup line gave beyond the group itself.
struct GroupLine {
  int line = 0;
  std::string name;
  std::string fabric;  // Fabric=: one of the FabricName lines
};

Status parse_node_line(const std::vector<Pair>& pairs, Config& cfg, std::set<std::string>& seen,
                       NodeLine& info) {
  info.expr = pairs[0].value;
  auto names = expand_hostlist(pairs[0].value);
  if (!names) return Error{ErrorCode::kInvalidArgument, "NodeName: " + names.error().message};
  Host proto;
  std::string fabric_host;
  for (size_t i = 1; i < pairs.size(); ++i) {
    const std::string k = lower(pairs[i].key);
    const std::string& v = pairs[i].value;
    if (k == "fabrichost") {
      if (names->size() != 1) {
        return Error{ErrorCode::kInvalidArgument,
                     "FabricHost= can only be given on a NodeName line naming one node"};
      }
      if (auto s = check_name("FabricHost", v); !s) return s;
      fabric_host = v;
    } else if (k == "fabric") {
      if (auto s = check_name("Fabric", v); !s) return s;
      info.fabric = v;
    } else if (k == "zones") {
      info.zones = true;
      proto.zones.clear();
      for (const auto& z : split(v, ',')) {
        if (auto s = check_name("Zones", z); !s) return s;
        proto.zones.push_back(z);
      }
    } else if (k == "gpuslots" || k == "memslots" || k == "nvmeslots") {
      info.slots = true;
      auto n = parse_int(pairs[i].key, v, 0, 1024);
      if (!n) return n.error();
      (k == "gpuslots"   ? proto.gpu_slots
       : k == "memslots" ? proto.mem_slots
                         : proto.nvme_slots) = static_cast<uint32_t>(*n);
    } else {
      return Error{ErrorCode::kInvalidArgument,
                   "unknown NodeName option '" + pairs[i].key +
                       "' (allowed: Fabric, FabricHost, Zones, GpuSlots, MemSlots, NvmeSlots)"};
    }
  }
  info.first_host = cfg.sim.hosts.size();
  info.host_count = names->size();
  for (const auto& n : *names) {
    if (!seen.insert(n).second) {
      return Error{ErrorCode::kInvalidArgument, "node '" + n + "' is declared twice"};
    }
    Host h = proto;
    h.node = n;
    h.fabric_id = fabric_host.empty() ? n : fabric_host;
    cfg.sim.hosts.push_back(std::move(h));
  }
  return Status::Ok();
}

Status parse_group_line(const std::vector<Pair>& pairs, Config& cfg, std::set<std::string>& seen,
                        GroupLine& info) {
  SimConfig::Group g;
  g.name = pairs[0].value;
  info.name = g.name;
  if (auto s = check_name("DeviceGroup", g.name); !s) return s;
  if (!seen.insert(g.name).second) {
    return Error{ErrorCode::kInvalidArgument, "DeviceGroup '" + g.name + "' is declared twice"};
  }
  bool have_type = false;
  bool have_count = false;
  for (size_t i = 1; i < pairs.size(); ++i) {
    const std::string k = lower(pairs[i].key);
    const std::string& v = pairs[i].value;
    if (k == "fabric") {
      if (auto s = check_name("Fabric", v); !s) return s;
      info.fabric = v;
    } else if (k == "type") {
      auto t = parse_device_type(lower(v));
      if (!t) {
        return Error{ErrorCode::kInvalidArgument, "Type=" + v + ": expected gpu, mem or nvme"};
      }
      g.type = *t;
      have_type = true;
    } else if (k == "model") {
      if (auto s = check_name("Model", v); !s) return s;
      g.model = v;
    } else if (k == "zone") {
      if (auto s = check_name("Zone", v); !s) return s;
      g.zone = v;
    } else if (k == "count") {
      auto n = parse_int("Count", v, 1, 100000);
      if (!n) return n.error();
      g.count = static_cast<uint32_t>(*n);
      have_count = true;
    } else if (k == "size") {
      auto sz = parse_size(v);
      if (!sz) return Error{ErrorCode::kInvalidArgument, "Size=" + v + ": " + sz.error().message};
      g.size_bytes = *sz;
    } else {
      return Error{ErrorCode::kInvalidArgument,
                   "unknown DeviceGroup option '" + pairs[i].key +
                       "' (allowed: Fabric, Type, Model, Zone, Count, Size)"};
    }
  }
  if (!have_type || !have_count || g.zone.empty() || g.model.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 "DeviceGroup=" + g.name + " needs Type=, Model=, Zone= and Count="};
  }
  if (g.type != DeviceType::kGpu && g.size_bytes == 0) {
    return Error{ErrorCode::kInvalidArgument, "DeviceGroup=" + g.name + " of type " +
                                                  std::string(to_string(g.type)) + " needs Size="};
  }
  if (g.type == DeviceType::kGpu && g.size_bytes != 0) {
    return Error{ErrorCode::kInvalidArgument,
                 "DeviceGroup=" + g.name + ": Size= applies to mem and nvme groups, not gpu"};
  }
  cfg.sim.groups.push_back(std::move(g));
  return Status::Ok();
}

// One Fabric* key into the fabric settings. An unknown key answers an error with no message.
Status parse_fabric_key(const std::string& key, const std::string& k, const std::string& value,
                        FabricConfig& f) {
  auto absolute = [&](std::string& field) -> Status {
    if (value.empty() || value[0] != '/') {
      return Error{ErrorCode::kInvalidArgument, k + "=" + value + ": expected an absolute path"};
    }
    field = value;
    return Status::Ok();
  };
  auto duration = [&](int64_t& field, int64_t min_ms, int64_t max_ms) -> Status {
    auto ms = parse_duration(k, value, min_ms, max_ms);
    if (!ms) return ms.error();
    field = *ms;
    return Status::Ok();
  };
  if (key == "fabricname") {
    f.name = value;
    return check_name(k, value);
  }
  if (key == "fabricurl") {
    const std::string v = lower(value);
    if (!v.starts_with("http://") && !v.starts_with("https://")) {
      return Error{ErrorCode::kInvalidArgument,
                   k + ": expected http(s)://HOST[:PORT] of the fabric manager"};
    }
    const std::string authority = value.substr(value.find("//") + 2);
    // The sentence never repeats a URL that carries a password.
    if (authority.find('@') != std::string::npos) {
      return Error{ErrorCode::kInvalidArgument,
                   k + " must not carry credentials; put them in the credentials file"};
    }
    if (authority.empty() || authority.find('/') != std::string::npos) {
      return Error{
          ErrorCode::kInvalidArgument,
          k + "=" + value + ": expected http(s)://HOST[:PORT] only; the driver adds the API path"};
    }
    f.url = value;
    return Status::Ok();
  }
  if (key == "fabriccredentials") return absolute(f.credentials_file);
  if (key == "fabriccafile") return absolute(f.ca_file);
  if (key == "fabricauth") {
    f.auth = lower(value);
    if (f.auth != "session" && f.auth != "basic" && f.auth != "apikey") {
      return Error{
          ErrorCode::kInvalidArgument,
          k + "=" + value + ": expected session or basic (redfish), apikey or basic (liqid)"};
    }
    return Status::Ok();
  }
  if (key == "fabricverifytls") {
    auto b = parse_bool(k, value);
    if (!b) return b.error();
    f.verify_tls = *b;
    return Status::Ok();
  }
  if (key == "fabricconnecttimeout") return duration(f.connect_timeout_ms, 100, 300000);
  if (key == "fabrictimeout") return duration(f.request_timeout_ms, 100, 600000);
  if (key == "fabricpollinterval") return duration(f.poll_interval_ms, 10, 60000);
  if (key == "fabrictaskwait") return duration(f.task_wait_ms, 0, 3600000);
  if (key == "fabricnodenames") {
    const std::string v = lower(value);
    if (v != "id" && v != "hostname") {
      return Error{ErrorCode::kInvalidArgument, k + "=" + value + ": expected id or hostname"};
    }
    f.use_host_name = v == "hostname";
    return Status::Ok();
  }
  if (key == "fabricslots") {
    auto n = parse_int(k, value, 1, 1024);
    if (!n) return n.error();
    f.slots = static_cast<uint32_t>(*n);
    return Status::Ok();
  }
  return Error{ErrorCode::kInvalidArgument, ""};
}

// The options of a FabricName line: the Fabric* keys without the word Fabric, and Driver=.
constexpr const char* kFabricLineOptions =
    "Driver, Url, Credentials, Auth, CaFile, VerifyTls, ConnectTimeout, Timeout, PollInterval, "
    "TaskWait, NodeNames, Slots";

Status parse_fabric_line(const std::vector<Pair>& pairs, FabricSpec& spec,
                         std::set<std::string>& seen) {
  spec.name = pairs[0].value;
  if (auto s = check_name("FabricName", spec.name); !s) return s;
  if (!seen.insert(spec.name).second) {
    return Error{ErrorCode::kInvalidArgument, "FabricName=" + spec.name + " is declared twice"};
  }
  std::set<std::string> options;
  std::string real_option;  // one option that only a real fabric takes
  for (size_t i = 1; i < pairs.size(); ++i) {
    const std::string& k = pairs[i].key;
    const std::string& v = pairs[i].value;
    const std::string key = lower(k);
    if (!options.insert(key).second) {
      return Error{ErrorCode::kInvalidArgument, "'" + k + "' is given twice for this fabric"};
    }
    if (key == "driver") {
      spec.driver = lower(v);
      if (spec.driver != "sim" && spec.driver != "redfish" && spec.driver != "liqid") {
        return Error{ErrorCode::kInvalidArgument,
                     "Driver=" + v + ": expected sim, redfish or liqid"};
      }
      continue;
    }
    Status st = key == "name" || key.starts_with("fabric")
                    ? Status(Error{ErrorCode::kInvalidArgument, ""})
                    : parse_fabric_key("fabric" + key, k, v, spec.config);
    if (!st && st.error().message.empty()) {
      return Error{ErrorCode::kInvalidArgument,
                   "unknown FabricName option '" + k + "' (allowed: " + kFabricLineOptions + ")"};
    }
    if (!st) return st;
    if (real_option.empty()) real_option = k;
  }
  if (spec.driver.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 "FabricName=" + spec.name + " needs Driver=sim, Driver=redfish or Driver=liqid"};
  }
  if (spec.driver == "sim" && !real_option.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 real_option + " applies to Driver=redfish or Driver=liqid, not Driver=sim"};
  }
  return Status::Ok();
}

using At = std::function<Error(int, const std::string&)>;

// How rule sentences name one fabric's settings: the Fabric* keys of a file with one fabric,
// or the options of a FabricName line.
struct FabricNaming {
  std::string driver;      // "Fabric=redfish", "FabricName=pod-a (Driver=redfish)"
  std::string key;         // prefix of the setting keys: "Fabric" or ""
  std::string driver_key;  // "Fabric" or "Driver"
};

// A simulated fabric: its NodeName lines say where the nodes sit, its DeviceGroup lines what
// the pool holds.
Status check_sim(const std::vector<const NodeLine*>& nodes, size_t groups, const FabricNaming& name,
                 const At& at) {
  for (const NodeLine* n : nodes) {
    if (!n->zones) return at(n->line, "NodeName=" + n->expr + " needs Zones= with " + name.driver);
  }
  if (nodes.empty()) return at(0, "no NodeName= line: " + name.driver + " serves no node");
  if (groups == 0) return at(0, name.driver + " needs at least one DeviceGroup= line");
  return Status::Ok();
}

// A real fabric: the fabric manager gives devices, zones and slots; NodeName lines (if any)
// map its hosts to nodes.
Status check_real(const std::string& driver, FabricConfig& f,
                  const std::vector<const NodeLine*>& nodes, const std::vector<Host>& hosts,
                  const FabricNaming& name, const At& at) {
  const std::string& p = name.key;
  for (const NodeLine* n : nodes) {
    if (n->zones || n->slots) {
      return at(n->line, "NodeName=" + n->expr + ": with " + name.driver +
                             " zones and slots come from the fabric manager; keep only NodeName= "
                             "and FabricHost=");
    }
  }
  if (f.url.empty()) return at(0, name.driver + " needs " + p + "Url=http(s)://HOST[:PORT]");
  if (f.credentials_file.empty()) {
    return at(0, name.driver + " needs " + p +
                     "Credentials=<a root-only file of username= and password= lines>");
  }
  if (driver == "redfish" && f.auth == "apikey") {
    return at(0, p + "Auth=apikey applies to " + name.driver_key +
                     "=liqid; redfish takes session or basic");
  }
  if (driver == "liqid" && f.auth == "session") {
    return at(0, p + "Auth=session applies to " + name.driver_key +
                     "=redfish; liqid takes apikey or basic");
  }
  if (driver == "liqid" && f.use_host_name) {
    return at(0, p + "NodeNames=hostname applies to " + name.driver_key +
                     "=redfish only; Liqid machines go by their machine name");
  }
  if (!nodes.empty() && f.use_host_name) {
    return at(nodes.front()->line,
              "NodeName lines map nodes explicitly; drop " + p + "NodeNames=hostname or them");
  }
  // NodeName lines map fabric hosts to nodes; without them every fabric host is served.
  for (const Host& h : hosts) {
    auto [it, fresh] = f.host_map.emplace(h.fabric_id, h.node);
    if (!fresh) {
      return at(0, "fabric host '" + h.fabric_id + "' is mapped to both " + it->second + " and " +
                       h.node);
    }
  }
  return Status::Ok();
}

// One fabric from Fabric= and the Fabric* keys.
Status check_fabric(Config& cfg, const std::vector<NodeLine>& nodes,
                    const std::vector<GroupLine>& groups,
                    const std::map<std::string, int>& fabric_keys, const At& at) {
  for (const NodeLine& n : nodes) {
    if (!n.fabric.empty()) {
      return at(n.line, "Fabric=" + n.fabric +
                            " on a NodeName line names one of several fabrics; declare them "
                            "with FabricName lines (FabricName=NAME Driver=...)");
    }
  }
  for (const GroupLine& g : groups) {
    if (!g.fabric.empty()) {
      return at(g.line, "Fabric=" + g.fabric +
                            " on a DeviceGroup line names one of several fabrics; declare them "
                            "with FabricName lines (FabricName=NAME Driver=...)");
    }
  }
  std::vector<const NodeLine*> node_ptrs;
  for (const NodeLine& n : nodes) node_ptrs.push_back(&n);
  const FabricNaming name{"Fabric=" + cfg.fabric, "Fabric", "Fabric"};
  if (cfg.fabric == "sim") {
    for (const auto& [k, line] : fabric_keys) {
      if (line > 0) {
        return at(line, k + " applies to Fabric=redfish or Fabric=liqid, not Fabric=sim");
      }
    }
    return check_sim(node_ptrs, cfg.sim.groups.size(), name, at);
  }
  for (const auto& [k, line] : fabric_keys) {
    if (line < 0) return at(-line, k + " applies to Fabric=sim only");
  }
  if (!groups.empty()) {
    return at(groups.front().line, "DeviceGroup lines describe the simulated fabric; with " +
                                       name.driver + " the devices come from the fabric manager");
  }
  return check_real(cfg.fabric, cfg.fabric_config, node_ptrs, cfg.sim.hosts, name, at);
}

// Several fabrics, one FabricName line each: every NodeName and DeviceGroup line belongs to
// one of them.
Status check_fabrics(Config& cfg, const std::vector<NodeLine>& nodes,
                     const std::vector<GroupLine>& groups,
                     const std::map<std::string, int>& fabric_keys, int fabric_line, const At& at) {
  std::string declared;
  std::map<std::string, FabricSpec*> by_name;
  std::vector<FabricSpec*> sims;
  for (FabricSpec& spec : cfg.fabrics) {
    declared += (declared.empty() ? "" : ", ") + spec.name;
    by_name[spec.name] = &spec;
    if (spec.driver == "sim") sims.push_back(&spec);
  }
  if (fabric_line > 0) {
    return at(fabric_line,
              "Fabric= picks the driver of a file with one fabric; with FabricName lines give "
              "each its Driver=");
  }
  for (const auto& [k, line] : fabric_keys) {
    if (line > 0 && lower(k) == "fabricname") {
      return at(line, k + "= alone names the one fabric of a file without FabricName lines; "
                          "with them, every FabricName line needs Driver=");
    }
    if (line > 0) {
      return at(line, k + " applies to a file with one fabric; with FabricName lines put " +
                          k.substr(6) + "= on the fabric's line (FabricName=NAME ... " +
                          k.substr(6) + "=...)");
    }
    if (sims.empty()) return at(-line, k + " applies to Driver=sim only");
  }
  auto owner = [&](const std::string& named, int line, const std::string& what,
                   bool sim_only) -> Expected<FabricSpec*> {
    if (named.empty()) {
      if (!sim_only && cfg.fabrics.size() == 1) return &cfg.fabrics.front();
      if (sim_only && sims.size() == 1) return sims.front();
      if (sim_only && sims.empty()) {
        return at(line,
                  "DeviceGroup lines describe a simulated fabric; no FabricName line has "
                  "Driver=sim");
      }
      return at(line,
                what + " needs Fabric= naming one of the FabricName lines (" + declared + ")");
    }
    auto it = by_name.find(named);
    if (it == by_name.end()) {
      return at(line, what + ": Fabric=" + named +
                          " names no FabricName line (declared: " + declared + ")");
    }
    if (sim_only && it->second->driver != "sim") {
      return at(line, what + ": DeviceGroup lines describe a simulated fabric; the devices of " +
                          named + " (Driver=" + it->second->driver +
                          ") come from its fabric manager");
    }
    return it->second;
  };
  std::map<const FabricSpec*, std::vector<const NodeLine*>> node_lines;
  for (const NodeLine& n : nodes) {
    auto spec = owner(n.fabric, n.line, "NodeName=" + n.expr, false);
    if (!spec) return spec.error();
    node_lines[*spec].push_back(&n);
    for (size_t i = 0; i < n.host_count; ++i) {
      (*spec)->sim.hosts.push_back(cfg.sim.hosts[n.first_host + i]);
    }
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    auto spec = owner(groups[i].fabric, groups[i].line, "DeviceGroup=" + groups[i].name, true);
    if (!spec) return spec.error();
    (*spec)->sim.groups.push_back(cfg.sim.groups[i]);
  }
  cfg.fabric.clear();
  for (FabricSpec& spec : cfg.fabrics) {
    const FabricNaming name{"FabricName=" + spec.name + " (Driver=" + spec.driver + ")", "",
                            "Driver"};
    auto at_spec = [&](int line, const std::string& why) {
      return at(line > 0 ? line : spec.line, why);
    };
    spec.sim.latency_ms = cfg.sim.latency_ms;
    Status st = spec.driver == "sim"
                    ? check_sim(node_lines[&spec], spec.sim.groups.size(), name, at_spec)
                    : check_real(spec.driver, spec.config, node_lines[&spec], spec.sim.hosts, name,
                                 at_spec);
    if (!st) return st;
    if (spec.driver != "sim") spec.sim.hosts.clear();
    spec.config.name = spec.name;
    cfg.fabric += (cfg.fabric.empty() ? "" : ",") + spec.name + "=" + spec.driver;
  }
  return Status::Ok();
}

}  // namespace

Expected<std::vector<std::string>> expand_hostlist(std::string_view expr) {
  std::vector<std::string> out;
  // Split on commas outside brackets.
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : expr) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  const std::string rule = "expected names like node1 or node[01-04,07]";
  for (const auto& p : parts) {
    auto open = p.find('[');
    if (open == std::string::npos) {
      if (auto s = check_name("NodeName", p); !s) return s.error();
      out.push_back(p);
      continue;
    }
    auto close = p.find(']', open);
    if (close == std::string::npos || close != p.size() - 1 || open == 0) {
      return Error{ErrorCode::kInvalidArgument, "'" + p + "': " + rule};
    }
    const std::string prefix = p.substr(0, open);
    for (const auto& range : split(p.substr(open + 1, close - open - 1), ',')) {
      auto dash = range.find('-');
      const std::string lo_s = range.substr(0, dash);
      const std::string hi_s = dash == std::string::npos ? lo_s : range.substr(dash + 1);
      auto lo = parse_count(lo_s, 1000000);
      auto hi = parse_count(hi_s, 1000000);
      if (!lo || !hi || *hi < *lo || *hi - *lo > 100000) {
        return Error{ErrorCode::kInvalidArgument, "'" + p + "': " + rule};
      }
      for (uint32_t i = *lo; i <= *hi; ++i) {
        std::string num = std::to_string(i);
        if (num.size() < lo_s.size()) num.insert(0, lo_s.size() - num.size(), '0');
        out.push_back(prefix + num);
      }
    }
  }
  return out;
}

Expected<Config> parse_config(std::string_view text, const std::string& path) {
  Config cfg;
  cfg.path = path;
  std::set<std::string> nodes;
  std::set<std::string> groups;
  std::set<std::string> seen_keys;
  std::vector<NodeLine> node_lines;
  std::vector<GroupLine> group_lines;
  std::set<std::string> fabric_names;
  int fabric_line = 0;                          // where Fabric= was set
  std::map<std::string, int> fabric_key_lines;  // Fabric* keys given, for sim's refusal
  std::istringstream in{std::string(text)};
  std::string raw;
  int lineno = 0;
  auto fail = [&](const std::string& why) {
    return Error{ErrorCode::kInvalidArgument,
                 path + " line " + std::to_string(lineno) + ": " + why};
  };
  while (std::getline(in, raw)) {
    ++lineno;
    std::string line = raw;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    auto pairs = split_pairs(line);
    if (!pairs) return fail(pairs.error().message);
    const std::string key = lower((*pairs)[0].key);
    const std::string& value = (*pairs)[0].value;

    if (key == "nodename") {
      NodeLine info;
      info.line = lineno;
      if (auto s = parse_node_line(*pairs, cfg, nodes, info); !s) return fail(s.error().message);
      node_lines.push_back(std::move(info));
      continue;
    }
    if (key == "devicegroup") {
      GroupLine info;
      info.line = lineno;
      if (auto s = parse_group_line(*pairs, cfg, groups, info); !s) {
        return fail(s.error().message);
      }
      group_lines.push_back(std::move(info));
      continue;
    }
    if (key == "fabricname" && pairs->size() > 1) {
      FabricSpec spec;
      spec.line = lineno;
      if (auto s = parse_fabric_line(*pairs, spec, fabric_names); !s) {
        return fail(s.error().message);
      }
      cfg.fabrics.push_back(std::move(spec));
      continue;
    }
    // composer.conf is shared with the job_submit plugin: its JobSubmit* keys are its own.
    if (key.rfind("jobsubmit", 0) == 0) continue;
    if (pairs->size() > 1) {
      return fail("'" + (*pairs)[0].key +
                  "' takes one value; put other settings on their own line");
    }
    if (!seen_keys.insert(key).second) return fail("'" + (*pairs)[0].key + "' is set twice");

    const std::string& k = (*pairs)[0].key;
    Status st;
    auto set_ms = [&](int64_t& field, int64_t min_s, int64_t max_s) {
      auto n = parse_int(k, value, min_s, max_s);
      if (!n) return Status(n.error());
      field = *n * 1000;
      return Status::Ok();
    };
    if (key == "listenaddress") {
      if (value.empty()) st = Error{ErrorCode::kInvalidArgument, "ListenAddress needs a value"};
      cfg.listen_address = value;
    } else if (key == "listenport") {
      auto n = parse_int(k, value, 1, 65535);
      if (n)
        cfg.listen_port = static_cast<int>(*n);
      else
        st = n.error();
    } else if (key == "statedir") {
      if (value.empty() || value[0] != '/') {
        st =
            Error{ErrorCode::kInvalidArgument, "StateDir=" + value + ": expected an absolute path"};
      }
      cfg.state_dir = value;
    } else if (key == "database") {
      cfg.database = value;
    } else if (key == "snapshotfile") {
      cfg.snapshot = value;
    } else if (key == "logfile") {
      cfg.log_file = value;
    } else if (key == "loglevel") {
      if (!log::parse_level(lower(value), &cfg.log_level)) {
        st = Error{ErrorCode::kInvalidArgument,
                   "LogLevel=" + value + ": expected debug, info, warning or error"};
      }
    } else if (key == "adminusers") {
      cfg.admin_users = split(value, ',');
      for (const auto& u : cfg.admin_users) {
        if (auto s = check_name("AdminUsers", u); !s) st = s;
      }
    } else if (key == "workloads") {
      cfg.workloads = split(value, ',');
      for (const auto& w : cfg.workloads) {
        if (auto s = check_name("Workloads", w); !s) st = s;
      }
    } else if (key == "mungesocket") {
      cfg.munge_socket = value;
    } else if (key == "apithreads") {
      auto n = parse_int(k, value, 2, 4096);
      if (n)
        cfg.api_threads = static_cast<int>(*n);
      else
        st = n.error();
    } else if (key == "composetimeout") {
      st = set_ms(cfg.compose_timeout_ms, 1, 3600);
    } else if (key == "releasetimeout") {
      st = set_ms(cfg.release_timeout_ms, 1, 3600);
    } else if (key == "reconcileinterval") {
      st = set_ms(cfg.reconcile_interval_ms, 1, 3600);
    } else if (key == "orphangrace") {
      st = set_ms(cfg.orphan_grace_ms, 0, 86400);
    } else if (key == "stuckafter") {
      st = set_ms(cfg.stuck_after_ms, 1, 86400);
    } else if (key == "durable") {
      auto b = parse_bool(k, value);
      if (b)
        cfg.durable = *b;
      else
        st = b.error();
    } else if (key == "slurmjobcheck") {
      auto b = parse_bool(k, value);
      if (b)
        cfg.slurm_job_check = *b;
      else
        st = b.error();
    } else if (key == "slurmconf") {
      cfg.slurm_conf = value;
    } else if (key == "fabric") {
      fabric_line = lineno;
      cfg.fabric = lower(value);
      if (cfg.fabric != "sim" && cfg.fabric != "redfish" && cfg.fabric != "liqid") {
        st = Error{ErrorCode::kInvalidArgument,
                   "Fabric=" + value + ": expected sim, redfish or liqid"};
      }
    } else if (key.starts_with("fabric") && key != "fabrichost") {
      fabric_key_lines[k] = lineno;
      st = parse_fabric_key(key, k, value, cfg.fabric_config);
      if (!st && st.error().message.empty()) return fail("unknown key '" + k + "'");
    } else if (key == "simlatency") {
      fabric_key_lines[k] = -lineno;  // sim only
      auto n = parse_int(k, value, 0, 600000);
      if (n)
        cfg.sim.latency_ms = static_cast<int>(*n);
      else
        st = n.error();
    } else {
      return fail("unknown key '" + k + "'");
    }
    if (!st) return fail(st.error().message);
  }
  if (cfg.database.empty()) cfg.database = cfg.state_dir + "/composer.db";
  if (cfg.snapshot.empty()) cfg.snapshot = cfg.state_dir + "/snapshot.json";
  auto at = [&](int line, const std::string& why) {
    return Error{ErrorCode::kInvalidArgument,
                 path + (line > 0 ? " line " + std::to_string(line) : std::string()) + ": " + why};
  };
  Status checked =
      cfg.fabrics.empty()
          ? check_fabric(cfg, node_lines, group_lines, fabric_key_lines, at)
          : check_fabrics(cfg, node_lines, group_lines, fabric_key_lines, fabric_line, at);
  if (!checked) return checked.error();
  return cfg;
}

Expected<Config> load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Error{ErrorCode::kNotFound, "cannot read " + path + ": " + std::strerror(errno)};
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_config(buf.str(), path);
}

}  // namespace composer::server
