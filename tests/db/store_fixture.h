// A store on a real SQLite file in a fresh temporary directory, plus helpers to fill it.
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

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  void reopen(bool durable = false);
  // Hosts node1..node3 and devices gpu-0..gpu-5 (z1/z2), mem-0..1, nvme-0.
  void add_inventory();
  int64_t event_count();

  Store& store() { return *store_; }
  std::string db_path() const { return dir_.file("composer.db"); }

  TempDir dir_;
  std::unique_ptr<Store> store_;
};

}  // namespace composer::db::testing
