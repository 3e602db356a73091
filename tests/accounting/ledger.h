// Ledgers for the report tests: a worked example whose figures are computed by hand in
// report_test.cc, and random ledgers that follow the store's rules.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "composer/common/units.h"
#include "composer/model/model.h"

namespace composer::accounting::testing {

inline constexpr int64_t kH = 3600 * 1000;
inline constexpr int64_t kT0 = 1704067200000;  // 2024-01-01T00:00:00Z, a Monday

// Hour-of-day and day slots are local time; the tests fix it.
inline void use_utc() {
  setenv("TZ", "UTC", 1);
  tzset();
}

inline Device device(std::string id, DeviceType type, std::string model, uint64_t capacity = 0) {
  Device d;
  d.id = std::move(id);
  d.type = type;
  d.model = std::move(model);
  d.capacity_bytes = capacity;
  d.zone = "z1";
  return d;
}
inline Device gpu(std::string id, std::string model) {
  return device(std::move(id), DeviceType::kGpu, std::move(model));
}

struct Who {
  uint32_t job = 0;
  std::string node;
  uint32_t uid = 0;
  std::string user, account, workload, window;
  std::vector<std::string> devices;
};

struct Ledger {
  std::vector<Device> inventory;
  std::vector<Event> events;

  void add(int64_t ts, std::string kind, std::optional<int64_t> composition, uint32_t job,
           std::string node, std::vector<std::string> devices, std::string from,
           std::string detail = "") {
    Event e;
    e.ts_ms = ts;
    e.kind = kind;
    e.composition_id = composition;
    e.owner.job_id = job;
    e.node = std::move(node);
    e.from_state = std::move(from);
    e.to_state = kind;
    e.devices = std::move(devices);
    e.detail = std::move(detail);
    events.push_back(std::move(e));
  }

  // One composition's state change, carrying who and what as the store writes it.
  void step(int64_t ts, int64_t id, const Who& w, std::string kind, std::string from,
            std::string detail = "") {
    add(ts, std::move(kind), id, w.job, w.node, w.devices, std::move(from), std::move(detail));
    Event& e = events.back();
    e.owner.uid = w.uid;
    e.owner.user = w.user;
    e.owner.account = w.account;
    e.owner.workload = w.workload;
    e.window = w.window;
  }

  // requested and composing at t, ready `ready_after` later; released at `release_at` (plus
  // `free_after` from releasing to released) unless it is nullopt (still live).
  void composition(int64_t id, const Who& w, int64_t t, int64_t ready_after,
                   std::optional<int64_t> release_at, int64_t free_after) {
    step(t, id, w, "requested", "");
    step(t, id, w, "composing", "requested");
    step(t + ready_after, id, w, "ready", "composing");
    if (release_at) {
      step(*release_at, id, w, "releasing", "ready");
      step(*release_at + free_after, id, w, "released", "releasing");
    }
  }

  void device_event(int64_t ts, std::string kind, const std::string& id, std::string from,
                    std::string to) {
    add(ts, std::move(kind), std::nullopt, 0, "", {id}, std::move(from));
    events.back().to_state = std::move(to);
  }

