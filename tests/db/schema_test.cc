// Opening a database: migrations on a fresh file, reopening an existing one, refusals.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/clock.h"
#include "store_fixture.h"

namespace composer::db::testing {
namespace {

using SchemaTest = StoreTest;

TEST_F(SchemaTest, FreshFileIsMigratedToTheLatestVersionWithWalAndForeignKeys) {
  EXPECT_EQ(store().schema_version(), 12);
  auto raw = raw_connection(db_path());
  EXPECT_EQ(query_int(*raw, "PRAGMA user_version"), 12);
  EXPECT_EQ(raw->pragma("journal mode", "journal_mode"), "wal");
  EXPECT_EQ(query_int(*raw, "SELECT count(*) FROM schema_migrations WHERE version = 1"), 1);
  for (const char* table : {"hosts", "devices", "compositions", "composition_devices", "events"}) {
    EXPECT_EQ(query_int(*raw, std::string("SELECT count(*) FROM sqlite_schema WHERE type = "
                                          "'table' AND name = '") +
                                  table + "'"),
              1)
        << table;
  }
  // Migration 3: reports find the device events before their range through this index.
  EXPECT_EQ(query_int(*raw,
                      "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = "
                      "'events_device_by_ts'"),
            1);
  // Migration 4: composerd's claims on what it attached, made with the device links.
  EXPECT_EQ(query_int(*raw, "SELECT count(*) FROM sqlite_master WHERE name = 'fabric_claims'"), 1);
  EXPECT_EQ(query_int(*raw,
                      "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND "
                      "name IN ('composition_devices_claim', 'compositions_released_unclaim')"),
            2);
  // Migration 5: device identities, empty for devices of older files.
  EXPECT_EQ(query_int(*raw,
                      "SELECT count(*) FROM pragma_table_info('devices') WHERE name IN "
                      "('pci_vendor', 'pci_device', 'serial', 'uuid')"),
            4);
  // Migration 7: when composerd first knew each device.
  EXPECT_EQ(query_int(*raw,
                      "SELECT count(*) FROM pragma_table_info('devices') WHERE name = "
                      "'known_since_ms'"),
            1);
  // Migration 8: the failure domains of hosts.
  EXPECT_EQ(query_int(*raw,
                      "SELECT count(*) FROM pragma_table_info('hosts') WHERE name = "
                      "'domains'"),
            1);
  // Migration 9: the rollup of ended compositions, kept by triggers on the ledger.
  EXPECT_EQ(query_int(*raw, "SELECT count(*) FROM sqlite_master WHERE name = 'composition_rollup'"),
            1);
  EXPECT_EQ(query_int(*raw,
                      "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name IN "
                      "('events_roll_up_ended_composition', 'events_roll_up_late_event')"),
            2);
}

// The temporary b-trees SQLite opens while running `sql` (EXPLAIN's OpenEphemeral, trigger
// programs included).
int temporary_btrees(sqlite::Connection& db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  const std::string explain = "EXPLAIN " + sql;
  if (sqlite3_prepare_v2(db.handle(), explain.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << db.last_error();
    return -1;
  }
  int n = 0;
  while (sqlite3_step(raw) == SQLITE_ROW) {
    const auto* op = reinterpret_cast<const char*>(sqlite3_column_text(raw, 1));
    if (op != nullptr && std::string_view(op) == "OpenEphemeral") ++n;
  }
  sqlite3_finalize(raw);
  return n;
}

// Migration 11: appending an event (the device-event index's WHERE, the rollup triggers) and
// giving a device to a composition (the live-owner trigger) build no temporary table; with a
// list after IN in the index or the trigger each did, on every row.
TEST_F(SchemaTest, AppendingAnEventOrGivingADeviceBuildsNoTemporaryTable) {
  auto raw = raw_connection(db_path());
  EXPECT_EQ(temporary_btrees(*raw,
                             "INSERT INTO events (ts_ms, kind, composition_id, job_id, node) "
                             "VALUES (1, 'ready', 1, 7, 'node1')"),
            0);
  EXPECT_EQ(temporary_btrees(*raw,
                             "INSERT INTO events (ts_ms, kind, composition_id, job_id, node) "
                             "VALUES (1, 'released', 1, 7, 'node1')"),
            0);
  EXPECT_EQ(temporary_btrees(*raw,
                             "INSERT INTO composition_devices (composition_id, device_id) "
                             "VALUES (1, 'gpu-0')"),
            0);
}

// The live-owner trigger refuses a device for a composition that has ended, and lets one
// through for a live one, as before migration 11.
TEST_F(SchemaTest, OnlyALiveCompositionIsGivenADevice) {
  add_inventory();
  auto created = store().create_composition(make_composition(7, "node1"), {"gpu-0"}, 200);
  ASSERT_TRUE(created.ok()) << created.error();
  auto raw = raw_connection(db_path());
  const std::string give = "INSERT INTO composition_devices (composition_id, device_id) VALUES (" +
                           std::to_string(created->id) + ", 'gpu-1')";
  EXPECT_TRUE(exec_raw(*raw, give).ok());
  ASSERT_TRUE(store()
                  .transition(created->id, CompositionState::kComposing, CompositionState::kFailed,
                              "test", 300, false)
                  .ok());
  const Status refused =
      exec_raw(*raw, "INSERT INTO composition_devices (composition_id, device_id) VALUES (" +
                         std::to_string(created->id) + ", 'gpu-2')");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("a device can only be given to a live composition"),
            std::string::npos)
      << refused.error().message;
}

TEST_F(SchemaTest, HostsKeepTheirFailureDomains) {
  Host h{.node = "node1", .fabric_id = "host-1", .zones = {"z1"}, .gpu_slots = 4};
  h.domains = {{"power", "pdu-2"}, {"switch", "sw-1"}};
  ASSERT_TRUE(store().upsert_hosts({h}).ok());
  reopen();
  auto hosts = store().hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.error();
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].domains, h.domains);
  h.domains = {{"switch", "bad,name"}};
  auto refused = store().upsert_hosts({h});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message,
            "store: host node1: failure domain 'switch:bad,name' is not valid: level and name "
            "must be non-empty, without commas or spaces, and the level without ':'");
}

