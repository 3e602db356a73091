// The discrete-event scheduler: Slurm's priority FCFS with EASY backfill, placing every job
// with composerd's Allocator and admitting it with the policy's Evaluator. The model and its
// differences from a real slurmctld are in docs/CAPACITY.md ("How the simulation decides").
//
// Time advances from event to event (a submit, an end, a policy boundary). At each event time
// the ends are applied first, then the submits, then one scheduling pass. Between two events
// nothing changes, so busy and stranded device time is integrated over those intervals.

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "composer/common/units.h"
#include "composer/core/allocator.h"
#include "composer/policies/classify.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/validate.h"
#include "composer/simulate/simulate.h"

namespace composer::simulate {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kBackfillInterval = 30;             // s, Slurm's bf_interval default
constexpr int64_t kStuckAfterS = int64_t{8} * 86400;  // longer than the policy's weekly horizon
// How far ahead a job's run is checked against the caps: the policy repeats weekly, so a
// longer run meets no cap beyond eight days.
constexpr int64_t kHorizonS = int64_t{8} * 86400;
// Job sizes for the waits by size: the smallest GPU count of each bucket and its name.
constexpr std::array<std::pair<uint32_t, const char*>, 7> kSizes = {{{0, "0 GPUs"},
                                                                     {1, "1 GPU"},
                                                                     {2, "2-4 GPUs"},
                                                                     {5, "5-8 GPUs"},
                                                                     {9, "9-16 GPUs"},
                                                                     {17, "17-64 GPUs"},
                                                                     {65, "65+ GPUs"}}};

using Shape = std::vector<std::pair<uint32_t, uint64_t>>;  // (gpus, mem) per node

struct DevInfo {
  DeviceType type = DeviceType::kGpu;
  size_t zone = 0;
  uint64_t bytes = 0;
};

struct Placement {
  std::string node;
  size_t host = 0;
  std::vector<std::string> ids;
  std::vector<const DevInfo*> info;  // of ids, looked up once
};

struct SimJob {
  const Job* job = nullptr;
  std::string cls;  // workload class ("" when none)
  size_t cls_index = 0;
  std::vector<Request> parts;
  Shape shape;
  uint64_t mem_gib = 0;  // the memory licenses: whole GiB per node, rounded up, x nodes
  int64_t start_s = -1;
  std::vector<Placement> placed;
  uint64_t got_mem = 0;  // bytes of the blocks taken
};

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Nearest rank.
int64_t percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  if (rank == 0) rank = 1;
  return sorted[std::min(rank, sorted.size()) - 1];
}

WaitStats stats(std::string name, std::vector<int64_t> waits) {
  WaitStats w;
  w.name = std::move(name);
  w.jobs = waits.size();
  if (waits.empty()) return w;
  std::sort(waits.begin(), waits.end());
  double sum = 0;
  for (int64_t x : waits) sum += static_cast<double>(x);
  w.mean_s = sum / static_cast<double>(waits.size());
  w.p50_s = percentile(waits, 0.50);
  w.p95_s = percentile(waits, 0.95);
  w.max_s = waits.back();
  return w;
}

class Engine {
 public:
  Engine(const Cluster& cluster, const Trace& trace, const policies::Policy* policy,
         const Options& options)
      : cluster_(cluster), trace_(trace), options_(options) {
    alloc_.load(cluster.hosts, cluster.devices);
    if (policy != nullptr) {
      evaluator_.emplace(*policy, policies::PoolSize::from_rows(alloc_.summary()));
    }
    std::map<std::string, size_t> zones;
    for (const Device& d : cluster.devices) {
      auto [it, fresh] = zones.emplace(d.zone, zones.size());
      (void)fresh;
      devs_.emplace(d.id, DevInfo{d.type, it->second, d.capacity_bytes});
    }
    zone_gpus_.assign(zones.size(), 0);
    zone_mem_.assign(zones.size(), 0);
    zone_held_gpus_.assign(zones.size(), 0);
    zone_held_mem_.assign(zones.size(), 0);
    for (const Device& d : cluster.devices) {
      const size_t z = zones.at(d.zone);
      if (d.type == DeviceType::kGpu) zone_gpus_[z] += 1;
      if (d.type == DeviceType::kMem) zone_mem_[z] += d.capacity_bytes;
    }
    free_gpus_ = cluster.gpus;
    free_mem_ = cluster.mem_bytes;
    for (const Host& h : cluster.hosts) {
      HostState s;
      s.host = &h;
      uint64_t gpus = 0;
      uint64_t mem = 0;
      uint64_t largest = 0;
      for (const std::string& z : h.zones) {
        auto it = zones.find(z);
        if (it == zones.end()) continue;
        s.zones.push_back(it->second);
        gpus += zone_gpus_[it->second];
        mem += zone_mem_[it->second];
      }
      for (const Device& d : cluster.devices) {
        if (d.type == DeviceType::kMem && h.zone_rank(d.zone)) {
          largest = std::max(largest, d.capacity_bytes);
        }
      }
      s.largest_block = largest;
      max_node_gpus_ = std::max<uint64_t>(max_node_gpus_, std::min<uint64_t>(gpus, h.gpu_slots));
      max_node_mem_ =
          std::max<uint64_t>(max_node_mem_, std::min<uint64_t>(mem, largest * h.mem_slots));
      hosts_.push_back(std::move(s));
    }
    std::map<size_t, uint32_t> reach;
    for (const HostState& h : hosts_) {
      for (size_t z : h.zones) ++reach[z];
    }
    for (HostState& h : hosts_) {
      h.private_zones =
          std::all_of(h.zones.begin(), h.zones.end(), [&](size_t z) { return reach[z] == 1; });
    }
  }

