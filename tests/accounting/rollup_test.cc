// The report composerd serves, walked from the ledger's rollup of ended compositions
// (Store::walk_report), against the report from the ledger's events one by one (scan_events,
// the reference): the same JSON, the counts of events read and ignored included, for ledgers
// the store writes and ledgers appended by plain SQL (odd ones too: several ends, events after
// the end, a compositions row that disagrees), over ranges whose edges cut compositions. And
// the rollup migration 9 fills for an existing ledger is the one its trigger keeps.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "composer/accounting/report.h"
#include "composer/accounting/report_json.h"
#include "composer/api/codec.h"
#include "composer/db/store.h"
#include "composer/test_support/pg_server.h"
#include "composer/test_support/temp_dir.h"
#include "ledger.h"

namespace composer::accounting {
namespace {

using testing::kH;
using testing::kT0;

constexpr int64_t kMin = 60 * 1000;

class RollupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::use_utc();
    fresh_store();
  }

  // An empty store with four hosts and their pool.
  void fresh_store() {
    store_.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(dir_.file(std::string("composer.db") + suffix));
    }
    if (pg_ != nullptr) conninfo_ = pg_->fresh_database();
    ids_.clear();
    reopen();
    std::vector<Host> hosts;
    for (int n = 1; n <= 4; ++n) {
      Host h;
      h.node = "n" + std::to_string(n);
      h.zones = {"z1"};
      h.gpu_slots = h.mem_slots = h.nvme_slots = 8;
      hosts.push_back(h);
    }
    ASSERT_TRUE(store_->upsert_hosts(hosts).ok());
    std::vector<Device> inventory;
    for (int i = 0; i < 8; ++i) {
      inventory.push_back(testing::gpu("g" + std::to_string(i), i % 2 ? "H100" : "A100"));
    }
    for (int i = 0; i < 3; ++i) {
      inventory.push_back(
          testing::device("m" + std::to_string(i), DeviceType::kMem, "CXL", (i + 1) * 32 * kGiB));
    }
    for (int i = 0; i < 2; ++i) {
      inventory.push_back(
          testing::device("v" + std::to_string(i), DeviceType::kNvme, "P5620", 3 * kTiB));
    }
    ASSERT_TRUE(store_->upsert_devices(inventory, kT0 - kH).ok());
    // One more device the fabric reported later: reports count it from then.
    ASSERT_TRUE(store_->upsert_devices({testing::gpu("g8", "H100")}, kT0 + 20 * kH).ok());
    for (const Device& d : inventory) ids_.push_back(d.id);
    ids_.push_back("g8");
  }

  void reopen() {
    store_.reset();
    auto s = conninfo_.empty() ? db::Store::open(dir_.file("composer.db"), {.durable = false})
                               : db::Store::open_postgresql(conninfo_);
    ASSERT_TRUE(s.ok()) << s.error();
    store_ = std::move(s).value();
  }

  Report reference(const ReportOptions& o) {
    auto inventory = store_->devices();
    EXPECT_TRUE(inventory.ok());
    ReportBuilder b(*inventory, o);
    auto s = store_->scan_events(o.start_ms, std::min(o.end_ms, o.now_ms), [&](const Event& e) {
      b.add(e);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s.error();
    return b.finish();
  }

  Report walked(const ReportOptions& o) {
    auto inventory = store_->devices();
    EXPECT_TRUE(inventory.ok());
    ReportBuilder b(*inventory, o);
    auto s = store_->walk_report(o.start_ms, std::min(o.end_ms, o.now_ms),
                                 {.event = [&](const Event& e) { b.add(e); },
                                  .began = [&](const CompositionRollup& c) { b.begin(c); },
                                  .ended = [&](const CompositionRollup& c) { b.end(c); },
                                  .unattached = [&](uint64_t n) { b.add_unattached(n); }});
    EXPECT_TRUE(s.ok()) << s.error();
    return b.finish();
  }

  // The two reports, member by member, so that a difference names where it is.
  void expect_same(const ReportOptions& o) {
    SCOPED_TRACE("range " + std::to_string(o.start_ms - kT0) + ".." +
                 std::to_string(o.end_ms - kT0) + " ms after kT0, now " +
                 std::to_string(o.now_ms - kT0) +
                 (o.only_uid ? ", only uid " + std::to_string(*o.only_uid) : ""));
    const Report want = reference(o);
    const Json::Value a = to_json(want), b = to_json(walked(o));
    EXPECT_EQ(a.getMemberNames(), b.getMemberNames());
    for (const std::string& name : a.getMemberNames()) {
      EXPECT_TRUE(a[name] == b[name]) << name << ":\n  reference " << api::to_text(a[name])
                                      << "\n  walked    " << api::to_text(b[name]);
    }
    ++compared_;
    if (want.compositions > 0) ++with_compositions_;
  }

  // Every range between the given instants (each pair, in order), for every caller, with now
  // after all of them and, for the last ones, now inside the range.
  void expect_same_over(std::vector<int64_t> at, const std::vector<uint32_t>& uids) {
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    const int64_t now = at.back() + kH;
    for (size_t i = 0; i < at.size(); ++i) {
      for (size_t j = i + 1; j < at.size(); ++j) {
        expect_same({.start_ms = at[i], .end_ms = at[j], .now_ms = now, .top_jobs = 3});
        for (uint32_t uid : uids) {
          expect_same({.start_ms = at[i], .end_ms = at[j], .now_ms = now, .only_uid = uid});
        }
      }
      if (at[i] + 1 < at.back()) {
        expect_same({.start_ms = at[i], .end_ms = now + kH, .now_ms = at.back() - 1});
      }
    }
  }

  // A year of the store's own writes in miniature: compositions composed on four nodes, made
  // ready, released or failed from every live state, some still live at the end; drains,
  // resumes and health changes of free and held devices (a held device's event names its
  // composition); refused composes; failure reactions on live and on ended compositions; and
  // a clock that now and then steps back a little.
  struct Written {
    std::vector<int64_t> times;
    std::set<uint32_t> uids;
  };
  Written write_random_ledger(std::mt19937_64& rng, int steps) {
    const auto pick = [&rng](int64_t below) { return static_cast<int64_t>(rng() % below); };
    struct Live {
      int64_t id = 0;
      CompositionState state = CompositionState::kComposing;
      std::vector<std::string> devices;
      Composition c;
    };
    std::vector<Live> live;
    std::vector<Composition> ended;
    std::set<std::string> held, drained, failed;
    Written w;
    const std::string windows[] = {"day", "night", ""};
    const std::string classes[] = {"training", "inference", ""};
    int64_t t = kT0;
    uint32_t job = 100;
    for (int i = 0; i < steps; ++i) {
      t += pick(40 * kMin);
      const int64_t at = pick(12) == 0 ? t - pick(3000) : t;
      w.times.push_back(at);
      const int64_t action = pick(12);
      if (action < 4) {
        Composition c;
        // Now and then a job on a second node.
        c.owner.job_id = pick(4) == 0 && job > 100 ? job - 1 : ++job;
        c.node = "n" + std::to_string(1 + pick(4));
        const uint32_t u = c.owner.job_id % 5;
        c.owner.uid = 1000 + u;
        c.owner.user = "u" + std::to_string(u);
        c.owner.account = u < 3 ? "physics" : "chem";
        c.owner.workload = classes[c.owner.job_id % 3];
        c.window = windows[pick(3)];
        c.request.gpus = 1;
        c.state = CompositionState::kComposing;
        std::vector<std::string> devices;
        for (const std::string& id : ids_) {
          if (held.count(id) == 0 && pick(5) == 0) devices.push_back(id);
        }
        if (devices.empty()) continue;
        auto made = store_->create_composition(c, devices, at);
        if (!made.ok()) {
          // The (job, node) has a live composition already.
          EXPECT_EQ(made.error().code, ErrorCode::kConflict) << made.error();
          continue;
        }
        for (const auto& d : devices) held.insert(d);
        live.push_back({made->id, CompositionState::kComposing, devices, *made});
        w.uids.insert(c.owner.uid);
      } else if (action < 8 && !live.empty()) {
        const size_t k = static_cast<size_t>(pick(static_cast<int64_t>(live.size())));
        Live& l = live[k];
        CompositionState to = l.state == CompositionState::kComposing ? CompositionState::kReady
                              : l.state == CompositionState::kReady   ? CompositionState::kReleasing
                                                                      : CompositionState::kReleased;
        if (l.state == CompositionState::kReady && pick(3) == 0) {
          // A node held it after its job (a process kept a device), then found it free: two
          // events of the composition that are no state, before its end.
          EXPECT_TRUE(store_->set_hold(l.id, "pid 7 holds " + l.devices[0], "uid 0", at).ok());
          EXPECT_TRUE(store_->set_hold(l.id, "", "uid 0", at + pick(60000)).ok());
        }
        std::string detail;
        if (pick(7) == 0) {
          to = CompositionState::kFailed;
          detail = "attach of " + std::to_string(l.devices.size()) + " devices failed after " +
                   std::to_string(pick(90000)) + " ms";
        }
        auto moved = store_->transition(l.id, l.state, to, detail, at,
                                        l.state == CompositionState::kComposing);
        EXPECT_TRUE(moved.ok()) << moved.error();
        l.state = to;
        if (!is_live(to)) {
          for (const auto& d : l.devices) held.erase(d);
          ended.push_back(l.c);
          live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        }
      } else if (action < 9) {
        const std::string& id = ids_[static_cast<size_t>(pick(static_cast<int64_t>(ids_.size())))];
        const bool drain = drained.count(id) == 0;
        EXPECT_TRUE(store_->set_drained(id, drain, drain ? "cable" : "", "uid 0", at).ok());
        if (drain) {
          drained.insert(id);
        } else {
          drained.erase(id);
        }
      } else if (action < 10) {
        const std::string& id = ids_[static_cast<size_t>(pick(static_cast<int64_t>(ids_.size())))];
        const bool fail = failed.count(id) == 0;
        EXPECT_TRUE(
            store_->set_health(id, fail ? Health::kCritical : Health::kOk, "probe", at).ok());
        if (fail) {
          failed.insert(id);
        } else {
          failed.erase(id);
        }
      } else if (action < 11) {
        Event e;
        e.ts_ms = at;
        e.kind = "refused";
        e.owner.job_id = ++job;
        e.owner.uid = 1000;
        e.owner.user = "u0";
        e.detail = "no pool can serve 9 GPUs";
        EXPECT_TRUE(store_->add_event(e).ok());
      } else {
        // A failure reaction on a live composition, or (rarely) on one already ended.
        const Composition* c = nullptr;
        if (!live.empty())
          c = &live[static_cast<size_t>(pick(static_cast<int64_t>(live.size())))].c;
        if ((c == nullptr || pick(4) == 0) && !ended.empty()) {
          c = &ended[static_cast<size_t>(pick(static_cast<int64_t>(ended.size())))];
        }
        if (c == nullptr) continue;
        Event e;
        e.ts_ms = at;
        e.kind = "requeued";
        e.composition_id = c->id;
        e.owner.job_id = c->owner.job_id;
        e.node = c->node;
        e.owner.uid = c->owner.uid;
        e.owner.user = c->owner.user;
        e.owner.account = c->owner.account;
        e.owner.workload = c->owner.workload;
        e.window = c->window;
        e.detail = "a device failed; requeued";
        EXPECT_TRUE(store_->add_event(e).ok());
      }
    }
    w.times.push_back(t + kMin);
    return w;
  }

  // The rollup's rows: every column of whole rows; of the others only that they are not whole,
  // as that is all a report reads of them.
  std::vector<std::string> rollup_rows() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(dir_.file("composer.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
              SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT * FROM composition_rollup ORDER BY composition_id", -1,
                                 &s, nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    std::vector<std::string> rows;
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::string row;
      const int n = sqlite3_column_count(s);
      const bool whole = sqlite3_column_int(s, n - 1) == 1;
      for (int i = 0; i < n; ++i) {
        if (!whole && i != 0 && i != n - 1) continue;
        const unsigned char* text = sqlite3_column_text(s, i);
        row += std::string(sqlite3_column_name(s, i)) + "=" +
               (text != nullptr ? reinterpret_cast<const char*>(text) : "NULL") + " ";
      }
      rows.push_back(row);
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return rows;
  }

  void sql(const std::string& text) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir_.file("composer.db").c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db, text.c_str(), nullptr, nullptr, &error);
    const std::string message = error != nullptr ? error : "";
    sqlite3_free(error);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << message << "\n" << text;
  }

  // 1,200 compositions appended by plain SQL, two minutes apart, each on one of the 13 devices
  // for 15 minutes (a device's next one starts 26 minutes later): one in 17 fails while
  // composing, one in 250 has a failure reaction after its end (its row is not whole), the
  // last three are still live; a drain and resume every 100. Thousands of steps.
  void write_long_ledger() {
    store_.reset();
    std::string text = "BEGIN;";
    const auto event = [&text](int64_t ts, const char* kind, int id, const std::string& device,
                               const char* from, const char* detail) {
      const std::string c = id > 0 ? std::to_string(id) : "NULL";
      const int u = id % 3;
      text +=
          "INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, user, "
          "account, workload, from_state, to_state, devices, detail, policy_window) VALUES (" +
          std::to_string(ts) + ", '" + kind + "', " + c + ", " + std::to_string(id) + ", 'n1', " +
          std::to_string(1000 + u) + ", 'u" + std::to_string(u) + "', 'acct', '" +
          (id % 2 ? "training" : "inference") + "', '" + from + "', '" + kind + "', '" + device +
          "', '" + detail + "', '" + (id % 4 ? "day" : "night") + "');";
    };
    for (int id = 1; id <= 1200; ++id) {
      const int64_t t = kT0 + (id - 1) * 2 * kMin;
      const std::string& device = ids_[static_cast<size_t>(id) % ids_.size()];
      const bool fails = id % 17 == 0;
      const bool live = id > 1197;
      const int64_t end = fails ? t + 30000 : t + 15 * kMin;
      const int u = id % 3;
      text +=
          "INSERT INTO compositions (id, job_id, node, uid, user, account, workload, gpus, "
          "gpu_model, mem_bytes, nvme, state, created_ms, updated_ms, policy_window) VALUES (" +
          std::to_string(id) + ", " + std::to_string(id) + ", 'n1', " + std::to_string(1000 + u) +
          ", 'u" + std::to_string(u) + "', 'acct', '" + (id % 2 ? "training" : "inference") +
          "', 1, '', 0, 0, '" +
          (live    ? "ready"
           : fails ? "failed"
                   : "released") +
          "', " + std::to_string(t) + ", " + std::to_string(live ? t + 2000 : end) + ", '" +
          (id % 4 ? "day" : "night") + "');";
      event(t, "requested", id, device, "", "");
      event(t + 500, "composing", id, device, "requested", "");
      if (fails) {
        event(end, "failed", id, device, "composing", "attach timed out after 30000 ms");
        continue;
      }
      event(t + 2000, "ready", id, device, "composing", "");
      if (live) continue;
      event(end - 700, "releasing", id, device, "ready", "");
      event(end, "released", id, device, "releasing", "");
      if (id % 250 == 0) event(end + 5, "requeued", id, "", "", "late reaction");
      if (id % 100 == 0) {
        event(t + 3 * kMin, "drain", 0, "v0", "free", "maintenance");
        event(t + 40 * kMin, "resume", 0, "v0", "drained", "");
      }
    }
    text += "COMMIT;";
    sql(text);
    reopen();
  }

  void walked_is_event_by_event_on_the_stores_ledgers() {
    for (uint64_t seed : {1u, 2u, 3u}) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      fresh_store();
      std::mt19937_64 rng(seed);
      const Written w = write_random_ledger(rng, 220);
      ASSERT_FALSE(w.uids.empty()) << w.times.size();
      // The ledger's start and end, instants between events, and instants exactly at events.
      std::vector<int64_t> at = {kT0 - kH, kT0, w.times.back() + kH};
      for (size_t i = 0; i < w.times.size(); i += w.times.size() / 7) {
        at.push_back(w.times[i]);
        at.push_back(w.times[i] + 1);
      }
      expect_same_over(at, {*w.uids.begin(), *w.uids.rbegin()});
    }
    EXPECT_GT(with_compositions_, compared_ / 2);
  }

  test_support::TempDir dir_{"composer-rollup"};
  // The PostgreSQL runs: the server, and the database of the store; else an SQLite file.
  test_support::PgServer* pg_ = nullptr;
  std::string conninfo_;
  std::unique_ptr<db::Store> store_;
  std::vector<std::string> ids_;
  int compared_ = 0;
  int with_compositions_ = 0;
};

