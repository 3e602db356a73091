#include "composer/accounting/report.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <limits>
#include <numeric>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace composer::accounting {
namespace {

__extension__ using Int128 = __int128;

constexpr double kGiBHour = 1024.0 * 1024.0 * 1024.0 * 3600.0 * 1000.0;  // byte-ms

enum Category { kAttached = 0, kIdle = 1, kDrained = 2, kFailed = 3 };

size_t type_index(DeviceType t) { return static_cast<size_t>(t); }

std::tm local_time(int64_t ms) {
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  return tm;
}

std::string two_digits(int n) {
  std::string s = std::to_string(n);
  return s.size() < 2 ? "0" + s : s;
}

// Every run of digits becomes N: "detach of 3 devices timed out after 60000 ms" and the same
// with other numbers are one cause.
std::string cause_of(std::string_view detail) {
  std::string out;
  bool in_digits = false;
  for (char c : detail) {
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      if (!in_digits) out += 'N';
      in_digits = true;
    } else {
      out += c;
      in_digits = false;
    }
  }
  return out.empty() ? "(no detail recorded)" : out;
}

// The value of nearest rank `percent` in `values`: where it would stand were they sorted (they
// are reordered, not sorted; a year holds hundreds of thousands of them).
int64_t nearest_rank(std::vector<int64_t>& values, int percent) {
  if (values.empty()) return 0;
  const size_t n = values.size();
  size_t rank = (n * static_cast<size_t>(percent) + 99) / 100;  // ceil(p/100 * n)
  rank = std::clamp<size_t>(rank, 1, n);
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(rank - 1);
  std::nth_element(values.begin(), at, values.end());
  return *at;
}

Latency latency_of(std::string phase, std::vector<int64_t> values) {
  Latency l;
  l.phase = std::move(phase);
  l.count = values.size();
  if (values.empty()) return l;
  l.p50_ms = nearest_rank(values, 50);
  l.p90_ms = nearest_rank(values, 90);
  l.p99_ms = nearest_rank(values, 99);
  l.max_ms = *std::max_element(values.begin(), values.end());
  const Int128 sum = std::accumulate(values.begin(), values.end(), Int128{0});
  l.mean_ms = static_cast<double>(sum) / static_cast<double>(values.size());
  return l;
}

bool is_device_event(std::string_view kind) {
  return kind == "drain" || kind == "resume" || kind == "health";
}

}  // namespace

double Usage::share_attached() const {
  const int64_t available = available_ms();
  return available > 0 ? static_cast<double>(attached_ms) / static_cast<double>(available) : 0.0;
}

Usage& Usage::operator+=(const Usage& o) {
  attached_ms += o.attached_ms;
  idle_ms += o.idle_ms;
  drained_ms += o.drained_ms;
  failed_ms += o.failed_ms;
  return *this;
}

Status validate(const ReportOptions& o) {
  const auto bad = [](std::string m) { return Error{ErrorCode::kInvalidArgument, std::move(m)}; };
  if (o.start_ms < 0) {
    return bad("report start " + std::to_string(o.start_ms) +
               " is before 1970; give a time in milliseconds since the epoch");
  }
  if (o.end_ms <= o.start_ms) {
    return bad("report end (" + std::to_string(o.end_ms) + ") must be after its start (" +
               std::to_string(o.start_ms) + ")");
  }
  if (o.start_ms >= o.now_ms) {
    return bad("report start (" + std::to_string(o.start_ms) +
               ") is not in the past; a report covers time that has already happened");
  }
  if (std::min(o.end_ms, o.now_ms) - o.start_ms > kMaxRangeMs) {
    return bad("report range is longer than 3660 days; give a shorter range");
  }
  if (o.top_jobs > kMaxTopJobs) {
    return bad("top jobs: " + std::to_string(o.top_jobs) + " is more than " +
               std::to_string(kMaxTopJobs) + "; give 0 to " + std::to_string(kMaxTopJobs));
  }
  return Status::Ok();
}

struct ReportBuilder::State {
  // Device-ms credited to hourly buckets. A stretch of time adds its ends to `partial` and
  // marks the whole buckets between them in `diff` (a difference array), so crediting costs
  // the same for an hour as for a year.
  struct Buckets {
    std::vector<int64_t> partial;
    std::vector<int64_t> diff;
  };