  Expected<Result> run(std::vector<JobOutcome>* outcomes) {
    keep_placements_ = outcomes != nullptr;
    if (evaluator_) {
      const policies::Validation v = policies::validate(evaluator_->policy(), evaluator_->pool());
      if (!v.ok()) {
        return Error{ErrorCode::kInvalidArgument,
                     "the policy does not fit cluster " + cluster_.name + ": " + v.to_string()};
      }
    }
    result_.cluster = cluster_.name;
    result_.trace = trace_.name;
    result_.gpus = cluster_.gpus;
    result_.mem_bytes = cluster_.mem_bytes;
    result_.hosts = static_cast<uint32_t>(cluster_.hosts.size());
    result_.fixed_servers = cluster_.fixed_servers;
    result_.counts = trace_.counts;
    result_.jobs = trace_.jobs.size();
    jobs_.resize(trace_.jobs.size());
    for (size_t i = 0; i < trace_.jobs.size(); ++i) prepare(i);
    if (trace_.jobs.empty()) return result_;
    result_.first_submit_s = trace_.jobs.front().submit_s;
    now_ = result_.first_submit_s;
    last_progress_ = now_;
    step_ = options_.series_step_s > 0                                ? options_.series_step_s
            : trace_.jobs.back().submit_s - now_ < int64_t{7} * 86400 ? 3600
                                                                      : 86400;
    size_t next = 0;
    while (true) {
      int64_t t = kNever;
      if (next < jobs_.size()) t = jobs_[next].job->submit_s;
      if (!ends_.empty()) t = std::min(t, ends_.top().first);
      if (!queue_.empty() && !wakes_.empty()) t = std::min(t, *wakes_.begin());
      if (t == kNever) break;
      if (ends_.empty() && next >= jobs_.size() && t - last_progress_ > kStuckAfterS) break;
      advance(t);
      while (!ends_.empty() && ends_.top().first == t) {
        finish(ends_.top().second);
        ends_.pop();
      }
      while (next < jobs_.size() && jobs_[next].job->submit_s == t) {
        if (admissible(next)) queue_.push_back(next);
        ++next;
        if (options_.progress && next % std::max<uint64_t>(options_.progress_every, 1) == 0) {
          options_.progress(next, jobs_.size());
        }
      }
      while (!wakes_.empty() && *wakes_.begin() <= t) wakes_.erase(wakes_.begin());
      pass(t);
    }
    for (size_t i : queue_) {
      never(jobs_[i],
            "still waiting when nothing was left to run: no placement on the idle "
            "cluster, or no policy window, ever took it");
    }
    if (options_.progress) options_.progress(next, jobs_.size());
    return finish_result(outcomes);
  }

 private:
  struct HostState {
    const Host* host = nullptr;
    std::vector<size_t> zones;
    uint32_t gpus_held = 0;
    uint32_t mem_held = 0;
    uint64_t largest_block = 0;  // of the memory its zones hold
    bool private_zones = false;  // no other host reaches any of its zones
  };

  // ---- jobs ----

  void prepare(size_t i) {
    SimJob& s = jobs_[i];
    const Job& j = trace_.jobs[i];
    s.job = &j;
    uint64_t k = j.nodes;
    if (k == 0) {
      k = 1;
      if (max_node_gpus_ > 0)
        k = std::max<uint64_t>(k, (j.gpus + max_node_gpus_ - 1) / max_node_gpus_);
      if (max_node_mem_ > 0) {
        k = std::max<uint64_t>(k, (j.mem_bytes + max_node_mem_ - 1) / max_node_mem_);
      }
    }
    k = std::min<uint64_t>(k, 100000);
    const uint64_t per_mem = (j.mem_bytes + k - 1) / k;
    const uint64_t mib_mem = (per_mem + kMiB - 1) / kMiB * kMiB;
    for (uint64_t n = 0; n < k; ++n) {
      Request r;
      r.gpus = static_cast<uint32_t>(j.gpus / k + (n < j.gpus % k ? 1 : 0));
      r.mem_bytes = mib_mem;
      s.parts.push_back(r);
      s.shape.emplace_back(r.gpus, r.mem_bytes);
      s.mem_gib += gib_rounded_up(r.mem_bytes);
    }
  }

  uint64_t job_mem(const SimJob& s) const { return s.parts.front().mem_bytes * s.parts.size(); }

  void never(SimJob& s, const std::string& reason) {
    ++result_.never_runnable;
    auto [it, fresh] = never_index_.emplace(reason, result_.never.size());
    if (fresh) result_.never.push_back({reason, 0, s.job->line, s.job->id});
    result_.never[it->second].jobs++;
  }

  std::string shape_text(const SimJob& s) const {
    const Job& j = *s.job;
    std::string t = std::to_string(j.gpus) + (j.gpus == 1 ? " GPU" : " GPUs");
    if (j.mem_bytes > 0) t += " and " + format_size(job_mem(s)) + " of memory";
    return t + " on " + std::to_string(s.parts.size()) + (s.parts.size() == 1 ? " node" : " nodes");
  }

