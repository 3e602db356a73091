// kill -9 under load: the real composerd, durable, is killed while many clients compose and
// release, and started again, round after round, on two fabrics with injected faults: the sim
// fabric (latency, failing attaches) and the fake Redfish service (failing, failed-task,
// broken and slow actions, failing inventory reads; its mockup systems hold blocks composerd
// must never touch). After each restart, once the reconciler has settled what was in flight:
//   - the database passes SQLite's integrity check;
//   - every answer a client got is in the store and the ledger (a composition acknowledged
//     ready is still ready with the same devices unless its release was tried; an
//     acknowledged release is released);
//   - no device is in two live compositions, and the fabric holds exactly the devices of the
//     live compositions: nothing attached that no composition owns, nothing owned not attached;
//   - nothing stays composing or releasing.
// The default is a short campaign; COMPOSER_CRASH_ROUNDS and COMPOSER_CRASH_CLIENTS make it
// longer (contrib/test.sh --full runs 40 rounds of 64 clients on each fabric).
#include <signal.h>
#include <sqlite3.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "composer/common/units.h"
#include "composer/testing/fake_redfish.h"
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
    std::string e = h ? sqlite3_errmsg(h) : "cannot open";
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

// One fabric for the campaign: composer.conf's lines for it and its pool, the nodes clients
// compose on, what it holds that composerd may own, faults injected before each round and
// dropped once composerd is killed (the checks run on a calm fabric).
struct CampaignFabric {
  std::string name;
  std::string conf;
  std::string pool;
  std::vector<std::string> nodes;
  std::function<std::set<std::string>(const ComposerdProcess&)> held;
  std::function<void(std::mt19937&)> faults = [](std::mt19937&) {};
  std::function<void()> calm = [] {};
};

struct CampaignCounts {
  size_t answered = 0;
  size_t compositions = 0;
  size_t settled_at_start = 0;
  size_t faults_logged = 0;  // composerd's log lines naming an injected fault
};

void campaign(const CampaignFabric& f, int rounds, int clients, CampaignCounts* counts) {
  ComposerdProcess d(
      "Durable=yes\nReconcileInterval=1\nStuckAfter=2\nOrphanGrace=1\nComposeTimeout=5\n"
      "ReleaseTimeout=5\n" +
          f.conf,
      f.pool);
  const std::string db = d.state_dir() + "/composer.db";
  std::mt19937 rng(20261201);
  std::mutex mu;
  std::map<std::pair<uint32_t, std::string>, Told> told;
  size_t& answered = counts->answered;

  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(f.name + " round " + std::to_string(round));
    f.faults(rng);
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
          const std::string node = f.nodes[r() % f.nodes.size()];
          api::ComposeBody body{
              .owner = {
                  .uid = 1000, .user = "alice", .account = "physics", .workload = "training"}};
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
    f.calm();
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
      held = f.held(d);
      if (held == owned) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    EXPECT_EQ(held, owned) << "round " << round;

    // Every answer is in the store and the ledger.
    std::map<std::pair<uint32_t, std::string>, const Composition*> by_key;
    for (const auto& x : live) by_key[{x.owner.job_id, x.node}] = &x;
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
        // A copy: clang before 16 refuses a lambda that names a structured binding.
        const auto composition = w.composition;
        const bool in_ledger = std::any_of(events->begin(), events->end(), [&](const Event& e) {
          return e.composition_id == composition && e.kind == "ready";
        });
        EXPECT_TRUE(in_ledger) << "job " << key.first << ": no ready event in the ledger";
      }
    }
    // The next round composes against a pool with room again.
    for (const auto& x : live) {
      auto released = c.release(x.owner.job_id, x.node);
      ASSERT_TRUE(released.ok() && released->has_value()) << "job " << x.owner.job_id;
      told[{x.owner.job_id, x.node}].released = (*released)->state;
    }
  }
  EXPECT_GT(answered, static_cast<size_t>(rounds)) << "the clients were never answered";
  const std::string log = d.log();
  size_t settled_at_start = 0;
  for (size_t at = log.find("unfinished by the previous run"); at != std::string::npos;
       at = log.find("unfinished by the previous run", at + 1)) {
    ++settled_at_start;
  }
  for (size_t at = log.find("injected"); at != std::string::npos;
       at = log.find("injected", at + 1)) {
    ++counts->faults_logged;
  }
  EXPECT_GT(counts->faults_logged, 0u) << "no injected fault reached composerd";
  counts->compositions = told.size();
  counts->settled_at_start = settled_at_start;

  // In the end everything goes back, and the pool adds up.
  auto c = d.client(5000);
  auto live = c.compositions(client::CompositionQuery{.live = true, .limit = 10000});
  ASSERT_TRUE(live.ok());
  for (const auto& x : *live) ASSERT_TRUE(c.release(x.owner.job_id, x.node).ok());
  auto pool = c.pool();
  ASSERT_TRUE(pool.ok());
  for (const auto& row : *pool) {
    EXPECT_EQ(row.free + row.drained + row.failed + row.foreign, row.total)
        << row.model << " in " << row.zone;
    EXPECT_EQ(row.attached, 0u);
  }
  EXPECT_TRUE(f.held(d).empty());
}

