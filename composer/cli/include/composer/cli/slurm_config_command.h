// `composerctl slurm-config`: the slurm.conf and gres.conf lines that match composerd's pool.
#pragma once

#include <json/value.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "composer/cli/output.h"
#include "composer/model/model.h"

namespace composer::cli {

// Pool licenses (fabric_gpu, fabric_mem in GiB, fabric_nvme) and per-model GPU licenses, each
// what the pool can serve now (policies::PoolSize::from_rows, model_license_sizes), and per group
// of nodes with identical attach slots the count-only GRES for them (cgpu, cmem, cnvme).
struct SlurmConfig {
  struct Nodes {
    std::vector<std::string> names;
    uint32_t gpu_slots = 0;
    uint32_t mem_slots = 0;
    uint32_t nvme_slots = 0;
  };
  uint64_t gpus = 0;
  uint64_t mem_gib = 0;
  uint64_t nvme = 0;
  // Per GPU model, its license beside fabric_gpu (policies::model_license_name): job_submit
  // adds it to the jobs that ask for the model, once Slurm has it.
  std::map<std::string, uint64_t> model_licenses;
  // composerd's SlurmLicenseServer with SlurmLicenses=remote (GET /v1/health): the pool's and
  // the models' licenses are then slurmdbd's NAME@SERVER, which composerd creates and counts,
  // so slurm.conf gets no Licenses= for them. Empty: slurm.conf's licenses.
  std::string license_server;
  std::vector<Nodes> nodes;  // ordered by slot counts
};

SlurmConfig slurm_config(const std::vector<PoolRow>& pool, const std::vector<Host>& hosts,
                         const std::string& license_server = "");

// The lines to paste once: slurm.conf's Licenses= (local licenses only), GresTypes=,
// JobSubmitPlugins=, PrologFlags=, SchedulerParameters= (with allow_zero_lic for remote
// licenses), AccountingStorageTRES= (commented for local licenses: it needs slurmdbd) and the
// nodes' Gres= (as comments, to add to their NodeName lines), then gres.conf; and what composerd
// manages at run time instead (SlurmSync=yes: the hold and blocker reservations).
std::string slurm_config_text(const SlurmConfig& config);
// One setting a row (-P): FILE, NODES (empty for a cluster-wide one), SETTING.
Table slurm_config_table(const SlurmConfig& config);
// {"licenses": {"fabric_gpu": N, "fabric_mem": GiB, "fabric_nvme": N, "fabric_gpu_h200": N,
//  ...}, "gres_types": [...],
//  "job_submit_plugins": [...], "prolog_flags", "scheduler_parameters",
//  "accounting_storage_tres", "managed_by_composerd" (text),
//  "nodes": [{"nodes": [...], "cgpu": N, "cmem": N, "cnvme": N}, ...]}
Json::Value slurm_config_to_json(const SlurmConfig& config);

}  // namespace composer::cli