  // Whether the job could ever run here: classified, within the cluster and the policy.
  bool admissible(size_t i) {
    SimJob& s = jobs_[i];
    const Job& j = *s.job;
    if (evaluator_) {
      auto c =
          policies::classify(evaluator_->policy(), {j.workload, j.partition, j.qos, j.account});
      if (!c) {
        never(s, "job_submit refuses the job: " + c.error().message);
        return false;
      }
      s.cls = c->class_name;
    } else {
      s.cls = j.workload;
    }
    auto [it, fresh] = class_index_.emplace(s.cls, class_names_.size());
    if (fresh) {
      class_names_.push_back(s.cls);
      class_usage_.push_back({0, 0});
      class_ends_.emplace_back();
      class_busy_.push_back({0, 0});
    }
    s.cls_index = it->second;
    const std::string what = shape_text(s);
    if (j.gpus > cluster_.gpus) {
      never(s, what + ": the cluster has only " + std::to_string(cluster_.gpus) + " GPUs");
      return false;
    }
    if (job_mem(s) > cluster_.mem_bytes) {
      never(s, what + ": the cluster has only " + format_size(cluster_.mem_bytes) + " of memory");
      return false;
    }
    if (s.parts.size() > hosts_.size()) {
      never(s, what + ": the cluster has only " + std::to_string(hosts_.size()) +
                   (hosts_.size() == 1 ? " node" : " nodes"));
      return false;
    }
    auto memo = possible_.find(s.shape);
    if (memo == possible_.end()) {
      size_t ok = 0;
      std::string first;
      for (const HostState& h : hosts_) {
        Status st = alloc_.check_possible(h.host->node, s.parts.front());
        if (st) {
          if (++ok >= s.parts.size()) break;
        } else if (first.empty()) {
          first = st.error().message;
        }
      }
      std::string reason;
      if (ok < s.parts.size()) {
        reason = what + ": " +
                 (ok == 0 ? first
                          : "only " + std::to_string(ok) + " nodes could ever take " +
                                shape_text_part(s) + " (" + first + ")");
      }
      memo = possible_.emplace(s.shape, reason).first;
    }
    if (!memo->second.empty()) {
      never(s, memo->second);
      return false;
    }
    if (evaluator_) {
      auto a = evaluator_->admit(query(s, {0, 0}, j.submit_s));
      if (!a) {
        never(s, a.error().message);
        return false;
      }
      if (!a->admitted && !a->earliest_s) {
        never(s, evaluator_->explain(query(s, {0, 0}, j.submit_s), *a));
        return false;
      }
    }
    return true;
  }

  std::string shape_text_part(const SimJob& s) const {
    const Request& r = s.parts.front();
    std::string t = std::to_string(r.gpus) + (r.gpus == 1 ? " GPU" : " GPUs");
    if (r.mem_bytes > 0) t += " and " + format_size(r.mem_bytes);
    return t;
  }

  policies::JobQuery query(const SimJob& s, std::pair<uint64_t, uint64_t> usage, int64_t t) const {
    policies::JobQuery q;
    q.workload_class = s.cls;
    q.gpus = usage.first + s.job->gpus;
    q.mem_bytes = (usage.second + s.mem_gib) * kGiB;
    q.time_limit_s = std::max<int64_t>(s.job->limit_s, 1);
    q.start_s = t;
    return q;
  }

  // ---- the pool ----

  void take(Placement& p, int64_t owner, bool add) {
    take_devices(p, owner, add);
    count(p, add);
  }

  // The allocator's half of take().
  void take_devices(Placement& p, int64_t owner, bool add) {
    if (add) {
      alloc_.take(hosts_[p.host].host->node, p.ids, owner);
    } else {
      alloc_.give_back(p.ids);
    }
  }

  // The engine's own counters' half of take(): what may_fit() and the free totals read.
  void count(Placement& p, bool add) {
    HostState& hs = hosts_[p.host];
    if (p.info.size() != p.ids.size()) {
      p.info.clear();
      for (const std::string& id : p.ids) p.info.push_back(&devs_.at(id));
    }
    for (const DevInfo* d : p.info) {
      if (d->type == DeviceType::kGpu) {
        add ? --zone_gpus_[d->zone] : ++zone_gpus_[d->zone];
        add ? --free_gpus_ : ++free_gpus_;
        add ? ++hs.gpus_held : --hs.gpus_held;
      } else if (d->type == DeviceType::kMem) {
        add ? zone_mem_[d->zone] -= d->bytes : zone_mem_[d->zone] += d->bytes;
        add ? free_mem_ -= d->bytes : free_mem_ += d->bytes;
        add ? ++hs.mem_held : --hs.mem_held;
      }
    }
  }

  // A cheap test of what allocate() would refuse for certain: too few slots or free devices
  // within the host's zones. The allocator decides everything else.
  // Devices the reservation holds count as taken; memory needs at least as many slots as
  // blocks of the host's largest size would take.
  bool may_fit(const HostState& h, const Request& r) const {
    if (r.gpus > 0 && h.gpus_held + r.gpus > h.host->gpu_slots) return false;
    if (r.mem_bytes > 0) {
      if (h.largest_block == 0) return false;
      const uint64_t blocks = (r.mem_bytes + h.largest_block - 1) / h.largest_block;
      if (h.mem_held + blocks > h.host->mem_slots) return false;
    }
    uint64_t gpus = 0;
    uint64_t mem = 0;
    for (size_t z : h.zones) {
      gpus += zone_gpus_[z] - zone_held_gpus_[z];
      mem += zone_mem_[z] - zone_held_mem_[z];
    }
    return gpus >= r.gpus && mem >= r.mem_bytes;
  }

  // First fit of every part on distinct nodes in file order, by the allocator's answer per
  // node. Without an owner it changes nothing, which is exact while each chosen node's zones
  // are its own (fixed servers: taking devices there changes nothing another node could get),
  // and answers nullopt once a later part would depend on what an earlier one takes. With an
  // owner it takes each part's devices as it goes, and gives them back if a part finds none.
  std::optional<bool> first_fit(const SimJob& s, std::vector<Placement>& out,
                                std::optional<int64_t> owner) {
    std::vector<bool> used(hosts_.size(), false);
    for (const Request& r : s.parts) {
      bool ok = false;
      for (size_t h = 0; h < hosts_.size() && !ok; ++h) {
        if (used[h] || !may_fit(hosts_[h], r)) continue;
        auto ids = alloc_.allocate(hosts_[h].host->node, r);
        if (!ids) continue;
        if (guard_ && !within_spare_slots(h, *ids)) continue;
        if (!owner && s.parts.size() > 1 && !hosts_[h].private_zones) return std::nullopt;
        out.push_back({hosts_[h].host->node, h, std::move(*ids), {}});
        if (owner) take(out.back(), *owner, true);
        used[h] = true;
        ok = true;
      }
      if (!ok) {
        if (owner) {
          for (Placement& p : out) take(p, *owner, false);
        }
        out.clear();
        return false;
      }
    }
    return true;
  }