void report(const std::string& fabric, int rounds, int clients, const CampaignCounts& c) {
  std::cout << "kill -9 campaign on the " << fabric << " fabric: " << rounds << " rounds of "
            << clients << " clients, " << c.answered << " answers checked, " << c.compositions
            << " compositions, " << c.settled_at_start
            << " starts that settled compositions left in flight, " << c.faults_logged
            << " injected faults in composerd's log, violations: "
            << (::testing::Test::HasFailure() ? "see above" : "0") << "\n";
}

TEST(ComposerdCrash, KillNineUnderConcurrentClientsLosesNothingItAnswered) {
  const int rounds = env_int("COMPOSER_CRASH_ROUNDS", 4);
  const int clients = env_int("COMPOSER_CRASH_CLIENTS", 12);
  CampaignFabric sim{.name = "sim",
                     .conf = "SimLatency=30\nSimFailAttaches=2\n",
                     .held = [](const ComposerdProcess& d) { return sim_fabric_holds(d); }};
  for (int n = 1; n <= 8; ++n) {
    sim.nodes.push_back("n" + std::to_string(n));
    sim.pool += "NodeName=n" + std::to_string(n) + " Zones=z" + std::to_string((n + 1) / 2) +
                " GpuSlots=8 MemSlots=8\n";
  }
  for (int z = 1; z <= 4; ++z) {
    sim.pool += "DeviceGroup=gpu-" + std::to_string(z) + " Type=gpu Model=H100 Zone=z" +
                std::to_string(z) + " Count=16\n";
    sim.pool += "DeviceGroup=cxl-" + std::to_string(z) + " Type=mem Model=CXL Zone=z" +
                std::to_string(z) + " Count=8 Size=64G\n";
  }
  CampaignCounts counts;
  campaign(sim, rounds, clients, &counts);
  report("sim", rounds, clients, counts);
}

// The systems of a fake Redfish service and their blocks.
std::map<std::string, std::set<std::string>> redfish_systems(const FakeRedfish& fake) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [system, blocks] : fake.systems())
    out[system].insert(blocks.begin(), blocks.end());
  return out;
}

TEST(ComposerdCrash, KillNineOnRedfishWithFaultsLosesNothingAndTouchesNoForeignBlock) {
  const int rounds = env_int("COMPOSER_CRASH_ROUNDS", 4);
  const int clients = env_int("COMPOSER_CRASH_CLIENTS", 12);
  FakeRedfishOptions o;
  o.gpus_per_zone = 16;
  o.memory_per_zone = 4;
  o.drives_per_zone = 0;
  o.hosts = 4;
  o.task_ms = 30;
  auto started = FakeRedfish::start(o);
  ASSERT_TRUE(started.ok()) << started;
  FakeRedfish& fake = **started;
  // What the systems hold before composerd starts (the mockups' compositions, the hosts' own
  // compute blocks): never composerd's to detach, nor its to count.
  std::map<std::string, std::set<std::string>> before = redfish_systems(fake);
  std::set<std::string> theirs;
  for (const auto& [system, blocks] : before) theirs.insert(blocks.begin(), blocks.end());
  std::map<std::string, std::set<std::string>> foreign = before;
  for (const std::string& host : fake.hosts()) foreign.erase(host);
  ASSERT_FALSE(foreign.empty()) << "the mockups compose no system of their own";

  test_support::TempDir dir("composer-crash-redfish");
  CampaignFabric redfish{
      .name = "redfish",
      .conf = "Fabric=redfish\nFabricName=fake\nFabricUrl=" + fake.base_url() +
              "\nFabricCredentials=" + write_credentials(dir, o.username, o.password) +
              "\nFabricPollInterval=20ms\nFabricTimeout=3s\n",
      .nodes = fake.hosts(),
      .held =
          [&](const ComposerdProcess&) {
            std::set<std::string> out;
            for (const auto& [system, blocks] : redfish_systems(fake)) {
              for (const std::string& b : blocks) {
                if (!theirs.contains(b)) out.insert(b);
              }
            }
            return out;
          },
      .faults =
          [&](std::mt19937& r) {
            using K = FakeRedfishFault::Kind;
            auto at = [&r] { return static_cast<uint32_t>(r() % 8); };
            fake.inject({.kind = K::kStatus,
                         .method = "POST",
                         .path = "AddResourceBlock",
                         .status = 500,
                         .count = 1 + static_cast<uint32_t>(r() % 2),
                         .skip = at()});
            fake.inject({.kind = K::kTaskFails,
                         .method = "POST",
                         .path = "AddResourceBlock",
                         .count = 1,
                         .skip = at()});
            fake.inject({.kind = K::kReset,
                         .method = "POST",
                         .path = "RemoveResourceBlock",
                         .count = 1,
                         .skip = at()});
            fake.inject({.kind = K::kDelay,
                         .method = "POST",
                         .path = "ResourceBlock",
                         .delay_ms = 400,
                         .count = 1,
                         .skip = at()});
            fake.inject({.kind = K::kStatus,
                         .method = "GET",
                         .path = "/Systems",
                         .status = 503,
                         .count = 2,
                         .skip = 10 * at()});
          },
      .calm = [&] { fake.clear_faults(); }};
  CampaignCounts counts;
  campaign(redfish, rounds, clients, &counts);
  report("redfish", rounds, clients, counts);

  std::map<std::string, std::set<std::string>> after = redfish_systems(fake);
  for (const auto& [system, blocks] : before) {
    EXPECT_EQ(after[system], blocks) << "composerd left system " << system << " changed";
  }
}

}  // namespace
}  // namespace composer::testing
