#include "composer/policies/diff_plan.h"

#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "composer/common/strings.h"

namespace composer::policies {
namespace {

std::string local_text(const TimeZone& tz, int64_t t) { return format_civil(tz.to_local(t).civil); }

std::optional<CivilTime> parse_local(std::string_view s) {
  CivilTime c;
  int n = 0;
  const std::string str(s);
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &c.year, &c.month, &c.day, &c.hour,
                  &c.minute, &c.second, &n) == 6 &&
      static_cast<size_t>(n) == str.size()) {
    return c;
  }
  c.second = 0;
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d%n", &c.year, &c.month, &c.day, &c.hour,
                  &c.minute, &n) == 5 &&
      static_cast<size_t>(n) == str.size()) {
    return c;
  }
  return {};
}

std::set<std::string> upper_set(const std::vector<std::string>& v) {
  std::set<std::string> out;
  for (auto s : v) {
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out.insert(s);
  }
  return out;
}

}  // namespace

std::string_view to_string(ActionKind k) {
  switch (k) {
    case ActionKind::kConfigure:
      return "configure";
    case ActionKind::kCreate:
      return "create";
    case ActionKind::kUpdate:
      return "update";
    case ActionKind::kLeave:
      return "leave";
    case ActionKind::kRemove:
      return "remove";
  }
  return "";
}

