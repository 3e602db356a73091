// Caps in force and admission of hypothetical jobs, exactly as the policy states them (the
// Slurm compilation in compile_plan.h approximates this and says where).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "composer/policies/policy.h"
#include "composer/policies/schedule.h"

namespace composer::policies {

// A class's caps in one window, resolved against the pool. An uncapped type holds the pool
// size and capped[type] = false.
struct Caps {
  std::array<uint64_t, 3> value{};
  std::array<bool, 3> capped{};
  uint64_t get(DeviceType t) const { return value[type_index(t)]; }
  bool operator==(const Caps&) const = default;
};

struct CapsInForce {
  std::string window;                // the window that decides (kDefaultWindow if none is open)
  std::vector<std::string> windows;  // every window open at that time, in file order
  Caps caps;
  std::optional<int64_t> until_s;  // when the set of open windows changes next
};

// A job as the policy sees it: totals over all its nodes.
struct JobQuery {
  std::string workload_class;
  uint64_t gpus = 0;
  uint64_t mem_bytes = 0;  // counted in whole GiB, rounded up
  uint64_t nvme = 0;
  int64_t time_limit_s = 0;
  int64_t start_s = 0;
};

// The limit that stops a job: `requested` exceeds `cap` from `from_s` to `until_s`.
struct Hold {
  std::string window;  // kDefaultWindow, a window's name, or "pool" when the pool is too small
  DeviceType type = DeviceType::kGpu;
  uint64_t cap = 0;
  uint64_t requested = 0;
  int64_t from_s = 0;
  int64_t until_s = 0;
};

struct Admission {
  bool admitted = false;              // it could start at the asked time
  std::optional<int64_t> earliest_s;  // otherwise: the earliest start within the horizon
  std::optional<Hold> hold;           // what holds it at the asked time
  std::vector<std::string> windows;   // windows its run overlaps (when admitted)
  int horizon_days = 0;
};

class Evaluator {
 public:
  // Keeps a copy of the policy; call validate() first, the evaluator trusts it.
  Evaluator(Policy policy, PoolSize pool);

  const Policy& policy() const { return policy_; }
  const PoolSize& pool() const { return pool_; }
  const Schedule& schedule() const { return schedule_; }

  // The caps of `class_name` in `window` (a window's name or kDefaultWindow).
  Expected<Caps> caps(std::string_view class_name, std::string_view window) const;
  Expected<CapsInForce> caps_in_force(int64_t t, std::string_view class_name) const;

  // Whether the job could start at job.start_s: its amounts must fit the caps of every window
  // its run [start, start + time limit) overlaps. If not, the earliest start within
  // `horizon_days` and the limit that holds it. A job that no start within a week admits can
  // never run (the policy repeats weekly, up to clock changes).
  Expected<Admission> admit(const JobQuery& job, int horizon_days = 7) const;
  // A sentence for an admin or a user: what was asked, the answer and the limit that decides.
  std::string explain(const JobQuery& job, const Admission& admission) const;
  Expected<std::string> explain(const JobQuery& job, int horizon_days = 7) const;

  // "Mon 2024-03-04 08:00 CET"
  std::string format_time(int64_t t) const;

 private:
  std::optional<Hold> first_hold(const JobQuery& job, int64_t start) const;

  Policy policy_;
  PoolSize pool_;
  Schedule schedule_;
};

}  // namespace composer::policies
