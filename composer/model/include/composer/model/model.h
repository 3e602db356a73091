// The domain model shared by the store, the core, the API codecs and the plugins' client.
// Plain values only: no I/O, no locking.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"

namespace composer {

enum class DeviceType { kGpu, kMem, kNvme };
inline constexpr DeviceType kAllDeviceTypes[] = {DeviceType::kGpu, DeviceType::kMem,
                                                 DeviceType::kNvme};
std::string_view to_string(DeviceType t);  // "gpu", "mem", "nvme"
std::optional<DeviceType> parse_device_type(std::string_view s);

// Redfish's health vocabulary.
enum class Health { kOk, kWarning, kCritical };
std::string_view to_string(Health h);  // "ok", "warning", "critical"
std::optional<Health> parse_health(std::string_view s);

// What a device is doing, derived from its record (see Device::state()).
// Foreign: the fabric shows it composed into (or connected to, or shared by) something that no
// composition of composerd's ledger explains; composerd never allocates nor detaches it.
enum class DeviceState { kFree, kAttached, kDrained, kFailed, kForeign };
// "free", "attached", "drained", "failed", "foreign"
std::string_view to_string(DeviceState s);
inline constexpr std::string_view kDeviceStateNames = "free, attached, drained, failed, foreign";
std::optional<DeviceState> parse_device_state(std::string_view s);

// What the host can recognise a device by, as the fabric reports it; an empty field is one the
// fabric does not know. The node prolog matches these against the PCI functions that appear
// after a rescan (slurm-plugin/README.md, "Host side").
struct DeviceIdentity {
  std::string pci_vendor;  // PCI vendor id, "0x" and 4 lower-case hex digits: "0x10de"
  std::string pci_device;  // PCI device id, same form: "0x20b5"
  std::string serial;      // the device's serial number
  std::string uuid;        // a GPU's UUID as its driver reports it: "GPU-5f2c..."

  bool empty() const {
    return pci_vendor.empty() && pci_device.empty() && serial.empty() && uuid.empty();
  }
  bool operator==(const DeviceIdentity&) const = default;
};
// A PCI vendor or device id in the form DeviceIdentity holds: "0x10DE", "10de" and "0x10de"
// all give "0x10de". nullopt for anything that is not 1 to 4 hex digits after an optional "0x".
std::optional<std::string> normal_pci_id(std::string_view s);
// A failure domain: what one failure takes down together (an enclosure, a switch, a memory
// appliance, a power feed). `level` is one of the levels composer.conf declares
// (DomainLevels=); `name` is unique within its level. Spelled "level:name" ("appliance:mem-a").
struct FailureDomain {
  std::string level;
  std::string name;
  bool operator==(const FailureDomain&) const = default;
  bool operator<(const FailureDomain& o) const {
    return level != o.level ? level < o.level : name < o.name;
  }
};
std::string to_string(const FailureDomain& d);  // "appliance:mem-a"
// "LEVEL:NAME", split at the first ':' (a name may hold one: "pod-a:mem-a"); nullopt when
// either part is empty.
std::optional<FailureDomain> parse_failure_domain(std::string_view s);
// The domain at `level` in `domains`, or nullptr: Device::domain and Host::domain.
const FailureDomain* find_domain(const std::vector<FailureDomain>& domains, std::string_view level);

// How composerd's drain reason for a device the fabric lost while a job held it begins (the
// reconciler's); the node's epilog tells a lost device from other failures by it.
inline constexpr std::string_view kLostByTheFabric = "lost by the fabric: ";

struct Device {
  std::string id;  // the fabric's id; unique across the pool
  DeviceType type = DeviceType::kGpu;
  std::string model;            // "A100-80G", "CXL-DDR5", "P5620"
  uint64_t capacity_bytes = 0;  // memory block or drive size; 0 for GPUs
  std::string zone;             // fabric zone the device sits in
  std::string address;          // how the host sees it: PCI address, or NUMA node for memory
  DeviceIdentity identity;      // what the host can recognise it by
  Health health = Health::kOk;
  bool drained = false;
  std::string drain_reason;
  // Owner, when the device sits in a live composition.
  std::optional<int64_t> composition_id;
  std::string node;  // node of that composition
  // Who holds it outside composerd, in words (a fabric host, "shared by systems a, b"), when
  // the fabric shows it held and no live composition of composerd's owns it; empty otherwise.
  std::string holder;
  // The failure domains it sits in, at most one per level, sorted by level name; empty when
  // neither composer.conf nor the fabric says.
  std::vector<FailureDomain> domains;
  // When composerd first knew the device: the store sets it when the fabric's inventory first
  // names the device and keeps it ever after (schema migration 7 says what older files got).
  // Reports count the device as capacity only from then. nullopt where the source does not say
  // (a fabric's inventory, an API answer).
  std::optional<int64_t> known_since_ms;

