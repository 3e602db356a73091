// Compiling a policy into Slurm's own objects (cap licenses and recurring blocker
// reservations; docs/ARCHITECTURE.md, policies/README.md), and diffing that plan against what
// Slurm has now. Pure: the caller reads Slurm's state and runs the commands.
//
// - Pool licenses fabric_gpu, fabric_mem (GiB; a job is charged whole blocks per node,
//   mem_charge), fabric_nvme, sized to the pool.
// - Per class and capped type a cap license <class>_<type>_cap sized to the class's highest
//   cap over the week.
// - Per class and window where the class's cap is lower than that, a blocker reservation
//   (Flags=ANY_NODES, Users=root) holding <highest - cap> of the cap license while the window
//   is open. Recurrence: a window on every day is DAILY, on Mon-Fri WEEKDAY, on Sat and Sun
//   WEEKEND; other day sets get DAILY/WEEKDAY/WEEKEND for the part that fits and one WEEKLY
//   reservation per remaining day. Default-window time is split into its maximal stretches.
// - When the plan is compiled inside a blocked period, a one-off blocker "<name>_once" from
//   now to the period's end, because a recurring reservation cannot start in the past.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/policies/policy.h"

namespace composer::policies {

struct LicenseCount {
  std::string name;
  uint64_t count = 0;
  bool operator==(const LicenseCount&) const = default;
};
// "a:1,b:2"
std::string format_licenses(const std::vector<LicenseCount>& l);

enum class Recurrence { kOnce, kDaily, kWeekday, kWeekend, kWeekly };
std::string_view to_string(Recurrence r);  // "", "DAILY", "WEEKDAY", "WEEKEND", "WEEKLY"

struct BlockerReservation {
  std::string name;
  std::string class_name;
  std::string window;
  Recurrence recurrence = Recurrence::kWeekly;
  int64_t start_s = 0;      // first start (UTC)
  std::string start_local;  // the same in the policy's time zone: "2024-03-04T08:00:00"
  int64_t duration_min = 0;
  std::vector<LicenseCount> licenses;
  std::string users = "root";

