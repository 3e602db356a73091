#include "composer/policies/slurm_plan.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "composer/common/error.h"
#include "composer/common/slurm_text.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/schedule.h"

namespace composer::policies {

namespace {

constexpr std::string_view kBlockMarker = "_block_";

std::string hhmm(int minute) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02d%02d", minute % 1440 / 60, minute % 60);
  return buf;
}

std::string clock_text(int minute) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%02d:%02d", minute % 1440 / 60, minute % 60);
  return buf;
}

std::string local_text(const TimeZone& tz, int64_t t) { return format_civil(tz.to_local(t).civil); }

int64_t wall_minute_to_utc(const TimeZone& tz, int64_t wall_minute) {
  int64_t day = wall_minute >= 0 ? wall_minute / 1440 : -((-wall_minute + 1439) / 1440);
  CivilTime c = civil_from_days(day);
  const int64_t m = wall_minute - day * 1440;
  c.hour = static_cast<int>(m / 60);
  c.minute = static_cast<int>(m % 60);
  return tz.to_utc(c);
}

// One recurring piece of a blocker before naming: a day set with one start and length.
struct Piece {
  Recurrence recurrence = Recurrence::kWeekly;
  DaySet days = 0;
  int start_min = 0;  // minute of the day
  int length_min = 0;
  std::string tag;
};

// Runs of minutes owned by `owner`, split where an occurrence of that window starts.
std::vector<std::pair<int, int>> runs_of(const Policy& policy, const std::vector<int>& owners,
                                         int owner) {
  std::vector<bool> split(kWeekMinutes, false);
  if (owner >= 0) {
    const Window& w = policy.windows[static_cast<size_t>(owner)];
    for (int d = 0; d < 7; ++d)
      if (w.days & (1u << d)) split[(d * 1440 + w.start_min) % kWeekMinutes] = true;
  }
  // Start scanning at a minute where a run cannot continue from the previous one.
  int origin = -1;
  for (int m = 0; m < kWeekMinutes && origin < 0; ++m) {
    const int prev = (m + kWeekMinutes - 1) % kWeekMinutes;
    if (owners[m] == owner && (owners[prev] != owner || split[m])) origin = m;
  }
  std::vector<std::pair<int, int>> out;
  if (origin < 0) {
    // The window covers the whole week with no start: one run of a week.
    if (owners[0] == owner) out.push_back({0, kWeekMinutes});
    return out;
  }
  for (int i = 0; i < kWeekMinutes; ++i) {
    const int m = (origin + i) % kWeekMinutes;
    if (owners[m] != owner) continue;
    const int prev = (m + kWeekMinutes - 1) % kWeekMinutes;
    if (i == 0 || owners[prev] != owner || split[m]) {
      out.push_back({m, 1});
    } else {
      ++out.back().second;
    }
  }
  return out;
}

std::vector<Piece> pieces_of(const std::vector<std::pair<int, int>>& runs) {
  std::map<std::pair<int, int>, DaySet> groups;  // (start minute of day, length) -> days
  for (auto [start, length] : runs)
    groups[{start % 1440, length}] |= static_cast<DaySet>(1u << (start / 1440));
  std::vector<Piece> out;
  for (const auto& group : groups) {
    const std::pair<int, int>& key = group.first;
    DaySet rest = group.second;
    auto add = [&](Recurrence r, DaySet d, std::string tag) {
      out.push_back(Piece{r, d, key.first, key.second, std::move(tag)});
    };
    if ((rest & kAllDays) == kAllDays) {
      add(Recurrence::kDaily, kAllDays, "daily");
      rest = 0;
    } else if ((rest & kMonToFri) == kMonToFri) {
      add(Recurrence::kWeekday, kMonToFri, "weekday");
      rest &= static_cast<DaySet>(~kMonToFri);
    } else if ((rest & kSatSun) == kSatSun) {
      add(Recurrence::kWeekend, kSatSun, "weekend");
      rest &= static_cast<DaySet>(~kSatSun);
    }
    for (int d = 0; d < 7; ++d)
      if (rest & (1u << d))
        add(Recurrence::kWeekly, static_cast<DaySet>(1u << d), lower(day_name(d)));
  }
  // Tags must be unique within one blocker's pieces.
  std::map<std::string, int> seen;
  for (const auto& p : out) ++seen[p.tag];
  for (auto& p : out)
    if (seen[p.tag] > 1) p.tag += "_" + hhmm(p.start_min);
  return out;
}