  // The device's domain at `level`, or nullptr.
  const FailureDomain* domain(std::string_view level) const;
  bool in(const FailureDomain& d) const {
    return domain(d.level) && domain(d.level)->name == d.name;
  }

  // Failed wins over drained, drained over foreign, foreign over attached: an admin wants to
  // see the worst.
  DeviceState state() const;
  bool foreign() const { return !holder.empty() && !composition_id; }
  // Free and usable for a new composition.
  bool allocatable() const {
    return !composition_id && !drained && health != Health::kCritical && holder.empty();
  }
};

// A compute host the fabric can attach devices to.
struct Host {
  std::string node;                // Slurm node name
  std::string fabric_id;           // the fabric's name for the host
  std::vector<std::string> zones;  // reachable zones, nearest first
  uint32_t gpu_slots = 0;          // attach-slot limits per type
  uint32_t mem_slots = 0;
  uint32_t nvme_slots = 0;
  // The failure domains the host sits in (its switch, its rack's power), at most one per
  // level, sorted by level name: composer.conf's NodeName Domains=. A domain failure of its
  // host cuts a composition off as surely as one of its devices.
  std::vector<FailureDomain> domains;

  uint32_t slots(DeviceType t) const;
  // Index of the zone in `zones` (0 is nearest), or nullopt if unreachable.
  std::optional<size_t> zone_rank(std::string_view zone) const;
  // The host's domain at `level`, or nullptr.
  const FailureDomain* domain(std::string_view level) const;
};

// One row of the pool summary: counts (and bytes for memory/NVMe) per type, model and zone.
struct PoolRow {
  DeviceType type = DeviceType::kGpu;
  std::string model;
  std::string zone;
  uint32_t total = 0;
  uint32_t free = 0;
  uint32_t attached = 0;
  uint32_t drained = 0;
  uint32_t failed = 0;
  uint32_t foreign = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  // Of total_bytes, what Slurm may schedule (see schedulable()).
  uint64_t schedulable_bytes = 0;
};

// The one rule for what Slurm may hand out of a pool row: the devices that are free or in a
// composerd composition, i.e. healthy, not drained and not foreign. Every total that is
// printed or published (licenses, snapshot, policy plans, reports) is this.
inline uint32_t schedulable(const PoolRow& r) { return r.free + r.attached; }

// Counts `d` into `row` by its state (`add`), or takes it out again (no count goes below
// zero): its free, attached, drained, failed or foreign count, and the free and schedulable
// bytes. The one way the allocator's pool rows and `pool --by domain` count a device's state.
void count_state(PoolRow& row, const Device& d, bool add = true);
// count_state() and the row's total and total_bytes.
void count_device(PoolRow& row, const Device& d, bool add = true);

// What one job asks for on one node.
struct Request {
  uint32_t gpus = 0;
  std::string gpu_model;  // empty: any model
  uint64_t mem_bytes = 0;
  uint32_t nvme = 0;

  bool empty() const { return gpus == 0 && mem_bytes == 0 && nvme == 0; }
  bool operator==(const Request&) const = default;
  // "gpus=A100:2 mem=64G nvme=1", the form written into the job's admin comment.
  std::string to_string() const;
};

// What job_submit records of a composed job in its admin comment, after any comment the job
// had: "composer: gpus=A100:2 mem=64G nvme=1 workload=training nodes=2".
struct ComposerComment {
  Request request;       // per node
  std::string workload;  // the class job_submit gave it; empty: none
  uint32_t nodes = 1;    // the node count its licenses are priced on
  // The nodes job_submit or composerd excluded because their zones could not serve the job
  // ("cn1,cn3"; docs/ADMIN.md "Zones"): the job's ExcNodeList while it is this, composerd's
  // to change. Empty: none.
  std::string avoid;

  bool operator==(const ComposerComment&) const = default;
};
// "composer: gpus=A100:2 workload=training nodes=2 [avoid=cn1,cn3]"
std::string to_admin_comment(const ComposerComment& c);
// The composer part of a job's whole admin comment (Slurm's AdminComment); nullopt when there
// is none (a job job_submit did not compose). kInvalidArgument naming a word that is not one
// to_admin_comment() writes.
Expected<std::optional<ComposerComment>> parse_admin_comment(std::string_view comment);

// Largest weight of weighted interleave: the kernel keeps each node's weight in a byte.
inline constexpr uint32_t kMaxMemWeight = 255;

// Where a job's memory goes across a node's local DRAM and its composed CXL NUMA nodes
// (--compose-mem-policy, the policy file's MemPolicy lines). kPreferred is what a job that
// says nothing gets where no class default says otherwise.
struct MemPolicy {
  enum class Kind { kPreferred, kBind, kInterleave, kWeighted };
  Kind kind = Kind::kPreferred;
  // kWeighted: pages on each DRAM node to pages on each CXL node, reduced ("6:2" is 3:1).
  uint32_t dram_weight = 0;
  uint32_t cxl_weight = 0;

