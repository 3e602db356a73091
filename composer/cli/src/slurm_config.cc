#include "slurm_config.h"

#include <cstring>
#include <map>
#include <sstream>
#include <utility>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/policies/policy.h"

namespace composer::cli {
namespace {

constexpr const char* kGresTypes[] = {"cgpu", "cnvme"};
constexpr char kJobSubmitPlugin[] = "composer";

std::string licenses(const SlurmConfig& c) {
  return "fabric_gpu:" + std::to_string(c.gpus) + ",fabric_mem:" + std::to_string(c.mem_gib) +
         ",fabric_nvme:" + std::to_string(c.nvme);
}
constexpr char kPrologFlags[] = "PrologFlags=Alloc";
constexpr char kSchedulerParameters[] = "SchedulerParameters=bf_licenses";
constexpr char kTres[] =
    "AccountingStorageTRES=license/fabric_gpu,license/fabric_mem,license/fabric_nvme,"
    "gres/cgpu,gres/cnvme";
// What composerd keeps in step at run time (SlurmSync=yes), never written to slurm.conf.
constexpr char kManaged[] =
    "reservations hold_fabric_gpu, hold_fabric_mem, hold_fabric_nvme (what the pool cannot "
    "serve) and the policy's blocker and cap holds (composerctl policy apply)";
std::string gres_types() { return std::string(kGresTypes[0]) + "," + kGresTypes[1]; }
std::string node_gres(const SlurmConfig::Nodes& n) {
  return "Gres=cgpu:" + std::to_string(n.gpu_slots) + ",cnvme:" + std::to_string(n.nvme_slots);
}
std::string gres_conf(const char* name, uint32_t count) {
  return std::string("Name=") + name + " Count=" + std::to_string(count);
}

}  // namespace

SlurmConfig slurm_config(const std::vector<PoolRow>& pool, const std::vector<Host>& hosts) {
  SlurmConfig c;
  const auto size = policies::PoolSize::from_rows(pool);
  c.gpus = size.gpus;
  c.nvme = size.nvme;
  c.mem_gib = size.mem_gib;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>> by_slots;
  for (const auto& h : hosts) by_slots[{h.gpu_slots, h.nvme_slots}].push_back(h.node);
  for (auto& [slots, nodes] : by_slots) {
    c.nodes.push_back({std::move(nodes), slots.first, slots.second});
  }
  return c;
}

std::string slurm_config_text(const SlurmConfig& c) {
  std::ostringstream out;
  out << "# slurm.conf: the pool as cluster-wide licenses (fabric_mem in GiB), and a count-only\n"
      << "# GRES per node for its attach slots. job_submit/composer requests both for each job.\n"
      << "Licenses=" << licenses(c) << "\n"
      << "GresTypes=" << gres_types() << "\n"
      << "JobSubmitPlugins=" << kJobSubmitPlugin << "\n"
      << "# the prolog composes at allocation; backfill plans big license requests:\n"
      << kPrologFlags << "\n"
      << kSchedulerParameters << "\n"
      << "# with slurmdbd, to see licenses and GRES in sacct:\n"
      << "#" << kTres << "\n"
      << "# composer-slurmctld composes each job before it launches and releases it at the end\n"
      << "# (the plugin's default, compose=controller; with compose=node leave both out):\n"
      << "PrologSlurmctld=/usr/sbin/composer-slurmctld\n"
      << "EpilogSlurmctld=/usr/sbin/composer-slurmctld\n"
      << "# composerd manages at run time (SlurmSync=yes), not in slurm.conf: " << kManaged << ".\n"
      << "# add to the NodeName lines:\n";
  for (const auto& n : c.nodes) {
    out << "#   NodeName=" << join(n.names) << " ... " << node_gres(n) << "\n";
  }
  out << "\n# gres.conf\n";
  for (const auto& n : c.nodes) {
    out << "NodeName=" << join(n.names) << " " << gres_conf("cgpu", n.gpu_slots) << "\n";
    out << "NodeName=" << join(n.names) << " " << gres_conf("cnvme", n.nvme_slots) << "\n";
  }
  return out.str();
}

Table slurm_config_table(const SlurmConfig& c) {
  Table t({{"FILE"}, {"NODES"}, {"SETTING"}});
  t.add_row({"slurm.conf", "", "Licenses=" + licenses(c)});
  t.add_row({"slurm.conf", "", "GresTypes=" + gres_types()});
  t.add_row({"slurm.conf", "", std::string("JobSubmitPlugins=") + kJobSubmitPlugin});
  for (const auto& n : c.nodes) t.add_row({"slurm.conf", join(n.names), node_gres(n)});
  for (const auto& n : c.nodes) {
    t.add_row({"gres.conf", join(n.names), gres_conf("cgpu", n.gpu_slots)});
    t.add_row({"gres.conf", join(n.names), gres_conf("cnvme", n.nvme_slots)});
  }
  t.add_row({"slurm.conf", "", kPrologFlags});
  t.add_row({"slurm.conf", "", kSchedulerParameters});
  t.add_row({"slurm.conf", "", kTres});
  t.add_row({"composerd", "", kManaged});
  return t;
}

Json::Value slurm_config_to_json(const SlurmConfig& c) {
  Json::Value v(Json::objectValue);
  v["licenses"]["fabric_gpu"] = Json::UInt64(c.gpus);
  v["licenses"]["fabric_mem"] = Json::UInt64(c.mem_gib);
  v["licenses"]["fabric_nvme"] = Json::UInt64(c.nvme);
  v["gres_types"] = Json::Value(Json::arrayValue);
  for (const char* g : kGresTypes) v["gres_types"].append(g);
  v["job_submit_plugins"] = Json::Value(Json::arrayValue);
  v["job_submit_plugins"].append(kJobSubmitPlugin);
  v["prolog_flags"] = std::string(kPrologFlags).substr(std::strlen("PrologFlags="));
  v["scheduler_parameters"] =
      std::string(kSchedulerParameters).substr(std::strlen("SchedulerParameters="));
  v["accounting_storage_tres"] = std::string(kTres).substr(std::strlen("AccountingStorageTRES="));
  v["managed_by_composerd"] = kManaged;
  v["nodes"] = Json::Value(Json::arrayValue);
  for (const auto& n : c.nodes) {
    Json::Value group(Json::objectValue);
    group["nodes"] = Json::Value(Json::arrayValue);
    for (const auto& name : n.names) group["nodes"].append(name);
    group["cgpu"] = n.gpu_slots;
    group["cnvme"] = n.nvme_slots;
    v["nodes"].append(std::move(group));
  }
  return v;
}

}  // namespace composer::cli
