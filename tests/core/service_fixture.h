// A composition service and the device administration, on their live pool, a fresh database
// file and a small sim fabric:
// node n1 reaches zones z1 (near) and z2; node n2 reaches only z2.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "composer/common/units.h"
#include "composer/core/device_admin.h"
#include "composer/core/live_pool.h"
#include "composer/core/service.h"
#include "composer/db/store.h"
#include "composer/drivers/sim_fabric.h"
#include "composer/test_support/temp_dir.h"

namespace composer::testing {

inline SimConfig small_fabric() {
  SimConfig c;
  c.hosts.push_back(Host{.node = "n1",
                         .fabric_id = "host-1",
                         .zones = {"z1", "z2"},
                         .gpu_slots = 8,
                         .mem_slots = 8,
                         .nvme_slots = 4});
  c.hosts.push_back(Host{.node = "n2",
                         .fabric_id = "host-2",
                         .zones = {"z2"},
                         .gpu_slots = 8,
                         .mem_slots = 8,
                         .nvme_slots = 4});
  c.groups.push_back({.name = "gpu-a",
                      .type = DeviceType::kGpu,
                      .model = "A100",
                      .zone = "z1",
                      .count = 4,
                      .size_bytes = 0});
  c.groups.push_back({.name = "gpu-b",
                      .type = DeviceType::kGpu,
                      .model = "A100",
                      .zone = "z2",
                      .count = 4,
                      .size_bytes = 0});
  c.groups.push_back({.name = "mem-a",
                      .type = DeviceType::kMem,
                      .model = "CXL",
                      .zone = "z1",
                      .count = 4,
                      .size_bytes = 64 * kGiB});
  c.groups.push_back({.name = "nvme-b",
                      .type = DeviceType::kNvme,
                      .model = "P5620",
                      .zone = "z2",
                      .count = 2,
                      .size_bytes = 2 * kTiB});
  return c;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { open(); }

  void open() {
    admin_.reset();
    service_.reset();
    pool_.reset();
    store_.reset();
    auto store = db::Store::open(dir_.file("composer.db"), db::StoreOptions{.durable = false});
    ASSERT_TRUE(store.ok()) << store.error();
    store_ = std::move(store).value();
    if (!fabric_) {
      auto fabric = SimFabric::create(small_fabric(), clock_);
      ASSERT_TRUE(fabric.ok()) << fabric.error();
      fabric_ = std::move(fabric).value();
    }
    pool_ = std::make_unique<LivePool>(*store_, clock_);
    service_ = std::make_unique<CompositionService>(
        *store_, *fabric_, *pool_, clock_,
        ServiceOptions{
            .compose_timeout_ms = 2000, .release_timeout_ms = 2000, .poll_interval_ms = 1});
    admin_ = std::make_unique<DeviceAdmin>(*service_, *pool_, clock_);
    auto started = service_->start();
    ASSERT_TRUE(started.ok()) << started.error();
  }

  static ComposeInput job(uint32_t id, const std::string& node, Request r) {
    return ComposeInput{.owner = {.job_id = id,
                                  .uid = 1000,
                                  .user = "alice",
                                  .account = "physics",
                                  .workload = "training"},
                        .node = node,
                        .request = r};
  }

  uint32_t free_of(DeviceType t) {
    uint32_t n = 0;
    for (const auto& row : pool_->pool_summary()) {
      if (row.type == t) n += row.free;
    }
    return n;
  }

  std::vector<std::string> kinds(uint32_t job_id) {
    db::EventFilter f;
    f.job_id = job_id;
    auto events = store_->events(f);
    EXPECT_TRUE(events.ok());
    std::vector<std::string> out;
    for (const auto& e : *events) out.push_back(e.kind);
    return out;
  }

  test_support::TempDir dir_{"service-test"};
  ManualClock clock_{1'700'000'000'000};
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<SimFabric> fabric_;
  std::unique_ptr<LivePool> pool_;  // before the services on it, so that it goes after them
  std::unique_ptr<CompositionService> service_;
  std::unique_ptr<DeviceAdmin> admin_;
};

}  // namespace composer::testing
