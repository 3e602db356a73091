// Opening a database: migrations on a fresh file, reopening an existing one, refusals.
#include <gtest/gtest.h>

#include "store_fixture.h"

namespace composer::db::testing {
namespace {

using SchemaTest = StoreTest;

TEST_F(SchemaTest, FreshFileIsMigratedToTheLatestVersionWithWalAndForeignKeys) {
  EXPECT_EQ(store().schema_version(), 6);
  auto raw = raw_connection(db_path());
  EXPECT_EQ(query_int(*raw, "PRAGMA user_version"), 6);
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
}

TEST_F(SchemaTest, ReopeningKeepsVersionAndData) {
  add_inventory();
  ASSERT_TRUE(store().set_drained("gpu-1", true, "fan noise", "root", 100).ok());
  auto created = store().create_composition(make_composition(7, "node1"), {"gpu-0"}, 200);
  ASSERT_TRUE(created.ok()) << created.error();

  reopen();
  reopen();  // a second reopen must not re-run a migration either
  EXPECT_EQ(store().schema_version(), 6);
  auto raw = raw_connection(db_path());
  EXPECT_EQ(query_int(*raw, "SELECT count(*) FROM schema_migrations"), 6);

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
