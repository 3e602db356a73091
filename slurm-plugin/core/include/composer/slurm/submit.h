// What job_submit/composer does to a submitted job, free of Slurm: validate the composer
// options again, check them against the pool snapshot, and translate them into Slurm-native
// requests so that Slurm's scheduler holds the job until the pool can serve it:
//   licenses (cluster-wide, count = per-node amount x nodes)
//     fabric_gpu:<gpus x nodes>, fabric_mem:<GiB of the whole blocks one node takes x nodes>
//     (policies::mem_charge, with the snapshot's block size: a 1G request on a pool of 64G
//     blocks holds 64), fabric_nvme:<n x nodes>,
//     for --compose-gpus=MODEL:N also the model's license (fabric_gpu_<model>) where the
//     snapshot lists it (Slurm has it and composerd keeps it in step), plus the cap licenses
//     of the job's workload class from the snapshot; the pool's and the models' licenses are
//     written NAME@SERVER where the snapshot names a license server (remote licenses);
//   GRES per node (attach slots): gres/cgpu:<gpus>, gres/cmem:<blocks>, gres/cnvme:<n>
//     (gres:cgpu:<gpus> before Slurm 23.11: SubmittedJob::gres_prefix, which the glue sets).
//     A memory request takes ceil(size / block) blocks, one attach slot each; where the pool's
//     blocks differ in size the block is the largest, so Slurm counts the fewest blocks the
//     request can take and composerd checks exactly at compose time;
//   admin comment: "composer: gpus=A100:2 mem=64G nvme=1 workload=training nodes=2";
//   excluded nodes, on a pool whose nodes reach different zones, when the snapshot shows a
//   node's zones unable to serve the job while enough other nodes can (SubmitChanges::exc_nodes).
// The workload class is --workload's; without it, while composerd enforces a policy, the
// class the policy's rules give (partition, QOS, account, DefaultClass: policies/classify.h,
// the same function composerd uses), which is then also written into the job's SPANK
// environment as if given with --workload, so that the prolog tells composerd the same class.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "composer/api/snapshot.h"
#include "composer/common/error.h"
#include "composer/slurm/options.h"

namespace composer::slurm {

// Pool licenses are named by policies::pool_license_name ("fabric_gpu", ...).
inline constexpr const char* kGpuGres = "cgpu";
inline constexpr const char* kMemGres = "cmem";
inline constexpr const char* kNvmeGres = "cnvme";

// The fields of job_desc_msg_t that matter here (nullopt for Slurm's NO_VAL).
struct SubmittedJob {
  std::vector<std::string> spank_env;
  std::optional<uint32_t> min_nodes;
  std::optional<uint32_t> max_nodes;
  std::optional<uint32_t> num_tasks;        // -n (sbatch also fills it from --ntasks-per-node)
  std::optional<uint32_t> ntasks_per_node;  // --ntasks-per-node
  std::optional<uint32_t> het_job_offset;   // set for every component of a heterogeneous job
  std::string licenses;
  std::string tres_per_node;
  // The other TRES requests, only checked: a GRES of ours may not hide in them either.
  std::string tres_per_job;
  std::string tres_per_socket;
  std::string tres_per_task;
  std::string admin_comment;
  std::string reservation;
  std::string partition;  // as submitted: may be a comma-separated list; empty: not given
  std::string qos;
  std::string account;
  std::optional<int64_t> time_limit_s;  // nullopt: not given (NO_VAL) or unlimited (INFINITE)
  std::string req_nodes;                // -w / --nodelist as submitted; empty: not given
  std::string exc_nodes;                // -x / --exclude as submitted; empty: not given
  // How the running Slurm writes a GRES in tres_per_*: "gres/" since 23.11 (slurmctld converts
  // older clients' "gres:" while unpacking, before job_submit, and refuses "gres:" written by a
  // plugin), "gres:" before. Only what the plugin writes uses it; every spelling is recognised.
  std::string gres_prefix = "gres/";
};

// New values for the job's fields; `composes` false means leave the job alone.
struct SubmitChanges {
  bool composes = false;
  JobOptions options;
  // The node count the licenses are priced on. The glue pins the job to it (min_nodes =
  // max_nodes = nodes), so that Slurm never gives the job more nodes than it was priced for.
  uint32_t nodes = 1;
  std::string licenses;
  std::string tres_per_node;
  std::string admin_comment;
  // The job's workload class (empty: none) and what chose it ("--workload=training",
  // "partition infer", "DefaultClass").
  std::string workload;
  std::string workload_reason;
  // Entries to append to the job's SPANK environment (the class the rules chose).
  std::vector<std::string> spank_env_add;
  // Zones in the scheduler: the nodes whose zones cannot serve the job now while enough
  // others can (api::nodes_out_of_reach), comma-separated, for the job's excluded nodes.
  // Empty: leave them; always so for a job that names its nodes (-w) or excludes some (-x).
  std::string exc_nodes;
};

// Why a job was refused, in Slurm's terms: the glue answers each with the Slurm error code
// that names it (slurm-plugin/README.md, "Refusals"), so that the client's second line
// ("Batch job submission failed: ...") does not name a wrong cause.
enum class Refusal {
  kBadRequest,   // a --compose-* value that does not parse (kInvalidArgument)
  kBadWorkload,  // --workload: not a class name, or no such class (kInvalidArgument, kInsufficient)
  kLicenses,     // -L names a pool or cap license, or offers alternatives ('|') to a composed job
  kGres,         // --gres or --tres-per-* names a GRES of ours
  kNodeCount,    // a composed job whose node count is not fixed (-N MIN-MAX, -n without -N)
  kHetJob,       // a composed heterogeneous job
  kPool,         // more than the pool holds or a host can attach; no GPU of that model
  kPolicy,       // over a workload class's caps or their stretches; no class rule matches
  kReservation,  // a blocker reservation
  kNoSnapshot,   // no usable snapshot while JobSubmitSnapshotMissing=refuse (kUnavailable)
};

// `snapshot` null: no usable snapshot; `snapshot_problem` says why. With
// refuse_without_snapshot the job is then refused (kUnavailable), else accepted after the
// syntax checks. Refusals are kInvalidArgument (bad syntax, a license or GRES of ours given by
// hand, a job no class rule matches while the policy has no DefaultClass) or kInsufficient
// (can never run: larger than the pool or a host's attach slots, unknown GPU model or workload
// class, over a class's highest cap, more than the class's lowest cap for longer than the
// longest stretch in which it may hold that much, a blocker reservation), each with a sentence
// for the user starting with "composer: ", and (when `refusal` is not null) its kind in
// `*refusal`. A count or size of zero (--compose-gpus=0, --compose-mem=0) asks for nothing.
Expected<SubmitChanges> review_submission(const SubmittedJob& job,
                                          const api::PoolSnapshot* snapshot,
                                          const std::string& snapshot_problem,
                                          bool refuse_without_snapshot, Refusal* refusal = nullptr);

}  // namespace composer::slurm
