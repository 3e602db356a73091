// Comparing a compiled plan (compile_plan.h) with what Slurm has now, as scontrol reports it
// (composer/common/slurm_text.h), into the scontrol commands that bring Slurm to the plan.
// Pure: the caller reads Slurm's state and runs the commands.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "composer/common/slurm_text.h"
#include "composer/policies/compile_plan.h"
#include "composer/policies/time_zone.h"

namespace composer::policies {

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

}  // namespace composer::policies