TEST_F(SchemaTest, ReopeningKeepsVersionAndData) {
  add_inventory();
  ASSERT_TRUE(store().set_drained("gpu-1", true, "fan noise", "root", 100).ok());
  auto created = store().create_composition(make_composition(7, "node1"), {"gpu-0"}, 200);
  ASSERT_TRUE(created.ok()) << created.error();

  reopen();
  reopen();  // a second reopen must not re-run a migration either
  EXPECT_EQ(store().schema_version(), 12);
  auto raw = raw_connection(db_path());
  EXPECT_EQ(query_int(*raw, "SELECT count(*) FROM schema_migrations"), 12);

  auto gpu1 = store().device("gpu-1");
  ASSERT_TRUE(gpu1.ok()) << gpu1.error();
  EXPECT_TRUE(gpu1->drained);
  EXPECT_EQ(gpu1->drain_reason, "fan noise");
  auto live = store().live_composition(7, "node1");
  ASSERT_TRUE(live.ok()) << live.error();
  ASSERT_TRUE(live->has_value());
  EXPECT_EQ((*live)->id, created->id);
  ASSERT_EQ((*live)->devices.size(), 1u);
  EXPECT_EQ((*live)->devices[0].id, "gpu-0");
  EXPECT_EQ(event_count(), 3);  // drain, requested, composing
}

// A file of schema version 11 gets the compositions' memory policies, '' for those it has.
TEST_F(SchemaTest, Migration12GivesCompositionsAnEmptyMemoryPolicy) {
  add_inventory();
  auto created = store().create_composition(make_composition(7, "node1"), {"gpu-0"}, 200);
  ASSERT_TRUE(created.ok()) << created.error();
  store_.reset();
  {
    auto raw = raw_connection(db_path());
    for (const char* sql :
         {"ALTER TABLE compositions DROP COLUMN mem_policy",
          "DELETE FROM schema_migrations WHERE version = 12", "PRAGMA user_version = 11"}) {
      ASSERT_TRUE(exec_raw(*raw, sql).ok()) << sql;
    }
  }
  reopen();
  EXPECT_EQ(store().schema_version(), 12);
  auto c = store().composition(created->id);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->mem_policy, "");
  ASSERT_EQ(c->devices.size(), 1u);
}

// Turns the file back into one of schema version 6, as an earlier release left it: no
// known_since_ms column, hosts' domains, the rollup nor compositions' host_hold, no record of
// migrations 7 to 10. Then reopening migrates it again.
void downgrade_to_version_6(const std::string& path) {
  auto raw = raw_connection(path);
  for (const char* sql :
       {"DROP TRIGGER events_roll_up_ended_composition", "DROP TRIGGER events_roll_up_late_event",
        "DROP INDEX events_unattached_by_ts", "DROP TABLE composition_rollup",
        "ALTER TABLE devices DROP COLUMN known_since_ms", "ALTER TABLE hosts DROP COLUMN domains",
        "ALTER TABLE compositions DROP COLUMN host_hold",
        "ALTER TABLE compositions DROP COLUMN mem_policy",
        "DELETE FROM schema_migrations WHERE version >= 7", "PRAGMA user_version = 6"}) {
    ASSERT_TRUE(exec_raw(*raw, sql).ok()) << sql;
  }
  ASSERT_EQ(query_int(*raw,
                      "SELECT count(*) FROM pragma_table_info('devices') WHERE name = "
                      "'known_since_ms'"),
            0);
}

int64_t known_since(Store& store, const std::string& id) {
  auto d = store.device(id);
  EXPECT_TRUE(d.ok()) << d.error();
  return d.ok() ? d->known_since_ms.value_or(-1) : -1;
}

