#include "composer/setup/composer_conf.h"

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
#include "composer/config/settings.h"
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

// What the options of a NodeName line give, read through node_options(); the checks across
// options come once the table has read the whole line.
struct NodeOptions {
  Host proto;               // each node's zones, slots and domains
  std::string fabric_host;  // FabricHost=
  std::string fabric;       // Fabric=
  bool zones = false;       // Zones= given
  bool slots = false;       // one of the *Slots= given
};

// What the options of a DeviceGroup line give, read through group_options().
struct GroupOptions {
  SimConfig::Group group;
  std::string fabric;  // Fabric=
  bool type = false;   // Type= given
  bool count = false;  // Count= given
};

// `set`, and `given` marked once it took the value.
template <class T>
config::Setter<T> marking(config::Setter<T> set, bool T::*given) {
  return
      [set = std::move(set), given](const std::string& k, const std::string& v, T& into) -> Status {
        if (Status s = set(k, v, into); !s) return s;
        into.*given = true;
        return Status::Ok();
      };
}

// Domains=LEVEL:NAME,... (parse_domains) into the field `domains` answers.
template <class T, class F>
config::Setter<T> domains_of(F domains) {
  return [domains](const std::string& k, const std::string& v, T& into) -> Status {
    auto d = parse_domains(k, v);
    if (!d) return d.error();
    std::invoke(domains, into) = std::move(*d);
    return Status::Ok();
  };
}

// A NodeName line's options, in the order refusals list them.
const config::Settings<NodeOptions>& node_options() {
  using N = NodeOptions;
  namespace set = config::set;
  auto slots = [](uint32_t Host::*field) {
    return marking<N>(set::whole<N>([field](N& n) -> uint32_t& { return n.proto.*field; }, 0, 1024),
                      &N::slots);
  };
  static const config::Settings<N> table(
      config::KeyCase::kInsensitive,
      {
          {"Fabric", set::name<N>(&N::fabric)},
          {"FabricHost", set::name<N>(&N::fabric_host)},
          {"Zones",
           marking<N>(set::names<N>([](N & n) -> auto& { return n.proto.zones; }), &N::zones)},
          {"GpuSlots", slots(&Host::gpu_slots)},
          {"MemSlots", slots(&Host::mem_slots)},
          {"NvmeSlots", slots(&Host::nvme_slots)},
          {"Domains", domains_of<N>([](N & n) -> auto& { return n.proto.domains; })},
      });
  return table;
}

// A DeviceGroup line's options, in the order refusals list them.
const config::Settings<GroupOptions>& group_options() {
  using G = GroupOptions;
  namespace set = config::set;
  auto type = set::one_of<G>(
      [](G & g) -> auto& { return g.group.type; },
      std::vector<std::pair<std::string, DeviceType>>{
          {"gpu", DeviceType::kGpu}, {"mem", DeviceType::kMem}, {"nvme", DeviceType::kNvme}},
      "expected gpu, mem or nvme");
  auto count = set::whole<G>(
      [](G & g) -> auto& { return g.group.count; }, 1, 100000);
  config::Setter<G> size = [](const std::string& k, const std::string& v, G& into) -> Status {
    auto bytes = parse_size(v);
    if (!bytes) return invalid(k + "=" + v + ": " + bytes.error().message);
    into.group.size_bytes = *bytes;
    return Status::Ok();
  };
  static const config::Settings<G> table(
      config::KeyCase::kInsensitive,
      {
          {"Fabric", set::name<G>(&G::fabric)},
          {"Type", marking<G>(std::move(type), &G::type)},
          {"Model", set::name<G>([](G & g) -> auto& { return g.group.model; })},
          {"Zone", set::name<G>([](G & g) -> auto& { return g.group.zone; })},
          {"Count", marking<G>(std::move(count), &G::count)},
          {"Size", std::move(size)},
          {"Domains", domains_of<G>([](G & g) -> auto& { return g.group.domains; })},
      });
  return table;
}

