// db::copy_to_postgresql: a site's SQLite file into an empty PostgreSQL store, checked, and
// the refusals (a file composerd holds open, a store that is not empty, no password shown).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "composer/test_support/pg_server.h"
#include "store_fixture.h"

namespace composer::db::testing {
namespace {

using S = CompositionState;

class CopyTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    std::string why;
    bool installed = true;
    server_ = test_support::PgServer::shared(why, installed);
    if (!installed) GTEST_SKIP() << why;
    ASSERT_NE(server_, nullptr) << why;
  }

  // A site's history: compositions live, released and failed, a drain, a policy, a refusal.
  void fill() {
    add_inventory();
    auto live = store().create_composition(make_composition(1, "node1"), {"gpu-0", "mem-0"}, 10);
    ASSERT_TRUE(live.ok()) << live.error();
    ASSERT_TRUE(store().transition(live->id, S::kComposing, S::kReady, "", 20).ok());
    auto done = store().create_composition(make_composition(2, "node2"), {"gpu-1"}, 30);
    ASSERT_TRUE(done.ok()) << done.error();
    ASSERT_TRUE(store().transition(done->id, S::kComposing, S::kReady, "", 40).ok());
    ASSERT_TRUE(store().transition(done->id, S::kReady, S::kReleasing, "", 50).ok());
    ASSERT_TRUE(store().transition(done->id, S::kReleasing, S::kReleased, "", 60).ok());
    auto failed = store().create_composition(make_composition(3, "node3"), {"gpu-2"}, 70);
    ASSERT_TRUE(failed.ok()) << failed.error();
    ASSERT_TRUE(
        store().transition(failed->id, S::kComposing, S::kFailed, "fabric said no", 80).ok());
    ASSERT_TRUE(store().set_drained("gpu-5", true, "maintenance", "root", 90).ok());
    PolicyVersion p;
    p.uid = 0;
    p.user = "root";
    p.file = "site.policy";
    p.sha256 = std::string(64, 'a');
    p.text = "x";
    ASSERT_TRUE(store().add_policy(p, 100).ok());
    Event refused;
    refused.ts_ms = 110;
    refused.kind = "refused";
    refused.owner.job_id = 9;
    refused.detail = "no gpus";
    ASSERT_TRUE(store().add_event(refused).ok());
  }

  test_support::PgServer* server_ = nullptr;
};

TEST_F(CopyTest, CopiesEveryTableAndThePostgresqlStoreGoesOnFromThere) {
  fill();
  auto events = store().events({});
  ASSERT_TRUE(events.ok());
  auto claims = store().claims();
  ASSERT_TRUE(claims.ok());
  store_.reset();  // composerd stopped
  const std::string target = server_->fresh_database();
  auto copied = copy_to_postgresql(db_path(), target);
  ASSERT_TRUE(copied.ok()) << copied.error();
  EXPECT_EQ(copied->live_compositions, 1);
  EXPECT_EQ(copied->claims, 3);  // the failed composition's device stays claimed
  ASSERT_EQ(copied->rows.size(), 8u);
  std::map<std::string, int64_t> rows(copied->rows.begin(), copied->rows.end());
  EXPECT_EQ(rows["events"], static_cast<int64_t>(events->size()));
  EXPECT_EQ(rows["compositions"], 3);
  EXPECT_EQ(rows["devices"], 9);
  EXPECT_EQ(rows["hosts"], 3);
  EXPECT_EQ(rows["policies"], 1);
  EXPECT_EQ(rows["composition_rollup"], 2);
  EXPECT_EQ(rows["fabric_claims"], 3);

  auto pg = Store::open_postgresql(target);
  ASSERT_TRUE(pg.ok()) << pg.error();
  Store& moved = **pg;
  auto moved_events = moved.events({});
  ASSERT_TRUE(moved_events.ok());
  ASSERT_EQ(moved_events->size(), events->size());
  for (size_t i = 0; i < events->size(); ++i) {
    EXPECT_EQ((*moved_events)[i].id, (*events)[i].id);
    EXPECT_EQ((*moved_events)[i].kind, (*events)[i].kind);
  }
  auto moved_claims = moved.claims();
  ASSERT_TRUE(moved_claims.ok());
  EXPECT_EQ(*moved_claims, *claims);
  auto drained = moved.device("gpu-5");
  ASSERT_TRUE(drained.ok());
  EXPECT_TRUE(drained->drained);
  // The database still refuses gpu-0 to a second live composition, and new ids follow the
  // copied ones.
  auto twice = moved.create_composition(make_composition(4, "node2"), {"gpu-0"}, 200);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().code, ErrorCode::kConflict);
  auto next = moved.create_composition(make_composition(5, "node2"), {"gpu-3"}, 210);
  ASSERT_TRUE(next.ok()) << next.error();
  EXPECT_GT(next->id, 3);
  // The schema's triggers are back: a release frees the devices and drops their claims.
  ASSERT_TRUE(moved.transition(1, S::kReady, S::kReleasing, "", 230).ok());
  ASSERT_TRUE(moved.transition(1, S::kReleasing, S::kReleased, "", 240).ok());
  auto after = moved.claims();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->count("gpu-0"), 0u);
  EXPECT_EQ(after->count("mem-0"), 0u);
  auto reused = moved.create_composition(make_composition(6, "node3"), {"gpu-0"}, 250);
  EXPECT_TRUE(reused.ok()) << reused.error();
  auto policy =
      moved.add_policy(PolicyVersion{0, 0, 0, "root", "b.policy", std::string(64, 'b'), "y"}, 220);
  ASSERT_TRUE(policy.ok()) << policy.error();
  EXPECT_EQ(policy->id, 2);
}