  struct Dev {
    int pool = 0;
    DeviceType type = DeviceType::kGpu;
    uint64_t capacity = 0;
    bool attached = false;
    bool drained = false;
    bool failed = false;
    // Credited from here on; before it composerd did not know the device, which then adds to
    // no category at all. The start of time for a device whose first known time is not given.
    int64_t since = std::numeric_limits<int64_t>::min();

    Category category() const {
      if (attached) return kAttached;
      if (failed) return kFailed;
      if (drained) return kDrained;
      return kIdle;
    }
  };

  struct Owner;

  struct Open {
    int64_t held_from = 0;
    std::optional<int64_t> requested_ms;
    std::optional<int64_t> releasing_ms;
    uint32_t job = 0;
    uint32_t uid = 0;
    Owner* owner = nullptr;
    std::vector<int> devs;
    std::array<int64_t, 3> count{};
    uint64_t mem_bytes = 0;
  };

  struct Group {
    TypeMs device_ms{};
    Int128 mem_byte_ms = 0;
    uint32_t jobs = 0;  // counted at the end from `jobs` below
    uint32_t compositions = 0;
  };

  struct Window {
    TypeMs device_ms{};
    std::array<int64_t, 3> held{};
    std::array<int64_t, 3> peak{};
    uint32_t compositions = 0;
  };

  // A group's entry in `workloads`, `accounts` or `users`: its name and totals (entries of an
  // unordered_map stay where they are as it grows).
  using GroupEntry = std::pair<const std::string, Group>;

  struct Job {
    // The groups of its first composition in the range.
    GroupEntry* user = nullptr;
    GroupEntry* account = nullptr;
    GroupEntry* workload = nullptr;
    uint32_t compositions = 0;
    TypeMs device_ms{};
    Int128 mem_byte_ms = 0;
  };

  // Who composed a composition and under which policy window, as its first event names them,
  // with what it books into: found once for all the compositions of the same four names. The
  // groups are found when first booked into (a report for one caller books only theirs).
  struct Owner {
    std::string user, account, workload;
    Window* row = nullptr;                      // (window, workload) in `windows`
    std::array<Buckets, 3>* classes = nullptr;  // the workload's series in `by_class`
    GroupEntry* user_group = nullptr;
    GroupEntry* account_group = nullptr;
    GroupEntry* workload_group = nullptr;
  };

  ReportOptions options;
  int64_t start = 0;
  int64_t end = 0;
  int64_t origin = 0;  // start, down to the local hour
  size_t buckets = 0;

  std::vector<PoolUsage> pools;
  std::vector<Dev> devs;
  std::unordered_map<std::string, int> dev_index;
  std::array<bool, 3> type_present{};
  std::array<std::array<Buckets, 4>, 3> by_type;  // [type][category]
  // Per workload, per type; a type's buckets are made when first credited.
  std::map<std::string, std::array<Buckets, 3>> by_class;

  std::unordered_map<int64_t, Open> open;
  // Nodes of closed compositions, reused: an open composition then costs no allocation.
  std::vector<std::unordered_map<int64_t, Open>::node_type> closed;
  // Hashed, not ordered: looked up for every composition; finish() puts them in name order.
  std::unordered_map<std::string, Group> workloads, accounts, users;
  std::unordered_map<uint32_t, Job> jobs;
  std::map<std::pair<std::string, std::string>, Window> windows;  // (window, workload)
  // By the four names, each after its length (owner_of).
  std::unordered_map<std::string, Owner> owners;
  std::string owner_key;       // reused
  bool range_started = false;  // an event at or after start was seen: peaks count from now
  uint32_t compositions = 0;
  std::vector<int64_t> compose_ms, release_ms;
  std::map<std::pair<std::string, std::string>, uint32_t> failures;
  uint64_t events_read = 0;
  uint64_t events_ignored = 0;

  int64_t bucket_start(size_t i) const {
    return std::max(start, origin + static_cast<int64_t>(i) * kHourMs);
  }
  int64_t bucket_end(size_t i) const {
    return std::min(end, origin + static_cast<int64_t>(i + 1) * kHourMs);
  }
  size_t bucket_of(int64_t t) const { return static_cast<size_t>((t - origin) / kHourMs); }

