// The pool snapshot: what composerd publishes to a file so that slurmctld's job_submit plugin
// can refuse impossible requests without a network call. Written with write_snapshot (atomic
// rename), read with read_snapshot. The reader ignores fields it does not know, so composerd
// may add some without breaking older plugins; `version` changes only for incompatible ones.
//
// {"version": 1, "generated_ms": 1700000000000,
//  "pools": {"gpu":  {"total": 8, "models": {"A100-80G": 6, "H100": 2}, "max_node_slots": 4},
//            "mem":  {"total": 4, "total_bytes": 549755813888,
//                     "largest_bytes": 137438953472, "max_node_slots": 2},
//            "nvme": {"total": 4, "total_bytes": 0, "max_node_slots": 2}},
//  "workload_classes": [{"name": "training",
//                        "cap_licenses": {"gpu": "training_gpu_cap"},
//                        "max": {"gpu": 16},
//                        "partitions": ["train"], "qos": [], "accounts": ["ml"],
//                        "min": {"gpu": 2},
//                        "stretches": {"gpu": [{"cap": 16, "seconds": 43200}]}}],
//  "policy_id": 3, "default_class": "training",
//  "blocker_reservations": ["day_block_inference"],
//  "model_licenses": ["fabric_gpu_h100"], "license_server": "",
//  "zones": {"z1": {"gpus": 0, "gpu_models": {}, "mem_bytes": 0, "nvme": 2}, "z2": {...}},
//  "node_zones": {"cn1": ["z1"], "cn2": ["z2"]}}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <json/value.h>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::api {

inline constexpr int kSnapshotVersion = 1;

// What the pool holds of one pooled type, for PoolSnapshot. Counts include drained and failed
// devices (they come back when resumed or repaired; meanwhile Slurm's licenses hold jobs back), not
// foreign ones (held outside composerd): the most the pool could ever serve, what job_submit
// refuses beyond.
struct TypeCapacity {
  uint32_t total = 0;        // devices
  uint64_t total_bytes = 0;  // memory/NVMe capacity; 0 for GPUs
  // The biggest single device (policies::largest_device_bytes). For memory, the block size
  // job_submit charges a job in: whole blocks per node (policies::mem_charge).
  uint64_t largest_bytes = 0;
  std::map<std::string, uint32_t> models;  // model -> devices (GPUs; optional for others)
  uint32_t max_node_slots = 0;             // the most devices of this type any one host may attach
  // Per failure-domain level: how many domains of it hold devices of this type.
  std::map<std::string, uint32_t> domains;

  bool operator==(const TypeCapacity&) const = default;
};

struct CapStretch {
  uint64_t cap = 0;
  int64_t seconds = 0;
  bool operator==(const CapStretch&) const = default;
};

struct WorkloadClass {
  std::string name;
  // Per pooled type ("gpu", "mem", "nvme"): the cap license jobs of this class also request.
  std::map<std::string, std::string> cap_licenses;
  // Per pooled type: the highest cap over all windows (GPUs and drives as counts, memory in
  // GiB, the unit of the fabric_mem license). A type missing here is not capped.
  std::map<std::string, uint64_t> max;
  // Which jobs without --workload fall into this class (policies/README.md,
  // "Classification"): those whose partition, QOS or account is listed here.
  std::vector<std::string> partitions;
  std::vector<std::string> qos;
  std::vector<std::string> accounts;
  // Per capped type whose cap changes over the week: the lowest cap (same unit as `max`) ...
  std::map<std::string, uint64_t> min;
  // ... and, for each higher cap, the longest stretch of wall-clock time (seconds, across
  // window boundaries) in which the class may hold at least that much; ascending by cap. A job
  // asking for more than `min` whose time limit is longer than the stretch of the smallest cap
  // that holds its amount can never start.
  std::map<std::string, std::vector<CapStretch>> stretches;
  // The class's placement rule (the policy's Placement line), by its parts: "spread" or
  // "avoid-shared"; empty for pack, the default.
  std::string placement;
  std::string placement_level;
  uint32_t placement_count = 0;  // spread: at least this many domains
  std::string placement_type;    // spread: only this type ("gpu", "mem", "nvme"); empty: each
  // The class's MemPolicy line: its default memory policy (empty: preferred), the kinds a job
  // may ask for (empty: every one) and the line, for job_submit's refusal; line 0: none.
  std::string mem_policy_default;
  std::vector<std::string> mem_policy_allow;
  int mem_policy_line = 0;