  // Places every part of the job on distinct nodes, taking the devices; all or nothing.
  bool place(SimJob& s, int64_t owner) {
    if (s.job->gpus > free_gpus_ || job_mem(s) > free_mem_) return false;
    std::vector<Placement> done;
    if (auto exact = first_fit(s, done, std::nullopt)) {
      if (!*exact) return false;
      for (Placement& p : done) take(p, owner, true);
    } else {
      done.clear();
      if (!*first_fit(s, done, owner)) return false;
    }
    s.placed = std::move(done);
    return true;
  }

  void release(SimJob& s) {
    for (Placement& p : s.placed) take(p, 0, false);
  }

  // Whether the job could be placed now, changing nothing: first fit without taking where that
  // is exact, else
  // a trial placement undone at once.
  // With `where`, the placement it would take.
  bool placeable(SimJob& s, std::vector<Placement>* where = nullptr) {
    if (s.job->gpus > free_gpus_ || job_mem(s) > free_mem_) return false;
    std::vector<Placement> planned;
    if (auto exact = first_fit(s, planned, std::nullopt)) {
      if (where != nullptr) *where = std::move(planned);
      return *exact;
    }
    std::vector<Placement> kept = std::move(s.placed);
    const bool ok = place(s, -1);
    if (ok) {
      release(s);
      if (where != nullptr) *where = s.placed;
    }
    s.placed = std::move(kept);
    return ok;
  }

  // ---- the reservation's places ----

  // A job that runs past the shadow time must leave, in every zone, as many devices of each
  // type as the reserved job takes there then, less those that free up by then (running jobs
  // whose time limits end by the shadow time): so many of the reserved job's devices that are
  // free now are held (Allocator::set_holder: never allocated, no attach slot counted) while
  // such a job is placed, and free again for everything else. Devices of one zone and type
  // are alike, so this is "never delay the reserved job", as Slurm's backfill keeps it.
  // Switched only when the next placement needs the other state.
  void hold(bool on) {
    if (held_ == on) return;
    held_ = on;
    if (!on) {
      for (const std::string& id : held_ids_) alloc_.set_holder(id, "");
      held_ids_.clear();
      std::fill(zone_held_gpus_.begin(), zone_held_gpus_.end(), 0);
      std::fill(zone_held_mem_.begin(), zone_held_mem_.end(), 0);
      return;
    }
    using Key = std::pair<size_t, DeviceType>;  // (zone, type)
    std::map<Key, int64_t> keep;
    for (const Placement& p : reserved_) {
      for (const std::string& id : p.ids) {
        const DevInfo& d = devs_.at(id);
        ++keep[{d.zone, d.type}];
      }
    }
    for (auto it = expected_.begin(); it != expected_.end() && it->first <= shadow_; ++it) {
      for (const Placement& p : jobs_[it->second].placed) {
        for (const DevInfo* d : p.info) --keep[{d->zone, d->type}];
      }
    }
    for (const Placement& p : reserved_) {
      for (const std::string& id : p.ids) {
        const DevInfo& d = devs_.at(id);
        int64_t& left = keep[{d.zone, d.type}];
        const Device* now = alloc_.device(id);
        if (left <= 0 || now == nullptr || now->composition_id) continue;
        alloc_.set_holder(id, "reservation");
        held_ids_.push_back(id);
        (d.type == DeviceType::kGpu ? zone_held_gpus_[d.zone] : zone_held_mem_[d.zone]) +=
            d.type == DeviceType::kGpu ? 1 : d.bytes;
        --left;
      }
    }
  }

  // Attach slots are the host's own: a job running past the shadow time may use a slot of a
  // host the reserved job is placed on only if the host still has one spare for the reserved
  // job then.
  bool within_spare_slots(size_t h, const std::vector<std::string>& ids) const {
    auto it = spare_slots_.find(h);
    if (it == spare_slots_.end()) return true;
    const std::array<int64_t, 2> need = slots_of(ids);
    return need[0] <= it->second[0] && need[1] <= it->second[1];
  }

  std::array<int64_t, 2> slots_of(const std::vector<std::string>& ids) const {
    std::array<int64_t, 2> n{0, 0};
    for (const std::string& id : ids) {
      const DevInfo& d = devs_.at(id);
      if (d.type == DeviceType::kGpu) ++n[0];
      if (d.type == DeviceType::kMem) ++n[1];
    }
    return n;
  }

  void use_spare_slots(const SimJob& s) {
    for (const Placement& p : s.placed) {
      auto it = spare_slots_.find(p.host);
      if (it == spare_slots_.end()) continue;
      const std::array<int64_t, 2> n = slots_of(p.ids);
      it->second[0] -= n[0];
      it->second[1] -= n[1];
    }
  }

  // ---- time ----

