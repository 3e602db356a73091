// A parsed policy: time windows, workload classes and per-window caps. Plain values; the
// grammar is in policies/README.md and the parser in parser.h.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/model/model.h"
#include "composer/policies/time_zone.h"

namespace composer::policies {

// The reserved window name for the times no named window covers.
inline constexpr std::string_view kDefaultWindow = "Default";

// Days of the week as a bit set: bit 0 is Monday ... bit 6 is Sunday.
using DaySet = uint8_t;
inline constexpr DaySet kAllDays = 0x7f;
inline constexpr DaySet kMonToFri = 0x1f;
inline constexpr DaySet kSatSun = 0x60;
// "Mon", ..., "Sun" for 0..6.
std::string_view day_name(int weekday);
// "Mon-Fri", "Sat,Sun", "Mon,Wed-Fri", "every day".
std::string format_days(DaySet days);

// A recurring period: on each listed day, from Start to End local time. End <= Start means
// the period ends on the following day (it crosses midnight).
struct Window {
  std::string name;
  DaySet days = kAllDays;
  int start_min = 0;  // minutes after local midnight, 0..1439
  int end_min = 0;    // 1..1440
  int line = 0;

  bool crosses_midnight() const { return end_min <= start_min; }
  // Length on a day without a clock change, in minutes.
  int nominal_minutes() const {
    return crosses_midnight() ? end_min + 1440 - start_min : end_min - start_min;
  }
};

struct WorkloadClass {
  std::string name;
  std::vector<std::string> partitions;
  std::vector<std::string> qos;
  std::vector<std::string> accounts;
  int line = 0;
};

// One cap on one pooled type: a count (GPUs, NVMe drives, GiB of memory) or a share of the
// pool in basis points (1% = 100).
struct CapSpec {
  enum class Kind { kCount, kShare };
  Kind kind = Kind::kCount;
  uint64_t value = 0;
  bool operator==(const CapSpec&) const = default;
  // "75%", "12.5%", "4", "512G"
  std::string to_string(DeviceType type) const;
};

inline size_t type_index(DeviceType t) { return static_cast<size_t>(t); }

struct Limit {
  std::string class_name;
  std::string window;                          // a window's name or kDefaultWindow
  std::array<std::optional<CapSpec>, 3> caps;  // by type_index(); empty: not capped
  int line = 0;
};

// The pool's size per type: what the shares refer to and the caps are checked against.
// Memory in whole GiB, the unit of the fabric_mem license.
struct PoolSize {
  uint64_t gpus = 0;
  uint64_t mem_gib = 0;
  uint64_t nvme = 0;
  // The block size memory is handed out in (largest_device_bytes); 0: unknown, or no memory.
  uint64_t mem_block_bytes = 0;
  uint64_t size(DeviceType t) const;
  // Sums what the rows may schedule (model.h's schedulable(): not failed, drained or
  // foreign; memory: schedulable_bytes, rounded down to GiB). The one pool total.
  static PoolSize from_rows(const std::vector<PoolRow>& rows);
};

// The size of one device of type `t` among the rows' devices not held outside composerd, the
// largest where they differ (a row groups devices of one model and zone, whose sizes are alike,
// so its mean is one device's size); 0 when there is none. For memory this is the block size
// Slurm's licenses and GRES count in (mem_charge): the snapshot's largest_bytes and
// PoolSize::mem_block_bytes.
uint64_t largest_device_bytes(const std::vector<PoolRow>& rows, DeviceType t);

// What one node's memory request holds of the pool as Slurm counts it: the pool hands memory
// out in whole blocks, so a request takes blocks = ceil(mem_bytes / block_bytes) attach slots
// (the cmem GRES) and those blocks' size, in whole GiB, of the fabric_mem license and a
// class's memory cap (gib). A block size of 0 (unknown, or no memory in the pool) counts the
// request itself: one block, its size rounded up to GiB. The one rule for job_submit's
// licenses and GRES and composerd's cap check (docs/ADMIN.md, "How Slurm counts memory").
struct MemCharge {
  uint64_t blocks = 0;
  uint64_t gib = 0;
  bool operator==(const MemCharge&) const = default;
};
MemCharge mem_charge(uint64_t mem_bytes, uint64_t block_bytes);

// How a workload class's jobs are placed over failure domains (Placement lines):
//   pack                 as few domains as the zones allow: the allocator's zone preference
//                        (the default)
//   spread LEVEL N       a job's devices of each type asked (of `type` only, when set) over at
//                        least N domains of LEVEL; devices in no domain of LEVEL are not used
//   avoid-shared LEVEL   the class's jobs never share a domain of LEVEL with another class's
//                        job, either way round; devices in no domain of LEVEL are not used
struct PlacementRule {
  enum class Kind { kPack, kSpread, kAvoidShared };
  Kind kind = Kind::kPack;
  std::string level;
  uint32_t count = 0;              // spread: at least this many domains
  std::optional<DeviceType> type;  // spread: only this type; nullopt: each type asked
  bool operator==(const PlacementRule&) const = default;
  // "pack", "spread appliance 2", "spread appliance 2 mem", "avoid-shared enclosure".
  std::string to_string() const;
};
// A rule's kind as the policy file (Rule=) and the snapshot spell it: "pack", "spread",
// "avoid-shared"; parse_placement_kind reads them in any case, nullopt for anything else.
std::string_view to_string(PlacementRule::Kind kind);
std::optional<PlacementRule::Kind> parse_placement_kind(std::string_view s);

// "placement rule 'spread enclosure 2' of class training": how every refusal names a rule.
std::string rule_sentence(const PlacementRule& rule, std::string_view class_name);

// Where a request would be placed, for the sentences below: "node n1 reaches" and "node n1
// has" for one node; "the pool holds" and "no node has more than" for the whole pool.
struct PlacementPlace {
  std::string reaches;
  std::string has;
};
// Why a job asking `asked` devices of type `t` per node (memory: any amount takes a block per
// domain, so the attach slots count, not the bytes) can never be placed under `rule` of class
// `class_name`, where the place has `domains` domains of the rule's level holding that type
// (whatever their state) and `mem_slots` memory attach slots; empty when it can be. The one
// rule for composerd's compose-time check and job_submit's refusal.
std::string placement_never(const PlacementRule& rule, std::string_view class_name, DeviceType t,
                            uint64_t asked, size_t domains, uint32_t mem_slots,
                            const PlacementPlace& place);

struct Placement {
  std::string class_name;
  PlacementRule rule;
  int line = 0;
};

// What composerd does to a running job of a class when a device of its composition fails
// (the fabric reports it critical, or lost its attachment): OnFailure lines.
//   notify   the job keeps running; a ledger event, the metrics and a message to the job
//            (scontrol notify) say it is degraded (the default)
//   requeue  composerd requeues the job through Slurm: its epilog releases the healthy
//            devices and it composes again, away from the failed ones, when it restarts; at
//            most max_requeues times per job (a flapping device), then notify
//   none     only the ledger event
struct FailureReaction {
  enum class Action { kNotify, kRequeue, kNone };
  static constexpr uint32_t kDefaultMaxRequeues = 3;
  static constexpr uint32_t kMostMaxRequeues = 100;
  std::string class_name;
  Action action = Action::kNotify;
  uint32_t max_requeues = kDefaultMaxRequeues;
  int line = 0;
};
// "notify", "requeue", "none"; parse_failure_action reads them in any case.
std::string_view to_string(FailureReaction::Action action);
std::optional<FailureReaction::Action> parse_failure_action(std::string_view s);

// How a workload class's jobs use their composed CXL memory (MemPolicy lines): the memory
// policy a job of the class that asks for none gets, and the kinds a job may ask for. The cap
// is a list of kinds, not an order: placing pages on CXL is what bind, interleave and weighted
// do in different measure, and a site allows the ones its class's work tolerates.
struct ClassMemPolicy {
  std::string class_name;
  std::optional<MemPolicy> default_policy;  // nullopt: preferred
  std::vector<MemPolicy::Kind> allowed;     // empty: every kind
  int line = 0;
  // "interleave" for a kind the class allows; "" when it allows every one.
  bool allows(MemPolicy::Kind kind) const;
  // "preferred or interleave": the allowed kinds, for sentences.
  std::string allowed_text() const;
};

// The memory policy a job of class `class_name` runs under: `asked` where the class allows its
// kind (kInvalidArgument naming the class, the kinds it allows and the policy file's line
// otherwise: a request is never changed), the class's default where the job asked for none, else
// preferred. The one rule for job_submit's refusal and composerd's compose-time check
// (policies_test, MemPolicyLinesGiveADefaultAndACap).
Expected<MemPolicy> class_mem_policy(const std::vector<ClassMemPolicy>& lines,
                                     std::string_view class_name,
                                     const std::optional<MemPolicy>& asked);

struct Policy {
  std::string file;  // the name used in messages
  TimeZone time_zone;
  int time_zone_line = 0;
  std::vector<Window> windows;
  std::vector<WorkloadClass> classes;
  std::string default_class;  // empty: jobs that match no class are refused
  int default_class_line = 0;
  std::vector<Limit> limits;
  std::vector<Placement> placements;         // one per class at most; a class without one packs
  std::vector<FailureReaction> reactions;    // one per class at most; a class without one: notify
  std::vector<ClassMemPolicy> mem_policies;  // one per class at most; without one: any, preferred

