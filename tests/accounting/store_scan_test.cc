// Reports from a real SQLite store: what scan_events streams gives the same report as every
// event of the ledger, for ranges that start before, inside and after compositions.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "composer/accounting/report.h"
#include "composer/accounting/report_json.h"
#include "composer/db/store.h"
#include "composer/test_support/pg_server.h"
#include "composer/test_support/temp_dir.h"
#include "ledger.h"

namespace composer::accounting {
namespace {

using testing::kH;
using testing::kT0;

class StoreScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::use_utc();
    auto s = conninfo_.empty() ? db::Store::open(dir_.file("composer.db"), {.durable = false})
                               : db::Store::open_postgresql(conninfo_);
    ASSERT_TRUE(s.ok()) << s.error();
    store_ = std::move(s).value();
    Host h;
    h.node = "n1";
    h.zones = {"z1"};
    h.gpu_slots = h.mem_slots = h.nvme_slots = 8;
    ASSERT_TRUE(store_->upsert_hosts({h}).ok());
    inventory_ = {testing::gpu("g1", "A100"), testing::gpu("g2", "A100"),
                  testing::device("m1", DeviceType::kMem, "CXL", 64 * kGiB)};
    ASSERT_TRUE(store_->upsert_devices(inventory_, 0).ok());
  }

  int64_t compose(uint32_t job, std::vector<std::string> devices, int64_t t) {
    Composition c;
    c.owner.job_id = job;
    c.node = "n1";
    c.owner.uid = 1000 + job;
    c.owner.user = "u" + std::to_string(job);
    c.owner.account = "acct";
    c.owner.workload = job % 2 == 0 ? "training" : "inference";
    c.request.gpus = 1;
    c.state = CompositionState::kComposing;
    auto made = store_->create_composition(c, devices, t);
    EXPECT_TRUE(made.ok()) << made.error();
    EXPECT_TRUE(store_
                    ->transition(made->id, CompositionState::kComposing, CompositionState::kReady,
                                 "", t + 1000, true)
                    .ok());
    return made->id;
  }
  void release(int64_t id, int64_t t) {
    ASSERT_TRUE(
        store_->transition(id, CompositionState::kReady, CompositionState::kReleasing, "", t).ok());
    ASSERT_TRUE(
        store_
            ->transition(id, CompositionState::kReleasing, CompositionState::kReleased, "", t + 500)
            .ok());
  }

  Report from_scan(const ReportOptions& o, uint64_t* delivered) {
    ReportBuilder b(inventory_, o);
    *delivered = 0;
    auto s = store_->scan_events(o.start_ms, std::min(o.end_ms, o.now_ms), [&](const Event& e) {
      ++*delivered;
      b.add(e);
      return true;
    });
    EXPECT_TRUE(s.ok()) << s.error();
    return b.finish();
  }
  Report from_everything(const ReportOptions& o) {
    auto all = store_->events({});
    EXPECT_TRUE(all.ok());
    auto r = build_report(inventory_, *all, o);
    EXPECT_TRUE(r.ok()) << r.error();
    return *r;
  }