std::vector<Action> diff_plan(const Plan& plan, const SlurmState& now, const TimeZone& tz) {
  std::vector<Action> reservations;
  std::set<std::string> planned;
  auto existing = [&](std::string_view name) -> const ExistingReservation* {
    for (const auto& e : now.reservations)
      if (e.name == name) return &e;
    return nullptr;
  };
  // The one-off blocker for the rest of a window's current occurrence is needed only where
  // Slurm's recurring blocker does not run that occurrence already (it was made after the
  // occurrence began); where it does, the two would hold the same licenses twice, and Slurm
  // refuses reservations that add up to more than a license's total.
  auto covered = [&](const BlockerReservation& once) {
    constexpr std::string_view kOnceSuffix = "_once";
    if (once.recurrence != Recurrence::kOnce || !once.name.ends_with(kOnceSuffix)) return false;
    const ExistingReservation* recurring =
        existing(std::string_view(once.name).substr(0, once.name.size() - kOnceSuffix.size()));
    if (recurring == nullptr || recurring->duration_min <= 0) return false;
    const auto start = parse_local(recurring->start_local);
    if (!start) return false;
    const int64_t start_s = tz.to_utc(*start);
    return start_s <= once.start_s && once.start_s < start_s + recurring->duration_min * 60;
  };
  for (const auto& r : plan.reservations) {
    if (covered(r)) continue;
    planned.insert(r.name);
    const ExistingReservation* have = existing(r.name);
    if (!have) {
      reservations.push_back(
          {ActionKind::kCreate, r.name,
           "new blocker for class " + r.class_name + " in window '" + r.window + "'",
           "scontrol create reservation " + r.to_slurm()});
      continue;
    }
    std::string changes, fields;
    const auto have_start = parse_local(have->start_local);
    const LocalTime want = tz.to_local(r.start_s);
    if (r.recurrence == Recurrence::kOnce) {
      const int64_t want_end = r.start_s + r.duration_min * 60;
      const int64_t have_end =
          have_start ? tz.to_utc(*have_start) + have->duration_min * 60 : want_end + 3600;
      if (std::llabs(have_end - want_end) > 60) {
        changes += "end " + (have_start ? local_text(tz, have_end) : "unknown") + " -> " +
                   local_text(tz, want_end) + "; ";
        fields += " EndTime=" + local_text(tz, want_end);
      }
    } else {
      bool same_start = have_start.has_value();
      if (have_start) {
        const int have_wd = weekday_from_days(
            days_from_civil(have_start->year, have_start->month, have_start->day));
        same_start = have_start->hour == want.civil.hour &&
                     have_start->minute == want.civil.minute &&
                     have_start->second == want.civil.second;
        if (r.recurrence == Recurrence::kWeekly) same_start = same_start && have_wd == want.weekday;
        if (r.recurrence == Recurrence::kWeekday) same_start = same_start && have_wd < 5;
        if (r.recurrence == Recurrence::kWeekend) same_start = same_start && have_wd >= 5;
      }
      if (!same_start) {
        changes += "start " + have->start_local + " -> " + r.start_local + "; ";
        fields += " StartTime=" + r.start_local;
      }
      if (have->duration_min != r.duration_min) {
        changes += "duration " + std::to_string(have->duration_min) + " -> " +
                   std::to_string(r.duration_min) + " min; ";
        fields += " Duration=" + std::to_string(r.duration_min);
      }
    }
    const auto flags = upper_set(have->flags);
    for (auto rec :
         {Recurrence::kDaily, Recurrence::kWeekday, Recurrence::kWeekend, Recurrence::kWeekly}) {
      const std::string f(to_string(rec));
      if (rec != r.recurrence && flags.count(f)) {
        changes += "drop flag " + f + "; ";
        fields += " Flags-=" + f;
      }
    }
    for (const std::string& f : {std::string("ANY_NODES"), std::string(to_string(r.recurrence))}) {
      if (!f.empty() && !flags.count(f)) {
        changes += "add flag " + f + "; ";
        fields += " Flags+=" + f;
      }
    }
    if (license_counts(have->licenses) != license_counts(r.licenses)) {
      changes += "Licenses " + format_licenses(have->licenses) + " -> " +
                 format_licenses(r.licenses) + "; ";
      fields += " Licenses=" + format_licenses(r.licenses);
    }
    if (have->users != r.users) {
      changes += "Users " + have->users + " -> " + r.users + "; ";
      fields += " Users=" + r.users;
    }
    if (fields.empty()) {
      reservations.push_back({ActionKind::kLeave, r.name, "unchanged", ""});
    } else {
      changes.resize(changes.size() - 2);
      reservations.push_back({ActionKind::kUpdate, r.name, changes,
                              "scontrol update ReservationName=" + r.name + fields});
    }
  }
  for (const auto& e : now.reservations) {
    if (!is_blocker_name(e.name) || planned.count(e.name)) continue;
    reservations.push_back({ActionKind::kRemove, e.name, "blocker the policy no longer has",
                            "scontrol delete ReservationName=" + e.name});
  }

  // Licenses: slurm.conf keeps the ones the policy does not manage.
  const auto want = license_counts(plan.licenses);
  std::map<std::string, uint64_t> have_managed;
  std::vector<LicenseCount> line;
  for (const auto& l : now.licenses) {
    if (is_managed_license(l.name)) {
      have_managed[l.name] = l.count;
    } else {
      line.push_back(l);
    }
  }
  for (const auto& l : plan.licenses) line.push_back(l);
  std::vector<Action> out;
  bool shrinks = false;
  std::string changes;
  for (const auto& [name, count] : want) {
    auto it = have_managed.find(name);
    if (it == have_managed.end()) {
      changes += "add " + name + ":" + std::to_string(count) + "; ";
    } else if (it->second != count) {
      changes += name + " " + std::to_string(it->second) + " -> " + std::to_string(count) + "; ";
      shrinks = shrinks || count < it->second;
    }
  }
  for (const auto& [name, count] : have_managed) {
    if (!want.count(name)) {
      changes += "drop " + name + "; ";
      shrinks = true;
    }
  }
  Action licenses{ActionKind::kLeave, "Licenses", "unchanged", ""};
  if (!changes.empty()) {
    changes.resize(changes.size() - 2);
    licenses = {ActionKind::kConfigure, "Licenses",
                changes + "; set Licenses=" + format_licenses(line) + " in slurm.conf, then run",
                "scontrol reconfigure"};
  }
  if (!shrinks) out.push_back(licenses);
  out.insert(out.end(), reservations.begin(), reservations.end());
  if (shrinks) out.push_back(licenses);
  return out;
}

std::string render_actions(const std::vector<Action>& actions) {
  std::string out;
  for (const auto& a : actions) {
    out += std::string(to_string(a.kind)) + "  " + a.object + "  " + a.detail;
    if (!a.command.empty()) out += ": " + a.command;
    out += "\n";
  }
  return out;
}

}  // namespace composer::policies
