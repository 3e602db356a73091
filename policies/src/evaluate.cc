#include "composer/policies/evaluate.h"

#include <algorithm>
#include <cstdio>

#include "composer/common/units.h"

namespace composer::policies {

namespace {

std::array<uint64_t, 3> amounts(const JobQuery& job) {
  return {job.gpus, gib_rounded_up(job.mem_bytes), job.nvme};
}

}  // namespace

Evaluator::Evaluator(Policy policy, PoolSize pool)
    : policy_(std::move(policy)), pool_(pool), schedule_(policy_) {}

std::string Evaluator::format_time(int64_t t) const {
  const LocalTime l = policy_.time_zone.to_local(t);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s %04d-%02d-%02d %02d:%02d %s",
                std::string(day_name(l.weekday)).c_str(), l.civil.year, l.civil.month, l.civil.day,
                l.civil.hour, l.civil.minute, l.abbreviation.c_str());
  return buf;
}

Expected<Caps> Evaluator::caps(std::string_view class_name, std::string_view window) const {
  if (!policy_.find_class(class_name)) {
    std::string known;
    for (const auto& c : policy_.classes) known += (known.empty() ? "" : ", ") + c.name;
    return Error{ErrorCode::kInvalidArgument, "unknown workload class '" + std::string(class_name) +
                                                  "': the policy defines " +
                                                  (known.empty() ? "no classes" : known)};
  }
  Caps out;
  const Limit* limit = policy_.find_limit(class_name, window);
  for (DeviceType t : kAllDeviceTypes) {
    const size_t i = type_index(t);
    if (limit && limit->caps[i]) {
      out.value[i] = resolve_cap(*limit->caps[i], pool_.size(t));
      out.capped[i] = true;
    } else {
      out.value[i] = pool_.size(t);
    }
  }
  return out;
}

Expected<CapsInForce> Evaluator::caps_in_force(int64_t t, std::string_view class_name) const {
  CapsInForce out;
  for (size_t w : schedule_.windows_at(t)) out.windows.push_back(policy_.windows[w].name);
  out.window = out.windows.empty() ? std::string(kDefaultWindow) : out.windows.front();
  auto c = caps(class_name, out.window);
  if (!c) return c.error();
  out.caps = *c;
  out.until_s = schedule_.next_boundary(t);
  return out;
}

std::optional<Hold> Evaluator::first_hold(const JobQuery& job, int64_t start) const {
  const auto want = amounts(job);
  const int64_t end = start + job.time_limit_s;
  int64_t t = start;
  while (t < end) {
    auto in_force = caps_in_force(t, job.workload_class);
    if (!in_force) return {};
    const int64_t until = in_force->until_s.value_or(end);
    for (DeviceType type : kAllDeviceTypes) {
      const size_t i = type_index(type);
      if (want[i] > in_force->caps.value[i]) {
        return Hold{in_force->window, type, in_force->caps.value[i], want[i], t, until};
      }
    }
    t = until;
  }
  return {};
}

Expected<Admission> Evaluator::admit(const JobQuery& job, int horizon_days) const {
  if (!policy_.find_class(job.workload_class)) {
    auto c = caps(job.workload_class, kDefaultWindow);
    return c.error();
  }
  if (job.time_limit_s <= 0) {
    return Error{ErrorCode::kInvalidArgument,
                 "time limit " + std::to_string(job.time_limit_s) +
                     "s is not a duration: a job's time limit must be at least one second"};
  }
  if (horizon_days < 1 || horizon_days > 366) {
    return Error{ErrorCode::kInvalidArgument,
                 "horizon of " + std::to_string(horizon_days) + " days: look ahead 1 to 366 days"};
  }
  Admission out;
  out.horizon_days = horizon_days;
  const auto want = amounts(job);
  for (DeviceType type : kAllDeviceTypes) {
    const size_t i = type_index(type);
    if (want[i] > pool_.size(type)) {
      out.hold = Hold{"pool",  type,        pool_.size(type),
                      want[i], job.start_s, job.start_s + job.time_limit_s};
      return out;
    }
  }
  out.hold = first_hold(job, job.start_s);
  if (!out.hold) {
    out.admitted = true;
    for (const auto& o : schedule_.occurrences(job.start_s, job.start_s + job.time_limit_s)) {
      const std::string& name = policy_.windows[o.window].name;
      if (std::find(out.windows.begin(), out.windows.end(), name) == out.windows.end())
        out.windows.push_back(name);
    }
    return out;
  }
  // Whether a start fits changes only when an open window closes under it, so the
  // candidates are the window boundaries.
  const int64_t horizon = job.start_s + int64_t{horizon_days} * 86400;
  int64_t t = job.start_s;
  while (true) {
    auto next = schedule_.next_boundary(t);
    if (!next || *next > horizon) break;
    t = *next;
    if (!first_hold(job, t)) {
      out.earliest_s = t;
      break;
    }
  }
  return out;
}

std::string Evaluator::explain(const JobQuery& job, const Admission& a) const {
  std::string asked;
  const auto want = amounts(job);
  for (DeviceType type : kAllDeviceTypes) {
    if (want[type_index(type)] == 0) continue;
    asked += (asked.empty() ? "" : ", ") + format_amount(type, want[type_index(type)]);
  }
  if (asked.empty()) asked = "no pooled devices";
  std::string s = "A " + job.workload_class + " job asking for " + asked + " for " +
                  format_duration(job.time_limit_s);
  if (a.admitted) {
    s += " can start at " + format_time(job.start_s) + ": it fits the " + job.workload_class +
         " caps of ";
    if (a.windows.empty()) {
      s += "the Default window (no window is open during its run)";
    } else {
      std::string names;
      for (const auto& w : a.windows) names += (names.empty() ? "'" : ", '") + w + "'";
      s += "window" + std::string(a.windows.size() > 1 ? "s " : " ") + names + " for its whole run";
    }
    return s + ".";
  }
  s += " cannot start at " + format_time(job.start_s) + ": ";
  const Hold& h = *a.hold;
  if (h.window == "pool") {
    return s + "the pool has only " + format_amount(h.type, h.cap) + ", so it can never run.";
  }
  s += "from " + format_time(h.from_s) + " to " + format_time(h.until_s) + " window '" + h.window +
       "' caps " + job.workload_class + " jobs at " + format_amount(h.type, h.cap) + ".";
  if (a.earliest_s) {
    s += " The earliest start is " + format_time(*a.earliest_s) + ".";
  } else {
    s += " No start within the next " + std::to_string(a.horizon_days) +
         " days works: a run that long always reaches a window whose cap is too small; "
         "ask for less or for a shorter time limit.";
  }
  return s;
}

Expected<std::string> Evaluator::explain(const JobQuery& job, int horizon_days) const {
  auto a = admit(job, horizon_days);
  if (!a) return a.error();
  return explain(job, *a);
}

}  // namespace composer::policies
