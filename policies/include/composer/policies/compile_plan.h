// Compiling a policy into Slurm's own objects (cap licenses and recurring blocker
// reservations; docs/ARCHITECTURE.md, policies/README.md). Pure: diff_plan.h compares the plan
// with what Slurm has, and the caller runs the commands.
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
#include <vector>

#include "composer/common/slurm_text.h"
#include "composer/policies/policy.h"

namespace composer::policies {

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

}  // namespace composer::policies
