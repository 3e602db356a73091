#include "composer/cli/blast_radius_command.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "composer/common/strings.h"

namespace composer::cli {
namespace {

std::string domain_list(const std::set<FailureDomain>& domains) {
  if (domains.empty()) return "the pool has no failure domains";
  std::vector<std::string> names;
  for (const FailureDomain& d : domains) names.push_back(to_string(d));
  return "the pool's domains: " + join(names, ", ");
}

// Whole percent, rounded down, so a share below 100% never prints as 100%.
std::string percent(uint32_t part, uint32_t whole) {
  if (whole == 0) return "-";
  return std::to_string(static_cast<uint64_t>(part) * 100 / whole) + "%";
}

}  // namespace

Expected<BlastRadius> blast_radius(std::string_view target, const std::vector<Device>& devices,
                                   const std::vector<Composition>& live,
                                   const std::vector<Host>& hosts) {
  BlastRadius out;
  std::set<FailureDomain> domains;
  for (const Device& d : devices) domains.insert(d.domains.begin(), d.domains.end());
  for (const Host& h : hosts) domains.insert(h.domains.begin(), h.domains.end());

  // Which devices the target names: a device id first, then LEVEL:NAME, then a bare NAME.
  std::set<std::string> in_target;
  std::optional<FailureDomain> domain;
  if (std::any_of(devices.begin(), devices.end(),
                  [&](const Device& d) { return d.id == target; })) {
    in_target.insert(std::string(target));
    out.target = std::string(target);
  } else {
    if (auto parsed = parse_failure_domain(target); parsed && domains.contains(*parsed)) {
      domain = *parsed;
    } else if (target.find(':') == std::string_view::npos) {
      std::vector<FailureDomain> named;
      for (const FailureDomain& d : domains) {
        if (d.name == target) named.push_back(d);
      }
      if (named.size() > 1) {
        std::vector<std::string> names;
        for (const FailureDomain& d : named) names.push_back(to_string(d));
        return Error{ErrorCode::kInvalidArgument,
                     "'" + std::string(target) + "' names a domain at several levels (" +
                         join(names, ", ") + "); say which, as LEVEL:NAME"};
      }
      if (named.size() == 1) domain = named[0];
    }
    if (!domain) {
      return Error{ErrorCode::kNotFound, "'" + std::string(target) +
                                             "' is neither a device nor a failure domain; " +
                                             domain_list(domains)};
    }
    out.domain = true;
    out.target = to_string(*domain);
    for (const Device& d : devices) {
      if (d.in(*domain)) in_target.insert(d.id);
    }
    for (const Host& h : hosts) {
      const FailureDomain* mine = h.domain(domain->level);
      if (mine != nullptr && mine->name == domain->name) out.hosts.push_back(h.node);
    }
    std::sort(out.hosts.begin(), out.hosts.end());
  }
  for (const Device& d : devices) {
    if (in_target.contains(d.id)) count_device(out.counts, d);
  }

  // The jobs hit, then what every class holds and what of it the hit jobs hold.
  std::set<uint32_t> jobs_hit;
  std::set<std::string> users;
  std::set<std::string> nodes;
  for (const Composition& c : live) {
    BlastHit hit{.composition_id = c.id,
                 .job_id = c.owner.job_id,
                 .node = c.node,
                 .user = c.owner.user,
                 .account = c.owner.account,
                 .workload = c.owner.workload,
                 .state = c.state,
                 .devices = c.devices.size()};
    const bool on_host = std::binary_search(out.hosts.begin(), out.hosts.end(), c.node);
    for (const Device& d : c.devices) {
      if (on_host || in_target.contains(d.id)) hit.devices_hit.push_back(d.id);
    }
    if (hit.devices_hit.empty()) continue;
    std::sort(hit.devices_hit.begin(), hit.devices_hit.end());
    jobs_hit.insert(c.owner.job_id);
    users.insert(c.owner.user);
    nodes.insert(c.node);
    out.hits.push_back(std::move(hit));
  }
  std::sort(out.hits.begin(), out.hits.end(), [](const BlastHit& a, const BlastHit& b) {
    return std::tie(a.job_id, a.node) < std::tie(b.job_id, b.node);
  });
  std::map<std::string, ClassShare> classes;
  std::map<std::string, std::set<uint32_t>> class_jobs;
  std::map<std::string, std::set<uint32_t>> class_jobs_hit;
  for (const Composition& c : live) {
    ClassShare& share = classes[c.owner.workload];
    share.workload = c.owner.workload;
    const auto held = static_cast<uint32_t>(c.devices.size());
    share.devices += held;
    class_jobs[c.owner.workload].insert(c.owner.job_id);
    if (jobs_hit.contains(c.owner.job_id)) {
      share.devices_hit += held;
      class_jobs_hit[c.owner.workload].insert(c.owner.job_id);
    }
  }
  for (auto& [name, share] : classes) {
    share.jobs = static_cast<uint32_t>(class_jobs[name].size());
    share.jobs_hit = static_cast<uint32_t>(class_jobs_hit[name].size());
    out.classes.push_back(share);
  }
  out.users.assign(users.begin(), users.end());
  out.nodes.assign(nodes.begin(), nodes.end());
  return out;
}

Table blast_table(const BlastRadius& radius) {
  Table t({{"ID", true},
           {"JOBID", true},
           {"NODE"},
           {"USER"},
           {"ACCOUNT"},
           {"WORKLOAD"},
           {"STATE"},
           {"HIT"},
           {"DEVICES", true}});
  for (const BlastHit& h : radius.hits) {
    t.add_row({std::to_string(h.composition_id), std::to_string(h.job_id), h.node, h.user,
               h.account, h.workload, std::string(to_string(h.state)), join(h.devices_hit),
               std::to_string(h.devices)});
  }
  return t;
}

std::string blast_text(const BlastRadius& radius, const OutputOptions& options) {
  std::ostringstream out;
  const PoolRow& n = radius.counts;
  out << radius.target << ": " << (radius.domain ? "failure domain of " : "") << n.total
      << (n.total == 1 ? " device" : " devices") << " (" << n.attached << " attached, " << n.free
      << " free, " << n.drained << " drained, " << n.failed << " failed, " << n.foreign
      << " foreign)\n";
  if (!radius.hosts.empty()) out << "hosts in it: " << join(radius.hosts, ", ") << "\n";
  if (radius.hits.empty()) {
    out << "no live composition uses it"
        << (radius.drained_and_empty() ? "; drained and empty: ready for maintenance" : "") << "\n";
    return out.str();
  }
  out << "\n";
  (void)print_table(out, blast_table(radius), options);
  out << "\n";
  Table shares({{"WORKLOAD"},
                {"JOBS_HIT", true},
                {"JOBS", true},
                {"DEVICES_HIT", true},
                {"DEVICES", true},
                {"SHARE", true}});
  for (const ClassShare& c : radius.classes) {
    shares.add_row({c.workload.empty() ? "(none)" : c.workload, std::to_string(c.jobs_hit),
                    std::to_string(c.jobs), std::to_string(c.devices_hit),
                    std::to_string(c.devices), percent(c.devices_hit, c.devices)});
  }
  shares.print(out, Format::kTable, options.header);
  out << "\nusers: " << join(radius.users, ", ") << "\nnodes: " << join(radius.nodes, ", ") << "\n";
  return out.str();
}

Json::Value blast_to_json(const BlastRadius& radius) {
  Json::Value v(Json::objectValue);
  v["target"] = radius.target;
  v["kind"] = radius.domain ? "domain" : "device";
  Json::Value counts(Json::objectValue);
  const PoolRow& n = radius.counts;
  counts["total"] = n.total;
  counts["free"] = n.free;
  counts["attached"] = n.attached;
  counts["drained"] = n.drained;
  counts["failed"] = n.failed;
  counts["foreign"] = n.foreign;
  v["devices"] = std::move(counts);
  Json::Value hits(Json::arrayValue);
  for (const BlastHit& h : radius.hits) {
    Json::Value x(Json::objectValue);
    x["id"] = static_cast<Json::Int64>(h.composition_id);
    x["job_id"] = h.job_id;
    x["node"] = h.node;
    x["user"] = h.user;
    x["account"] = h.account;
    x["workload"] = h.workload;
    x["state"] = std::string(to_string(h.state));
    Json::Value ids(Json::arrayValue);
    for (const std::string& id : h.devices_hit) ids.append(id);
    x["devices_hit"] = std::move(ids);
    x["devices"] = static_cast<Json::UInt64>(h.devices);
    hits.append(std::move(x));
  }
  v["compositions"] = std::move(hits);
  Json::Value classes(Json::arrayValue);
  for (const ClassShare& c : radius.classes) {
    Json::Value x(Json::objectValue);
    x["workload"] = c.workload;
    x["jobs_hit"] = c.jobs_hit;
    x["jobs"] = c.jobs;
    x["devices_hit"] = c.devices_hit;
    x["devices"] = c.devices;
    x["share"] = c.devices == 0 ? 0.0 : static_cast<double>(c.devices_hit) / c.devices;
    classes.append(std::move(x));
  }
  v["classes"] = std::move(classes);
  Json::Value users(Json::arrayValue);
  for (const std::string& u : radius.users) users.append(u);
  v["users"] = std::move(users);
  Json::Value nodes(Json::arrayValue);
  for (const std::string& x : radius.nodes) nodes.append(x);
  v["nodes"] = std::move(nodes);
  Json::Value in_hosts(Json::arrayValue);
  for (const std::string& x : radius.hosts) in_hosts.append(x);
  v["hosts"] = std::move(in_hosts);
  v["drained_and_empty"] = radius.drained_and_empty();
  return v;
}

}  // namespace composer::cli