  const Window* find_window(std::string_view name) const;
  const WorkloadClass* find_class(std::string_view name) const;
  // The Limit line for (class, window), or nullptr when the class is not capped there.
  const Limit* find_limit(std::string_view class_name, std::string_view window) const;
  // The class's OnFailure line, or the default (notify) for a class without one, or for a
  // name that is no class of the policy.
  FailureReaction reaction(std::string_view class_name) const;
};

// Wording and Slurm names shared by composerd, composerctl and the job_submit plugin.
// "3d 4h", "90m", "45s"
std::string format_duration(int64_t seconds);
// "8 GPUs", "1 GPU", "512 GiB of memory", "2 NVMe drives"
std::string format_amount(DeviceType t, uint64_t amount);
// "training_gpu_cap"
std::string cap_license_name(std::string_view class_name, DeviceType t);
// The class and type a cap license is named for ("training_gpu_cap" -> training, gpu);
// nullopt for any other name.
std::optional<std::pair<std::string, DeviceType>> parse_cap_license_name(std::string_view name);
// The pool license of a type: "fabric_gpu", "fabric_mem", "fabric_nvme".
std::string pool_license_name(DeviceType t);
// The license of one GPU model beside the pool license, held by the jobs that ask for that
// model (--compose-gpus=H200:2): the pool license's name, '_' and the model in lower case
// ("H200" -> "fabric_gpu_h200", "A100-80G" -> "fabric_gpu_a100-80g"). Models that differ only
// in case share one license. Only GPUs are asked for by model.
std::string model_license_name(std::string_view model);
// Per model license, what the pool can serve of it now: the schedulable() GPUs of the rows
// of its models (0 where every one is failed, drained or foreign). The one rule for these
// totals, as PoolSize::from_rows is for the pool licenses.
std::map<std::string, uint64_t> model_license_sizes(const std::vector<PoolRow>& rows);
// The name Slurm gives a license slurmdbd serves (composer.conf's SlurmLicenses=remote):
// "fabric_gpu@composer".
std::string remote_license_name(std::string_view name, std::string_view server);
// Whether composerd sizes this license to the pool: a pool license or a GPU model's license
// (fabric_gpu, fabric_mem, fabric_nvme, fabric_gpu_<model>), by its plain name or as a remote
// license (NAME@SERVER). Cap licenses and a site's own licenses are not.
bool is_pool_license(std::string_view name);
// Whether a license is one composerd manages in Slurm: a pool or model license (fabric_*) or
// a cap license (*_cap).
bool is_managed_license(std::string_view name);
// The reservation that holds back what the pool cannot serve of a managed license
// (composer/server/src/slurm_holds.h): "hold_fabric_gpu" for fabric_gpu.
std::string hold_name(std::string_view license);
bool is_hold_name(std::string_view reservation_name);

// Share rounding: floor(pool x share), except that a share above zero of a non-empty pool
// is never less than 1, so a class with a small share can still run something.
uint64_t resolve_cap(const CapSpec& cap, uint64_t pool_size);

}  // namespace composer::policies