  void advance(int64_t t) {
    if (t <= now_) return;
    const int64_t dt = t - now_;
    const int64_t busy_gpus = static_cast<int64_t>(cluster_.gpus - free_gpus_);
    const int64_t busy_mib = static_cast<int64_t>((cluster_.mem_bytes - free_mem_) / kMiB);
    result_.gpu_s += busy_gpus * dt;
    result_.mem_mib_s += busy_mib * dt;
    if (strand_gpus_) result_.stranded_gpu_s += static_cast<int64_t>(free_gpus_) * dt;
    if (strand_mem_) result_.stranded_mem_mib_s += static_cast<int64_t>(free_mem_ / kMiB) * dt;
    if (waiting_gpu_jobs_ > 0) result_.idle_waiting_gpu_s += static_cast<int64_t>(free_gpus_) * dt;
    if (waiting_mem_jobs_ > 0) {
      result_.idle_waiting_mem_mib_s += static_cast<int64_t>(free_mem_ / kMiB) * dt;
    }
    // The series, one point per step from the first submit.
    int64_t a = now_;
    while (a < t) {
      const int64_t k = floor_div(a - result_.first_submit_s, step_);
      const int64_t point_end = result_.first_submit_s + (k + 1) * step_;
      const int64_t hour_end = (floor_div(a, 3600) + 1) * 3600;
      const int64_t b = std::min({t, point_end, hour_end});
      const int64_t hour = floor_div(a, 3600);
      const auto day =
          static_cast<size_t>(((floor_div(hour, 24) + 3) % 7 + 7) % 7);  // 1970-01-01: Thu
      const auto hod = static_cast<size_t>((hour % 24 + 24) % 24);
      result_.gpu_heat_s[day][hod] += busy_gpus * (b - a);
      result_.mem_heat_mib_s[day][hod] += busy_mib * (b - a);
      result_.heat_s[day][hod] += b - a;
      while (static_cast<int64_t>(result_.series.size()) <= k) {
        SeriesPoint p;
        p.start_s = result_.first_submit_s + static_cast<int64_t>(result_.series.size()) * step_;
        p.length_s = step_;
        result_.series.push_back(std::move(p));
      }
      SeriesPoint& p = result_.series[static_cast<size_t>(k)];
      for (size_t c = 0; c < class_busy_.size(); ++c) {
        if (class_busy_[c].first > 0) {
          p.gpu_s_by_class[class_names_[c]] += static_cast<int64_t>(class_busy_[c].first) * (b - a);
        }
        if (class_busy_[c].second > 0) {
          p.mem_mib_s_by_class[class_names_[c]] +=
              static_cast<int64_t>(class_busy_[c].second / kMiB) * (b - a);
        }
      }
      a = b;
    }
    now_ = t;
  }

  void start(size_t i, int64_t t) {
    SimJob& s = jobs_[i];
    s.start_s = t;
    s.got_mem = 0;
    for (const Placement& p : s.placed) {
      for (const DevInfo* d : p.info) {
        if (d->type == DeviceType::kMem) s.got_mem += d->bytes;
      }
    }
    ++result_.started;
    class_usage_[s.cls_index].first += s.job->gpus;
    class_usage_[s.cls_index].second += s.mem_gib;
    if (evaluator_) class_changed(s, true);
    class_busy_[s.cls_index].first += s.job->gpus;
    class_busy_[s.cls_index].second += s.got_mem;
    ends_.emplace(t + s.job->duration_s, i);
    expected_.emplace(t + s.job->limit_s, i);
    result_.job_gpu_s += static_cast<int64_t>(s.job->gpus) * s.job->duration_s;
    result_.job_mem_mib_s += static_cast<int64_t>(s.got_mem / kMiB) * s.job->duration_s;
    const auto asked_mib = static_cast<int64_t>((s.job->mem_bytes + kMiB - 1) / kMiB);
    result_.asked_mem_mib_s += asked_mib * s.job->duration_s;
    result_.rounding_mem_mib_s +=
        (static_cast<int64_t>(s.got_mem / kMiB) - asked_mib) * s.job->duration_s;
    last_progress_ = t;
  }

  void finish(size_t i) {
    SimJob& s = jobs_[i];
    release(s);
    class_usage_[s.cls_index].first -= s.job->gpus;
    class_usage_[s.cls_index].second -= s.mem_gib;
    if (evaluator_) class_changed(s, false);
    class_busy_[s.cls_index].first -= s.job->gpus;
    class_busy_[s.cls_index].second -= s.got_mem;
    expected_.erase({s.start_s + s.job->limit_s, i});
    if (!keep_placements_) {
      // Only the outcomes need them: a long trace keeps no device ids of ended jobs.
      std::vector<Placement>().swap(s.placed);
    }
    result_.last_end_s = std::max(result_.last_end_s, now_);
    shadow_valid_ = false;
    last_progress_ = now_;
  }

  // ---- the scheduler ----

  struct Stretch {
    int64_t from = 0;
    std::array<uint64_t, 3> caps{};  // GPUs, GiB, NVMe drives
    std::array<uint64_t, 2> used{};  // GPUs, GiB of the class's running jobs overlapping it
  };

  // The policy's answer for the job at t: its class's running jobs plus itself must fit the
  // caps of every stretch of windows its run [t, t + time limit) overlaps, where a running
  // job counts in a stretch only if it overlaps it (by its own time limit), as Slurm's blocker
  // reservations hold cap licenses only over their own time (SimulatePolicy.*). The stretches
  // of the next eight days are read once per class and time; the policy repeats weekly, so a
  // longer run meets no cap beyond them.
  bool policy_allows(const SimJob& s, int64_t t) {
    if (!evaluator_) return true;
    return fits(s, t, stretches(s.cls_index, t));
  }