  test_support::TempDir dir_{"composer-accounting"};
  void scan_is_the_whole_ledger() {
    // Many short compositions early on, one long one across the middle, one still live.
    for (uint32_t j = 1; j <= 20; ++j) {
      const int64_t t = kT0 + j * 60000;
      release(compose(j, {"g1"}, t), t + 30000);
    }
    const int64_t long_one = compose(100, {"g2", "m1"}, kT0 + kH);
    ASSERT_TRUE(store_->set_drained("g1", true, "cable", "uid 0", kT0 + 2 * kH).ok());
    ASSERT_TRUE(store_->set_drained("g1", false, "", "uid 0", kT0 + 3 * kH).ok());
    release(long_one, kT0 + 5 * kH);
    compose(101, {"g1"}, kT0 + 6 * kH);
    ASSERT_TRUE(store_->set_health("g2", Health::kCritical, "lost", kT0 + 7 * kH).ok());

    for (auto [start, end] : {std::pair{kT0, kT0 + 8 * kH}, std::pair{kT0 + 4 * kH, kT0 + 8 * kH},
                              std::pair{kT0 + 2 * kH + 1, kT0 + 6 * kH + 1},
                              std::pair{kT0 + 7 * kH + 5, kT0 + 9 * kH}}) {
      const ReportOptions o{.start_ms = start, .end_ms = end, .now_ms = kT0 + 9 * kH};
      uint64_t delivered = 0;
      const Report scanned = from_scan(o, &delivered);
      const Report full = from_everything(o);
      Json::Value a = to_json(scanned), b = to_json(full);
      // The counters of what was read differ by design; every figure must not.
      a.removeMember("events_read");
      b.removeMember("events_read");
      EXPECT_EQ(a, b) << "range " << start - kT0 << ".." << end - kT0;
      EXPECT_EQ(scanned.events_ignored, 0u);
    }
    // From 4h on, the 20 short compositions (80 events) before it are not read at all.
    uint64_t delivered = 0;
    const Report late = from_scan(
        {.start_ms = kT0 + 4 * kH, .end_ms = kT0 + 8 * kH, .now_ms = kT0 + 9 * kH}, &delivered);
    EXPECT_LT(delivered, 15u);
    // g2 and m1 were held by job 100 from 1h to 5h+500ms: 1h and 500 ms of it inside.
    for (const auto& p : late.pools) {
      if (p.type == "mem") {
        EXPECT_EQ(p.usage.attached_ms, kH + 500);
      }
    }
  }

  std::string conninfo_;  // the PostgreSQL runs: the database; empty: an SQLite file
  std::unique_ptr<db::Store> store_;
  std::vector<Device> inventory_;
};

TEST_F(StoreScanTest, ScanGivesTheSameReportAsTheWholeLedger) { scan_is_the_whole_ledger(); }

// The same on the PostgreSQL store, in a database of a private server.
class StoreScanOnPostgreSQL : public StoreScanTest {
 protected:
  void SetUp() override {
    std::string why;
    bool installed = true;
    test_support::PgServer* pg = test_support::PgServer::shared(why, installed);
    if (!installed) GTEST_SKIP() << why;
    ASSERT_NE(pg, nullptr) << why;
    conninfo_ = pg->fresh_database();
    StoreScanTest::SetUp();
  }
  void TearDown() override {
    store_.reset();
    test_support::PgServer::stop_shared();
  }
};

TEST_F(StoreScanOnPostgreSQL, ScanGivesTheSameReportAsTheWholeLedger) {
  scan_is_the_whole_ledger();
}

// The inventory as composerd hands it to the report: each device from the store, with the
// time the store first knew it.
TEST_F(StoreScanTest, ADeviceTheFabricAddsLaterCountsFromThen) {
  ASSERT_TRUE(
      store_->upsert_devices({testing::gpu("g1", "A100"), testing::gpu("g3", "A100")}, kT0 + 2 * kH)
          .ok());
  const int64_t id = compose(1, {"g3"}, kT0 + 3 * kH);
  release(id, kT0 + 4 * kH);
  auto stored = store_->devices();
  ASSERT_TRUE(stored.ok()) << stored.error();
  inventory_ = *stored;
  uint64_t delivered = 0;
  const Report r =
      from_scan({.start_ms = kT0, .end_ms = kT0 + 6 * kH, .now_ms = kT0 + 9 * kH}, &delivered);
  bool seen = false;
  for (const auto& p : r.pools) {
    if (p.model != "A100") continue;
    seen = true;
    EXPECT_EQ(p.devices, 3u);
    // g1 and g2 (known at 0) all 6 h; g3 from 2h: 4 h, 1 h and 500 ms of it attached.
    EXPECT_EQ(p.usage, (Usage{.attached_ms = kH + 500, .idle_ms = 16 * kH - kH - 500}));
  }
  EXPECT_TRUE(seen);
}