// Each option after the line's own key through `table`; an unknown one names the allowed.
template <class T>
Status read_options(const std::vector<Pair>& pairs, const config::Settings<T>& table,
                    const std::string& object, T& into) {
  for (size_t i = 1; i < pairs.size(); ++i) {
    const config::Setter<T>* set = table.find(pairs[i].key);
    if (!set) {
      return invalid("unknown " + object + " option '" + pairs[i].key +
                     "' (allowed: " + table.names() + ")");
    }
    if (Status s = (*set)(pairs[i].key, pairs[i].value, into); !s) return s;
  }
  return Status::Ok();
}

Status parse_node_line(const std::vector<Pair>& pairs, Config& cfg, std::set<std::string>& seen,
                       NodeLine& info) {
  info.expr = pairs[0].value;
  auto names = config::expand_hostlist(pairs[0].value);
  if (!names) return Error{ErrorCode::kInvalidArgument, "NodeName: " + names.error().message};
  NodeOptions o;
  if (Status s = read_options(pairs, node_options(), "NodeName", o); !s) return s;
  if (!o.fabric_host.empty() && names->size() != 1) {
    return invalid("FabricHost= can only be given on a NodeName line naming one node");
  }
  info.fabric = o.fabric;
  info.zones = o.zones;
  info.slots = o.slots;
  info.first_host = cfg.sim.hosts.size();
  info.host_count = names->size();
  for (const auto& n : *names) {
    if (!seen.insert(n).second) {
      return Error{ErrorCode::kInvalidArgument, "node '" + n + "' is declared twice"};
    }
    Host h = o.proto;
    h.node = n;
    h.fabric_id = o.fabric_host.empty() ? n : o.fabric_host;
    cfg.sim.hosts.push_back(std::move(h));
  }
  return Status::Ok();
}