  Buckets make_buckets() const {
    return Buckets{std::vector<int64_t>(buckets, 0), std::vector<int64_t>(buckets + 1, 0)};
  }

  void credit(Buckets& b, int64_t from, int64_t to, int64_t weight) const {
    from = std::max(from, start);
    to = std::min(to, end);
    if (from >= to || weight == 0) return;
    const size_t first = bucket_of(from);
    const size_t last = bucket_of(to - 1);
    if (first == last) {
      b.partial[first] += weight * (to - from);
      return;
    }
    b.partial[first] += weight * (bucket_end(first) - from);
    b.partial[last] += weight * (to - bucket_start(last));
    if (last > first + 1) {
      b.diff[first + 1] += weight;
      b.diff[last] -= weight;
    }
  }

  // Device-ms of every bucket.
  std::vector<int64_t> values(const Buckets& b) const {
    std::vector<int64_t> out(buckets, 0);
    int64_t whole = 0;
    for (size_t i = 0; i < buckets; ++i) {
      whole += b.diff[i];
      out[i] = b.partial[i] + whole * kHourMs;
    }
    return out;
  }

  // Credits the device's current category up to `ts` and starts a new stretch there.
  void settle(Dev& d, int64_t ts) {
    const int64_t from = std::max(d.since, start);
    const int64_t to = std::min(ts, end);
    if (from < to) {
      const Category c = d.category();
      Usage& u = pools[static_cast<size_t>(d.pool)].usage;
      (c == kAttached  ? u.attached_ms
       : c == kIdle    ? u.idle_ms
       : c == kDrained ? u.drained_ms
                       : u.failed_ms) += to - from;
      credit(by_type[type_index(d.type)][c], from, to, 1);
    }
    d.since = std::max(d.since, ts);
  }

  Dev* device(const std::string& id) {
    auto it = dev_index.find(id);
    return it == dev_index.end() ? nullptr : &devs[static_cast<size_t>(it->second)];
  }

  static void add_to(Group& g, const TypeMs& ms, Int128 mem) {
    for (size_t t = 0; t < 3; ++t) g.device_ms[t] += ms[t];
    g.mem_byte_ms += mem;
    ++g.compositions;
  }

  // Books composition `c`, held until `until`, into the series and the usage groupings.
  void book(const Open& c, int64_t until) {
    const int64_t from = std::max(c.held_from, start);
    const int64_t to = std::min(until, end);
    const int64_t held = std::max<int64_t>(0, to - from);
    const bool began_inside = c.held_from >= start && c.held_from < end;
    if (held == 0 && !began_inside) return;
    Owner& o = *c.owner;
    for (size_t t = 0; t < 3; ++t) {
      if (c.count[t] == 0) continue;
      Buckets& b = (*o.classes)[t];
      if (b.diff.empty()) b = make_buckets();
      credit(b, from, to, c.count[t]);
    }
    Window& w = *o.row;
    for (size_t t = 0; t < 3; ++t) w.device_ms[t] += c.count[t] * held;
    ++w.compositions;
    if (options.only_uid && c.uid != *options.only_uid) return;
    TypeMs ms{};
    for (size_t t = 0; t < 3; ++t) ms[t] = c.count[t] * held;
    const Int128 mem = static_cast<Int128>(c.mem_bytes) * held;
    if (o.workload_group == nullptr) {
      o.workload_group = &*workloads.try_emplace(o.workload).first;
      o.account_group = &*accounts.try_emplace(o.account).first;
      o.user_group = &*users.try_emplace(o.user).first;
    }
    add_to(o.workload_group->second, ms, mem);
    add_to(o.account_group->second, ms, mem);
    add_to(o.user_group->second, ms, mem);
    Job& j = jobs[c.job];
    if (j.compositions == 0) {
      j.user = o.user_group;
      j.account = o.account_group;
      j.workload = o.workload_group;
    }
    ++j.compositions;
    for (size_t t = 0; t < 3; ++t) j.device_ms[t] += ms[t];
    j.mem_byte_ms += mem;
    ++compositions;
  }

  // What is held when the range starts counts towards the peaks.
  void start_range() {
    if (range_started) return;
    range_started = true;
    for (auto& [key, w] : windows) {
      for (size_t t = 0; t < 3; ++t) w.peak[t] = std::max(w.peak[t], w.held[t]);
    }
  }