int64_t next_start(const TimeZone& tz, const Piece& p, int64_t now) {
  const int64_t today = local_day(tz, now);
  for (int64_t d = today - 1; d <= today + 8; ++d) {
    if (!(p.days & (1u << weekday_from_days(d)))) continue;
    const int64_t t = wall_minute_to_utc(tz, d * 1440 + p.start_min);
    if (t > now) return t;
  }
  return now;  // unreachable: every piece has a day within the next week
}

// If `now` lies inside an occurrence of the piece, the wall-clock minute that occurrence ends.
std::optional<int64_t> current_end(const TimeZone& tz, const Piece& p, int64_t now) {
  const LocalTime l = tz.to_local(now);
  const int64_t today = days_from_civil(l.civil.year, l.civil.month, l.civil.day);
  const int64_t wall_now = today * 1440 + int64_t{l.civil.hour} * 60 + l.civil.minute;
  for (int64_t d = today - 7; d <= today; ++d) {
    if (!(p.days & (1u << weekday_from_days(d)))) continue;
    const int64_t start = d * 1440 + p.start_min;
    if (start <= wall_now && wall_now < start + p.length_min) return start + p.length_min;
  }
  return {};
}

}  // namespace

std::string format_licenses(const std::vector<LicenseCount>& l) {
  std::string out;
  for (const auto& x : l) out += (out.empty() ? "" : ",") + x.name + ":" + std::to_string(x.count);
  return out;
}

std::string_view to_string(Recurrence r) {
  switch (r) {
    case Recurrence::kOnce:
      return "";
    case Recurrence::kDaily:
      return "DAILY";
    case Recurrence::kWeekday:
      return "WEEKDAY";
    case Recurrence::kWeekend:
      return "WEEKEND";
    case Recurrence::kWeekly:
      return "WEEKLY";
  }
  return "";
}

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

std::string BlockerReservation::flags() const {
  std::string f = "ANY_NODES";
  if (recurrence != Recurrence::kOnce) f += "," + std::string(to_string(recurrence));
  return f;
}

std::string BlockerReservation::to_slurm() const {
  return "ReservationName=" + name +
         " StartTime=" + (recurrence == Recurrence::kOnce ? std::string("now") : start_local) +
         " Duration=" + std::to_string(duration_min) + " Flags=" + flags() +
         " Licenses=" + format_licenses(licenses) + " Users=" + users;
}

std::string Plan::render() const {
  std::string out = "# Slurm plan for policy " + policy_file + " (time zone " + time_zone + ")\n";
  out += "# slurm.conf\nLicenses=" + format_licenses(licenses) + "\n";
  out += "# blocker reservations (" + std::to_string(reservations.size()) + ")\n";
  for (const auto& r : reservations) out += r.to_slurm() + "\n";
  for (const auto& n : notes) out += "# note: " + n + "\n";
  for (const auto& w : warnings) out += "# WARNING: " + w + "\n";
  return out;
}

bool is_blocker_name(std::string_view name) {
  return name.find(kBlockMarker) != std::string_view::npos;
}

std::string job_licenses(const Plan& plan, std::string_view class_name, uint64_t gpus,
                         uint64_t mem_bytes, uint64_t nvme) {
  const uint64_t want[3] = {gpus, mem_charge(mem_bytes, plan.mem_block_bytes).gib, nvme};
  std::vector<LicenseCount> out;
  for (DeviceType t : kAllDeviceTypes) {
    const uint64_t n = want[type_index(t)];
    if (n == 0) continue;
    out.push_back({pool_license_name(t), n});
    const std::string cap = cap_license_name(class_name, t);
    for (const auto& l : plan.licenses)
      if (l.name == cap) out.push_back({cap, n});
  }
  return format_licenses(out);
}

