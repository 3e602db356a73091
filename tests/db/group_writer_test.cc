// The group-committing writer on its own: batching, per-call savepoints, draining at shutdown.
#include "composer/db/group_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <utility>

#include "store_fixture.h"

namespace composer::db::testing {
namespace {

using ::testing::HasSubstr;

constexpr sqlite::Sql kInsert{"inserting a test row", "INSERT INTO t (v) VALUES (?1)"};

class GroupWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = raw_connection(path());
    db->pragma("switching to WAL", "journal_mode = WAL");
    ASSERT_TRUE(exec_raw(*db, "CREATE TABLE t (v INTEGER NOT NULL UNIQUE)").ok());
  }
  std::string path() const { return dir_.file("writer.db"); }
  std::unique_ptr<GroupWriter> make_writer() {
    return std::make_unique<GroupWriter>(raw_connection(path()));
  }
  static GroupWriter::Body insert(int64_t v) {
    return [v](sqlite::Connection& db) { db.statement(kInsert)->bind(1, v).run(); };
  }

  TempDir dir_;
};

TEST_F(GroupWriterTest, AFailingCallIsRolledBackAloneWhileItsBatchCommits) {
  auto writer = make_writer();
  auto outside = raw_connection(path());
  // Hold the write lock so that everything submitted meanwhile queues up.
  ASSERT_TRUE(exec_raw(*outside, "BEGIN IMMEDIATE").ok());
  std::vector<std::future<Status>> done;
  done.push_back(writer->submit(insert(1)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  done.push_back(writer->submit([](sqlite::Connection& db) {
    // Writes, then fails: its own insert must disappear, the others' must not.
    db.statement(kInsert)->bind(1, 20).run();
    throw std::runtime_error("closure gave up");
  }));
  done.push_back(writer->submit(insert(3)));
  done.push_back(writer->submit([](sqlite::Connection& db) {
    db.statement(kInsert)->bind(1, 40).run();
    db.statement(kInsert)->bind(1, 3).run();  // UNIQUE: 3 is taken earlier in this batch
  }));
  done.push_back(writer->submit(insert(5)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(exec_raw(*outside, "COMMIT").ok());

  std::vector<Status> results;
  for (auto& f : done) results.push_back(f.get());
  EXPECT_TRUE(results[0].ok()) << results[0];
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].error().code, ErrorCode::kInternal);
  EXPECT_THAT(results[1].error().message, HasSubstr("closure gave up"));
  EXPECT_TRUE(results[2].ok()) << results[2];
  ASSERT_FALSE(results[3].ok());
  EXPECT_EQ(results[3].error().code, ErrorCode::kConflict);
  EXPECT_THAT(results[3].error().message,
              HasSubstr("store: inserting a test row: UNIQUE constraint failed: t.v"));
  EXPECT_TRUE(results[4].ok()) << results[4];

  const WriteStats stats = writer->stats();
  EXPECT_EQ(stats.calls, 5u);
  EXPECT_EQ(stats.failed_calls, 2u);
  EXPECT_LE(stats.transactions, 2u);
  EXPECT_GE(stats.largest_batch, 4u);

  writer.reset();
  EXPECT_EQ(query_int(*outside, "SELECT count(*) FROM t"), 3);
  EXPECT_EQ(query_int(*outside, "SELECT count(*) FROM t WHERE v IN (1, 3, 5)"), 3);
}

// A caller that leaves a callback goes on at once; the callback is called on the writer's
// thread once the change is committed, and at once on the caller's when the writer is closing.
TEST_F(GroupWriterTest, ACallbackIsToldOnTheWritersThreadOnceCommitted) {
  auto writer = make_writer();
  auto outside = raw_connection(path());
  ASSERT_TRUE(exec_raw(*outside, "BEGIN IMMEDIATE").ok());  // nothing commits meanwhile
  std::promise<std::pair<Status, std::thread::id>> told;
  auto answer = told.get_future();
  writer->submit(insert(7), [&told](Status s) {
    told.set_value({std::move(s), std::this_thread::get_id()});
  });
  // submit() returned without waiting for the lock; no callback runs before the commit.
  EXPECT_EQ(answer.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  ASSERT_TRUE(exec_raw(*outside, "ROLLBACK").ok());
  auto [status, thread] = answer.get();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_NE(thread, std::this_thread::get_id());
  EXPECT_EQ(query_int(*outside, "SELECT count(*) FROM t WHERE v = 7"), 1);
}

TEST_F(GroupWriterTest, ShutdownCommitsEverythingAlreadySubmitted) {
  auto writer = make_writer();
  std::vector<std::future<Status>> done;
  for (int i = 0; i < 500; ++i) done.push_back(writer->submit(insert(i)));
  writer.reset();  // returns only after the queue is drained and committed
  for (auto& f : done) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    EXPECT_TRUE(f.get().ok());
  }
  auto db = raw_connection(path());
  EXPECT_EQ(query_int(*db, "SELECT count(*) FROM t"), 500);
}

TEST_F(GroupWriterTest, ABatchThatCannotStartFailsEveryCallInIt) {
  auto outside = raw_connection(path());
  ASSERT_TRUE(exec_raw(*outside, "BEGIN IMMEDIATE").ok());
  auto db = raw_connection(path());
  sqlite3_busy_timeout(db->handle(), 50);  // give up on the lock quickly
  GroupWriter writer(std::move(db));
  Status s = writer.run(insert(1));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(s.error().message, HasSubstr("beginning a write transaction"));
  ASSERT_TRUE(exec_raw(*outside, "ROLLBACK").ok());
  EXPECT_TRUE(writer.run(insert(1)).ok());  // the writer recovers once the lock is free
}

}  // namespace
}  // namespace composer::db::testing
