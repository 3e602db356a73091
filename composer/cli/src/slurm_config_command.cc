#include "composer/cli/slurm_config_command.h"

#include <cstring>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/policies/policy.h"

namespace composer::cli {
namespace {

constexpr const char* kGresTypes[] = {"cgpu", "cmem", "cnvme"};
constexpr char kJobSubmitPlugin[] = "composer";

// The licenses in the order slurm.conf gets them: the pool's, then one per GPU model, as
// Slurm names them (NAME@SERVER where they are remote).
std::vector<std::pair<std::string, uint64_t>> license_counts(const SlurmConfig& c) {
  std::vector<std::pair<std::string, uint64_t>> out = {
      {"fabric_gpu", c.gpus}, {"fabric_mem", c.mem_gib}, {"fabric_nvme", c.nvme}};
  for (const auto& [name, n] : c.model_licenses) out.emplace_back(name, n);
  if (!c.license_server.empty()) {
    for (auto& [name, n] : out) name = policies::remote_license_name(name, c.license_server);
  }
  return out;
}
bool remote(const SlurmConfig& c) { return !c.license_server.empty(); }
std::string licenses(const SlurmConfig& c) {
  std::string out;
  for (const auto& [name, n] : license_counts(c)) {
    out += (out.empty() ? "" : ",") + name + ":" + std::to_string(n);
  }
  return out;
}
constexpr char kPrologFlags[] = "PrologFlags=Alloc";
// Remote licenses: a job asking for more than a count that shrank must wait, not be refused.
std::string scheduler_parameters(const SlurmConfig& c) {
  return std::string("SchedulerParameters=bf_licenses") + (remote(c) ? ",allow_zero_lic" : "");
}
std::string tres(const SlurmConfig& c) {
  std::string out;
  for (const auto& [name, n] : license_counts(c)) out += "license/" + name + ",";
  return out + "gres/cgpu,gres/cmem,gres/cnvme";
}
// What composerd keeps in step at run time (SlurmSync=yes), never written to slurm.conf.
std::string managed(const SlurmConfig& c) {
  std::string names;
  for (const auto& [name, n] : license_counts(c)) {
    names +=
        std::string(names.empty() ? "" : ", ") + (remote(c) ? name : policies::hold_name(name));
  }
  if (remote(c)) {
    return "slurmdbd's remote licenses " + names +
           " (created and counted to what the pool can serve: SlurmLicenses=remote) and the "
           "policy's blocker and cap holds (composerctl policy apply)";
  }
  return "reservations " + names +
         " (what the pool cannot serve) and the policy's blocker and cap holds (composerctl "
         "policy apply)";
}
std::string gres_types() {
  std::string out;
  for (const char* g : kGresTypes) out += (out.empty() ? "" : ",") + std::string(g);
  return out;
}
std::string node_gres(const SlurmConfig::Nodes& n) {
  return "Gres=cgpu:" + std::to_string(n.gpu_slots) + ",cmem:" + std::to_string(n.mem_slots) +
         ",cnvme:" + std::to_string(n.nvme_slots);
}
std::string gres_conf(const char* name, uint32_t count) {
  return std::string("Name=") + name + " Count=" + std::to_string(count);
}

}  // namespace

SlurmConfig slurm_config(const std::vector<PoolRow>& pool, const std::vector<Host>& hosts,
                         const std::string& license_server) {
  SlurmConfig c;
  c.license_server = license_server;
  const auto size = policies::PoolSize::from_rows(pool);
  c.gpus = size.gpus;
  c.nvme = size.nvme;
  c.mem_gib = size.mem_gib;
  c.model_licenses = policies::model_license_sizes(pool);
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::vector<std::string>> by_slots;
  for (const auto& h : hosts) {
    by_slots[{h.gpu_slots, h.mem_slots, h.nvme_slots}].push_back(h.node);
  }
  for (auto& [slots, nodes] : by_slots) {
    const auto [gpu, mem, nvme] = slots;
    c.nodes.push_back({std::move(nodes), gpu, mem, nvme});
  }
  return c;
}

std::string slurm_config_text(const SlurmConfig& c) {
  std::ostringstream out;
  if (remote(c)) {
    out << "# slurm.conf: the pool as cluster-wide licenses (fabric_mem in GiB, charged in whole\n"
        << "# blocks) are slurmdbd's\n"
        << "# remote licenses, which composerd creates and counts (SlurmLicenses=remote):\n"
        << "# " << licenses(c) << " now; no Licenses= line for them. A count-only\n"
        << "# GRES per node for its attach slots. job_submit/composer requests both for each "
           "job.\n";
  } else {
    out << "# slurm.conf: the pool as cluster-wide licenses (fabric_mem in GiB, charged in whole\n"
        << "# blocks), and a count-only GRES per node for its attach slots. job_submit/composer\n"
        << "# requests both for each job.\n"
        << "Licenses=" << licenses(c) << "\n";
  }
  out << "GresTypes=" << gres_types() << "\n"
      << "JobSubmitPlugins=" << kJobSubmitPlugin << "\n"
      << "# the prolog composes at allocation; backfill plans big license requests:\n"
      << kPrologFlags << "\n"
      << scheduler_parameters(c) << "\n"
      << "# with slurmdbd, to see licenses and GRES in sacct:\n"
      << (remote(c) ? "" : "#") << "AccountingStorageTRES=" << tres(c) << "\n"
      << "# composer-slurmctld composes each job before it launches and, at its end, releases\n"
      << "# the nodes that ran no epilog (the plugin's default, compose=controller; with\n"
      << "# compose=node leave both out):\n"
      << "PrologSlurmctld=/usr/sbin/composer-slurmctld\n"
      << "EpilogSlurmctld=/usr/sbin/composer-slurmctld\n"
      << "# composerd manages at run time (SlurmSync=yes), not in slurm.conf: " << managed(c)
      << ".\n"
      << "# add to the NodeName lines:\n";
  for (const auto& n : c.nodes) {
    out << "#   NodeName=" << join(n.names) << " ... " << node_gres(n) << "\n";
  }
  out << "\n# gres.conf\n";
  for (const auto& n : c.nodes) {
    out << "NodeName=" << join(n.names) << " " << gres_conf("cgpu", n.gpu_slots) << "\n";
    out << "NodeName=" << join(n.names) << " " << gres_conf("cmem", n.mem_slots) << "\n";
    out << "NodeName=" << join(n.names) << " " << gres_conf("cnvme", n.nvme_slots) << "\n";
  }
  return out.str();
}

Table slurm_config_table(const SlurmConfig& c) {
  Table t({{"FILE"}, {"NODES"}, {"SETTING"}});
  if (!remote(c)) t.add_row({"slurm.conf", "", "Licenses=" + licenses(c)});
  t.add_row({"slurm.conf", "", "GresTypes=" + gres_types()});
  t.add_row({"slurm.conf", "", std::string("JobSubmitPlugins=") + kJobSubmitPlugin});
  for (const auto& n : c.nodes) t.add_row({"slurm.conf", join(n.names), node_gres(n)});
  for (const auto& n : c.nodes) {
    t.add_row({"gres.conf", join(n.names), gres_conf("cgpu", n.gpu_slots)});
    t.add_row({"gres.conf", join(n.names), gres_conf("cmem", n.mem_slots)});
    t.add_row({"gres.conf", join(n.names), gres_conf("cnvme", n.nvme_slots)});
  }
  t.add_row({"slurm.conf", "", kPrologFlags});
  t.add_row({"slurm.conf", "", scheduler_parameters(c)});
  t.add_row({"slurm.conf", "", "AccountingStorageTRES=" + tres(c)});
  t.add_row({"composerd", "", managed(c)});
  return t;
}

Json::Value slurm_config_to_json(const SlurmConfig& c) {
  Json::Value v(Json::objectValue);
  v["licenses"] = Json::Value(Json::objectValue);
  for (const auto& [name, n] : license_counts(c)) v["licenses"][name] = Json::UInt64(n);
  v["gres_types"] = Json::Value(Json::arrayValue);
  for (const char* g : kGresTypes) v["gres_types"].append(g);
  v["job_submit_plugins"] = Json::Value(Json::arrayValue);
  v["job_submit_plugins"].append(kJobSubmitPlugin);
  v["prolog_flags"] = std::string(kPrologFlags).substr(std::strlen("PrologFlags="));
  v["license_server"] = c.license_server;
  v["scheduler_parameters"] = scheduler_parameters(c).substr(std::strlen("SchedulerParameters="));
  v["accounting_storage_tres"] = tres(c);
  v["managed_by_composerd"] = managed(c);
  v["nodes"] = Json::Value(Json::arrayValue);
  for (const auto& n : c.nodes) {
    Json::Value group(Json::objectValue);
    group["nodes"] = Json::Value(Json::arrayValue);
    for (const auto& name : n.names) group["nodes"].append(name);
    group["cgpu"] = n.gpu_slots;
    group["cmem"] = n.mem_slots;
    group["cnvme"] = n.nvme_slots;
    v["nodes"].append(std::move(group));
  }
  return v;
}

}  // namespace composer::cli