TEST_F(StoreScanTest, ScanStopsWhenTheVisitorSaysSo) {
  for (uint32_t j = 1; j <= 5; ++j) release(compose(j, {"g1"}, kT0 + j * kH), kT0 + j * kH + 10);
  int seen = 0;
  ASSERT_TRUE(
      store_->scan_events(kT0, kT0 + 10 * kH, [&](const Event&) { return ++seen < 3; }).ok());
  EXPECT_EQ(seen, 3);
  auto refused = store_->scan_events(kT0 + 5, kT0, [](const Event&) { return true; });
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(StoreScanTest, RangeReadInRowidOrderKeepsLedgerOrderWhenTimestampsGoBack) {
  // Events are appended with the writer's time, which may step back a little: ids below follow
  // the order of the calls, timestamps (after kT0) do not. The range is [200, 1000).
  struct Step {
    const char* device;
    bool drain;  // drain/resume; for m1: critical/ok
    int64_t t;
  };
  const Step steps[] = {{"g1", true, 100},  {"g1", false, 50},  {"g2", true, 210},
                        {"g2", false, 190}, {"g1", true, 205},  {"m1", true, 200},
                        {"g2", true, 400},  {"g1", false, 300}, {"g2", false, 1010},
                        {"m1", false, 990}, {"g1", true, 995},  {"g1", false, 150}};
  for (const Step& st : steps) {
    if (std::string(st.device) == "m1") {
      ASSERT_TRUE(store_
                      ->set_health(st.device, st.drain ? Health::kCritical : Health::kOk, "probe",
                                   kT0 + st.t)
                      .ok());
    } else {
      ASSERT_TRUE(store_->set_drained(st.device, st.drain, "test", "uid 0", kT0 + st.t).ok());
    }
  }
  const int64_t since = kT0 + 200, until = kT0 + 1000;
  // What the ts index alone gives, in ledger order: every device event before the range, then
  // the range itself.
  auto before = store_->events({.until_ms = since});
  auto range = store_->events({.since_ms = since, .until_ms = until});
  ASSERT_TRUE(before.ok() && range.ok());
  std::vector<Event> expected = *before;
  expected.insert(expected.end(), range->begin(), range->end());
  ASSERT_EQ(before->size(), 4u);
  ASSERT_EQ(range->size(), 7u);
  // The range's ids are out of order on purpose: some below its first id, some read early.
  std::vector<int64_t> range_ids;
  for (const Event& e : *range) range_ids.push_back(e.id);
  ASSERT_FALSE(std::is_sorted(range_ids.begin(), range_ids.end()));
  ASSERT_LT(*std::min_element(range_ids.begin(), range_ids.end()), range_ids.front());

  std::vector<Event> scanned;
  ASSERT_TRUE(store_
                  ->scan_events(since, until,
                                [&](const Event& e) {
                                  scanned.push_back(e);
                                  return true;
                                })
                  .ok());
  ASSERT_EQ(scanned.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(scanned[i].id, expected[i].id);
    EXPECT_EQ(scanned[i].ts_ms, expected[i].ts_ms);
    EXPECT_EQ(scanned[i].kind, expected[i].kind);
    EXPECT_EQ(scanned[i].devices, expected[i].devices);
    EXPECT_EQ(scanned[i].detail, expected[i].detail);
    EXPECT_EQ(scanned[i].to_state, expected[i].to_state);
  }

  // Stopping part way through the reordered range stops there.
  size_t seen = 0;
  ASSERT_TRUE(store_->scan_events(since, until, [&](const Event&) { return ++seen < 7; }).ok());
  EXPECT_EQ(seen, 7u);
}

}  // namespace
}  // namespace composer::accounting