  bool fits(const SimJob& s, int64_t t, const std::vector<Stretch>& list) const {
    const int64_t end = t + std::max<int64_t>(s.job->limit_s, 1);
    const uint64_t job[2] = {s.job->gpus, s.mem_gib};
    for (const Stretch& st : list) {
      if (st.from >= end) break;
      for (size_t i = 0; i < 2; ++i) {
        if (st.used[i] + job[i] > st.caps[i]) return false;
      }
    }
    return true;
  }

  // The earliest start from t within a week at which the policy admits the job: at t, at a
  // change of windows, or when a running job of its class reaches its time limit.
  std::optional<int64_t> earliest_allowed(const SimJob& s, int64_t t) {
    if (!evaluator_) return t;
    const size_t c = s.cls_index;
    std::set<int64_t> at = {t};
    for (const Stretch& st : build_stretches(c, t)) at.insert(st.from);
    for (const auto& [end, used] : class_ends_[c]) {
      if (end > t && end < t + kHorizonS) at.insert(end);
    }
    for (int64_t when : at) {
      if (fits(s, when, build_stretches(c, when))) return when;
    }
    return std::nullopt;
  }

  const std::vector<Stretch>& stretches(size_t cls, int64_t t) {
    auto& cached = stretch_cache_[cls];
    if (cached.first == t && !cached.second.empty()) return cached.second;
    cached.first = t;
    cached.second = build_stretches(cls, t);
    return cached.second;
  }

  // The class's caps from window change to window change, read from the evaluator for a
  // fortnight at a time: the scheduler asks for the next eight days at every event time.
  struct Timeline {
    int64_t from = 0;
    int64_t to = 0;
    std::vector<std::pair<int64_t, std::array<uint64_t, 3>>> caps;  // (from, caps), in order
  };

  const Timeline& timeline(size_t cls, int64_t t) {
    if (timelines_.size() <= cls) timelines_.resize(cls + 1);
    Timeline& tl = timelines_[cls];
    if (!tl.caps.empty() && t >= tl.from && t + kHorizonS <= tl.to) return tl;
    tl.caps.clear();
    tl.from = t;
    tl.to = t + 2 * kHorizonS;
    for (int64_t at = t; at < tl.to;) {
      auto in_force = evaluator_->caps_in_force(at, class_names_[cls]);
      if (!in_force) {
        tl.caps.push_back({at, {0, 0, 0}});
        break;
      }
      tl.caps.push_back({at, in_force->caps.value});
      at = in_force->until_s.value_or(tl.to);
    }
    return tl;
  }

  std::vector<Stretch> build_stretches(size_t cls, int64_t t) {
    std::vector<Stretch> out;
    const Timeline& tl = timeline(cls, t);
    auto it = std::upper_bound(tl.caps.begin(), tl.caps.end(), t,
                               [](int64_t at, const auto& c) { return at < c.first; });
    --it;  // tl.from <= t
    out.push_back({t, it->second, {}});
    for (++it; it != tl.caps.end() && it->first < t + kHorizonS; ++it) {
      out.push_back({it->first, it->second, {}});
    }
    // A running job counts from the first stretch to the one its time limit ends in.
    std::array<uint64_t, 2> total = {class_usage_[cls].first, class_usage_[cls].second};
    auto e = class_ends_[cls].begin();
    for (Stretch& st : out) {
      for (; e != class_ends_[cls].end() && e->first <= st.from; ++e) {
        total[0] -= e->second[0];
        total[1] -= e->second[1];
      }
      st.used = total;
    }
    return out;
  }

  // A job of the class started or ended at the current time: the cached stretches follow.
  void class_changed(const SimJob& s, bool started) {
    const int64_t end = s.start_s + s.job->limit_s;
    std::array<uint64_t, 2>& at_end = class_ends_[s.cls_index][end];
    if (started) {
      at_end[0] += s.job->gpus;
      at_end[1] += s.mem_gib;
    } else {
      at_end[0] -= s.job->gpus;
      at_end[1] -= s.mem_gib;
      if (at_end[0] == 0 && at_end[1] == 0) class_ends_[s.cls_index].erase(end);
    }
    auto cached = stretch_cache_.find(s.cls_index);
    if (cached == stretch_cache_.end()) return;
    if (!started || cached->second.first != now_) {
      cached->second.second.clear();
      return;
    }
    for (Stretch& st : cached->second.second) {
      if (st.from >= end) break;
      st.used[0] += s.job->gpus;
      st.used[1] += s.mem_gib;
    }
  }