TEST_F(CopyTest, RefusesWhileComposerdHoldsTheFileAndChangesNothing) {
  fill();
  const std::string target = server_->fresh_database();
  auto copied = copy_to_postgresql(db_path(), target);  // store_ open: composerd runs
  ASSERT_FALSE(copied.ok());
  EXPECT_EQ(copied.error().code, ErrorCode::kConflict);
  EXPECT_EQ(copied.error().message.rfind(db_path() + " is in use (is composerd running? stop it "
                                                     "first: systemctl stop composerd)",
                                         0),
            0u)
      << copied.error();
  auto pg = Store::open_postgresql(target);
  ASSERT_TRUE(pg.ok()) << pg.error();
  auto devices = (*pg)->devices();
  ASSERT_TRUE(devices.ok());
  EXPECT_TRUE(devices->empty());
  // The file is composerd's as before.
  EXPECT_TRUE(store().set_drained("gpu-4", true, "still mine", "root", 300).ok());
}

TEST_F(CopyTest, RefusesAStoreThatIsNotEmpty) {
  fill();
  store_.reset();
  const std::string target = server_->fresh_database();
  ASSERT_TRUE(copy_to_postgresql(db_path(), target).ok());
  auto again = copy_to_postgresql(db_path(), target);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_EQ(again.error().message,
            "the PostgreSQL store is not empty (hosts has 3 rows): copy into a new database "
            "(createdb -O composer composer)");
}

TEST_F(CopyTest, NeverShowsTheConnectionStringsPassword) {
  fill();
  store_.reset();
  const std::string conninfo = "host=" + dir_.file("no-server") +
                               " port=35401 dbname=composer user=composer "
                               "password=hunter2-secret";
  auto copied = copy_to_postgresql(db_path(), conninfo);
  ASSERT_FALSE(copied.ok());
  EXPECT_EQ(copied.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(copied.error().message.find("hunter2"), std::string::npos) << copied.error();
}

TEST_F(CopyTest, RefusesWhatIsNotAComposerdDatabase) {
  store_.reset();
  const std::string target = server_->fresh_database();
  auto missing = copy_to_postgresql(dir_.file("missing.db"), target);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  auto plain = raw_connection(dir_.file("plain.db"));
  ASSERT_TRUE(exec_raw(*plain, "CREATE TABLE x (a)").ok());
  plain.reset();
  auto other = copy_to_postgresql(dir_.file("plain.db"), target);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().message,
            dir_.file("plain.db") + " is not a composerd database (no schema)");
}

}  // namespace
}  // namespace composer::db::testing