Plan compile_plan(const Policy& policy, const PoolSize& pool, int64_t now_s) {
  Plan plan;
  plan.policy_file = policy.file;
  plan.time_zone = policy.time_zone.name();
  plan.now_s = now_s;
  plan.mem_block_bytes = pool.mem_block_bytes;
  const TimeZone& tz = policy.time_zone;
  const Evaluator eval(policy, pool);
  const auto owners = week_owners(policy);
  std::set<int> in_force(owners.begin(), owners.end());
  auto window_name = [&](int owner) {
    return owner < 0 ? std::string(kDefaultWindow)
                     : policy.windows[static_cast<size_t>(owner)].name;
  };

  for (DeviceType t : kAllDeviceTypes)
    if (pool.size(t) > 0) plan.licenses.push_back({pool_license_name(t), pool.size(t)});

  for (const auto& cls : policy.classes) {
    std::map<int, Caps> caps;
    for (int o : in_force) caps[o] = *eval.caps(cls.name, window_name(o));
    std::array<uint64_t, 3> highest{};
    std::array<bool, 3> capped{};
    for (const auto& [o, c] : caps) {
      for (DeviceType t : kAllDeviceTypes) {
        const size_t i = type_index(t);
        highest[i] = std::max(highest[i], c.value[i]);
        capped[i] = capped[i] || (c.capped[i] && c.value[i] < pool.size(t));
      }
    }
    for (DeviceType t : kAllDeviceTypes) {
      const size_t i = type_index(t);
      if (capped[i] && highest[i] > 0)
        plan.licenses.push_back({cap_license_name(cls.name, t), highest[i]});
    }

    std::map<std::string, uint64_t> blocked_by;  // window -> reserve, for the warnings below
    std::vector<std::pair<int, std::array<uint64_t, 3>>> reserves;
    for (const auto& [o, c] : caps) {
      std::vector<LicenseCount> lic;
      std::array<uint64_t, 3> reserve{};
      for (DeviceType t : kAllDeviceTypes) {
        const size_t i = type_index(t);
        if (!capped[i] || highest[i] == 0 || c.value[i] >= highest[i]) continue;
        reserve[i] = highest[i] - c.value[i];
        lic.push_back({cap_license_name(cls.name, t), reserve[i]});
      }
      if (lic.empty()) continue;
      reserves.push_back({o, reserve});
      const std::string base =
          (o < 0 ? std::string("default") : window_name(o)) + std::string(kBlockMarker) + cls.name;
      const auto pieces = pieces_of(runs_of(policy, owners, o));
      for (const auto& p : pieces) {
        BlockerReservation r;
        r.name = pieces.size() == 1 ? base : base + "_" + p.tag;
        r.class_name = cls.name;
        r.window = window_name(o);
        r.recurrence = p.length_min >= kWeekMinutes ? Recurrence::kWeekly : p.recurrence;
        r.start_s = next_start(tz, p, now_s);
        r.start_local = local_text(tz, r.start_s);
        r.duration_min = p.length_min;
        r.licenses = lic;
        if (auto end = current_end(tz, p, now_s)) {
          const int64_t end_s = wall_minute_to_utc(tz, *end);
          if (end_s > now_s) {
            BlockerReservation once = r;
            once.name = r.name + "_once";
            once.recurrence = Recurrence::kOnce;
            once.start_s = now_s;
            once.start_local = local_text(tz, now_s);
            once.duration_min = (end_s - now_s + 59) / 60;
            plan.reservations.push_back(once);
          }
        }
        plan.reservations.push_back(std::move(r));
      }
    }

    // Where Slurm's counting differs from the policy.
    const uint64_t block_gib = mem_charge(1, pool.mem_block_bytes).gib;
    if (block_gib > 1 && capped[type_index(DeviceType::kMem)]) {
      // Jobs hold whole blocks (mem_charge), so the part of a cap short of a block is never
      // used. Pinned by PlanTest.MemoryCapsAreChargedInWholeBlocks.
      std::set<uint64_t> told;
      for (const auto& [o, c] : caps) {
        const uint64_t cap = c.value[type_index(DeviceType::kMem)];
        if (!c.capped[type_index(DeviceType::kMem)] || cap % block_gib == 0 ||
            !told.insert(cap).second)
          continue;
        plan.warnings.push_back(
            cls.name + "'s memory cap of " + std::to_string(cap) + " GiB (in '" + window_name(o) +
            "') is not a whole number of the pool's " + std::to_string(block_gib) +
            " GiB blocks; jobs hold whole blocks, so the class holds at most " +
            format_amount(DeviceType::kMem, cap / block_gib * block_gib) + " there");
      }
    }
    for (DeviceType t : kAllDeviceTypes) {
      const size_t i = type_index(t);
      if (!capped[i] || highest[i] == 0) continue;
      for (size_t a = 0; a < reserves.size(); ++a) {
        for (size_t b = a + 1; b < reserves.size(); ++b) {
          const uint64_t ra = reserves[a].second[i], rb = reserves[b].second[i];
          if (ra == 0 || rb == 0) continue;
          const uint64_t slurm = highest[i] > ra + rb ? highest[i] - ra - rb : 0;
          const uint64_t exact = std::min(highest[i] - ra, highest[i] - rb);
          plan.warnings.push_back(
              "a " + cls.name + " job whose run reaches into both '" +
              window_name(reserves[a].first) + "' and '" + window_name(reserves[b].first) +
              "' counts against both blockers, so Slurm lets it hold at most " +
              format_amount(t, slurm) + " although the policy allows " + format_amount(t, exact) +
              (slurm == 0 ? "; such a job never starts" : ""));
        }
      }
      // The longest stretch during which the cap stays above its weekly minimum.
      uint64_t lowest = highest[i];
      for (const auto& [o, c] : caps) lowest = std::min(lowest, c.value[i]);
      if (lowest >= highest[i]) continue;
      int longest = 0, current = 0;
      for (int k = 0; k < 2 * kWeekMinutes; ++k) {
        if (caps[owners[k % kWeekMinutes]].value[i] > lowest) {
          longest = std::max(longest, ++current);
        } else {
          current = 0;
        }
      }
      longest = std::min(longest, kWeekMinutes);
      std::string low_windows;
      for (const auto& [o, c] : caps)
        if (c.value[i] == lowest)
          low_windows += (low_windows.empty() ? "'" : ", '") + window_name(o) + "'";
      plan.warnings.push_back(
          cls.name + " jobs asking for more than " + format_amount(t, lowest) + " (the cap in " +
          low_windows + ") can never start if their time limit is longer than " +
          format_duration(int64_t{longest} * 60) +
          ", the longest stretch between those periods; job_submit should refuse them");
    }
  }

  // Clock changes: Slurm moves a recurring reservation's start with the wall clock but keeps
  // its length in minutes, so a blocker that spans a change is off by the change that night.
  std::set<std::string> warned;
  int64_t t = now_s;
  for (int guard = 0; guard < 16; ++guard) {
    auto change = tz.next_transition(t);
    if (!change || *change > now_s + int64_t{366} * 86400) break;
    t = *change;
    const LocalTime before = tz.to_local(t - 1);
    const int delta_min = (tz.offset_at(t) - tz.offset_at(t - 1)) / 60;
    const int minute = before.weekday * 1440 + before.civil.hour * 60 + before.civil.minute + 1;
    for (const auto& r : plan.reservations) {
      const std::string key = r.name + (delta_min > 0 ? "+" : "-");  // once per direction
      if (r.recurrence == Recurrence::kOnce || warned.count(key)) continue;
      const LocalTime s = tz.to_local(r.start_s);
      const int start = s.civil.hour * 60 + s.civil.minute;
      bool inside = false;
      for (int d = 0; d < 7; ++d) {
        const bool runs = r.recurrence == Recurrence::kDaily ||
                          (r.recurrence == Recurrence::kWeekday && d < 5) ||
                          (r.recurrence == Recurrence::kWeekend && d >= 5) ||
                          (r.recurrence == Recurrence::kWeekly && d == s.weekday);
        if (!runs) continue;
        const int offset =
            ((minute - (d * 1440 + start)) % kWeekMinutes + kWeekMinutes) % kWeekMinutes;
        if (offset > 0 && offset < r.duration_min) inside = true;
      }
      if (!inside) continue;
      warned.insert(key);
      plan.warnings.push_back(
          "the clocks change on " + format_civil(before.civil).substr(0, 10) + " at " +
          clock_text(minute % 1440) + " local time, inside blocker " + r.name +
          "; Slurm keeps it " + std::to_string(r.duration_min) +
          " minutes long, so that night it ends " + std::to_string(std::abs(delta_min)) +
          " minutes " +
          (delta_min > 0 ? "late by the wall clock and holds the cap into the next period"
                         : "early by the wall clock and the cap is loose until the window ends"));
    }
  }

  plan.notes.push_back(
      "Slurm reads StartTime in slurmctld's own time zone: run slurmctld with "
      "TZ=" +
      tz.name() + " (or on a host set to that zone)");
  plan.notes.push_back(
      "every job of a class must request its pool and cap licenses, for "
      "example -L fabric_gpu:4,<class>_gpu_cap:4 (job_submit adds them)");
  return plan;
}