  bool operator==(const WorkloadClass&) const = default;
};

// What one zone has free now (allocatable devices: not attached, drained, failed or foreign).
struct ZoneFree {
  uint32_t gpus = 0;
  std::map<std::string, uint32_t> gpu_models;
  uint64_t mem_bytes = 0;
  uint32_t nvme = 0;
  bool operator==(const ZoneFree&) const = default;
};

struct PoolSnapshot {
  int version = kSnapshotVersion;
  int64_t generated_ms = 0;
  TypeCapacity gpu;
  TypeCapacity mem;
  TypeCapacity nvme;
  std::vector<WorkloadClass> workload_classes;  // empty: any class name is accepted
  // The policy version in force; 0 when composerd enforces none (the classes then come from
  // composer.conf's Workloads= and carry no rules, and jobs are not classified).
  int64_t policy_id = 0;
  // The class of a job that --workload, partition, QOS and account leave unclassified; empty:
  // such a job is refused while a policy is in force.
  std::string default_class;
  std::vector<std::string> blocker_reservations;  // no job may be submitted into these
  // The per-model GPU licenses (policies::model_license_name) that Slurm has and composerd
  // keeps in step (SlurmSync): job_submit adds the one of a job's model beside fabric_gpu.
  // Empty without SlurmSync, or where slurm.conf lacks them: fabric_gpu alone then.
  std::vector<std::string> model_licenses;
  // With composer.conf's SlurmLicenses=remote, the server of the pool's and the models'
  // licenses: Slurm names them fabric_gpu@SERVER, and job_submit asks for them so. Empty:
  // slurm.conf's licenses, by their plain names.
  std::string license_server;
  // Zones in the scheduler (docs/ADMIN.md "Zones"): what each zone has free and the zones each
  // node reaches, only where the nodes do not all reach the same zones (empty otherwise:
  // every node is as good as another, and the pool's licenses say all).
  std::map<std::string, ZoneFree> zones;
  std::map<std::string, std::vector<std::string>> node_zones;

  const TypeCapacity& pool(DeviceType t) const;
  TypeCapacity& pool(DeviceType t);
  const WorkloadClass* workload_class(std::string_view name) const;
  bool operator==(const PoolSnapshot&) const = default;
};

// Builds a snapshot from the pool summary and the hosts (what composerd has in memory).
PoolSnapshot make_snapshot(const std::vector<PoolRow>& rows, const std::vector<Host>& hosts,
                           int64_t now_ms);

// The nodes a job asking `request` on each of `nodes` nodes had better not start on: those
// whose zones together have less free than one node's request, by the snapshot's zones.
// Empty (no advice) without zones, or when fewer than `nodes` nodes could serve it: Slurm's
// licenses hold such a job, and excluding every node would make Slurm refuse it for good.
// Sorted. SnapshotTest.NodesOutOfReach*.
std::vector<std::string> nodes_out_of_reach(const PoolSnapshot& snapshot, const Request& request,
                                            uint32_t nodes);

Json::Value to_json(const PoolSnapshot& snapshot);
// Strict about the types of the fields it knows; a sentence names the field that is wrong.
Expected<PoolSnapshot> snapshot_from_json(const Json::Value& json);

// kNotFound when the file does not exist, kInvalidArgument when it does not parse.
Expected<PoolSnapshot> read_snapshot(const std::string& path);
// Writes <path>.tmp.<pid>, fsyncs it and renames it over `path`: a reader sees the old
// snapshot or the new one, never half of one. The file is world-readable (0644).
Status write_snapshot(const std::string& path, const PoolSnapshot& snapshot);

}  // namespace composer::api
