// db::backup: a consistent copy of a store that keeps writing meanwhile, private, never over
// an existing file, and a refusal with a sentence for what is not a composerd database.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "store_fixture.h"

namespace composer::db::testing {
namespace {

using BackupTest = StoreTest;

TEST_F(BackupTest, CopiesAStoreThatKeepsWritingIntoAPrivateFileThatOpens) {
  add_inventory();
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; !done.load(); ++i) {
      ASSERT_TRUE(store().set_drained("gpu-0", i % 2 == 0, "maintenance", "root", 1000 + i).ok());
    }
  });
  const std::string copy = dir_.file("backup.db");
  const Status s = backup(db_path(), copy);
  done = true;
  writer.join();
  ASSERT_TRUE(s.ok()) << s.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(copy.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The copy is a store of its own, with the inventory, and its ledger is one moment of the
  // original's: no more events than the original has now.
  auto restored = Store::open(copy);
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ((*restored)->schema_version(), store().schema_version());
  auto devices = (*restored)->devices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 9u);
  auto raw = raw_connection(copy);
  EXPECT_EQ(raw->pragma("checking the copy", "integrity_check"), "ok");
  EXPECT_LE(query_int(*raw, "SELECT count(*) FROM events"), event_count());
}

TEST_F(BackupTest, RefusesAnExistingFileAndWhatIsNotAComposerdDatabase) {
  add_inventory();
  const std::string copy = dir_.file("backup.db");
  std::ofstream(copy) << "keep me";
  Status s = backup(db_path(), copy);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, copy + " exists; composerctl backup writes a new file only");
  std::ifstream in(copy);
  std::string kept;
  std::getline(in, kept);
  EXPECT_EQ(kept, "keep me");

  const std::string empty = dir_.file("empty.db");
  std::ofstream(empty).flush();
  s = backup(empty, dir_.file("b2.db"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, empty + " is not a composerd database (no schema)");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("b2.db")));

  s = backup(dir_.file("missing.db"), dir_.file("b3.db"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(s.error().message.find("cannot read the database"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("b3.db")));
}

}  // namespace
}  // namespace composer::db::testing