// --- diff --------------------------------------------------------------------------------------

namespace {

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

std::map<std::string, uint64_t> as_map(const std::vector<LicenseCount>& l) {
  std::map<std::string, uint64_t> m;
  for (const auto& x : l) m[x.name] = x.count;
  return m;
}

bool managed_license(const std::string& name) {
  return name.rfind("fabric_", 0) == 0 ||
         (name.size() > 4 && name.compare(name.size() - 4, 4, "_cap") == 0);
}

}  // namespace

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
    if (as_map(have->licenses) != as_map(r.licenses)) {
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
  const auto want = as_map(plan.licenses);
  std::map<std::string, uint64_t> have_managed;
  std::vector<LicenseCount> line;
  for (const auto& l : now.licenses) {
    if (managed_license(l.name)) {
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

// --- run-time sync ------------------------------------------------------------------------------

namespace {

constexpr std::string_view kHoldPrefix = "hold_";

Expected<uint64_t> slurm_count(std::string_view text, std::string_view line) {
  auto n = parse_count(text, 1u << 30);
  if (!n) {
    return Error{ErrorCode::kInvalidArgument, "scontrol printed '" + std::string(text) +
                                                  "' where a count belongs: " + std::string(line)};
  }
  return uint64_t{*n};
}

Expected<std::vector<LicenseCount>> license_list(std::string_view text, std::string_view line) {
  std::vector<LicenseCount> out;
  if (text.empty() || text == "(null)") return out;
  for (const auto& part : split(text, ',', {.trim = true, .skip_empty = true})) {
    const auto colon = part.find(':');
    LicenseCount l;
    l.name = part.substr(0, colon);
    l.count = 1;
    if (colon != std::string::npos) {
      auto n = slurm_count(part.substr(colon + 1), line);
      if (!n) return n.error();
      l.count = *n;
    }
    out.push_back(l);
  }
  return out;
}

// A reservation's Duration as scontrol prints it, to the nearest whole minute; -1 for
// UNLIMITED or anything that is not a duration.
int64_t duration_minutes(const std::string& text) {
  const Expected<std::optional<int64_t>> s = parse_slurm_duration(text);
  if (!s || !*s) return -1;
  return (**s + 30) / 60;
}

bool grows(const std::vector<LicenseCount>& from, const std::vector<LicenseCount>& to) {
  const auto have = as_map(from);
  for (const auto& l : to) {
    auto it = have.find(l.name);
    if (it == have.end() || l.count > it->second) return true;
  }
  return false;
}

std::string hold_fields(const std::string& license, uint64_t count) {
  return "ReservationName=" + hold_name(license) +
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

std::string hold_name(std::string_view license) {
  return std::string(kHoldPrefix) + std::string(license);
}

bool is_hold_name(std::string_view name) {
  return name.size() > kHoldPrefix.size() && name.substr(0, kHoldPrefix.size()) == kHoldPrefix &&
         managed_license(std::string(name.substr(kHoldPrefix.size())));
}

Expected<SlurmState> parse_slurm_state(std::string_view licenses_text,
                                       std::string_view reservations_text) {
  SlurmState state;
  auto use = parse_license_use(licenses_text);
  if (!use) return use.error();
  for (const auto& l : *use) state.licenses.push_back({l.name, l.total});
  for (const auto& line : split(reservations_text, '\n', {.trim = true, .skip_empty = true})) {
    const ScontrolFields w = parse_scontrol_line(line);
    ExistingReservation r;
    r.name = scontrol_field(w, "ReservationName");
    if (r.name.empty()) continue;  // "No reservations in the system"
    r.start_local = scontrol_field(w, "StartTime");
    r.duration_min = duration_minutes(scontrol_field(w, "Duration"));
    r.flags = split(scontrol_field(w, "Flags"), ',', {.trim = true, .skip_empty = true});
    auto lic = license_list(scontrol_field(w, "Licenses"), line);
    if (!lic) return lic.error();
    r.licenses = std::move(*lic);
    r.users = scontrol_field(w, "Users");
    state.reservations.push_back(std::move(r));
  }
  return state;
}

Expected<std::vector<LicenseCount>> parse_licenses(std::string_view text) {
  return license_list(text, text);
}

uint64_t LicenseUse::available() const {
  const uint64_t taken = used + reserved;
  return std::min(free, taken >= total ? 0 : total - taken);
}

Expected<std::vector<LicenseUse>> parse_license_use(std::string_view licenses_text) {
  std::vector<LicenseUse> out;
  for (const auto& line : split(licenses_text, '\n', {.trim = true, .skip_empty = true})) {
    const ScontrolFields w = parse_scontrol_line(line);
    LicenseUse l;
    l.name = scontrol_field(w, "LicenseName");
    if (l.name.empty()) continue;  // "No licenses configured"
    auto total = slurm_count(scontrol_field(w, "Total"), line);
    if (!total) return total.error();
    l.total = *total;
    // Older releases leave out Reserved; an absent count is none.
    for (auto [key, count] : {std::pair{"Used", &l.used}, std::pair{"Free", &l.free},
                              std::pair{"Reserved", &l.reserved}}) {
      const std::string text = scontrol_field(w, key);
      if (text.empty()) continue;
      auto n = slurm_count(text, line);
      if (!n) return n.error();
      *count = *n;
    }
    if (scontrol_field(w, "Free").empty()) l.free = l.total - std::min(l.total, l.used);
    out.push_back(std::move(l));
  }
  return out;
}

bool SyncPlan::changes() const {
  for (const auto& a : actions)
    if (a.action.kind != ActionKind::kLeave) return true;
  return false;
}

SyncPlan sync_plan(const std::vector<LicenseCount>& wanted,
                   const std::vector<BlockerReservation>& blockers, const SlurmState& now,
                   const TimeZone& tz) {
  SyncPlan out;
  const auto totals = as_map(now.licenses);
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
    const std::string name = hold_name(w.name);
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
    if (as_map(have->licenses) != as_map(lic)) {
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
    if (!is_hold_name(e.name) || held.count(e.name)) continue;
    loosen.push_back(delete_hold(e, "no longer managed"));
  }

  // The blockers, as diff_plan brings them to the plan (without slurm.conf's licenses).
  Plan plan;
  plan.reservations = blockers;
  for (auto& a : diff_plan(plan, now, tz)) {
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

}  // namespace composer::policies
