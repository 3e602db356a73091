// The PostgreSQL store when its connections die under it, as they do when the server restarts
// or, under Patroni, the primary moves to another host (pg_pool.h): writes and reads go on
// over new connections; a batch whose COMMIT lost its answer is found out, and run again only
// if it did not take effect, so nothing is written twice and nothing is reported done that
// is not.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "store_fixture.h"

namespace composer::db::testing {
namespace {

class PgReconnectTest : public StoreTest {
 protected:
  Backend backend() const override { return Backend::kPostgresql; }

  // Ends every other session on the test's database, as a dying primary does.
  void terminate_sessions() {
    auto raw = raw_database();
    ASSERT_TRUE(raw->exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                    .ok());
  }

  // A deferred trigger on the ledger that runs `action` at the COMMIT of the first transaction
  // that appends an event after this call (a sequence counts outside transactions, so a
  // transaction rolled back still counts).
  void at_next_commit(const std::string& action) {
    auto raw = raw_database();
    ASSERT_TRUE(
        raw->exec("CREATE SEQUENCE commits_seen;"
                  "CREATE FUNCTION at_commit() RETURNS trigger LANGUAGE plpgsql AS $$"
                  " BEGIN IF nextval('commits_seen') = 1 THEN " +
                  action +
                  "; PERFORM 1; END IF; RETURN NULL; END $$;"
                  "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON events"
                  " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION at_commit()")
            .ok());
  }

  Event note(const std::string& detail) {
    Event e;
    e.ts_ms = 1000;
    e.kind = "note";
    e.detail = detail;
    return e;
  }

  int64_t notes(const std::string& detail) {
    return raw_database()->query_int("SELECT COUNT(*) FROM events WHERE detail = '" + detail + "'");
  }
};

// The writer's statements keep one plan each (pg_pool.cc, kKeepPlans), on its first connection
// and on the one it opens after losing it: a trigger on the ledger notes the setting each
// write ran under.
TEST_F(PgReconnectTest, TheWriterKeepsOnePlanAStatementAlsoOverANewConnection) {
  add_inventory();
  auto raw = raw_database();
  ASSERT_TRUE(raw->exec("CREATE TABLE settings_seen (setting text NOT NULL);"
                        "CREATE FUNCTION note_setting() RETURNS trigger LANGUAGE plpgsql AS $$"
                        " BEGIN INSERT INTO settings_seen"
                        " VALUES (current_setting('plan_cache_mode')); RETURN NULL; END $$;"
                        "CREATE TRIGGER note_setting AFTER INSERT ON events"
                        " FOR EACH ROW EXECUTE FUNCTION note_setting()")
                  .ok());
  ASSERT_TRUE(store().add_event(note("first")).ok());
  terminate_sessions();
  ASSERT_TRUE(store().add_event(note("second")).ok());
  EXPECT_EQ(notes("first"), 1);
  EXPECT_EQ(notes("second"), 1);
  raw = raw_database();  // terminate_sessions ended the first
  EXPECT_EQ(raw->query_int("SELECT COUNT(*) FROM settings_seen"), 2);
  EXPECT_EQ(raw->query_int("SELECT COUNT(*) FROM settings_seen"
                           " WHERE setting = 'force_generic_plan'"),
            2);
}

TEST_F(PgReconnectTest, WritesAndReadsGoOnAfterTheServerDropsEveryConnection) {
  add_inventory();
  ASSERT_TRUE(store().devices({}).ok());  // a reading connection now waits in the pool
  terminate_sessions();
  ASSERT_TRUE(store().add_event(note("after")).ok());
  auto devices = store().devices({});
  ASSERT_TRUE(devices.ok()) << devices.error();
  EXPECT_FALSE(devices->empty());
  EXPECT_EQ(notes("after"), 1);
}

// The server dies during COMMIT: the writer cannot know whether it committed; it finds out
// (here: it did not) and runs the batch again, once.
TEST_F(PgReconnectTest, ACommitLostWithItsServerIsFoundOutThenRunOnce) {
  add_inventory();
  at_next_commit("PERFORM pg_terminate_backend(pg_backend_pid())");
  auto created = store().create_composition(make_composition(7, "node1"), {"gpu-0"}, 1000);
  ASSERT_TRUE(created.ok()) << created.error();
  auto raw = raw_database();
  EXPECT_EQ(raw->query_int("SELECT COUNT(*) FROM compositions WHERE job_id = 7"), 1);
  EXPECT_EQ(raw->query_int("SELECT COUNT(*) FROM events WHERE job_id = 7 AND kind = 'requested'"),
            1);
  // One row seen at the lost COMMIT (it ended there), two (requested, composing) at the one
  // that took, none after.
  EXPECT_EQ(raw->query_int("SELECT nextval('commits_seen')"), 4);
}

// A COMMIT answered with a WARNING (a cancelled wait for the synchronous standby says so) is
// not taken at its word: the writer finds out that it did commit, and does not run it again.
TEST_F(PgReconnectTest, ACommitAnsweredWithAWarningIsFoundOutAndNotRunAgain) {
  add_inventory();
  at_next_commit("RAISE WARNING 'the commit may be on this server alone'");
  ASSERT_TRUE(store().add_event(note("warned")).ok());
  EXPECT_EQ(notes("warned"), 1);
  EXPECT_EQ(raw_database()->query_int("SELECT nextval('commits_seen')"), 2) << "one COMMIT only";
}

// A server that became a standby keeps its sessions but answers every write "read-only"
// (SQLSTATE 25006): the writer leaves that connection for a new one, which libpq opens on
// whichever host now takes writes. Here the first session to commit an event is the one
// refused, for good.
TEST_F(PgReconnectTest, AWriteRefusedAsReadOnlyGoesOnOverANewConnection) {
  add_inventory();
  auto raw = raw_database();
  ASSERT_TRUE(
      raw->exec("CREATE SEQUENCE refused_session;"
                "CREATE FUNCTION read_only_once() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN"
                " IF (SELECT NOT is_called FROM refused_session) THEN"
                "  PERFORM setval('refused_session', pg_backend_pid()); END IF;"
                " IF (SELECT last_value FROM refused_session) = pg_backend_pid() THEN"
                "  RAISE EXCEPTION 'cannot execute INSERT in a read-only transaction'"
                "  USING ERRCODE = '25006'; END IF;"
                " RETURN NULL; END $$;"
                "CREATE CONSTRAINT TRIGGER read_only_once AFTER INSERT ON events"
                " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION read_only_once()")
          .ok());
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(store().add_event(note("moved")).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5))
      << "the refused connection was tried until the bound";
  EXPECT_EQ(notes("moved"), 1);
}

}  // namespace
}  // namespace composer::db::testing