  // When the top job could start if every running job ran to its time limit, and what it
  // would leave free then (EASY backfill's reservation). Running jobs are released in order of
  // their expected end and put back afterwards.
  void reserve(size_t top, int64_t t) {
    SimJob& s = jobs_[top];
    hold(false);
    shadow_ = kNever;
    reserved_.clear();
    spare_slots_.clear();
    // A released job is counted free at once, but its devices go back to the allocator only
    // once the top job could use them: on a host that may fit one of its parts (may_fit() is
    // what allocate() needs), or at once where other hosts share the zones. Until then the
    // allocator's answer cannot have changed, so placeable() is not asked again; the answer
    // is the same as releasing everything, for far fewer allocator changes.
    using Part = std::pair<size_t, size_t>;  // (job, placement)
    std::vector<size_t> released;
    std::vector<Part> counted_only;
    std::vector<Part> given_back;
    int64_t at = t;
    std::vector<Placement> where;
    bool ok = placeable(s, &where);
    for (auto it = expected_.begin(); !ok && it != expected_.end(); ++it) {
      const size_t j = it->second;
      for (size_t k = 0; k < jobs_[j].placed.size(); ++k) {
        count(jobs_[j].placed[k], false);
        counted_only.emplace_back(j, k);
      }
      released.push_back(j);
      at = std::max(t, it->first);
      if (s.job->gpus > free_gpus_ || job_mem(s) > free_mem_) continue;
      bool changed = false;
      std::erase_if(counted_only, [&](const Part& part) {
        Placement& p = jobs_[part.first].placed[part.second];
        const HostState& hs = hosts_[p.host];
        const bool usable =
            !hs.private_zones || std::any_of(s.parts.begin(), s.parts.end(),
                                             [&](const Request& r) { return may_fit(hs, r); });
        if (!usable) return false;
        take_devices(p, 0, false);
        given_back.push_back(part);
        changed = true;
        return true;
      });
      if (changed) ok = placeable(s, &where);
    }
    if (ok) {
      shadow_ = at;
      reserved_ = std::move(where);
      // The hosts' attach slots held at the shadow time, less the reserved job's.
      for (const Placement& p : reserved_) {
        const HostState& hs = hosts_[p.host];
        const std::array<int64_t, 2> n = slots_of(p.ids);
        spare_slots_[p.host] = {
            static_cast<int64_t>(hs.host->gpu_slots) - static_cast<int64_t>(hs.gpus_held) - n[0],
            static_cast<int64_t>(hs.host->mem_slots) - static_cast<int64_t>(hs.mem_held) - n[1]};
      }
    }
    for (auto r = given_back.rbegin(); r != given_back.rend(); ++r) {
      take_devices(jobs_[r->first].placed[r->second], static_cast<int64_t>(r->first) + 1, true);
    }
    for (size_t j : released) {
      for (Placement& p : jobs_[j].placed) count(p, true);
    }
    if (evaluator_) {
      const int64_t from = std::max(t, shadow_ == kNever ? t : shadow_);
      if (auto earliest = earliest_allowed(s, from); earliest && *earliest > from) {
        shadow_ = *earliest;
      }
    }
    shadow_job_ = top;
    shadow_valid_ = true;
    shadow_at_ = t;
  }

  void pass(int64_t t) {
    std::set<Shape> failed;       // shapes that found no place: starting jobs only takes devices
    std::set<Shape> failed_past;  // and none past the shadow time, beside the reserved job
    bool blocked = false;
    size_t examined = 0;
    std::vector<size_t> waiting;
    waiting.reserve(queue_.size());
    for (size_t q = 0; q < queue_.size(); ++q) {
      const size_t i = queue_[q];
      if (examined >= options_.max_job_test) {
        waiting.insert(waiting.end(), queue_.begin() + static_cast<long>(q), queue_.end());
        break;
      }
      ++examined;
      SimJob& s = jobs_[i];
      bool started = false;
      if (blocked) {
        // EASY backfill by place: a job that ends (by its time limit) before the shadow time
        // may use anything free; one that runs past it only what the reserved job does not
        // take then: not its devices, not the attach slots it needs on its hosts. Pinned by
        // SimulateBackfill.*.
        const bool in_time = t + s.job->limit_s <= shadow_ || reserved_.empty();
        const bool shape_failed =
            failed.contains(s.shape) || (!in_time && failed_past.contains(s.shape));
        if (!shape_failed && policy_allows(s, t)) {
          hold(!in_time);
          guard_ = !in_time;
          const bool placed = place(s, static_cast<int64_t>(i) + 1);
          guard_ = false;
          if (placed) {
            if (!in_time) use_spare_slots(s);
            start(i, t);
            ++result_.backfilled;
            started = true;
          } else {
            (in_time ? failed : failed_past).insert(s.shape);
          }
        }
      } else if (policy_allows(s, t) && !failed.contains(s.shape) &&
                 place(s, static_cast<int64_t>(i) + 1)) {
        start(i, t);
        started = true;
      } else {
        hold(false);
        if (!failed.contains(s.shape) && !placeable(s)) failed.insert(s.shape);
        blocked = true;
        // Recomputed for a new top job, once its time has come, and after ends at most every
        // kBackfillInterval (Slurm's bf_interval): an end only brings the reservation forward.
        if (shadow_job_ != i || shadow_ <= t ||
            (!shadow_valid_ && t - shadow_at_ >= kBackfillInterval)) {
          reserve(i, t);
        }
      }
      if (!started) waiting.push_back(i);
    }
    queue_ = std::move(waiting);
    waiting_gpu_jobs_ = 0;
    waiting_mem_jobs_ = 0;
    for (size_t i : queue_) {
      waiting_gpu_jobs_ += jobs_[i].job->gpus > 0 ? 1 : 0;
      waiting_mem_jobs_ += jobs_[i].job->mem_bytes > 0 ? 1 : 0;
    }
    hold(false);
    // Stranding: a waiting job that fits in the free totals but finds no place.
    strand_gpus_ = false;
    strand_mem_ = false;
    examined = 0;
    std::set<Shape> fits;  // shapes placeable now: nothing changes during this loop
    for (size_t i : queue_) {
      if (examined++ >= options_.max_job_test || (strand_gpus_ && strand_mem_)) break;
      SimJob& s = jobs_[i];
      if (s.job->gpus > free_gpus_ || job_mem(s) > free_mem_) continue;
      if (s.job->gpus == 0 && job_mem(s) == 0) continue;
      if (fits.contains(s.shape)) continue;
      if (!failed.contains(s.shape)) {
        if (placeable(s)) {
          fits.insert(s.shape);
          continue;
        }
        failed.insert(s.shape);
      }
      strand_gpus_ |= s.job->gpus > 0 && free_gpus_ > 0;
      strand_mem_ |= job_mem(s) > 0 && free_mem_ > 0;
    }
    if (evaluator_ && !queue_.empty()) {
      // The next window change after t is the same for every t before it.
      if (!(t >= boundary_asked_ && boundary_ && t < *boundary_)) {
        boundary_asked_ = t;
        boundary_ = evaluator_->schedule().next_boundary(t);
      }
      if (boundary_) wakes_.insert(*boundary_);
    }
  }