Status parse_group_line(const std::vector<Pair>& pairs, Config& cfg, std::set<std::string>& seen,
                        GroupLine& info) {
  GroupOptions o;
  SimConfig::Group& g = o.group;
  g.name = pairs[0].value;
  info.name = g.name;
  if (auto s = config::name("DeviceGroup", g.name); !s) return s;
  if (!seen.insert(g.name).second) {
    return Error{ErrorCode::kInvalidArgument, "DeviceGroup '" + g.name + "' is declared twice"};
  }
  if (Status s = read_options(pairs, group_options(), "DeviceGroup", o); !s) return s;
  info.fabric = o.fabric;
  if (!o.type || !o.count || g.zone.empty() || g.model.empty()) {
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

// FabricUrl= (Url= on a FabricName line): http(s)://HOST[:PORT] only. The sentence never
// repeats a part that may carry a secret.
Status fabric_url(const std::string& k, const std::string& value) {
  const std::string v = lower(value);
  if (!v.starts_with("http://") && !v.starts_with("https://")) {
    return invalid(k + ": expected http(s)://HOST[:PORT] of the fabric manager");
  }
  const std::string authority = value.substr(value.find("//") + 2);
  // Never a URL that carries a password.
  if (authority.find('@') != std::string::npos) {
    return invalid(k + " must not carry credentials; put them in the credentials file");
  }
  // Nor one with a query string or a fragment (?token=...): shown up to the '?' only.
  if (const size_t query = value.find_first_of("?#"); query != std::string::npos) {
    return invalid(k + "=" + value.substr(0, query) +
                   "?<redacted>: a URL with a query string or fragment is refused (it may "
                   "carry a token; put credentials in the credentials file); expected "
                   "http(s)://HOST[:PORT] only");
  }
  // Nor the path, which may carry a token too (https://fm/api/<token>): shown up to the '/'.
  if (const size_t path = authority.find('/'); authority.empty() || path != std::string::npos) {
    const std::string shown =
        authority.empty() ? value : value.substr(0, value.size() - authority.size() + path);
    return invalid(k + "=" + shown + (authority.empty() ? "" : "/<redacted>") +
                   ": expected http(s)://HOST[:PORT] only; the driver adds the API path");
  }
  return Status::Ok();
}

namespace set = config::set;
using config::KeyCase;
using config::Settings;

// One fabric's settings: the Fabric* keys of a file with one fabric without the word Fabric,
// and the options of a FabricName line (beside Driver=), in the order refusals list them.
const Settings<FabricConfig>& fabric_settings() {
  using F = FabricConfig;
  static const Settings<F> table(
      KeyCase::kInsensitive,
      {
          {"Url", set::text<F>(&F::url, fabric_url)},
          {"Credentials", set::absolute_path<F>(&F::credentials_file)},
          {"Auth",
           set::one_of<F>(&F::auth,
                          std::vector<std::pair<std::string, std::string>>{
                              {"session", "session"}, {"basic", "basic"}, {"apikey", "apikey"}},
                          "expected session or basic (redfish), apikey or basic (liqid)")},
          {"CaFile", set::absolute_path<F>(&F::ca_file)},
          {"VerifyTls", set::yes_no<F>(&F::verify_tls)},
          {"ConnectTimeout", set::duration<F>(&F::connect_timeout_ms, 100, 300000)},
          {"Timeout", set::duration<F>(&F::request_timeout_ms, 100, 600000)},
          {"PollInterval", set::duration<F>(&F::poll_interval_ms, 10, 60000)},
          {"TaskWait", set::duration<F>(&F::task_wait_ms, 0, 3600000)},
          {"NodeNames", set::one_of<F>(&F::use_host_name,
                                       std::vector<std::pair<std::string, bool>>{
                                           {"id", false}, {"hostname", true}},
                                       "expected id or hostname")},
          {"Slots", set::whole<F>(&F::slots, 1, 1024)},
      });
  return table;
}

// SlurmLicenseServer= and SlurmCluster=: Slurm's names, as sacctmgr takes them.
Status slurm_name(const std::string& k, const std::string& value) {
  if (valid_name(value, 64)) return Status::Ok();
  return invalid(k + "=" + value +
                 ": expected a name of letters, digits, '-', '_' and '.' (at most 64)");
}

// Slurm's sacctmgr or scontrol: a path or a name on PATH, one word.
config::Setter<Config> slurm_command(std::string Config::*field, const std::string& command) {
  return set::text<Config>(field, [command](const std::string& k, const std::string& value) {
    if (value.empty() || value.find_first_of(" \t") != std::string::npos) {
      return Status(invalid(k + "=" + value + ": expected the path of Slurm's " + command +
                            " (or a name on PATH), no spaces"));
    }
    return Status::Ok();
  });
}

// composerd's settings, one line each: every key of composer.conf but the object lines
// (NodeName, DeviceGroup, FabricName with options), the keys shared with the job_submit plugin
// (shared_keys.h) and the plugin's own (JobSubmit*).
const Settings<Config>& settings() {
  using C = Config;
  auto sim = [](C& c) -> SimConfig& { return c.sim; };
  static const Settings<C> table = [&] {
    Settings<C> t(KeyCase::kInsensitive,
                  {
                      {"ListenAddress",
                       set::text<C>(&C::listen_address,
                                    [](const std::string& k, const std::string& value) -> Status {
                                      if (value.empty()) return invalid(k + " needs a value");
                                      if (!listen_address(value)) {
                                        return invalid(
                                            k + "=" + value +
                                            ": expected an IPv4 or IPv6 address (127.0.0.1, ::1, "
                                            "0.0.0.0) or a host name (letters, digits, '-' and "
                                            "'.')");
                                      }
                                      return Status::Ok();
                                    })},
                      {"ListenPort", set::whole<C>(&C::listen_port, 1, 65535)},
                      // composerd's working directory is nobody's business: never a file relative
                      // to it.
                      {"Database", set::absolute_path<C>(&C::database)},
                      {"StateBackend",
                       set::one_of<C>(&C::state_backend,
                                      std::vector<std::pair<std::string, std::string>>{
                                          {"sqlite", "sqlite"}, {"postgresql", "postgresql"}},
                                      "expected sqlite or postgresql")},
                      // Never quoted back: it may hold a password.
                      {"StateUrl",
                       set::text<C>(&C::state_url,
                                    [](const std::string& k, const std::string& value) -> Status {
                                      if (!value.empty()) return Status::Ok();
                                      return invalid(k +
                                                     " needs a libpq connection string, e.g. "
                                                     "StateUrl=host=db1,db2 dbname=composer "
                                                     "target_session_attrs=read-write");
                                    })},
                      {"StateUrlFile", set::absolute_path<C>(&C::state_url_file)},
                      {"AdvertiseUrl",
                       set::text<C>(
                           &C::advertise_url,
                           [](const std::string& k, const std::string& value) -> Status {
                             const bool http =
                                 value.starts_with("http://") || value.starts_with("https://");
                             if (http && value.size() > value.find("//") + 2 &&
                                 value.find_first_of(" \t\"") == std::string::npos) {
                               return Status::Ok();
                             }
                             return invalid(k + "=" + value +
                                            ": expected the URL clients reach this composerd at, "
                                            "http(s)://HOST[:PORT], e.g. "
                                            "AdvertiseUrl=http://ctl1:6830");
                           })},
                      {"LeaderLease", set::seconds<C>(&C::leader_lease_ms, 2, 300)},
                      {"StateGroup", set::name<C>(&C::state_group)},
                      {"LogFile", set::absolute_path<C>(&C::log_file)},
                      {"LogLevel",
                       [](const std::string& k, const std::string& value, C& c) -> Status {
                         if (log::parse_level(lower(value), &c.log_level)) return Status::Ok();
                         return invalid(k + "=" + value +
                                        ": expected debug, info, warning or error");
                       }},
                      {"AdminUsers", set::names<C>(&C::admin_users)},
                      {"ListenSocket",
                       set::text<C>(&C::listen_socket,
                                    [](const std::string& k, const std::string& value) -> Status {
                                      if (!value.empty() && value.front() == '/')
                                        return Status::Ok();
                                      return invalid(k + "=" + value +
                                                     ": expected an absolute path, e.g. "
                                                     "/run/composer/composerd.sock");
                                    })},
                      {"ComposeUsers", set::names<C>(&C::compose_users)},
                      {"Workloads", set::names<C>(&C::workloads)},
                      {"DomainLevels",
                       [](const std::string& k, const std::string& value, C& c) -> Status {
                         Expected<std::vector<std::string>> levels = config::name_list(k, value);
                         if (!levels) return levels.error();
                         if (levels->empty()) {
                           return invalid(k + " needs a value, e.g. DomainLevels=enclosure,power");
                         }
                         std::set<std::string> seen;
                         for (const auto& level : *levels) {
                           if (!seen.insert(level).second) {
                             return invalid(k + "=" + value + ": level '" + level +
                                            "' is given twice");
                           }
                         }
                         c.domain_levels = std::move(*levels);
                         return Status::Ok();
                       }},
                      {"MungeSocket", set::absolute_path<C>(&C::munge_socket)},
                      {"ApiThreads", set::whole<C>(&C::api_threads, 2, 4096)},
                      {"ApiMaxConnections", set::whole<C>(&C::api_max_connections, 16, 1000000)},
                      {"ApiMaxConnectionsPerPeer",
                       set::whole<C>(&C::api_max_connections_per_peer, 1, 1000000)},
                      {"ApiMaxHeaderBytes",
                       set::whole<C>(&C::api_max_header_bytes, 16384, 1 << 20)},
                      {"ApiMaxHeaders", set::whole<C>(&C::api_max_headers, 16, 10000)},
                      {"ApiMaxBodyBytes", set::whole<C>(&C::api_max_body_bytes, 65536, 1 << 28)},
                      {"ApiRequestTimeout", set::seconds<C>(&C::api_request_timeout_ms, 1, 3600)},
                      {"ApiIdleTimeout", set::seconds<C>(&C::api_idle_timeout_ms, 1, 86400)},
                      {"ComposeTimeout", set::seconds<C>(&C::compose_timeout_ms, 1, 3600)},
                      {"ReleaseTimeout", set::seconds<C>(&C::release_timeout_ms, 1, 3600)},
                      {"MaxFabricOperations", set::whole<C>(&C::max_fabric_operations, 1, 65536)},
                      {"ReconcileInterval", set::seconds<C>(&C::reconcile_interval_ms, 1, 3600)},
                      {"OrphanGrace", set::seconds<C>(&C::orphan_grace_ms, 0, 86400)},
                      {"StuckAfter", set::seconds<C>(&C::stuck_after_ms, 1, 86400)},
                      {"Durable", set::yes_no<C>(&C::durable)},
                      {"SlurmJobCheck", set::yes_no<C>(&C::slurm_job_check)},
                      {"SlurmConf", set::text<C>(&C::slurm_conf)},
                      {"SlurmSync", set::yes_no<C>(&C::slurm_sync)},
                      {"SlurmLicenses",
                       set::one_of<C>(
                           &C::slurm_remote_licenses,
                           std::vector<std::pair<std::string, bool>>{{"local", false},
                                                                     {"remote", true}},
                           "expected local (slurm.conf's licenses, held down by reservations) "
                           "or remote (slurmdbd's resources, counted by composerd)")},
                      {"SlurmLicenseServer", set::text<C>(&C::slurm_license_server, slurm_name)},
                      {"SlurmCluster", set::text<C>(&C::slurm_cluster, slurm_name)},
                      {"SlurmSacctmgr", slurm_command(&C::slurm_sacctmgr, "sacctmgr")},
                      {"SlurmScontrol", slurm_command(&C::slurm_scontrol, "scontrol")},
                      {"Fabric",
                       set::one_of<C>(
                           &C::fabric,
                           std::vector<std::pair<std::string, std::string>>{
                               {"sim", "sim"}, {"redfish", "redfish"}, {"liqid", "liqid"}},
                           "expected sim, redfish or liqid")},
                      {"FabricName",
                       set::name<C>([](C& c) -> std::string& { return c.fabric_config.name; })},
                      // The simulated fabric's (sim only).
                      {"SimLatency",
                       set::whole<C>([sim](C& c) -> int& { return sim(c).latency_ms; }, 0, 600000)},
                      {"SimSerialize",
                       set::yes_no<C>([sim](C& c) -> bool& { return sim(c).serialise; })},
                      {"SimHealthFile",
                       set::text<C>([sim](C& c) -> std::string& { return sim(c).health_file; },
                                    [](const std::string& k, const std::string& value) -> Status {
                                      if (!value.empty() && value[0] == '/') return Status::Ok();
                                      return invalid(
                                          k + "=" + value +
                                          ": expected an absolute path (the file need not "
                                          "exist yet)");
                                    })},
                      {"SimFailAttaches",
                       set::whole<C>([sim](C& c) -> uint32_t& { return sim(c).fail_attaches; }, 0,
                                     1000000)},
                      {"SimFailDetaches",
                       set::whole<C>([sim](C& c) -> uint32_t& { return sim(c).fail_detaches; }, 0,
                                     1000000)},
                  });
    t.add_all("Fabric", fabric_settings(), [](C& c) -> FabricConfig& { return c.fabric_config; });
    return t;
  }();
  return table;
}

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
    const config::Setter<FabricConfig>* setter = fabric_settings().find(key);
    if (setter == nullptr) {
      return invalid("unknown FabricName option '" + k + "' (allowed: Driver, " +
                     fabric_settings().names() + ")");
    }
    if (Status st = (*setter)(k, v, spec.config); !st) return st;
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
    const config::Setter<Config>* setter = settings().find(key);
    if (setter == nullptr) return invalid("unknown key '" + k + "'");
    // Where the fabric's settings were given, to refuse those its driver does not take once
    // the whole file is read (check_fabric, check_fabrics).
    if (key == "fabric") {
      fabric_line = line.number;
    } else if (key.starts_with("fabric")) {
      fabric_key_lines[k] = line.number;
    } else if (key.starts_with("sim")) {
      fabric_key_lines[k] = -line.number;  // sim only
    }
    return (*setter)(k, line.value(), cfg);
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