  std::string flags() const;  // "ANY_NODES,WEEKDAY"
  // Key=Value fields for scontrol create; a one-off uses StartTime=now.
  std::string to_slurm() const;
};

struct Plan {
  std::string policy_file;
  std::string time_zone;
  int64_t now_s = 0;
  std::vector<LicenseCount> licenses;  // pool licenses, then cap licenses
  // The pool's memory block size (PoolSize::mem_block_bytes): memory licenses count whole
  // blocks per node (mem_charge).
  uint64_t mem_block_bytes = 0;
  std::vector<BlockerReservation> reservations;
  std::vector<std::string> notes;     // how to use the plan
  std::vector<std::string> warnings;  // where Slurm cannot express the policy exactly
  // slurm.conf's Licenses= line, the reservations, notes and warnings, for a dry run.
  std::string render() const;
};

// What job_submit adds to a one-node job of `class_name` asking for these amounts (memory in
// bytes, charged in whole blocks of the pool: mem_charge): "fabric_gpu:4,training_gpu_cap:4".
// Cap licenses appear only where the plan has one.
std::string job_licenses(const Plan& plan, std::string_view class_name, uint64_t gpus,
                         uint64_t mem_bytes, uint64_t nvme);
// Whether a reservation name belongs to the compiled policy (job_submit refuses such names
// in --reservation).
bool is_blocker_name(std::string_view reservation_name);

// The policy must have passed validate().
Plan compile_plan(const Policy& policy, const PoolSize& pool, int64_t now_s);

// What Slurm has now, as `scontrol show lic` / `scontrol show res` report it.
struct ExistingReservation {
  std::string name;
  std::string start_local;  // "2024-03-04T08:00:00", slurmctld's (= the policy's) time zone
  int64_t duration_min = 0;
  std::vector<std::string> flags;
  std::vector<LicenseCount> licenses;
  std::string users;
};
struct SlurmState {
  std::vector<LicenseCount> licenses;  // configured totals
  std::vector<ExistingReservation> reservations;
};

enum class ActionKind { kConfigure, kCreate, kUpdate, kLeave, kRemove };
std::string_view to_string(ActionKind k);  // "configure", "create", "update", "leave", "remove"

struct Action {
  ActionKind kind = ActionKind::kLeave;
  std::string object;   // "Licenses" or a reservation name
  std::string detail;   // what changes, in words
  std::string command;  // the command line to run; empty for kLeave
};

// Actions that bring Slurm to the plan, in the order to run them. Reservations are created or
// updated in place, never deleted and re-created (that would open a gap jobs slip into);
// blockers of an earlier policy that the plan no longer has are removed (that only loosens
// caps). Licenses live in slurm.conf: one kConfigure action gives the full new Licenses=
// line (keeping licenses the policy does not manage) and runs `scontrol reconfigure`; it goes
// first when licenses only grow, last when one shrinks.
std::vector<Action> diff_plan(const Plan& plan, const SlurmState& now, const TimeZone& tz);
// One line per action: "update  day_block_inference  Licenses 8 -> 6: scontrol update ...".
std::string render_actions(const std::vector<Action>& actions);

// --- what composerd keeps in step at run time -----------------------------------------------
//
// Slurm's license totals are static (slurm.conf); what Slurm may hand out changes with the
// pool (drains, failures, foreign devices) and the policy. composerd holds the difference
// back with one license-only "hold" reservation per managed license, which nobody can run in
// (Users=root, StartTime=now, Duration=infinite): hold = configured total - wanted. A hold is
// updated in place while it holds something (deleting and re-creating it would leave a gap
// that jobs slip into), and deleted once it would hold 0, which Slurm 26.05 refuses to keep
// (SyncPlanTest.AHoldIsUpdatedInPlaceAndDeletedWhenItHoldsNothing).

// "hold_fabric_gpu" for fabric_gpu.
std::string hold_name(std::string_view license);
bool is_hold_name(std::string_view reservation_name);

// `scontrol -o show licenses` / `scontrol -o show reservations` as text. kInvalidArgument
// with the line that does not parse.
Expected<SlurmState> parse_slurm_state(std::string_view licenses_text,
                                       std::string_view reservations_text);

// --- reading scontrol's one-line output -----------------------------------------------------
// (each line's Key=Value fields: parse_scontrol_line, composer/common/slurm_text.h)

// A license list as scontrol prints it and -L takes it: "fabric_gpu:4,matlab" (a name alone
// counts 1); "" and "(null)" are none. kInvalidArgument naming a count that is not one.
Expected<std::vector<LicenseCount>> parse_licenses(std::string_view text);

// One line of `scontrol -o show licenses`.
struct LicenseUse {
  std::string name;
  uint64_t total = 0;
  uint64_t used = 0;      // by running jobs
  uint64_t free = 0;      // as Slurm prints it
  uint64_t reserved = 0;  // by reservations: composerd's holds, the policy's blockers
  // What a job outside the reservations may take now. Slurm starts a job only when used +
  // reserved + asked <= total; the smaller of that and Free, whichever of the two a Slurm
  // release folds the reservations into.
  uint64_t available() const;
  bool operator==(const LicenseUse&) const = default;
};
// kInvalidArgument with the line that does not parse; "No licenses configured" is none.
Expected<std::vector<LicenseUse>> parse_license_use(std::string_view licenses_text);

struct SyncAction {
  Action action;
  // What puts the reservation back as it was, if a later action of the same round fails.
  std::string undo;
  // Tightens (reserves more): run after the ones that loosen, so that the reservations never
  // add up to more than a license's total on the way.
  bool tightens = false;
};

struct SyncPlan {
  std::vector<SyncAction> actions;  // in the order to run them; kLeave for what matches
  // Why the plan cannot be applied at all (a license Slurm lacks); non-empty: apply nothing.
  std::vector<std::string> problems;
  std::vector<std::string> warnings;  // applied anyway (Slurm has fewer than the pool serves)
  bool changes() const;
};

// `wanted`: what Slurm may hand out of each managed license now (pool licenses sized to the
// schedulable pool; the policy's cap licenses to their highest cap); `blockers`: the policy's
// blocker reservations (none without a policy). Reservations of a blocker's or hold's name
// that are not wanted are removed; everything else in Slurm is left alone.
SyncPlan sync_plan(const std::vector<LicenseCount>& wanted,
                   const std::vector<BlockerReservation>& blockers, const SlurmState& now,
                   const TimeZone& tz);

}  // namespace composer::policies
