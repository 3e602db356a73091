// A store on a real SQLite file in a fresh temporary directory, or in a fresh database of a
// real PostgreSQL (pg_server.h), plus helpers to fill it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "composer/db/sqlite.h"
#include "composer/db/store.h"
#include "composer/test_support/temp_dir.h"

namespace composer::db::testing {

using test_support::TempDir;

Device make_device(const std::string& id, DeviceType type = DeviceType::kGpu,
                   const std::string& zone = "z1");
Host make_host(const std::string& node);
Composition make_composition(uint32_t job_id, const std::string& node,
                             CompositionState state = CompositionState::kComposing);

// A second, independent connection to the same file, for raw SQL that bypasses the Store.
std::unique_ptr<sqlite::Connection> raw_connection(const std::string& path);
// Runs a query that returns one integer.
int64_t query_int(sqlite::Connection& db, const std::string& sql);
// Runs raw SQL; returns the error, or an Ok status.
Status exec_raw(sqlite::Connection& db, const std::string& sql);

enum class Backend { kSqlite, kPostgresql };
std::string backend_name(const ::testing::TestParamInfo<Backend>& info);

// Raw SQL on the store's database, bypassing the Store: what the database itself refuses.
class RawDatabase {
 public:
  virtual ~RawDatabase() = default;
  // Runs raw SQL; returns the error (a refused constraint is kConflict), or an Ok status.
  virtual Status exec(const std::string& sql) = 0;
  // Runs a query that returns one integer.
  virtual int64_t query_int(const std::string& sql) = 0;
};

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override;
  // Which database the test runs on: SQLite here, each in turn in BackendTest.
  virtual Backend backend() const { return Backend::kSqlite; }
  std::unique_ptr<RawDatabase> raw_database();
  // What the database's refusal of a second row with the same `columns` of `table` (a unique
  // index) says, in the backend's words.
  std::string unique_refusal(const std::string& table, const std::vector<std::string>& columns);
  void TearDown() override;
  void reopen(bool durable = false);
  // Hosts node1..node3 and devices gpu-0..gpu-5 (z1/z2), mem-0..1, nvme-0.
  void add_inventory();
  int64_t event_count();

  Store& store() { return *store_; }
  std::string db_path() const { return dir_.file("composer.db"); }

  TempDir dir_;
  std::string pg_conninfo_;  // Backend::kPostgresql: the test's own database
  std::unique_ptr<Store> store_;
};

// The same tests on every backend.
class BackendTest : public StoreTest, public ::testing::WithParamInterface<Backend> {
 protected:
  Backend backend() const override { return GetParam(); }
};

}  // namespace composer::db::testing