  bool operator==(const MemPolicy&) const = default;
};
// "preferred", "bind", "interleave", "weighted:3:1": as the user types it and the state file,
// COMPOSER_MEM_POLICY, the API and the store carry it.
std::string to_string(const MemPolicy& policy);
// The same words back (weights from 1 to kMaxMemWeight, reduced); nullopt for anything else.
// Each reader says what is wrong in its own words, with kMemPolicyForms.
std::optional<MemPolicy> parse_mem_policy_text(std::string_view text);
inline constexpr std::string_view kMemPolicyForms =
    "bind, preferred, interleave or weighted:D:C with D and C whole numbers from 1 to 255 "
    "(pages on DRAM to pages on CXL), e.g. weighted:3:1";
// A kind's one word ("weighted" for every ratio), as a class's allowed list names it.
std::string_view kind_name(MemPolicy::Kind kind);
std::optional<MemPolicy::Kind> parse_mem_policy_kind(std::string_view word);

// The composition state machine:
//   requested -> composing -> ready -> releasing -> released
//   any of requested, composing, ready, releasing -> failed
// A failed composition holds no devices.
enum class CompositionState { kRequested, kComposing, kReady, kReleasing, kReleased, kFailed };
std::string_view to_string(CompositionState s);
std::optional<CompositionState> parse_composition_state(std::string_view s);
bool can_transition(CompositionState from, CompositionState to);
// Live compositions own their devices; released and failed ones own nothing.
bool is_live(CompositionState s);

// Whose a composition is: the Slurm job, the user who runs it, the account it is charged to
// and the workload class it counts against. Each value that carries these (the plugins'
// compose call, the request body, the compose input, the composition, its ledger events)
// embeds this one, so that passing them on is one assignment.
struct JobOwner {
  uint32_t job_id = 0;
  uint32_t uid = 0;
  std::string user{};
  std::string account{};
  std::string workload{};

  bool operator==(const JobOwner&) const = default;
};

struct Composition {
  int64_t id = 0;
  JobOwner owner{};
  std::string node;
  // The policy window in force when it was composed (policies/); empty without a policy.
  std::string window;
  Request request;
  CompositionState state = CompositionState::kRequested;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  uint32_t attempts = 0;
  std::string last_error;
  // Set by the node while a process on the host still holds the devices after the job ended
  // (its epilog waited busy_wait and they were still in use): why, naming the holders. While
  // set, nothing releases the composition; the node clears it once the host is clear.
  std::string hold;
  // The memory policy its tasks run under (to_string(MemPolicy)): what the job asked for, or
  // its workload class's default. Empty for a composition without memory, and for those
  // composed before composerd knew of memory policies.
  std::string mem_policy;
  std::vector<Device> devices;
};

// One line of the append-only ledger. Accounting is computed from these alone, so each
// carries who, what for and which devices, not only a reference to the composition.
struct Event {
  int64_t id = 0;
  int64_t ts_ms = 0;
  std::string kind;  // a state name ("ready", "released", ...), or "drain", "resume", "health"
  std::optional<int64_t> composition_id;
  JobOwner owner{};
  std::string node;
  std::string window;  // the composition's policy window; empty without a policy
  std::string from_state;
  std::string to_state;
  std::vector<std::string> devices;
  std::string detail;
};

// One ended composition as the ledger's rollup keeps it (db schema migration 9), for a report
// that walks compositions instead of reading each of their events. `first` is its first state
// event (its kind, place in the ledger, owner, policy window and devices), `end` the event that
// ended it ("released" or "failed": its id, ts_ms, kind and uid, and for "failed" its
// from_state and detail). The row stands for `events` events of the composition (device events
// aside), `other_events` of them of no state kind (failure reactions).
struct CompositionRollup {
  Event first;
  Event end;
  std::optional<int64_t> ready_ms;      // its ready event's time, if it had one
  std::optional<int64_t> releasing_ms;  // its last releasing event's time, if it had one
  uint64_t events = 0;
  uint64_t other_events = 0;
};

// One applied version of the time-of-day policy (policies/README.md): who applied which text
// when. Versions are never changed or deleted; the newest is the policy in force.
struct PolicyVersion {
  int64_t id = 0;
  int64_t applied_ms = 0;
  uint32_t uid = 0;
  std::string user;
  std::string file;    // the name the admin applied it under, for messages
  std::string sha256;  // of `text`, lower-case hex
  std::string text;
};

}  // namespace composer