TEST_F(RollupTest, WalkedReportIsTheEventByEventReportOnTheStoresLedgers) {
  walked_is_event_by_event_on_the_stores_ledgers();
}

// The same on the PostgreSQL store: its rollup is kept by its own trigger.
class RollupOnPostgreSQL : public RollupTest {
 protected:
  void SetUp() override {
    std::string why;
    bool installed = true;
    pg_ = test_support::PgServer::shared(why, installed);
    if (!installed) GTEST_SKIP() << why;
    ASSERT_NE(pg_, nullptr) << why;
    RollupTest::SetUp();
  }
  void TearDown() override {
    store_.reset();
    test_support::PgServer::stop_shared();
  }
};

TEST_F(RollupOnPostgreSQL, WalkedReportIsTheEventByEventReportOnTheStoresLedgers) {
  walked_is_event_by_event_on_the_stores_ledgers();
  // The walk read rollup rows, not only events one by one: the trigger wrote whole rows.
  PGconn* db = PQconnectdb(conninfo_.c_str());
  PGresult* r = PQexec(db, "SELECT count(*) FROM composition_rollup WHERE whole = 1");
  ASSERT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(db);
  EXPECT_GT(std::stoi(PQgetvalue(r, 0, 0)), 20);
  PQclear(r);
  PQfinish(db);
}