  Result finish_result(std::vector<JobOutcome>* outcomes) {
    result_.makespan_s = result_.last_end_s - result_.first_submit_s;
    if (result_.makespan_s < 0) result_.makespan_s = 0;
    std::vector<int64_t> all;
    std::map<std::string, std::vector<int64_t>> by_class;
    std::array<std::vector<int64_t>, kSizes.size()> by_size;
    double gpu_wait = 0;
    double gpus = 0;
    for (const SimJob& s : jobs_) {
      if (outcomes != nullptr) {
        JobOutcome o;
        o.id = s.job->id;
        o.workload_class = s.cls;
        o.gpus = s.start_s >= 0 ? s.job->gpus : 0;
        o.mem_bytes = s.got_mem;
        if (s.start_s >= 0) {
          o.start_s = s.start_s;
          o.end_s = s.start_s + s.job->duration_s;
          for (const Placement& p : s.placed) o.nodes.push_back(p.node);
        }
        outcomes->push_back(std::move(o));
      }
      if (s.start_s < 0) continue;
      const int64_t w = s.start_s - s.job->submit_s;
      all.push_back(w);
      by_class[s.cls.empty() ? "(none)" : s.cls].push_back(w);
      size_t b = 0;
      while (b + 1 < kSizes.size() && s.job->gpus >= kSizes[b + 1].first) ++b;
      by_size[b].push_back(w);
      gpu_wait += static_cast<double>(s.job->gpus) * static_cast<double>(w);
      gpus += s.job->gpus;
    }
    result_.wait = stats("all", std::move(all));
    result_.wait_gpu_weighted_s = gpus > 0 ? gpu_wait / gpus : 0;
    for (auto& [name, waits] : by_class) result_.by_class.push_back(stats(name, std::move(waits)));
    for (size_t b = 0; b < kSizes.size(); ++b) {
      if (!by_size[b].empty()) result_.by_size.push_back(stats(kSizes[b].second, by_size[b]));
    }
    return std::move(result_);
  }

  const Cluster& cluster_;
  const Trace& trace_;
  Options options_;
  Allocator alloc_;
  std::optional<policies::Evaluator> evaluator_;
  std::unordered_map<std::string, DevInfo> devs_;
  std::vector<uint64_t> zone_gpus_;
  std::vector<uint64_t> zone_mem_;
  std::vector<uint64_t> zone_held_gpus_;  // what hold() holds, by zone
  std::vector<uint64_t> zone_held_mem_;
  std::vector<HostState> hosts_;
  uint64_t free_gpus_ = 0;
  uint64_t free_mem_ = 0;
  uint64_t max_node_gpus_ = 0;
  uint64_t max_node_mem_ = 0;
  std::vector<SimJob> jobs_;
  std::vector<size_t> queue_;
  std::priority_queue<std::pair<int64_t, size_t>, std::vector<std::pair<int64_t, size_t>>,
                      std::greater<>>
      ends_;
  std::set<std::pair<int64_t, size_t>> expected_;
  std::set<int64_t> wakes_;
  std::map<Shape, std::string> possible_;
  std::map<std::string, size_t> class_index_;
  std::vector<std::string> class_names_;
  std::vector<std::pair<uint64_t, uint64_t>> class_usage_;  // GPUs, GiB (licenses)
  // Per class: the running jobs' GPUs and GiB by the end of their time limit.
  std::vector<std::map<int64_t, std::array<uint64_t, 2>>> class_ends_;
  std::vector<std::pair<uint64_t, uint64_t>> class_busy_;  // GPUs, bytes (allocated)
  std::map<std::string, size_t> never_index_;
  std::map<size_t, std::pair<int64_t, std::vector<Stretch>>> stretch_cache_;
  std::vector<Timeline> timelines_;  // by class
  int64_t boundary_asked_ = 0;       // next_boundary(boundary_asked_) is boundary_
  std::optional<int64_t> boundary_;
  int64_t now_ = 0;
  int64_t step_ = 86400;
  int64_t last_progress_ = 0;
  bool keep_placements_ = false;
  bool strand_gpus_ = false;
  bool strand_mem_ = false;
  size_t waiting_gpu_jobs_ = 0;  // queued jobs that ask for GPUs, after the last pass
  size_t waiting_mem_jobs_ = 0;
  bool shadow_valid_ = false;
  size_t shadow_job_ = std::numeric_limits<size_t>::max();
  int64_t shadow_at_ = 0;
  int64_t shadow_ = kNever;
  std::vector<Placement> reserved_;  // the reserved job's places at the shadow time
  std::unordered_map<size_t, std::array<int64_t, 2>> spare_slots_;  // host: GPU, memory slots
  bool held_ = false;
  std::vector<std::string> held_ids_;  // what hold(true) held
  bool guard_ = false;
  Result result_;
};

}  // namespace

double Result::gpu_utilisation() const {
  if (gpus == 0 || makespan_s <= 0) return 0;
  return static_cast<double>(gpu_s) / (static_cast<double>(gpus) * static_cast<double>(makespan_s));
}

double Result::mem_utilisation() const {
  const double mib = static_cast<double>(mem_bytes) / static_cast<double>(kMiB);
  if (mib == 0 || makespan_s <= 0) return 0;
  return static_cast<double>(mem_mib_s) / (mib * static_cast<double>(makespan_s));
}

Expected<Result> run(const Cluster& cluster, const Trace& trace, const policies::Policy* policy,
                     const Options& options, std::vector<JobOutcome>* outcomes) {
  Engine engine(cluster, trace, policy, options);
  return engine.run(outcomes);
}

}  // namespace composer::simulate
