#include "slurm_holds.h"

#include <map>
#include <set>

#include "composer/common/strings.h"

namespace composer::server {

using policies::ActionKind;
using policies::BlockerReservation;
using policies::Plan;
using policies::TimeZone;

namespace {

bool grows(const std::vector<LicenseCount>& from, const std::vector<LicenseCount>& to) {
  const auto have = license_counts(from);
  for (const auto& l : to) {
    auto it = have.find(l.name);
    if (it == have.end() || l.count > it->second) return true;
  }
  return false;
}

std::string hold_fields(const std::string& license, uint64_t count) {
  return "ReservationName=" + policies::hold_name(license) +
         " StartTime=now Duration=infinite Flags=ANY_NODES Licenses=" + license + ":" +
         std::to_string(count) + " Users=root";
}

// Deleting a hold reservation; the undo creates it again as it was.
SyncAction delete_hold(const ExistingReservation& have, const std::string& why) {
  std::string fields = "ReservationName=" + have.name +
                       " StartTime=now Duration=infinite Flags=ANY_NODES Users=" + have.users;
  if (!have.licenses.empty()) fields += " Licenses=" + format_licenses(have.licenses);
  return {{ActionKind::kRemove, have.name,
           "Licenses " + format_licenses(have.licenses) + " -> none (" + why + ")",
           "scontrol delete ReservationName=" + have.name},
          "scontrol create reservation " + fields,
          false};
}

}  // namespace

bool SyncPlan::changes() const {
  for (const auto& a : actions)
    if (a.action.kind != ActionKind::kLeave) return true;
  return false;
}

SyncPlan sync_plan(const std::vector<LicenseCount>& wanted,
                   const std::vector<BlockerReservation>& blockers, const SlurmState& now,
                   const TimeZone& tz) {
  SyncPlan out;
  const auto totals = license_counts(now.licenses);
  auto existing = [&](const std::string& name) -> const ExistingReservation* {
    for (const auto& e : now.reservations)
      if (e.name == name) return &e;
    return nullptr;
  };

  // Every license a blocker names must exist in Slurm, or creating it fails.
  // So must every cap license, or Slurm refuses every job job_submit adds it to.
  std::set<std::string> missing;
  for (const auto& b : blockers)
    for (const auto& l : b.licenses)
      if (!totals.count(l.name)) missing.insert(l.name);
  for (const auto& w : wanted)
    if (w.name.ends_with("_cap") && !totals.count(w.name)) missing.insert(w.name);
  for (const auto& name : missing) {
    uint64_t count = 0;
    for (const auto& w : wanted)
      if (w.name == name) count = w.count;
    out.problems.push_back("Slurm has no license " + name + ": add " + name + ":" +
                           std::to_string(count) +
                           " to slurm.conf's Licenses= (composerctl slurm-config prints the "
                           "line) and run 'scontrol reconfigure'");
  }

  std::vector<SyncAction> loosen, tighten;
  std::set<std::string> held;
  for (const auto& w : wanted) {
    auto total = totals.find(w.name);
    if (total == totals.end()) {
      if (!missing.count(w.name) && w.count > 0) {
        out.warnings.push_back("Slurm has no license " + w.name +
                               ", so jobs cannot ask for it; add " + w.name + ":" +
                               std::to_string(w.count) + " to slurm.conf's Licenses=");
      }
      continue;
    }
    if (total->second < w.count) {
      out.warnings.push_back("slurm.conf's Licenses= has " + w.name + ":" +
                             std::to_string(total->second) + " but " + std::to_string(w.count) +
                             " can be served; raise it to hand out the rest (composerctl "
                             "slurm-config)");
    }
    const uint64_t hold = total->second > w.count ? total->second - w.count : 0;
    const std::string name = policies::hold_name(w.name);
    held.insert(name);
    const std::vector<LicenseCount> lic = {{w.name, hold}};
    const ExistingReservation* have = existing(name);
    if (hold == 0) {
      // Nothing to hold back: no reservation. One that holds some is deleted, not brought to 0
      // (Slurm 26.05 refuses a license count of 0 in a reservation); deleting it frees only
      // what is to be freed, so no job can slip into a gap.
      if (have) loosen.push_back(delete_hold(*have, "nothing to hold back"));
      continue;
    }
    if (!have) {
      tighten.push_back({{ActionKind::kCreate, name,
                          "hold back " + std::to_string(hold) + " of " + w.name + " (Slurm has " +
                              std::to_string(total->second) + ", " + std::to_string(w.count) +
                              " may be handed out)",
                          "scontrol create reservation " + hold_fields(w.name, hold)},
                         "scontrol delete ReservationName=" + name,
                         true});
      continue;
    }
    std::string fields, changes;
    if (license_counts(have->licenses) != license_counts(lic)) {
      changes = "Licenses " + format_licenses(have->licenses) + " -> " + format_licenses(lic);
      fields += " Licenses=" + format_licenses(lic);
    }
    if (have->users != "root") {
      changes += std::string(changes.empty() ? "" : "; ") + "Users " + have->users + " -> root";
      fields += " Users=root";
    }
    if (fields.empty()) {
      loosen.push_back({{ActionKind::kLeave, name, "unchanged", ""}, "", false});
      continue;
    }
    SyncAction a{
        {ActionKind::kUpdate, name, changes, "scontrol update ReservationName=" + name + fields},
        "scontrol update ReservationName=" + name + " Licenses=" + format_licenses(have->licenses) +
            " Users=" + have->users,
        grows(have->licenses, lic)};
    (a.tightens ? tighten : loosen).push_back(std::move(a));
  }
  // A hold of a license no longer managed holds nothing back any more.
  for (const auto& e : now.reservations) {
    if (!policies::is_hold_name(e.name) || held.count(e.name)) continue;
    loosen.push_back(delete_hold(e, "no longer managed"));
  }

  // The blockers, as diff_plan brings them to the plan (without slurm.conf's licenses).
  Plan plan;
  plan.reservations = blockers;
  for (auto& a : policies::diff_plan(plan, now, tz)) {
    if (a.object == "Licenses") continue;
    const ExistingReservation* have = existing(a.object);
    SyncAction s{a, "", false};
    const BlockerReservation* want = nullptr;
    for (const auto& b : blockers)
      if (b.name == a.object) want = &b;
    switch (a.kind) {
      case ActionKind::kCreate:
        s.undo = "scontrol delete ReservationName=" + a.object;
        s.tightens = true;
        break;
      case ActionKind::kUpdate:
        s.undo = "scontrol update ReservationName=" + a.object +
                 (have->duration_min > 0 ? " Duration=" + std::to_string(have->duration_min) : "") +
                 " Licenses=" + format_licenses(have->licenses) + " Users=" + have->users;
        s.tightens = want == nullptr || grows(have->licenses, want->licenses) ||
                     want->duration_min > have->duration_min ||
                     a.detail.find("start ") != std::string::npos;
        break;
      case ActionKind::kRemove:
        s.undo = "scontrol create reservation ReservationName=" + have->name +
                 " StartTime=" + have->start_local +
                 " Duration=" + std::to_string(have->duration_min) + " Flags=" + join(have->flags) +
                 " Licenses=" + format_licenses(have->licenses) + " Users=" + have->users;
        break;
      default:
        break;
    }
    (s.tightens ? tighten : loosen).push_back(std::move(s));
  }
  out.actions = std::move(loosen);
  out.actions.insert(out.actions.end(), tighten.begin(), tighten.end());
  return out;
}

}  // namespace composer::server
