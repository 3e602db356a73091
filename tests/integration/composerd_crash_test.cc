// kill -9 under load: the real composerd, durable, on a sim fabric with latency and injected
// attach faults, is killed while many clients compose and release, and started again, round
// after round. After each restart, once the reconciler has settled what was in flight:
//   - the database passes SQLite's integrity check;
//   - every answer a client got is in the store and the ledger (a composition acknowledged
//     ready is still ready with the same devices unless its release was tried; an
//     acknowledged release is released);
//   - no device is in two live compositions, and the fabric holds exactly the devices of the
//     live compositions: nothing attached that no composition owns, nothing owned not attached;
//   - nothing stays composing or releasing.
// The default is a short campaign; COMPOSER_CRASH_ROUNDS and COMPOSER_CRASH_CLIENTS make it
// longer (contrib/test.sh --full runs 40 rounds of 64 clients).
#include <signal.h>
#include <sqlite3.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "composer/common/units.h"
#include "composerd_process.h"

namespace composer::testing {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::max(1, std::atoi(v));
}

// What clients were told, per (job, node).
struct Told {
  int64_t composition = 0;
  std::vector<std::string> devices;
  bool ready = false;                        // a compose answered ready
  bool release_tried = false;                // a release was sent (its answer may have been lost)
  std::optional<CompositionState> released;  // a release answered with this state
};

std::string integrity_of(const std::string& db) {
  sqlite3* h = nullptr;
  if (sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string e = h ? sqlite3_errmsg(h) : "cannot open";
    sqlite3_close(h);
    return e;
  }
  std::string out;
  sqlite3_exec(
      h, "PRAGMA integrity_check",
      [](void* o, int, char** v, char**) {
        *static_cast<std::string*>(o) += v[0] ? v[0] : "";
        return 0;
      },
      &out, nullptr);
  sqlite3_close(h);
  return out;
}

// The sim fabric's own record of what it holds ("DEVICE HOST" lines).
std::set<std::string> fabric_holds(const std::string& sim_file) {
  std::set<std::string> out;
  std::ifstream in(sim_file);
  std::string line;
  while (std::getline(in, line)) {
    if (const auto space = line.find(' '); space != std::string::npos) {
      out.insert(line.substr(0, space));
    }
  }
  return out;
}