  bool mine(const Event& e) const { return !options.only_uid || e.owner.uid == *options.only_uid; }
  bool inside(int64_t ts) const { return ts >= start && ts < end; }

  void device_event(const Event& e) {
    bool known = !e.devices.empty();
    for (const auto& id : e.devices) {
      Dev* d = device(id);
      if (d == nullptr) {
        known = false;
        continue;
      }
      settle(*d, e.ts_ms);
      if (e.kind == "drain") {
        d->drained = true;
      } else if (e.kind == "resume") {
        d->drained = false;
      } else {
        d->failed = e.to_state == "critical";
      }
    }
    if (!known) ++events_ignored;
  }

  Owner& owner_of(const Event& e) {
    owner_key.clear();
    for (const std::string* name :
         {&e.owner.user, &e.owner.account, &e.owner.workload, &e.window}) {
      const uint64_t size = name->size();
      owner_key.append(reinterpret_cast<const char*>(&size), sizeof size);
      owner_key += *name;
    }
    auto [it, inserted] = owners.try_emplace(owner_key);
    Owner& o = it->second;
    if (inserted) {
      o.user = e.owner.user;
      o.account = e.owner.account;
      o.workload = e.owner.workload;
      o.row = &windows[{e.window, e.owner.workload}];
      o.classes = &by_class[e.owner.workload];
    }
    return o;
  }

  void open_composition(const Event& e) {
    std::unordered_map<int64_t, Open>::node_type node;
    Open* slot = nullptr;
    if (closed.empty()) {
      slot = &open.try_emplace(*e.composition_id).first->second;
    } else {
      node = std::move(closed.back());
      closed.pop_back();
      node.key() = *e.composition_id;
      slot = &node.mapped();
    }
    Open& c = *slot;
    c.held_from = e.ts_ms;
    c.requested_ms.reset();
    c.releasing_ms.reset();
    if (e.kind == "requested") c.requested_ms = e.ts_ms;
    if (e.kind == "releasing") c.releasing_ms = e.ts_ms;
    c.job = e.owner.job_id;
    c.uid = e.owner.uid;
    c.owner = &owner_of(e);
    c.devs.clear();
    c.count = {};
    c.mem_bytes = 0;
    bool known = true;
    for (const auto& id : e.devices) {
      auto it = dev_index.find(id);
      if (it == dev_index.end()) {
        known = false;
        continue;
      }
      Dev& d = devs[static_cast<size_t>(it->second)];
      settle(d, e.ts_ms);
      d.attached = true;
      c.devs.push_back(it->second);
      ++c.count[type_index(d.type)];
      if (d.type == DeviceType::kMem) c.mem_bytes += d.capacity;
    }
    if (!known) ++events_ignored;
    Window& row = *c.owner->row;
    for (size_t t = 0; t < 3; ++t) {
      row.held[t] += c.count[t];
      if (range_started) row.peak[t] = std::max(row.peak[t], row.held[t]);
    }
    if (node) open.insert(std::move(node));
  }

  void close_composition(std::unordered_map<int64_t, Open>::iterator it, int64_t ts) {
    for (int i : it->second.devs) {
      Dev& d = devs[static_cast<size_t>(i)];
      settle(d, ts);
      d.attached = false;
    }
    book(it->second, ts);
    for (size_t t = 0; t < 3; ++t) it->second.owner->row->held[t] -= it->second.count[t];
    closed.push_back(open.extract(it));
  }

  // A failed end inside the range counts under the state it failed from and its cause.
  void count_failure(const Event& e) {
    if (e.kind == "failed" && inside(e.ts_ms) && mine(e)) {
      ++failures[{e.from_state.empty() ? "unknown" : e.from_state, cause_of(e.detail)}];
    }
  }

  // What composition_event() does with each of an ended composition's events, from its rollup
  // row: the row is whole (one uid, one end with nothing after it, at most one ready event),
  // so its events in between touch nothing but its own latencies, which its end books.
  void begin_rolled_up(const CompositionRollup& r) {
    events_read += r.events;
    events_ignored += r.other_events;
    if (r.first.id == r.end.id) {
      // It ended with its first event: nothing to book.
      count_failure(r.end);
      ++events_ignored;
      return;
    }
    open_composition(r.first);
  }

