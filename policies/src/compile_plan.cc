#include "composer/policies/compile_plan.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "composer/common/error.h"
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

}  // namespace composer::policies
