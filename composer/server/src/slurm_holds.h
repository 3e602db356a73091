// What composerd keeps in step at run time: the hold reservations of the managed licenses and
// the policy's blockers, planned against what Slurm has now. Pure: composerd's Slurm sync
// (slurm_sync.h) reads Slurm's state and runs the commands.
//
// Slurm's license totals are static (slurm.conf); what Slurm may hand out changes with the
// pool (drains, failures, foreign devices) and the policy. composerd holds the difference
// back with one license-only "hold" reservation per managed license, which nobody can run in
// (Users=root, StartTime=now, Duration=infinite): hold = configured total - wanted. A hold is
// updated in place while it holds something (deleting and re-creating it would leave a gap
// that jobs slip into), and deleted once it would hold 0, which Slurm 26.05 refuses to keep
// (SyncPlanTest.AHoldIsUpdatedInPlaceAndDeletedWhenItHoldsNothing).
#pragma once

#include <string>
#include <vector>

#include "composer/common/slurm_text.h"
#include "composer/policies/compile_plan.h"
#include "composer/policies/diff_plan.h"
#include "composer/policies/time_zone.h"

namespace composer::server {

struct SyncAction {
  policies::Action action;
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
                   const std::vector<policies::BlockerReservation>& blockers, const SlurmState& now,
                   const policies::TimeZone& tz);

}  // namespace composer::server
