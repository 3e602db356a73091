// Leadership of several composerd on one real PostgreSQL (leadership.h): one of two
// contenders wins, a takeover increments the epoch, a fenced store refuses the writes of a
// composerd that lost, and a holder that stops loses the lock after one lease.
#include "composer/db/leadership.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "composer/test_support/pg_server.h"
#include "store_fixture.h"

namespace composer::db::testing {
namespace {

class LeadershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    bool installed = true;
    test_support::PgServer* server = test_support::PgServer::shared(why, installed);
    if (!installed) GTEST_SKIP() << why;
    ASSERT_NE(server, nullptr) << why;
    conninfo_ = server->fresh_database();
    auto store = Store::open_postgresql(conninfo_);  // creates the schema
    ASSERT_TRUE(store.ok()) << store.error();
    store_ = std::move(*store);
  }

  std::unique_ptr<Leadership> contender(const std::string& name, int64_t lease_ms = 5000) {
    auto l = Leadership::open({.conninfo = conninfo_,
                               .holder = name,
                               .url = "http://" + name + ":6830",
                               .lease_ms = lease_ms});
    EXPECT_TRUE(l.ok()) << l.error();
    return l ? std::move(*l) : nullptr;
  }

  // Tries until it wins or `seconds` pass (the server lets a closed session's lock go a moment
  // after the client left).
  std::optional<Takeover> take_within(Leadership& l, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      auto t = l.try_take(1000);
      EXPECT_TRUE(t.ok()) << t.error();
      if (t.ok() && *t) return *t;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return std::nullopt;
  }

  // Ends every other session on the test's database, as a primary that dies does.
  void end_sessions() {
    PGconn* c = PQconnectdb(conninfo_.c_str());
    PGresult* r = PQexec(c,
                         "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = current_database() AND pid <> pg_backend_pid()");
    EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(c);
    PQclear(r);
    PQfinish(c);
  }

  // Calls regain() until it knows, or `seconds` pass.
  Expected<bool> regain_within(Leadership& l, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    Expected<bool> r = l.regain();
    while (!r && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      r = l.regain();
    }
    return r;
  }

  std::string conninfo_;
  std::unique_ptr<Store> store_;
};

TEST_F(LeadershipTest, TwoContendersOneWins) {
  auto a = contender("a");
  auto b = contender("b");
  ASSERT_TRUE(a && b);
  auto won = a->try_take(1000);
  ASSERT_TRUE(won.ok()) << won.error();
  ASSERT_TRUE(won->has_value());
  EXPECT_EQ((*won)->old_epoch, 0);
  EXPECT_EQ((*won)->now.epoch, 1);
  EXPECT_TRUE(a->held());
  auto lost = b->try_take(1000);
  ASSERT_TRUE(lost.ok()) << lost.error();
  EXPECT_FALSE(lost->has_value());
  EXPECT_FALSE(b->held());
  auto row = b->current();
  ASSERT_TRUE(row.ok()) << row.error();
  EXPECT_EQ(row->epoch, 1);
  EXPECT_EQ(row->holder, "a");
  EXPECT_EQ(row->url, "http://a:6830");
  EXPECT_EQ(row->since_ms, 1000);
  EXPECT_TRUE(a->renew().ok());
}

TEST_F(LeadershipTest, TakeoverIncrementsTheEpoch) {
  auto a = contender("a");
  auto b = contender("b");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(take_within(*a, 5));
  a.reset();  // its session ends, and with it the lock
  auto t = take_within(*b, 10);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->old_epoch, 1);
  EXPECT_EQ(t->old_holder, "a");
  EXPECT_EQ(t->now.epoch, 2);
  EXPECT_EQ(t->now.holder, "b");
}