  void end_rolled_up(const CompositionRollup& r) {
    auto it = open.find(*r.end.composition_id);
    if (it == open.end()) return;
    if (r.first.kind == "requested" && r.ready_ms && inside(*r.ready_ms) && mine(r.end)) {
      compose_ms.push_back(*r.ready_ms - r.first.ts_ms);
    }
    if (r.end.kind == "released" && r.releasing_ms && inside(r.end.ts_ms) && mine(r.end)) {
      release_ms.push_back(r.end.ts_ms - *r.releasing_ms);
    }
    count_failure(r.end);
    close_composition(it, r.end.ts_ms);
  }

  void composition_event(const Event& e) {
    const auto state = parse_composition_state(e.kind);
    if (!state) {
      ++events_ignored;
      return;
    }
    count_failure(e);
    auto it = open.find(*e.composition_id);
    if (it == open.end()) {
      if (is_live(*state)) {
        open_composition(e);
      } else {
        ++events_ignored;  // its start is not in what was read: nothing to book
      }
      return;
    }
    Open& c = it->second;
    switch (*state) {
      case CompositionState::kReady:
        if (c.requested_ms && inside(e.ts_ms) && mine(e)) {
          compose_ms.push_back(e.ts_ms - *c.requested_ms);
        }
        break;
      case CompositionState::kReleasing:
        c.releasing_ms = e.ts_ms;
        break;
      case CompositionState::kReleased:
        if (c.releasing_ms && inside(e.ts_ms) && mine(e)) {
          release_ms.push_back(e.ts_ms - *c.releasing_ms);
        }
        close_composition(it, e.ts_ms);
        break;
      case CompositionState::kFailed:
        close_composition(it, e.ts_ms);
        break;
      case CompositionState::kRequested:
      case CompositionState::kComposing:
        break;
    }
  }
};

ReportBuilder::ReportBuilder(const std::vector<Device>& inventory, const ReportOptions& options)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.options = options;
  s.start = options.start_ms;
  s.end = std::max(options.start_ms, std::min(options.end_ms, options.now_ms));
  const std::tm tm = local_time(s.start);
  s.origin = s.start - (s.start % 1000) - (int64_t{tm.tm_min} * 60 + tm.tm_sec) * 1000;
  s.buckets = s.end > s.start ? static_cast<size_t>((s.end - 1 - s.origin) / kHourMs + 1) : 0;

  std::map<std::pair<size_t, std::string>, size_t> pool_of;
  for (const Device& d : inventory) {
    const size_t t = type_index(d.type);
    auto [it, inserted] = pool_of.try_emplace({t, d.model}, 0);
    if (inserted) {
      PoolUsage p;
      p.type = std::string(to_string(d.type));
      p.model = d.model;
      it->second = s.pools.size();
      s.pools.push_back(std::move(p));
    }
    PoolUsage& p = s.pools[it->second];
    State::Dev dev;
    dev.pool = static_cast<int>(it->second);
    dev.type = d.type;
    dev.capacity = d.capacity_bytes;
    if (d.known_since_ms) dev.since = *d.known_since_ms;
    // A device composerd first knew after the range was not in the pool during it.
    if (dev.since < s.end) {
      ++p.devices;
      p.capacity_bytes += d.capacity_bytes;
    }
    if (s.dev_index.emplace(d.id, static_cast<int>(s.devs.size())).second) s.devs.push_back(dev);
    s.type_present[t] = true;
  }
  for (auto& per_type : s.by_type) {
    for (auto& b : per_type) b = s.make_buckets();
  }
}

ReportBuilder::~ReportBuilder() = default;

void ReportBuilder::add(const Event& e) {
  State& s = *s_;
  if (e.ts_ms >= s.end) return;
  ++s.events_read;
  if (e.ts_ms >= s.start) s.start_range();
  if (is_device_event(e.kind)) {
    s.device_event(e);
  } else if (e.composition_id) {
    s.composition_event(e);
  } else {
    ++s.events_ignored;
  }
}

void ReportBuilder::begin(const CompositionRollup& composition) {
  State& s = *s_;
  if (composition.first.ts_ms >= s.end) return;
  if (composition.first.ts_ms >= s.start) s.start_range();
  s.begin_rolled_up(composition);
}