// Appended by plain SQL, as report_bench does: the trigger keeps the rollup all the same. Beside
// ordinary compositions, every shape a row cannot tell whole, which the walk reads event by
// event, and shapes a row tells whole that are easy to get wrong.
TEST_F(RollupTest, WalkedReportIsTheEventByEventReportOnLedgersAppendedBySql) {
  store_.reset();
  std::string text = "BEGIN;";
  const auto composition = [&](int id, const std::string& state, int64_t created, int64_t updated) {
    text +=
        "INSERT INTO compositions (id, job_id, node, uid, user, account, workload, gpus, "
        "gpu_model, mem_bytes, nvme, state, created_ms, updated_ms, policy_window) VALUES (" +
        std::to_string(id) + ", " + std::to_string(500 + id % 7) + ", 'n1', " +
        std::to_string(1000 + id % 3) + ", 'u" + std::to_string(id % 3) + "', 'acct', '" +
        (id % 2 ? "training" : "inference") + "', 1, '', 0, 0, '" + state + "', " +
        std::to_string(created) + ", " + std::to_string(updated) + ", '" +
        (id % 2 ? "day" : "night") + "');";
  };
  const auto event = [&](int64_t ts, const std::string& kind, std::optional<int> id,
                         const std::string& devices, const std::string& from = "",
                         const std::string& detail = "", int uid_offset = 0) {
    const int c = id.value_or(0);
    text +=
        "INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, user, account, "
        "workload, from_state, to_state, devices, detail, policy_window) VALUES (" +
        std::to_string(ts) + ", '" + kind + "', " + (id ? std::to_string(c) : "NULL") + ", " +
        std::to_string(id ? 500 + c % 7 : 0) + ", 'n1', " +
        std::to_string(id ? 1000 + c % 3 + uid_offset : 0) + ", 'u" + std::to_string(c % 3) +
        "', 'acct', '" + (c % 2 ? "training" : "inference") + "', '" + from + "', '" + kind +
        "', '" + devices + "', '" + detail + "', '" + (c % 2 ? "day" : "night") + "');";
  };
  const auto whole_life = [&](int id, int64_t t, const std::string& devices, int64_t held) {
    composition(id, "released", t, t + held);
    event(t, "requested", id, devices);
    event(t, "composing", id, devices, "requested");
    event(t + 2000, "ready", id, devices, "composing");
    // A failure reaction while it is live: the row counts it.
    if (id == 3) event(t + 3000, "requeued", id, "", "", "a device failed");
    event(t + held - 700, "releasing", id, devices, "ready");
    event(t + held, "released", id, devices, "releasing");
  };
  // Ordinary ones, one across each hour, two failing while composing.
  for (int i = 1; i <= 12; ++i) {
    whole_life(i, kT0 + (i - 1) * kH + 5 * kMin, i % 2 ? "g0,m0" : "g1", 50 * kMin + i * kMin);
  }
  composition(13, "failed", kT0 + 2 * kH, kT0 + 2 * kH + 30000);
  event(kT0 + 2 * kH, "requested", 13, "g2");
  event(kT0 + 2 * kH, "composing", 13, "g2", "requested");
  event(kT0 + 2 * kH + 30000, "failed", 13, "g2", "composing", "timeout after 30000 ms");
  // Its first event is its end.
  composition(14, "failed", kT0 + 3 * kH, kT0 + 3 * kH);
  event(kT0 + 3 * kH, "failed", 14, "g3", "requested", "refused by the fabric: 3 busy");
  // Begins composing, or ready, without a request in the ledger; ends from releasing.
  composition(15, "released", kT0 + kH + 10, kT0 + 5 * kH);
  event(kT0 + kH + 10, "composing", 15, "g4,v0", "requested");
  event(kT0 + kH + 900, "ready", 15, "g4,v0", "composing");
  event(kT0 + 5 * kH - 100, "releasing", 15, "g4,v0", "ready");
  event(kT0 + 5 * kH, "released", 15, "g4,v0", "releasing");
  composition(16, "released", kT0 + 4 * kH, kT0 + 6 * kH);
  event(kT0 + 4 * kH, "ready", 16, "g5", "composing");
  event(kT0 + 6 * kH, "released", 16, "g5", "releasing");
  // Not whole: two ends.
  composition(17, "failed", kT0 + kH, kT0 + 3 * kH + 7);
  event(kT0 + kH, "requested", 17, "g6");
  event(kT0 + kH + 500, "ready", 17, "g6", "composing");
  event(kT0 + 3 * kH, "released", 17, "g6", "releasing");
  event(kT0 + 3 * kH + 7, "failed", 17, "g6", "releasing", "second end");
  // Not whole: an event dated after its end, appended before it.
  composition(18, "released", kT0 + 2 * kH, kT0 + 4 * kH);
  event(kT0 + 2 * kH, "requested", 18, "g7");
  event(kT0 + 4 * kH + 3000, "releasing", 18, "g7", "ready");
  event(kT0 + 4 * kH, "released", 18, "g7", "releasing");
  // Not whole: two ready events (two compose latencies), two uids, a reaction before its
  // first state event, and one after its end.
  composition(19, "released", kT0 + 5 * kH, kT0 + 7 * kH);
  event(kT0 + 5 * kH, "requested", 19, "g2");
  event(kT0 + 5 * kH + 100, "ready", 19, "g2", "composing");
  event(kT0 + 5 * kH + 200, "ready", 19, "g2", "composing");
  event(kT0 + 7 * kH, "released", 19, "g2", "releasing");
  composition(20, "released", kT0 + 5 * kH, kT0 + 6 * kH);
  event(kT0 + 5 * kH, "requested", 20, "g3");
  event(kT0 + 6 * kH, "released", 20, "g3", "releasing", "", 1);
  composition(21, "released", kT0 + 6 * kH, kT0 + 8 * kH);
  event(kT0 + 6 * kH - 5, "requeued", 21, "");
  event(kT0 + 6 * kH, "requested", 21, "g3");
  event(kT0 + 8 * kH, "released", 21, "g3", "releasing");
  composition(22, "released", kT0 + 6 * kH, kT0 + 7 * kH);
  event(kT0 + 6 * kH, "requested", 22, "g6");
  event(kT0 + 6 * kH + 50, "requeued", 22, "");
  event(kT0 + 7 * kH, "released", 22, "g6", "releasing");
  event(kT0 + 7 * kH + 50, "requeued", 22, "");
  // Not whole: compositions rows that disagree with the ledger (created after the first event,
  // ended later than the end event, or no row at all).
  composition(23, "released", kT0 + 3 * kH, kT0 + 4 * kH);
  event(kT0 + 2 * kH, "requested", 23, "g4");
  event(kT0 + 4 * kH, "released", 23, "g4", "releasing");
  composition(24, "released", kT0 + kH, kT0 + 9 * kH);
  event(kT0 + kH, "requested", 24, "m1");
  event(kT0 + 2 * kH + 30 * kMin, "released", 24, "m1", "releasing");
  // (plain SQL does not enforce the ledger's foreign key)
  event(kT0 + 30 * kMin, "requested", 99, "m2");
  event(kT0 + 90 * kMin, "released", 99, "m2", "releasing");
  // Still live: one since before every range, one begun later; and one device held by two
  // compositions at once, which only the ledger's order sorts out.
  composition(25, "ready", kT0 - 10 * kMin, kT0 + 2 * kH);
  event(kT0 - 10 * kMin, "requested", 25, "v1");
  event(kT0 + 2 * kH, "ready", 25, "v1", "composing");
  composition(26, "releasing", kT0 + 7 * kH, kT0 + 9 * kH);
  event(kT0 + 7 * kH, "requested", 26, "g0,g9");
  event(kT0 + 9 * kH, "releasing", 26, "g0,g9", "ready");
  composition(27, "released", kT0 + 30 * kMin, kT0 + 3 * kH);
  event(kT0 + 30 * kMin, "requested", 27, "g1");
  event(kT0 + 3 * kH, "released", 27, "g1", "releasing");
  // Events at the same millisecond as others, events of no composition, device events (one of
  // a device the inventory does not know).
  event(kT0 + 3 * kH, "refused", std::nullopt, "", "", "no pool can serve 9 GPUs");
  event(kT0 + 3 * kH, "drain", std::nullopt, "g1", "attached", "maintenance");
  event(kT0 + 4 * kH, "resume", std::nullopt, "g1", "drained");
  event(kT0 + 4 * kH + 1, "health", std::nullopt, "m0", "ok", "");
  text += "COMMIT;";
  sql(text);
  // Health events carry the new health in to_state.
  sql("INSERT INTO events (ts_ms, kind, devices, from_state, to_state) VALUES (" +
      std::to_string(kT0 + 5 * kH) + ", 'health', 'm0', 'ok', 'critical'), (" +
      std::to_string(kT0 + 6 * kH) + ", 'health', 'm0', 'critical', 'ok'), (" +
      std::to_string(kT0 + 6 * kH) + ", 'drain', 'zz', 'free', 'drained')");
  reopen();

  // Which rows are whole: the ordinary ones and the easy-to-get-wrong ones.
  std::map<int, bool> whole;
  for (const std::string& row : rollup_rows()) {
    whole[std::stoi(row.substr(row.find('=') + 1))] = row.find("whole=1") != std::string::npos;
  }
  for (int id : {1, 2, 3, 12, 13, 14, 15, 16, 27}) EXPECT_TRUE(whole[id]) << id;
  for (int id : {17, 18, 19, 20, 21, 22, 23, 24, 99}) EXPECT_FALSE(whole[id]) << id;
  EXPECT_EQ(whole.count(25) + whole.count(26), 0u);

  std::vector<int64_t> at = {kT0 - kH, kT0, kT0 + 10 * kH};
  for (int64_t h = 0; h < 10; ++h) {
    at.push_back(kT0 + h * kH + 17 * kMin);
    at.push_back(kT0 + h * kH);  // exactly at events
  }
  at.push_back(kT0 + 2 * kH + 30000);
  at.push_back(kT0 + 2 * kH + 30001);
  expect_same_over(at, {1000, 1001});
}