TEST_F(LeadershipTest, FencedWriteIsRefused) {
  store_->fence(0, 5000);
  auto standby = store_->upsert_hosts({make_host("n0")});
  ASSERT_FALSE(standby.ok());
  EXPECT_EQ(standby.error().code, ErrorCode::kUnavailable) << standby;

  auto a = contender("a");
  ASSERT_TRUE(a);
  ASSERT_TRUE(take_within(*a, 5));
  store_->fence(a->epoch(), 5000);
  auto active = store_->upsert_hosts({make_host("n1")});
  ASSERT_TRUE(active.ok()) << active;

  // Another composerd takes over: the old epoch's writes are refused and nothing is kept.
  a.reset();
  auto b = contender("b");
  ASSERT_TRUE(b);
  ASSERT_TRUE(take_within(*b, 10));
  auto fenced = store_->upsert_hosts({make_host("n2")});
  ASSERT_FALSE(fenced.ok());
  EXPECT_EQ(fenced.error().code, ErrorCode::kUnavailable) << fenced;
  EXPECT_NE(fenced.error().message.find("another composerd took over"), std::string::npos)
      << fenced;
  auto hosts = store_->hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.error();
  ASSERT_EQ(hosts->size(), 1U);
  EXPECT_EQ(hosts->front().node, "n1");

  // The new holder's epoch writes.
  store_->fence(b->epoch(), 5000);
  EXPECT_TRUE(store_->upsert_hosts({make_host("n3")}).ok());
}

TEST_F(LeadershipTest, StoppedHolderLosesTheLockAfterOneLease) {
  auto a = contender("a", 1000);
  auto b = contender("b", 1000);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(take_within(*a, 5));
  // `a` stops renewing, as a stopped process does: its connection stays open.
  auto t = b->try_take(2000);
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_FALSE(t->has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_FALSE(a->held());
  auto taken = take_within(*b, 5);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->now.epoch, 2);
  EXPECT_FALSE(a->renew().ok());
  EXPECT_FALSE(a->held());
}

// A composerd that lost leadership is told so even where its write would also have met a
// device another composition holds: the takeover is the cause, not the conflict.
TEST_F(LeadershipTest, AFencedWriteThatAlsoConflictsSaysTheTakeover) {
  ASSERT_TRUE(store_->upsert_hosts({make_host("n1")}).ok());
  ASSERT_TRUE(store_->upsert_devices({make_device("gpu-0")}, 1000).ok());
  auto a = contender("a");
  ASSERT_TRUE(a);
  ASSERT_TRUE(take_within(*a, 5));
  store_->fence(a->epoch(), 5000);
  ASSERT_TRUE(store_->create_composition(make_composition(1, "n1"), {"gpu-0"}, 2000).ok());

  a.reset();
  auto b = contender("b");
  ASSERT_TRUE(b);
  ASSERT_TRUE(take_within(*b, 10));
  auto late = store_->create_composition(make_composition(2, "n1"), {"gpu-0"}, 3000);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kUnavailable) << late.error();
  EXPECT_NE(late.error().message.find("another composerd took over"), std::string::npos)
      << late.error();
}

// The primary dies under the holder (its session ends): nobody took over, so the holder takes
// the lock again under the same epoch and stays active, as composerd does across a Patroni
// switch (tests/ha).
TEST_F(LeadershipTest, TheLockIsTakenAgainAfterItsConnectionBroke) {
  auto a = contender("a");
  ASSERT_TRUE(a);
  ASSERT_TRUE(take_within(*a, 5));
  const int64_t epoch = a->epoch();
  end_sessions();
  EXPECT_FALSE(a->renew().ok());
  EXPECT_FALSE(a->held());
  EXPECT_EQ(a->regainable(), epoch);
  auto again = regain_within(*a, 10);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_TRUE(*again);
  EXPECT_TRUE(a->held());
  EXPECT_EQ(a->epoch(), epoch);
  EXPECT_EQ(a->regainable(), 0);
  EXPECT_TRUE(a->renew().ok());
  // Held for real: another contender cannot take it.
  auto b = contender("b");
  ASSERT_TRUE(b);
  auto t = b->try_take(2000);
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_FALSE(t->has_value());
}

// While the holder's connection was down another composerd took over: the old holder learns it
// lost for good and is not held again.
TEST_F(LeadershipTest, ALockTakenOverMeanwhileIsNotTakenAgain) {
  auto a = contender("a");
  ASSERT_TRUE(a);
  ASSERT_TRUE(take_within(*a, 5));
  end_sessions();
  EXPECT_FALSE(a->renew().ok());
  auto b = contender("b");
  ASSERT_TRUE(b);
  auto taken = take_within(*b, 10);
  ASSERT_TRUE(taken);
  auto again = regain_within(*a, 10);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_FALSE(*again);
  EXPECT_FALSE(a->held());
  EXPECT_EQ(a->regainable(), 0);
  EXPECT_TRUE(b->renew().ok());
}

}  // namespace
}  // namespace composer::db::testing