TEST(ComposerdCrash, KillNineUnderConcurrentClientsLosesNothingItAnswered) {
  const int rounds = env_int("COMPOSER_CRASH_ROUNDS", 4);
  const int clients = env_int("COMPOSER_CRASH_CLIENTS", 12);
  std::string lines;
  for (int n = 1; n <= 8; ++n) {
    lines += "NodeName=n" + std::to_string(n) + " Zones=z" + std::to_string((n + 1) / 2) +
             " GpuSlots=8 MemSlots=8\n";
  }
  for (int z = 1; z <= 4; ++z) {
    lines += "DeviceGroup=gpu-" + std::to_string(z) + " Type=gpu Model=H100 Zone=z" +
             std::to_string(z) + " Count=16\n";
    lines += "DeviceGroup=cxl-" + std::to_string(z) + " Type=mem Model=CXL Zone=z" +
             std::to_string(z) + " Count=8 Size=64G\n";
  }
  ComposerdProcess d(
      "Durable=yes\nSimLatency=30\nSimFailAttaches=2\nReconcileInterval=1\nStuckAfter=2\n"
      "OrphanGrace=1\nComposeTimeout=5\nReleaseTimeout=5\n",
      lines);
  const std::string db = d.state_dir() + "/composer.db";
  std::mt19937 rng(20261201);
  std::mutex mu;
  std::map<std::pair<uint32_t, std::string>, Told> told;
  size_t answered = 0;

  for (int round = 0; round < rounds; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < clients; ++t) {
      const uint32_t seed = rng();
      threads.emplace_back([&, t, seed] {
        std::mt19937 r(seed);
        auto c = d.client(3000);
        for (uint32_t k = 0; !stop.load(); ++k) {
          const uint32_t job = 1'000'000u * static_cast<uint32_t>(round + 1) +
                               10'000u * static_cast<uint32_t>(t) + k;
          const std::string node = "n" + std::to_string(1 + r() % 8);
          api::ComposeBody body{
              .uid = 1000, .user = "alice", .account = "physics", .workload = "training"};
          body.request.gpus = 1 + static_cast<uint32_t>(r() % 2);
          if (r() % 3 == 0) body.request.mem_bytes = 64 * kGiB;
          auto composed = c.compose(job, node, body);
          if (!composed) continue;  // refused, exhausted, or composerd gone: nothing told
          std::vector<std::string> ids;
          for (const auto& dev : composed->devices) ids.push_back(dev.id);
          {
            std::lock_guard lock(mu);
            Told& w = told[{job, node}];
            w.composition = composed->id;
            w.devices = ids;
            w.ready = composed->state == CompositionState::kReady;
            ++answered;
          }
          if (r() % 3 == 0) continue;  // leave it composed across the crash
          {
            std::lock_guard lock(mu);
            told[{job, node}].release_tried = true;
          }
          auto released = c.release(job, node);
          if (released && released->has_value()) {
            std::lock_guard lock(mu);
            told[{job, node}].released = (*released)->state;
            ++answered;
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
    ASSERT_EQ(::kill(d.pid(), SIGKILL), 0);
    d.stop();  // reaps it
    stop = true;
    for (auto& th : threads) th.join();
    ASSERT_NO_THROW(d.start()) << "round " << round;

    // Settled: nothing composing or releasing, within the reconciler's bound.
    auto c = d.client(5000);
    std::vector<Composition> live;
    bool settled = false;
    for (int i = 0; i < 100 && !settled; ++i) {
      auto l = c.compositions(client::CompositionQuery{.live = true, .limit = 10000});
      ASSERT_TRUE(l.ok()) << l.error();
      live = *l;
      settled = std::all_of(live.begin(), live.end(), [](const Composition& x) {
        return x.state == CompositionState::kReady;
      });
      if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(settled) << "round " << round << ": compositions left in flight";

    EXPECT_EQ(integrity_of(db), "ok") << "round " << round;

    // No device twice; the fabric holds exactly what the live compositions own (after the
    // orphan grace the reconciler has taken back attaches that never became compositions).
    std::set<std::string> owned;
    for (const auto& x : live) {
      for (const auto& dev : x.devices) {
        EXPECT_TRUE(owned.insert(dev.id).second) << dev.id << " is in two live compositions";
      }
    }
    std::set<std::string> held;
    for (int i = 0; i < 50; ++i) {
      held = fabric_holds(db + ".sim");
      if (held == owned) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    EXPECT_EQ(held, owned) << "round " << round;

    // Every answer is in the store and the ledger.
    std::map<std::pair<uint32_t, std::string>, const Composition*> by_key;
    for (const auto& x : live) by_key[{x.job_id, x.node}] = &x;
    std::lock_guard lock(mu);
    for (const auto& [key, w] : told) {
      // Earlier rounds' jobs were checked then, and released at their round's end.
      if (w.composition == 0 || key.first / 1'000'000u != static_cast<uint32_t>(round + 1)) {
        continue;
      }
      auto it = by_key.find(key);
      if (w.released) {
        EXPECT_EQ(it, by_key.end()) << "job " << key.first << " was told released";
        auto past = c.show(key.first, key.second);
        ASSERT_TRUE(past.ok()) << past.error();
        EXPECT_EQ(past->id, w.composition);
        EXPECT_EQ(past->state, *w.released) << "job " << key.first;
      } else if (w.ready && !w.release_tried) {
        ASSERT_NE(it, by_key.end()) << "job " << key.first << " was told ready and is gone";
        EXPECT_EQ(it->second->id, w.composition);
        std::vector<std::string> ids;
        for (const auto& dev : it->second->devices) ids.push_back(dev.id);
        EXPECT_EQ(ids, w.devices) << "job " << key.first;
      }
      if (w.ready) {
        auto events = c.events(client::EventQuery{.job = key.first});
        ASSERT_TRUE(events.ok()) << events.error();
        const bool in_ledger = std::any_of(events->begin(), events->end(), [&](const Event& e) {
          return e.composition_id == w.composition && e.kind == "ready";
        });
        EXPECT_TRUE(in_ledger) << "job " << key.first << ": no ready event in the ledger";
      }
    }
    // The next round composes against a pool with room again.
    for (const auto& x : live) {
      auto released = c.release(x.job_id, x.node);
      ASSERT_TRUE(released.ok() && released->has_value()) << "job " << x.job_id;
      told[{x.job_id, x.node}].released = (*released)->state;
    }
  }
  EXPECT_GT(answered, static_cast<size_t>(rounds)) << "the clients were never answered";
  const std::string log = d.log();
  size_t settled_at_start = 0;
  for (size_t at = log.find("unfinished by the previous run"); at != std::string::npos;
       at = log.find("unfinished by the previous run", at + 1)) {
    ++settled_at_start;
  }
  std::cout << "kill -9 campaign: " << rounds << " rounds of " << clients << " clients, "
            << answered << " answers checked, " << told.size() << " compositions, "
            << settled_at_start << " starts that settled compositions left in flight\n";

  // In the end everything goes back, and the pool adds up.
  auto c = d.client(5000);
  auto live = c.compositions(client::CompositionQuery{.live = true, .limit = 10000});
  ASSERT_TRUE(live.ok());
  for (const auto& x : *live) ASSERT_TRUE(c.release(x.job_id, x.node).ok());
  auto pool = c.pool();
  ASSERT_TRUE(pool.ok());
  for (const auto& row : *pool) {
    EXPECT_EQ(row.free + row.drained + row.failed, row.total) << row.model << " in " << row.zone;
    EXPECT_EQ(row.attached, 0u);
  }
  EXPECT_TRUE(fabric_holds(db + ".sim").empty());
}

}  // namespace
}  // namespace composer::testing