// Migration 9 on a ledger that predates it (and the migrations after it): the rows it fills
// are those the trigger wrote, and the reports stay the same.
TEST_F(RollupTest, MigrationFillsTheRollupTheTriggerKeeps) {
  std::mt19937_64 rng(11);
  const Written w = write_random_ledger(rng, 300);
  const std::vector<std::string> kept = rollup_rows();
  ASSERT_GT(kept.size(), 20u);
  store_.reset();
  sql("BEGIN;"
      "DROP TRIGGER events_roll_up_ended_composition;"
      "DROP TRIGGER events_roll_up_late_event;"
      "DROP INDEX events_unattached_by_ts;"
      "DROP TABLE composition_rollup;"
      "ALTER TABLE compositions DROP COLUMN host_hold;"
      "ALTER TABLE compositions DROP COLUMN mem_policy;"
      "DELETE FROM schema_migrations WHERE version >= 9;"
      "PRAGMA user_version = 8;"
      "COMMIT;");
  reopen();
  EXPECT_EQ(store_->schema_version(), 12);
  EXPECT_EQ(rollup_rows(), kept);
  expect_same_over({kT0, w.times[w.times.size() / 3], w.times[w.times.size() / 2], w.times.back()},
                   {});
}

// The walk reads on a thread of its own and hands its steps over in batches of a few hundred:
// a ledger of many of them gives the same report, ranges that cut it in the middle included.
TEST_F(RollupTest, WalkedReportIsTheEventByEventReportOverManyBatches) {
  write_long_ledger();
  const int64_t end = kT0 + 1200 * 2 * kMin;
  expect_same_over({kT0 - kH, kT0 + 17 * kH + 5, kT0 + 30 * kH, end}, {1001});
}

