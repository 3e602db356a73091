#include "composer/policies/validate.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "composer/common/strings.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/schedule.h"

namespace composer::policies {

namespace {

std::string at(const Policy& p, int line) {
  return p.file + " line " + std::to_string(line) + ": ";
}

std::string week_time(int minute) {
  const int m = minute % 1440;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02d:%02d", m / 60, m % 60);
  return std::string(day_name(minute / 1440)) + " " + buf;
}

std::string type_noun(DeviceType t) {
  switch (t) {
    case DeviceType::kGpu:
      return "GPUs";
    case DeviceType::kMem:
      return "memory";
    case DeviceType::kNvme:
      return "NVMe drives";
  }
  return "";
}

std::string cap_text(const Caps& c, DeviceType t) {
  return c.capped[type_index(t)] ? format_amount(t, c.get(t)) : "no cap";
}

}  // namespace

std::string Validation::to_string() const {
  std::string out;
  for (const auto& e : errors) out += e + "\n";
  for (const auto& w : warnings) out += "warning: " + w + "\n";
  return out;
}

Validation validate(const Policy& policy, const PoolSize& pool) {
  Validation v;
  const Evaluator eval(policy, pool);

  // Counts above the pool.
  for (const auto& l : policy.limits) {
    for (DeviceType t : kAllDeviceTypes) {
      const auto& cap = l.caps[type_index(t)];
      if (!cap || cap->kind != CapSpec::Kind::kCount || cap->value <= pool.size(t)) continue;
      const char* key = t == DeviceType::kGpu ? "Gpus" : t == DeviceType::kMem ? "Mem" : "Nvme";
      v.errors.push_back(at(policy, l.line) + "Limit=" + l.class_name + " Window=" + l.window +
                         " " + key + "=" + cap->to_string(t) + " is above the pool's " +
                         format_amount(t, pool.size(t)) +
                         ": a cap may be at most the pool size (or write a share such as 50%)");
    }
  }

  // Overlapping windows must agree for every class.
  std::vector<std::vector<bool>> cover;
  for (const auto& w : policy.windows) cover.push_back(week_minutes(w));
  for (size_t b = 0; b < policy.windows.size(); ++b) {
    for (size_t a = 0; a < b; ++a) {
      int first = -1;
      for (int m = 0; m < kWeekMinutes && first < 0; ++m)
        if (cover[a][m] && cover[b][m]) first = m;
      if (first < 0) continue;
      const Window& wa = policy.windows[a];
      const Window& wb = policy.windows[b];
      for (const auto& c : policy.classes) {
        auto ca = eval.caps(c.name, wa.name);
        auto cb = eval.caps(c.name, wb.name);
        if (!ca || !cb || *ca == *cb) continue;
        std::string diff;
        for (DeviceType t : kAllDeviceTypes) {
          if (ca->capped[type_index(t)] == cb->capped[type_index(t)] && ca->get(t) == cb->get(t))
            continue;
          diff = type_noun(t) + ": " + cap_text(*ca, t) + " in '" + wa.name + "', " +
                 cap_text(*cb, t) + " in '" + wb.name + "'";
          break;
        }
        v.errors.push_back(at(policy, wb.line) + "Window=" + wb.name +
                           " overlaps Window=" + wa.name + " (line " + std::to_string(wa.line) +
                           ") from " + week_time(first) + " local time, and the two give class " +
                           c.name + " different caps (" + diff +
                           "): give both windows the same Limit lines for every class, or make "
                           "them not overlap");
      }
    }
  }

  // Which windows are ever in force, and whether the Default window is.
  const auto owners = week_owners(policy);
  std::set<int> in_force(owners.begin(), owners.end());
  std::vector<std::string> live;  // names of windows in force, Default included
  for (int w : in_force)
    live.push_back(w < 0 ? std::string(kDefaultWindow)
                         : policy.windows[static_cast<size_t>(w)].name);

  for (const auto& c : policy.classes) {
    bool can_run = false;
    for (DeviceType t : kAllDeviceTypes) {
      bool ever = false;  // uncapped, or a cap above 0, in some window in force
      for (const auto& w : live) {
        auto caps = eval.caps(c.name, w);
        if (!caps) continue;
        if (!caps->capped[type_index(t)] || caps->get(t) > 0) ever = true;
      }
      if (ever) {
        can_run = true;
      } else {
        v.warnings.push_back(at(policy, c.line) + "class " + c.name + " can never get " +
                             type_noun(t) + ": its cap on them is 0 in every window");
      }
    }
    if (!can_run) {
      v.errors.push_back(at(policy, c.line) + "class " + c.name +
                         " can never run: its caps are 0 for GPUs, memory and NVMe drives in "
                         "every window; raise one of them somewhere or remove the class");
    }
  }

  for (const auto& w : policy.windows) {
    bool used = false;
    for (const auto& l : policy.limits) used = used || l.window == w.name;
    if (!used) {
      v.warnings.push_back(at(policy, w.line) + "no Limit line names Window=" + w.name +
                           ": while it is open every class is limited only by the pool");
    }
  }
  if (!in_force.count(-1)) {
    for (const auto& l : policy.limits) {
      if (l.window == kDefaultWindow) {
        v.warnings.push_back(at(policy, l.line) + "Limit=" + l.class_name +
                             " Window=Default never applies: the windows cover the whole week");
      }
    }
  }
  if (policy.default_class.empty() && !policy.classes.empty()) {
    v.warnings.push_back(policy.file +
                         ": no DefaultClass: a job without --workload whose partition, QOS and "
                         "account match no class is refused");
  }
  return v;
}

Validation validate_placement(const Policy& policy, const std::vector<std::string>& levels,
                              const std::map<std::string, std::set<std::string>>& domains) {
  using Kind = PlacementRule::Kind;
  Validation v;
  for (const Placement& p : policy.placements) {
    const PlacementRule& r = p.rule;
    if (r.kind == Kind::kPack) continue;
    const std::string head =
        at(policy, p.line) + "Placement=" + p.class_name + " (" + r.to_string() + "): ";
    if (std::find(levels.begin(), levels.end(), r.level) == levels.end()) {
      v.errors.push_back(head + "level " + r.level +
                         " is not declared by composer.conf's DomainLevels= (declared: " +
                         (levels.empty() ? "none" : join(levels, ", ")) + ")");
      continue;
    }
    if (r.kind != Kind::kSpread) continue;
    auto it = domains.find(r.level);
    const size_t have = it == domains.end() ? 0 : it->second.size();
    if (have < r.count) {
      v.errors.push_back(head + "the pool has " + std::to_string(have) + " " + r.level + " " +
                         (have == 1 ? "domain" : "domains") + ", so a spread over " +
                         std::to_string(r.count) + " can never be met");
      continue;
    }
    for (const Limit& l : policy.limits) {
      if (l.class_name != p.class_name) continue;
      for (DeviceType t : {DeviceType::kGpu, DeviceType::kNvme}) {
        if (r.type && *r.type != t) continue;
        const auto& cap = l.caps[type_index(t)];
        if (!cap || cap->kind != CapSpec::Kind::kCount || cap->value == 0 ||
            cap->value >= r.count) {
          continue;
        }
        v.errors.push_back(head + "Limit=" + l.class_name + " Window=" + l.window + " (line " +
                           std::to_string(l.line) + ") caps the class at " +
                           format_amount(t, cap->value) + ", fewer than the " +
                           std::to_string(r.count) + " domains a job's " + type_noun(t) +
                           " must spread over");
      }
    }
  }
  return v;
}

}  // namespace composer::policies