// The devices of an older file are dated from when its ledger began: the database's creation
// or its first event, whichever is earlier.
TEST_F(SchemaTest, Migration7DatesExistingDevicesFromTheLedgersStart) {
  add_inventory();
  ASSERT_TRUE(store().set_drained("gpu-1", true, "fan noise", "root", 5000).ok());
  auto created = store().create_composition(make_composition(7, "node1"), {"gpu-0"}, 9000);
  ASSERT_TRUE(created.ok()) << created.error();
  store_.reset();
  downgrade_to_version_6(db_path());
  {
    auto raw = raw_connection(db_path());
    ASSERT_TRUE(
        exec_raw(*raw, "UPDATE schema_migrations SET applied_ms = 7000 WHERE version = 1").ok());
  }
  reopen();
  EXPECT_EQ(store().schema_version(), 12);
  // The first event (the drain at 5000) is earlier than the file's creation (7000).
  for (const char* id : {"gpu-0", "gpu-1", "gpu-5", "mem-0", "nvme-0"}) {
    EXPECT_EQ(known_since(store(), id), 5000) << id;
  }
  // The inventory composerd reads again at start keeps that time; a new device is known from
  // the inventory that first names it.
  ASSERT_TRUE(store().upsert_devices({make_device("gpu-0"), make_device("gpu-9")}, 20000).ok());
  EXPECT_EQ(known_since(store(), "gpu-0"), 5000);
  EXPECT_EQ(known_since(store(), "gpu-9"), 20000);
}

TEST_F(SchemaTest, Migration7DatesDevicesOfAFileWithoutEventsFromItsCreation) {
  add_inventory();
  store_.reset();
  downgrade_to_version_6(db_path());
  {
    auto raw = raw_connection(db_path());
    ASSERT_TRUE(
        exec_raw(*raw, "UPDATE schema_migrations SET applied_ms = 7000 WHERE version = 1").ok());
  }
  reopen();
  EXPECT_EQ(known_since(store(), "gpu-0"), 7000);
  EXPECT_EQ(known_since(store(), "mem-1"), 7000);
}

TEST_F(SchemaTest, Migration7FallsBackToItsOwnTimeWhenTheFileSaysNothing) {
  add_inventory();
  store_.reset();
  downgrade_to_version_6(db_path());
  {
    auto raw = raw_connection(db_path());
    ASSERT_TRUE(exec_raw(*raw, "DELETE FROM schema_migrations WHERE version = 1").ok());
  }
  const int64_t before = SystemClock::instance().now_ms();
  reopen();
  const int64_t after = SystemClock::instance().now_ms();
  const int64_t at = known_since(store(), "gpu-0");
  EXPECT_GE(at, before);
  EXPECT_LE(at, after);
}

TEST_F(SchemaTest, RefusesAFileFromANewerBuild) {
  store_.reset();
  {
    auto raw = raw_connection(db_path());
    ASSERT_TRUE(exec_raw(*raw, "PRAGMA user_version = 99").ok());
  }
  auto opened = Store::open(db_path());
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(opened.error().message.find("schema version 99"), std::string::npos)
      << opened.error().message;
}

TEST_F(SchemaTest, TheWritersStatementsCanBeTimedByWhatTheyDo) {
  store_.reset();
  std::mutex mu;
  std::vector<std::string> seen;
  StoreOptions options;
  options.writer_statement_timer = [&](std::string_view what, int64_t ns) {
    std::lock_guard lock(mu);
    seen.emplace_back(what);
    EXPECT_GE(ns, 0);
  };
  auto opened = Store::open(db_path(), options);
  ASSERT_TRUE(opened.ok()) << opened.error().message;
  {
    std::lock_guard lock(mu);
    seen.clear();
  }
  Host h;
  h.node = "n1";
  h.fabric_id = "host-1";
  h.zones = {"z1"};
  ASSERT_TRUE((*opened)->upsert_hosts({h}).ok());
  std::lock_guard lock(mu);
  for (const char* what : {"beginning a write transaction", "saving host", "committing"}) {
    EXPECT_NE(std::find(seen.begin(), seen.end(), what), seen.end()) << what;
  }
}

TEST(SchemaOpen, RefusesPathsThatCannotBeShared) {
  for (const char* path : {"", ":memory:", "file:x.db?mode=memory"}) {
    auto opened = Store::open(path);
    ASSERT_FALSE(opened.ok()) << path;
    EXPECT_EQ(opened.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(opened.error().message.find("give the path of a file"), std::string::npos);
  }
}

TEST(SchemaOpen, MissingDirectoryIsUnavailableAndNamesThePath) {
  auto opened = Store::open("/nonexistent-dir-for-db-test/composer.db");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(opened.error().message.find("/nonexistent-dir-for-db-test/composer.db"),
            std::string::npos)
      << opened.error().message;
}

}  // namespace
}  // namespace composer::db::testing