// A row the walk cannot read, far into the walk: the walk fails with the reason, whatever it
// handed over before, and the store walks again once the row is readable.
TEST_F(RollupTest, WalkThatFailsMidwayIsAnError) {
  write_long_ledger();
  const ReportOptions o{.start_ms = kT0, .end_ms = kT0 + 45 * kH, .now_ms = kT0 + 45 * kH};
  const std::string want = api::to_text(to_json(reference(o)));
  sql("UPDATE composition_rollup SET job_id = -1 WHERE composition_id = 900");
  uint64_t steps = 0;
  const auto count = [&steps](const auto&) { ++steps; };
  auto failed = store_->walk_report(
      o.start_ms, o.end_ms,
      {.event = count, .began = count, .ended = count, .unattached = [](uint64_t) {}});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().code, ErrorCode::kInternal);
  EXPECT_NE(failed.error().message.find("outside 0..4294967295"), std::string::npos)
      << failed.error();
  sql("UPDATE composition_rollup SET job_id = 900 WHERE composition_id = 900");
  EXPECT_EQ(api::to_text(to_json(walked(o))), want);
}

// A callback that throws stops the walk: the exception reaches the caller, and the store walks
// again afterwards.
TEST_F(RollupTest, WalkStopsWhenACallbackThrows) {
  write_long_ledger();
  const ReportOptions o{.start_ms = kT0, .end_ms = kT0 + 45 * kH, .now_ms = kT0 + 45 * kH};
  int began = 0;
  const auto ignore = [](const auto&) {};
  EXPECT_THROW((void)store_->walk_report(o.start_ms, o.end_ms,
                                         {.event = ignore,
                                          .began =
                                              [&began](const CompositionRollup&) {
                                                if (++began == 700)
                                                  throw std::runtime_error("stop");
                                              },
                                          .ended = ignore,
                                          .unattached = [](uint64_t) {}}),
               std::runtime_error);
  EXPECT_EQ(began, 700);
  expect_same(o);
}

TEST_F(RollupTest, WalkRefusesABackwardRange) {
  auto refused = store_->walk_report(kT0 + 5, kT0, {});
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace composer::accounting