void ReportBuilder::end(const CompositionRollup& composition) {
  State& s = *s_;
  if (composition.end.ts_ms >= s.end) return;
  if (composition.end.ts_ms >= s.start) s.start_range();
  s.end_rolled_up(composition);
}

void ReportBuilder::add_unattached(uint64_t n) {
  // Like add() for each: read, and ignored as an event of no composition. Such an event only
  // starts the range's peaks, which no change of what is held between it and the next
  // composition's event can tell apart.
  s_->events_read += n;
  s_->events_ignored += n;
}

Report ReportBuilder::finish() {
  State& s = *s_;
  Report r;
  r.start_ms = s.start;
  r.end_ms = s.end;
  r.restricted = s.options.only_uid.has_value();
  {
    const std::tm tm = local_time(s.start);
    r.time_zone = tm.tm_zone != nullptr ? tm.tm_zone : "";
  }
  s.start_range();
  // Compositions still live at the end hold their devices up to it.
  for (auto& [id, c] : s.open) s.book(c, s.end);
  for (auto& d : s.devs) s.settle(d, s.end);

  std::vector<size_t> order(s.pools.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto ta = parse_device_type(s.pools[a].type), tb = parse_device_type(s.pools[b].type);
    return std::tie(*ta, s.pools[a].model) < std::tie(*tb, s.pools[b].model);
  });
  for (size_t i : order) r.pools.push_back(s.pools[i]);

  // Local labels of every bucket.
  std::vector<int> hour_of(s.buckets), weekday_of(s.buckets);
  std::vector<std::string> day_of(s.buckets);
  for (size_t i = 0; i < s.buckets; ++i) {
    const std::tm tm = local_time(s.bucket_start(i));
    hour_of[i] = tm.tm_hour;
    weekday_of[i] = (tm.tm_wday + 6) % 7;
    day_of[i] = std::to_string(tm.tm_year + 1900) + "-" + two_digits(tm.tm_mon + 1) + "-" +
                two_digits(tm.tm_mday);
  }

  const size_t step = std::max<size_t>(1, (s.buckets + 199) / 200);
  for (DeviceType type : kAllDeviceTypes) {
    const size_t t = type_index(type);
    if (!s.type_present[t]) continue;
    const std::string name(to_string(type));
    std::array<std::vector<int64_t>, 4> v;
    for (size_t c = 0; c < 4; ++c) v[c] = s.values(s.by_type[t][c]);
    const auto usage_at = [&](size_t i) {
      return Usage{.attached_ms = v[kAttached][i],
                   .idle_ms = v[kIdle][i],
                   .drained_ms = v[kDrained][i],
                   .failed_ms = v[kFailed][i]};
    };

    std::array<Usage, 24> hours{};
    std::vector<SlotUsage> days;
    HeatMap heat;
    heat.type = name;
    for (size_t i = 0; i < s.buckets; ++i) {
      const Usage u = usage_at(i);
      hours[static_cast<size_t>(hour_of[i])] += u;
      if (days.empty() || days.back().slot != day_of[i]) days.push_back({name, day_of[i], {}});
      days.back().usage += u;
      heat.attached_ms[weekday_of[i]][hour_of[i]] += u.attached_ms;
      heat.available_ms[weekday_of[i]][hour_of[i]] += u.available_ms();
    }
    for (int h = 0; h < 24; ++h) r.by_hour.push_back({name, two_digits(h), hours[h]});
    for (auto& d : days) r.by_day.push_back(std::move(d));
    r.heat_maps.push_back(heat);

    Series series;
    series.type = name;
    std::vector<std::pair<std::string, std::vector<int64_t>>> classes;
    for (const auto& [workload, per_type] : s.by_class) {
      if (!per_type[t].diff.empty()) classes.emplace_back(workload, s.values(per_type[t]));
    }
    for (size_t i = 0; i < s.buckets; i += step) {
      const size_t last = std::min(s.buckets, i + step) - 1;
      SeriesPoint p;
      p.start_ms = s.bucket_start(i);
      p.length_ms = s.bucket_end(last) - p.start_ms;
      for (size_t k = i; k <= last; ++k) p.available_ms += usage_at(k).available_ms();
      for (const auto& [cls, values] : classes) {
        int64_t sum = 0;
        for (size_t k = i; k <= last; ++k) sum += values[k];
        if (sum > 0) p.attached_ms_by_class[cls] = sum;
      }
      series.points.push_back(std::move(p));
    }
    r.series.push_back(std::move(series));
  }

  // A job counts once, in the groups of its first composition in the range: Slurm gives all
  // of a job's nodes the same user, account and class, so the counts add up to the jobs.
  for (const auto& [id, j] : s.jobs) {
    ++j.workload->second.jobs;
    ++j.account->second.jobs;
    ++j.user->second.jobs;
  }
  const auto groups = [](const std::unordered_map<std::string, State::Group>& in) {
    std::vector<const State::GroupEntry*> by_name;
    by_name.reserve(in.size());
    for (const auto& entry : in) by_name.push_back(&entry);
    std::sort(by_name.begin(), by_name.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    std::vector<GroupUsage> out;
    for (const auto* entry : by_name) {
      const auto& [name, g] = *entry;
      GroupUsage u;
      u.name = name;
      u.device_ms = g.device_ms;
      u.mem_gib_hours = static_cast<double>(g.mem_byte_ms) / kGiBHour;
      u.jobs = g.jobs;
      u.compositions = g.compositions;
      out.push_back(std::move(u));
    }
    std::stable_sort(out.begin(), out.end(), [](const GroupUsage& a, const GroupUsage& b) {
      return a.total_device_ms() > b.total_device_ms();
    });
    return out;
  };
  r.by_workload = groups(s.workloads);
  r.by_account = groups(s.accounts);
  r.by_user = groups(s.users);

  // The top jobs by use, then by id; only those become JobUsage rows.
  std::vector<std::pair<int64_t, uint32_t>> by_use;  // (-total device-ms, job id)
  by_use.reserve(s.jobs.size());
  for (const auto& [id, j] : s.jobs) {
    by_use.emplace_back(-(j.device_ms[0] + j.device_ms[1] + j.device_ms[2]), id);
  }
  const size_t keep = std::min(by_use.size(), s.options.top_jobs);
  std::partial_sort(by_use.begin(), by_use.begin() + static_cast<std::ptrdiff_t>(keep),
                    by_use.end());
  for (size_t i = 0; i < keep; ++i) {
    const uint32_t id = by_use[i].second;
    const State::Job& j = s.jobs.at(id);
    JobUsage u;
    u.job_id = id;
    u.user = j.user->first;
    u.account = j.account->first;
    u.workload = j.workload->first;
    u.compositions = j.compositions;
    u.device_ms = j.device_ms;
    u.mem_gib_hours = static_cast<double>(j.mem_byte_ms) / kGiBHour;
    r.top_jobs.push_back(std::move(u));
  }
  r.jobs = static_cast<uint32_t>(s.jobs.size());
  r.compositions = s.compositions;

  for (const auto& [key, w] : s.windows) {
    if (w.compositions == 0) continue;  // held only outside the range
    WindowUsage u;
    u.window = key.first;
    u.workload = key.second;
    u.device_ms = w.device_ms;
    for (size_t t = 0; t < 3; ++t) u.peak_devices[t] = static_cast<uint32_t>(w.peak[t]);
    u.compositions = w.compositions;
    if (!u.window.empty()) r.windows_recorded = true;
    r.by_window.push_back(std::move(u));
  }

  r.latency.push_back(latency_of("compose", std::move(s.compose_ms)));
  r.latency.push_back(latency_of("release", std::move(s.release_ms)));
  for (const auto& [key, count] : s.failures) r.failures.push_back({key.first, key.second, count});
  std::stable_sort(r.failures.begin(), r.failures.end(),
                   [](const Failure& a, const Failure& b) { return a.count > b.count; });
  r.events_read = s.events_read;
  r.events_ignored = s.events_ignored;
  return r;
}

Expected<Report> build_report(const std::vector<Device>& inventory,
                              const std::vector<Event>& events, const ReportOptions& options) {
  if (Status v = validate(options); !v) return v.error();
  ReportBuilder builder(inventory, options);
  for (const Event& e : events) builder.add(e);
  return builder.finish();
}

}  // namespace composer::accounting