  // Ledger order: by time, and in the order written within one millisecond.
  void finish() {
    std::stable_sort(events.begin(), events.end(),
                     [](const Event& a, const Event& b) { return a.ts_ms < b.ts_ms; });
    for (size_t i = 0; i < events.size(); ++i) events[i].id = static_cast<int64_t>(i) + 1;
  }
};

inline Ledger worked_example() {
  Ledger l;
  l.inventory = {gpu("g1", "A100"), gpu("g2", "A100"), gpu("g3", "H100"),
                 device("m1", DeviceType::kMem, "CXL", 64 * kGiB),
                 device("n1", DeviceType::kNvme, "P5620", 3 * kTiB)};
  const Who alice_n1{10, "n1", 1000, "alice", "physics", "training", "day", {"g1", "m1"}};
  const Who alice_n2{10, "n2", 1000, "alice", "physics", "training", "day", {"g2"}};
  const Who alice_old{9, "n1", 1000, "alice", "physics", "training", "day", {"g3"}};
  const Who alice_fail{13, "n1", 1000, "alice", "physics", "training", "day", {"g1"}};
  const Who bob_big{11, "n1", 1001, "bob", "chem", "inference", "night", {"g2", "g3"}};
  const Who bob_nvme{12, "n2", 1001, "bob", "chem", "inference", "night", {"n1"}};

  l.composition(6, alice_old, kT0 + kH / 2, 1000, kT0 + kH - 1000, 1000);
  l.composition(1, alice_n1, kT0 + kH, 2000, kT0 + 4 * kH, 1000);
  l.composition(5, alice_n2, kT0 + kH, 1500, kT0 + 2 * kH + kH / 2, 2000);
  l.composition(2, bob_big, kT0 + 3 * kH, 4000, std::nullopt, 0);
  l.step(kT0 + 5 * kH, 4, alice_fail, "requested", "");
  l.step(kT0 + 5 * kH, 4, alice_fail, "composing", "requested");
  l.step(kT0 + 5 * kH + 3000, 4, alice_fail, "failed", "composing",
         "fabric attach failed: timeout after 60000 ms");
  l.composition(3, bob_nvme, kT0 + 9 * kH, 1000, kT0 + 11 * kH, 500);

  l.device_event(kT0 + kH, "health", "n1", "ok", "critical");
  l.device_event(kT0 + 3 * kH, "health", "n1", "critical", "ok");
  l.device_event(kT0 + 6 * kH, "drain", "m1", "free", "drained");
  l.device_event(kT0 + 8 * kH, "resume", "m1", "drained", "free");
  l.device_event(kT0 + 7 * kH, "drain", "g2", "attached", "drained");
  l.device_event(kT0 + 7 * kH + kH / 2, "resume", "g2", "drained", "attached");
  l.finish();
  return l;
}

// `n` compositions over about 100 hours on 12 devices, each device held by at most one live
// composition at a time; some fail, some are still live at the end; drains and health changes
// in between.
inline Ledger random_ledger(std::mt19937_64& rng, int n) {
  Ledger l;
  const char* models[] = {"A100", "H100"};
  for (int i = 0; i < 8; ++i) l.inventory.push_back(gpu("g" + std::to_string(i), models[i % 2]));
  for (int i = 0; i < 3; ++i) {
    l.inventory.push_back(
        device("m" + std::to_string(i), DeviceType::kMem, "CXL", (i + 1) * 32 * kGiB));
  }
  l.inventory.push_back(device("n0", DeviceType::kNvme, "P5620", 3 * kTiB));
  const auto pick = [&rng](int64_t below) { return static_cast<int64_t>(rng() % below); };
  std::vector<int64_t> free_at(l.inventory.size(), 0);
  const std::string users[] = {"ann", "ben", "cat", "dan"};
  const std::string classes[] = {"training", "inference", ""};
  const std::string windows[] = {"day", "night", ""};
  int64_t t = kT0;
  for (int id = 1; id <= n; ++id) {
    t += pick(20 * 60 * 1000);
    Who w;
    w.job = static_cast<uint32_t>(100 + pick(n / 2 + 1));
    w.node = "node" + std::to_string(pick(4));
    // A job belongs to one user, account and class, on every node it runs on.
    const int u = static_cast<int>(w.job % 4);
    w.uid = 2000 + static_cast<uint32_t>(u);
    w.user = users[u];
    w.account = u < 2 ? "a1" : "a2";
    w.workload = classes[w.job % 3];
    w.window = windows[pick(3)];
    for (size_t d = 0; d < l.inventory.size(); ++d) {
      if (free_at[d] <= t && pick(4) == 0) w.devices.push_back(l.inventory[d].id);
    }
    if (w.devices.empty()) continue;
    const int64_t outcome = pick(10);
    int64_t end = 0;
    if (outcome == 0) {
      end = t + pick(5000);
      l.step(t, id, w, "requested", "");
      l.step(t, id, w, "composing", "requested");
      l.step(end, id, w, "failed", "composing",
             "attach of 2 devices failed after " + std::to_string(pick(100)) + " ms");
    } else if (outcome == 1) {
      l.composition(id, w, t, pick(5000), std::nullopt, 0);
      end = std::numeric_limits<int64_t>::max();
    } else {
      const int64_t release = t + 5000 + pick(10 * kH);
      const int64_t free_after = pick(3000);
      l.composition(id, w, t, pick(5000), release, free_after);
      end = release + free_after;
    }
    for (size_t d = 0; d < l.inventory.size(); ++d) {
      if (std::find(w.devices.begin(), w.devices.end(), l.inventory[d].id) != w.devices.end()) {
        free_at[d] = end;
      }
    }
    if (pick(8) == 0) {
      const auto& dev = l.inventory[static_cast<size_t>(pick(12))].id;
      const int64_t at = t + pick(kH);
      if (pick(2) == 0) {
        l.device_event(at, "drain", dev, "free", "drained");
        l.device_event(at + pick(3 * kH), "resume", dev, "drained", "free");
      } else {
        l.device_event(at, "health", dev, "ok", "critical");
        l.device_event(at + pick(3 * kH), "health", dev, "critical", "ok");
      }
    }
  }
  l.finish();
  return l;
}

}  // namespace composer::accounting::testing
