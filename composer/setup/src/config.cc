#include "composer/setup/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "composer/common/names.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/config/conf_file.h"
#include "composer/config/shared_keys.h"

namespace composer::setup {
namespace {

using config::Pair;

Error invalid(const std::string& why) { return Error{ErrorCode::kInvalidArgument, why}; }

// A numeric IPv4 or IPv6 address, or a host name of letters, digits, '-' and '.' (labels of 1
// to 63 characters, not starting or ending with '-'), as getaddrinfo takes it.
bool listen_address(const std::string& v) {
  unsigned char buf[sizeof(in6_addr)];
  if (::inet_pton(AF_INET, v.c_str(), buf) == 1 || ::inet_pton(AF_INET6, v.c_str(), buf) == 1) {
    return true;
  }
  if (v.size() > 253) return false;
  for (const std::string& label : split(v, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
  }
  return true;
}

// Comma-separated names ("root, slurm"), each part trimmed.
std::vector<std::string> list(std::string_view s) { return split(s, ',', {.trim = true}); }

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

// Domains=LEVEL:NAME,...: one domain per level; the levels are checked against DomainLevels=
// once the whole file is read (check_domains).
Expected<std::vector<FailureDomain>> parse_domains(const std::string& k, const std::string& v) {
  std::vector<FailureDomain> out;
  for (const std::string& item : list(v)) {
    auto d = parse_failure_domain(item);
    if (!d) {
      return invalid(k + "=" + v + ": '" + item +
                     "' is not LEVEL:NAME; expected e.g. Domains=enclosure:enc1,power:pdu-a");
    }
    if (auto s = config::name(k + " level", d->level); !s) return s.error();
    if (auto s = config::name(k + " name", d->name); !s) return s.error();
    for (const FailureDomain& seen : out) {
      if (seen.level == d->level) {
        return invalid(k + "=" + v + ": level '" + d->level +
                       "' is given twice; a device sits in one domain per level");
      }
    }
    out.push_back(std::move(*d));
  }
  if (out.empty()) return invalid(k + " needs a value, e.g. Domains=enclosure:enc1");
  return out;
}

// Every level a Domains= option names must be one of DomainLevels=; the domains are then
// sorted by level (Device::domains).
Status check_domains(std::vector<FailureDomain>& domains, const std::vector<std::string>& levels,
                     const std::string& what) {
  for (const FailureDomain& d : domains) {
    if (std::find(levels.begin(), levels.end(), d.level) != levels.end()) continue;
    if (levels.empty()) {
      return invalid(
          what + ": Domains= names level '" + d.level +
          "', but no DomainLevels= line declares any level; add e.g. DomainLevels=" + d.level);
    }
    return invalid(what + ": Domains= names level '" + d.level +
                   "', which DomainLevels= does not declare (declared: " + join(levels, ", ") +
                   ")");
  }
  std::sort(domains.begin(), domains.end());
  return Status::Ok();
}

Status parse_node_line(const std::vector<Pair>& pairs, Config& cfg, std::set<std::string>& seen,
                       NodeLine& info) {
  info.expr = pairs[0].value;
  auto names = config::expand_hostlist(pairs[0].value);
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
      if (auto s = config::name("FabricHost", v); !s) return s;
      fabric_host = v;
    } else if (k == "fabric") {
      if (auto s = config::name("Fabric", v); !s) return s;
      info.fabric = v;
    } else if (k == "zones") {
      info.zones = true;
      proto.zones.clear();
      for (const auto& z : list(v)) {
        if (auto s = config::name("Zones", z); !s) return s;
        proto.zones.push_back(z);
      }
    } else if (k == "domains") {
      auto domains = parse_domains(pairs[i].key, v);
      if (!domains) return domains.error();
      proto.domains = std::move(*domains);
    } else if (k == "gpuslots" || k == "memslots" || k == "nvmeslots") {
      info.slots = true;
      auto n = config::whole_number(pairs[i].key, v, 0, 1024);
      if (!n) return n.error();
      (k == "gpuslots"   ? proto.gpu_slots
       : k == "memslots" ? proto.mem_slots
                         : proto.nvme_slots) = static_cast<uint32_t>(*n);
    } else {
      return Error{ErrorCode::kInvalidArgument,
                   "unknown NodeName option '" + pairs[i].key +
                       "' (allowed: Fabric, FabricHost, Zones, GpuSlots, MemSlots, NvmeSlots, "
                       "Domains)"};
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
  if (auto s = config::name("DeviceGroup", g.name); !s) return s;
  if (!seen.insert(g.name).second) {
    return Error{ErrorCode::kInvalidArgument, "DeviceGroup '" + g.name + "' is declared twice"};
  }
  bool have_type = false;
  bool have_count = false;
  for (size_t i = 1; i < pairs.size(); ++i) {
    const std::string k = lower(pairs[i].key);
    const std::string& v = pairs[i].value;
    if (k == "fabric") {
      if (auto s = config::name("Fabric", v); !s) return s;
      info.fabric = v;
    } else if (k == "type") {
      auto t = parse_device_type(lower(v));
      if (!t) {
        return Error{ErrorCode::kInvalidArgument, "Type=" + v + ": expected gpu, mem or nvme"};
      }
      g.type = *t;
      have_type = true;
    } else if (k == "model") {
      if (auto s = config::name("Model", v); !s) return s;
      g.model = v;
    } else if (k == "zone") {
      if (auto s = config::name("Zone", v); !s) return s;
      g.zone = v;
    } else if (k == "count") {
      auto n = config::whole_number("Count", v, 1, 100000);
      if (!n) return n.error();
      g.count = static_cast<uint32_t>(*n);
      have_count = true;
    } else if (k == "size") {
      auto sz = parse_size(v);
      if (!sz) return Error{ErrorCode::kInvalidArgument, "Size=" + v + ": " + sz.error().message};
      g.size_bytes = *sz;
    } else if (k == "domains") {
      auto domains = parse_domains(pairs[i].key, v);
      if (!domains) return domains.error();
      g.domains = std::move(*domains);
    } else {
      return Error{ErrorCode::kInvalidArgument,
                   "unknown DeviceGroup option '" + pairs[i].key +
                       "' (allowed: Fabric, Type, Model, Zone, Count, Size, Domains)"};
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
    auto ms = config::duration_ms(k, value, min_ms, max_ms);
    if (!ms) return ms.error();
    field = *ms;
    return Status::Ok();
  };
  if (key == "fabricname") {
    f.name = value;
    return config::name(k, value);
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
    // Nor one with a query string or a fragment (?token=...): shown up to the '?' only.
    if (const size_t query = value.find_first_of("?#"); query != std::string::npos) {
      return Error{ErrorCode::kInvalidArgument,
                   k + "=" + value.substr(0, query) +
                       "?<redacted>: a URL with a query string or fragment is refused (it may "
                       "carry a token; put credentials in the credentials file); expected "
                       "http(s)://HOST[:PORT] only"};
    }
    // Nor the path, which may carry a token too (https://fm/api/<token>): shown up to the '/'.
    if (const size_t path = authority.find('/'); authority.empty() || path != std::string::npos) {
      const std::string shown =
          authority.empty() ? value : value.substr(0, value.size() - authority.size() + path);
      return Error{ErrorCode::kInvalidArgument,
                   k + "=" + shown + (authority.empty() ? "" : "/<redacted>") +
                       ": expected http(s)://HOST[:PORT] only; the driver adds the API path"};
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
    auto b = config::yes_no(k, value);
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
    auto n = config::whole_number(k, value, 1, 1024);
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
  if (auto s = config::name("FabricName", spec.name); !s) return s;
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
                             " zones and slots come from the fabric manager; keep only NodeName=, "
                             "FabricHost= and Domains=");
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
    spec.sim.serialise = cfg.sim.serialise;
    spec.sim.fail_attaches = cfg.sim.fail_attaches;
    spec.sim.fail_detaches = cfg.sim.fail_detaches;
    spec.sim.health_file = cfg.sim.health_file;
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

Expected<Config> parse_config(std::string_view text, const std::string& path) {
  Config cfg;
  cfg.path = path;
  std::set<std::string> nodes;
  std::set<std::string> groups;
  std::set<std::string> seen_keys;
  std::vector<NodeLine> node_lines;
  std::vector<GroupLine> group_lines;
  std::set<std::string> fabric_names;
  config::StatePaths state;
  int fabric_line = 0;                          // where Fabric= was set
  std::map<std::string, int> fabric_key_lines;  // Fabric* keys given, for sim's refusal
  Status read = config::read_lines(text, path, [&](const config::Line& line) -> Status {
    const std::vector<Pair>& pairs = line.pairs;
    const std::string& key = line.key;
    const std::string& value = line.value();
    if (key == "nodename") {
      NodeLine info;
      info.line = line.number;
      if (auto s = parse_node_line(pairs, cfg, nodes, info); !s) return s;
      node_lines.push_back(std::move(info));
      return Status::Ok();
    }
    if (key == "devicegroup") {
      GroupLine info;
      info.line = line.number;
      if (auto s = parse_group_line(pairs, cfg, groups, info); !s) return s;
      group_lines.push_back(std::move(info));
      return Status::Ok();
    }
    if (key == "fabricname" && pairs.size() > 1) {
      FabricSpec spec;
      spec.line = line.number;
      if (auto s = parse_fabric_line(pairs, spec, fabric_names); !s) return s;
      cfg.fabrics.push_back(std::move(spec));
      return Status::Ok();
    }
    // composer.conf is shared with the job_submit plugin: its JobSubmit* keys are its own.
    if (key.rfind("jobsubmit", 0) == 0) return Status::Ok();
    bool shared = false;
    if (auto s = config::read_shared_key(line, seen_keys, state, shared); !s || shared) {
      if (s) cfg.lines[key] = line.number;
      return s;
    }
    if (auto s = config::single_setting(line, seen_keys); !s) return s;
    cfg.lines[key] = line.number;

    const std::string& k = line.written_key();
    auto set_ms = [&](int64_t& field, int64_t min_s, int64_t max_s) {
      auto n = config::whole_number(k, value, min_s, max_s);
      if (!n) return Status(n.error());
      field = *n * 1000;
      return Status::Ok();
    };
    auto set_int = [&](int& field, int64_t min, int64_t max) {
      auto n = config::whole_number(k, value, min, max);
      if (!n) return Status(n.error());
      field = static_cast<int>(*n);
      return Status::Ok();
    };
    auto set_bool = [&](bool& field) {
      auto b = config::yes_no(k, value);
      if (!b) return Status(b.error());
      field = *b;
      return Status::Ok();
    };
    auto set_names = [&](std::vector<std::string>& field, const std::string& what) {
      field = list(value);
      for (const auto& n : field) {
        if (auto s = config::name(what, n); !s) return s;
      }
      return Status::Ok();
    };
    if (key == "listenaddress") {
      if (value.empty()) return invalid("ListenAddress needs a value");
      if (!listen_address(value)) {
        return invalid(k + "=" + value +
                       ": expected an IPv4 or IPv6 address (127.0.0.1, ::1, 0.0.0.0) or a host "
                       "name (letters, digits, '-' and '.')");
      }
      cfg.listen_address = value;
    } else if (key == "listenport") {
      return set_int(cfg.listen_port, 1, 65535);
    } else if (key == "database") {
      // composerd's working directory is nobody's business: never a file relative to it.
      if (auto s = config::absolute_path(k, value); !s) return s;
      cfg.database = value;
    } else if (key == "statebackend") {
      if (lower(value) != "sqlite" && lower(value) != "postgresql") {
        return invalid(k + "=" + value + ": expected sqlite or postgresql");
      }
      cfg.state_backend = lower(value);
    } else if (key == "stateurl") {
      // Never quoted back: it may hold a password.
      if (value.empty()) {
        return invalid(k +
                       " needs a libpq connection string, e.g. StateUrl=host=db1,db2 "
                       "dbname=composer target_session_attrs=read-write");
      }
      cfg.state_url = value;
    } else if (key == "stateurlfile") {
      if (auto s = config::absolute_path(k, value); !s) return s;
      cfg.state_url_file = value;
    } else if (key == "advertiseurl") {
      const bool http = value.starts_with("http://") || value.starts_with("https://");
      if (!http || value.size() <= value.find("//") + 2 ||
          value.find_first_of(" \t\"") != std::string::npos) {
        return invalid(k + "=" + value +
                       ": expected the URL clients reach this composerd at, "
                       "http(s)://HOST[:PORT], e.g. AdvertiseUrl=http://ctl1:6830");
      }
      cfg.advertise_url = value;
    } else if (key == "leaderlease") {
      return set_ms(cfg.leader_lease_ms, 2, 300);
    } else if (key == "stategroup") {
      if (auto s = config::name(k, value); !s) return s;
      cfg.state_group = value;
    } else if (key == "logfile") {
      if (auto s = config::absolute_path(k, value); !s) return s;
      cfg.log_file = value;
    } else if (key == "loglevel") {
      if (!log::parse_level(lower(value), &cfg.log_level)) {
        return invalid("LogLevel=" + value + ": expected debug, info, warning or error");
      }
    } else if (key == "adminusers") {
      return set_names(cfg.admin_users, "AdminUsers");
    } else if (key == "listensocket") {
      if (value.empty() || value.front() != '/') {
        return invalid("ListenSocket=" + value +
                       ": expected an absolute path, e.g. "
                       "/run/composer/composerd.sock");
      }
      cfg.listen_socket = value;
    } else if (key == "composeusers") {
      return set_names(cfg.compose_users, "ComposeUsers");
    } else if (key == "workloads") {
      return set_names(cfg.workloads, "Workloads");
    } else if (key == "domainlevels") {
      if (auto st = set_names(cfg.domain_levels, k); !st) return st;
      std::set<std::string> levels;
      for (const auto& level : cfg.domain_levels) {
        if (!levels.insert(level).second) {
          return invalid(k + "=" + value + ": level '" + level + "' is given twice");
        }
      }
      if (cfg.domain_levels.empty()) {
        return invalid(k + " needs a value, e.g. DomainLevels=enclosure,power");
      }
    } else if (key == "mungesocket") {
      if (auto s = config::absolute_path(k, value); !s) return s;
      cfg.munge_socket = value;
    } else if (key == "apithreads") {
      return set_int(cfg.api_threads, 2, 4096);
    } else if (key == "apimaxconnections") {
      return set_int(cfg.api_max_connections, 16, 1000000);
    } else if (key == "apimaxconnectionsperpeer") {
      return set_int(cfg.api_max_connections_per_peer, 1, 1000000);
    } else if (key == "apimaxheaderbytes") {
      return set_int(cfg.api_max_header_bytes, 16384, 1 << 20);
    } else if (key == "apimaxheaders") {
      return set_int(cfg.api_max_headers, 16, 10000);
    } else if (key == "apimaxbodybytes") {
      return set_int(cfg.api_max_body_bytes, 65536, 1 << 28);
    } else if (key == "apirequesttimeout") {
      return set_ms(cfg.api_request_timeout_ms, 1, 3600);
    } else if (key == "apiidletimeout") {
      return set_ms(cfg.api_idle_timeout_ms, 1, 86400);
    } else if (key == "composetimeout") {
      return set_ms(cfg.compose_timeout_ms, 1, 3600);
    } else if (key == "releasetimeout") {
      return set_ms(cfg.release_timeout_ms, 1, 3600);
    } else if (key == "maxfabricoperations") {
      return set_int(cfg.max_fabric_operations, 1, 65536);
    } else if (key == "reconcileinterval") {
      return set_ms(cfg.reconcile_interval_ms, 1, 3600);
    } else if (key == "orphangrace") {
      return set_ms(cfg.orphan_grace_ms, 0, 86400);
    } else if (key == "stuckafter") {
      return set_ms(cfg.stuck_after_ms, 1, 86400);
    } else if (key == "durable") {
      return set_bool(cfg.durable);
    } else if (key == "slurmjobcheck") {
      return set_bool(cfg.slurm_job_check);
    } else if (key == "slurmconf") {
      cfg.slurm_conf = value;
    } else if (key == "slurmsync") {
      return set_bool(cfg.slurm_sync);
    } else if (key == "slurmlicenses") {
      const std::string v = lower(value);
      if (v != "local" && v != "remote") {
        return invalid("SlurmLicenses=" + value +
                       ": expected local (slurm.conf's licenses, held down by reservations) or "
                       "remote (slurmdbd's resources, counted by composerd)");
      }
      cfg.slurm_remote_licenses = v == "remote";
    } else if (key == "slurmlicenseserver" || key == "slurmcluster") {
      if (!valid_name(value, 64)) {
        return invalid(k + "=" + value +
                       ": expected a name of letters, digits, '-', '_' and '.' (at most 64)");
      }
      (key == "slurmcluster" ? cfg.slurm_cluster : cfg.slurm_license_server) = value;
    } else if (key == "slurmsacctmgr") {
      if (value.empty() || value.find_first_of(" \t") != std::string::npos) {
        return invalid("SlurmSacctmgr=" + value +
                       ": expected the path of Slurm's sacctmgr (or a name on PATH), no spaces");
      }
      cfg.slurm_sacctmgr = value;
    } else if (key == "slurmscontrol") {
      if (value.empty() || value.find_first_of(" \t") != std::string::npos) {
        return invalid("SlurmScontrol=" + value +
                       ": expected the path of Slurm's scontrol (or a name on PATH), no spaces");
      }
      cfg.slurm_scontrol = value;
    } else if (key == "fabric") {
      fabric_line = line.number;
      cfg.fabric = lower(value);
      if (cfg.fabric != "sim" && cfg.fabric != "redfish" && cfg.fabric != "liqid") {
        return invalid("Fabric=" + value + ": expected sim, redfish or liqid");
      }
    } else if (key.starts_with("fabric") && key != "fabrichost") {
      fabric_key_lines[k] = line.number;
      Status st = parse_fabric_key(key, k, value, cfg.fabric_config);
      if (!st && st.error().message.empty()) return invalid("unknown key '" + k + "'");
      return st;
    } else if (key == "simlatency") {
      fabric_key_lines[k] = -line.number;  // sim only
      return set_int(cfg.sim.latency_ms, 0, 600000);
    } else if (key == "simserialize") {
      fabric_key_lines[k] = -line.number;  // sim only
      return set_bool(cfg.sim.serialise);
    } else if (key == "simhealthfile") {
      fabric_key_lines[k] = -line.number;  // sim only
      if (value.empty() || value[0] != '/') {
        return invalid("SimHealthFile=" + value +
                       ": expected an absolute path (the file need not exist yet)");
      }
      cfg.sim.health_file = value;
    } else if (key == "simfailattaches" || key == "simfaildetaches") {
      fabric_key_lines[k] = -line.number;  // sim only
      auto n = config::whole_number(k, value, 0, 1000000);
      if (!n) return n.error();
      (key == "simfailattaches" ? cfg.sim.fail_attaches : cfg.sim.fail_detaches) =
          static_cast<uint32_t>(*n);
    } else {
      return invalid("unknown key '" + k + "'");
    }
    return Status::Ok();
  });
  if (!read) return read.error();
  if (state.state_dir.find_first_not_of('/') == std::string::npos) {
    return config::at(path, cfg.lines["statedir"],
                      "StateDir=" + state.state_dir +
                          ": the root directory cannot be composerd's own; give a directory "
                          "such as /var/lib/slurm-composer");
  }
  cfg.state_dir = state.state_dir;
  cfg.snapshot = state.snapshot();
  if (cfg.database.empty()) cfg.database = cfg.state_dir + "/composer.db";
  auto at = [&](int line, const std::string& why) { return config::at(path, line, why); };
  if (cfg.state_backend == "postgresql") {
    if (cfg.state_url.empty() == cfg.state_url_file.empty()) {
      return at(cfg.line_of("statebackend"),
                "StateBackend=postgresql needs its connection string in exactly one of "
                "StateUrlFile= (a file only composerd's user may read) and StateUrl=");
    }
  } else if (!cfg.state_url.empty() || !cfg.state_url_file.empty()) {
    return at(cfg.line_of(cfg.state_url.empty() ? "stateurlfile" : "stateurl"),
              std::string(cfg.state_url.empty() ? "StateUrlFile" : "StateUrl") +
                  "= names a PostgreSQL database, which only StateBackend=postgresql uses; "
                  "add StateBackend=postgresql or remove it");
  } else {
    for (const char* key : {"AdvertiseUrl", "LeaderLease"}) {
      if (cfg.line_of(lower(key)) != 0) {
        return at(cfg.line_of(lower(key)),
                  std::string(key) +
                      "= is for several composerd sharing one PostgreSQL store; with "
                      "StateBackend=sqlite one composerd is always active: remove it");
      }
    }
  }
  // Unless given, one peer may hold half of ApiMaxConnections.
  if (cfg.line_of("apimaxconnectionsperpeer") == 0) {
    cfg.api_max_connections_per_peer = std::max(1, cfg.api_max_connections / 2);
  } else if (cfg.api_max_connections_per_peer > cfg.api_max_connections) {
    return at(cfg.line_of("apimaxconnectionsperpeer"),
              "ApiMaxConnectionsPerPeer=" + std::to_string(cfg.api_max_connections_per_peer) +
                  " is more than ApiMaxConnections=" + std::to_string(cfg.api_max_connections) +
                  ": one peer cannot hold more connections than composerd keeps in all");
  }
  // Before the groups go to their fabrics (check_fabrics copies them). Group names are unique
  // in the file, so a group's line is found by its name.
  auto check_group_domains = [&](std::vector<SimConfig::Group>& groups_read) -> Status {
    for (SimConfig::Group& g : groups_read) {
      int line = 0;
      for (const GroupLine& gl : group_lines) {
        if (gl.name == g.name) line = gl.line;
      }
      if (Status s = check_domains(g.domains, cfg.domain_levels, "DeviceGroup=" + g.name); !s) {
        return at(line, s.error().message);
      }
    }
    return Status::Ok();
  };
  if (Status s = check_group_domains(cfg.sim.groups); !s) return s.error();
  for (const NodeLine& n : node_lines) {
    for (size_t i = 0; i < n.host_count; ++i) {
      Host& h = cfg.sim.hosts[n.first_host + i];
      if (Status s = check_domains(h.domains, cfg.domain_levels, "NodeName=" + n.expr); !s) {
        return at(n.line, s.error().message);
      }
    }
  }
  Status checked =
      cfg.fabrics.empty()
          ? check_fabric(cfg, node_lines, group_lines, fabric_key_lines, at)
          : check_fabrics(cfg, node_lines, group_lines, fabric_key_lines, fabric_line, at);
  if (!checked) return checked.error();
  // One fabric host per node on a fabric: a second NodeName line naming the same one would
  // let two nodes receive each other's devices (a real fabric's host map refuses it above).
  std::map<std::pair<std::string, std::string>, std::pair<std::string, int>> fabric_hosts;
  for (const NodeLine& n : node_lines) {
    for (size_t i = 0; i < n.host_count; ++i) {
      const Host& h = cfg.sim.hosts[n.first_host + i];
      auto [it, fresh] =
          fabric_hosts.emplace(std::pair(n.fabric, h.fabric_id), std::pair(h.node, n.line));
      if (!fresh) {
        return config::at(path, n.line,
                          "NodeName=" + h.node + ": fabric host '" + h.fabric_id +
                              "' is already the fabric host of " + it->second.first + " (line " +
                              std::to_string(it->second.second) +
                              "); each node needs a fabric host of its own");
      }
    }
  }
  if (cfg.slurm_remote_licenses) {
    const int line = cfg.lines["slurmlicenses"];
    if (!cfg.slurm_sync) {
      return config::at(path, line,
                        "SlurmLicenses=remote needs SlurmSync=yes: composerd sets the remote "
                        "licenses' counts as it keeps Slurm in step");
    }
    if (cfg.slurm_cluster.empty()) {
      return config::at(path, line,
                        "SlurmLicenses=remote needs SlurmCluster=, the ClusterName of slurm.conf "
                        "that slurmdbd gives the licenses to");
    }
  }
  // A simulated fabric keeps its attachments beside the database, as a real one keeps them
  // in its fabric manager.
  if (cfg.fabric == "sim") cfg.sim.state_file = sim_state_file(cfg.database, "");
  for (FabricSpec& spec : cfg.fabrics) {
    if (spec.driver == "sim") spec.sim.state_file = sim_state_file(cfg.database, spec.name);
  }
  return cfg;
}

std::string sim_state_file(const std::string& database, const std::string& fabric_name) {
  return database + (fabric_name.empty() ? ".sim" : ".sim-" + fabric_name);
}

std::string Config::advertised_url() const {
  if (!advertise_url.empty()) return advertise_url;
  std::string host = listen_address;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    char name[256] = {0};
    host = ::gethostname(name, sizeof name - 1) == 0 && name[0] != '\0' ? name : "localhost";
  } else if (host.find(':') != std::string::npos) {
    host = "[" + host + "]";  // an IPv6 address
  }
  return "http://" + host + ":" + std::to_string(listen_port);
}

Expected<Config> load_config(const std::string& path) {
  Expected<std::string> text = config::read_file(path);
  if (!text) return text.error();
  return parse_config(*text, path);
}

}  // namespace composer::setup
