#include "composer/core/allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "composer/common/units.h"

namespace composer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

Host make_host(std::string node, std::vector<std::string> zones, uint32_t gpu_slots = 8,
               uint32_t mem_slots = 8, uint32_t nvme_slots = 8) {
  Host h;
  h.node = node;
  h.fabric_id = "fab-" + node;
  h.zones = std::move(zones);
  h.gpu_slots = gpu_slots;
  h.mem_slots = mem_slots;
  h.nvme_slots = nvme_slots;
  return h;
}

Device gpu(std::string id, std::string zone, std::string model = "A100-80G") {
  Device d;
  d.id = std::move(id);
  d.type = DeviceType::kGpu;
  d.model = std::move(model);
  d.zone = std::move(zone);
  return d;
}

Device mem(std::string id, std::string zone, uint64_t bytes) {
  Device d;
  d.id = std::move(id);
  d.type = DeviceType::kMem;
  d.model = "CXL-DDR5";
  d.capacity_bytes = bytes;
  d.zone = std::move(zone);
  return d;
}

Device nvme(std::string id, std::string zone, uint64_t bytes = 4 * kTiB) {
  Device d;
  d.id = std::move(id);
  d.type = DeviceType::kNvme;
  d.model = "P5620";
  d.capacity_bytes = bytes;
  d.zone = std::move(zone);
  return d;
}

Request gpus(uint32_t n, std::string model = "") {
  Request r;
  r.gpus = n;
  r.gpu_model = std::move(model);
  return r;
}

Request memory(uint64_t bytes) {
  Request r;
  r.mem_bytes = bytes;
  return r;
}

Request drives(uint32_t n) {
  Request r;
  r.nvme = n;
  return r;
}

std::vector<std::string> ids_ok(const Expected<std::vector<std::string>>& got) {
  EXPECT_TRUE(got.ok()) << got;
  return got.ok() ? got.value() : std::vector<std::string>{};
}

TEST(AllocatorAllocate, UnknownNodeIsNotFound) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})}, {gpu("g0", "z1")});
  auto got = allocator.allocate("nx", gpus(1));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(got.error().message, "unknown node 'nx'");
}

TEST(AllocatorAllocate, EmptyRequestTakesNothing) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})}, {gpu("g0", "z1")});
  EXPECT_TRUE(ids_ok(allocator.allocate("n1", Request{})).empty());
}

TEST(AllocatorAllocate, ExhaustionIsInsufficientAndGiveBackRestores) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"}), make_host("n2", {"z1"})},
                 {gpu("g0", "z1"), gpu("g1", "z1"), gpu("g2", "z1")});
  auto first = ids_ok(allocator.allocate("n1", gpus(3)));
  EXPECT_THAT(first, ElementsAre("g0", "g1", "g2"));
  allocator.take("n1", first, 7);

  auto none = allocator.allocate("n2", gpus(1));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kInsufficient);
  EXPECT_EQ(none.error().message, "node n2: asked for 1 GPU, none are free in zone z1");

  allocator.give_back({"g1"});
  EXPECT_THAT(ids_ok(allocator.allocate("n2", gpus(1))), ElementsAre("g1"));
}

TEST(AllocatorAllocate, ShortageSentenceNamesModelCountAndZones) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1", "z2"})},
                 {gpu("a0", "z1"), gpu("a1", "z2"), gpu("h0", "z1", "H100")});
  auto got = allocator.allocate("n1", gpus(4, "A100-80G"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kInsufficient);
  EXPECT_EQ(got.error().message,
            "node n1: asked for 4 GPUs of model A100-80G, only 2 are free in zones z1, z2");
}

TEST(AllocatorAllocate, NearestZoneFirst) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z2", "z1"})}, {gpu("g-z1-0", "z1"), gpu("g-z1-1", "z1"),
                                                   gpu("g-z2-0", "z2"), gpu("g-z2-1", "z2")});
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(2))), ElementsAre("g-z2-0", "g-z2-1"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", drives(0))), ElementsAre());
}

TEST(AllocatorAllocate, UnreachableZonesAreNeverUsed) {
  Allocator allocator;
  std::vector<Device> devices = {gpu("near-0", "z1"), gpu("near-1", "z1")};
  for (int i = 0; i < 8; ++i) devices.push_back(gpu("far-" + std::to_string(i), "z3"));
  devices.push_back(mem("far-mem", "z3", 512 * kGiB));
  devices.push_back(nvme("far-nvme", "z3"));
  allocator.load({make_host("n1", {"z1"})}, devices);

  auto got = allocator.allocate("n1", gpus(3));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message, "node n1: asked for 3 GPUs, only 2 are free in zone z1");
  EXPECT_FALSE(allocator.allocate("n1", memory(kGiB)).ok());
  EXPECT_FALSE(allocator.allocate("n1", drives(1)).ok());
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(2))), ElementsAre("near-0", "near-1"));
}

TEST(AllocatorAllocate, HostWithoutZonesSaysSo) {
  Allocator allocator;
  allocator.load({make_host("n1", {})}, {gpu("g0", "z1")});
  auto got = allocator.allocate("n1", gpus(1));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message, "node n1: asked for 1 GPU, but the node reaches no fabric zone");
}

TEST(AllocatorAllocate, GpusStayInOneZoneWhenAnyZoneCanServeThemAll) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1", "z2"})},
                 {gpu("a0", "z1"), gpu("a1", "z1"), gpu("b0", "z2"), gpu("b1", "z2"),
                  gpu("b2", "z2"), gpu("b3", "z2")});
  // z1 is nearer but holds only two: all three come from z2.
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(3))), ElementsAre("b0", "b1", "b2"));
  // Two fit in the nearest zone.
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(2))), ElementsAre("a0", "a1"));
}

TEST(AllocatorAllocate, GpusSpillOverNearestZoneFirst) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1", "z2", "z3"})},
                 {gpu("a0", "z1"), gpu("a1", "z1"), gpu("b0", "z2"), gpu("b1", "z2"),
                  gpu("b2", "z2"), gpu("c0", "z3"), gpu("c1", "z3"), gpu("c2", "z3")});
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(6))),
              ElementsAre("a0", "a1", "b0", "b1", "b2", "c0"));
}

TEST(AllocatorAllocate, ModelFilterPicksOnlyThatModel) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1", "z2"})},
                 {gpu("a0", "z1"), gpu("a1", "z1"), gpu("h0", "z1", "H100"),
                  gpu("h1", "z2", "H100"), gpu("h2", "z2", "H100")});
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(2, "H100"))), ElementsAre("h1", "h2"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(3, "H100"))), ElementsAre("h0", "h1", "h2"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(1, "A100-80G"))), ElementsAre("a0"));

  auto unknown = allocator.allocate("n1", gpus(1, "V100"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kInsufficient);
  EXPECT_THAT(unknown.error().message, HasSubstr("V100"));
}

TEST(AllocatorAllocate, AnyModelPrefersOneModelWithinTheZone) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})},
                 {gpu("a0", "z1", "A100-80G"), gpu("h0", "z1", "H100"), gpu("h1", "z1", "H100")});
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(2))), ElementsAre("h0", "h1"));
  // No single model has three: mixed, in (model, id) order.
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(3))), ElementsAre("a0", "h0", "h1"));
}

TEST(AllocatorAllocate, DrainedCriticalAndOwnedDevicesAreNeverPicked) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})}, {gpu("g0", "z1"), gpu("g1", "z1"), gpu("g2", "z1"),
                                             gpu("g3", "z1"), gpu("g4", "z1")});
  allocator.set_drained("g0", true, "fan noise");
  allocator.set_health("g1", Health::kCritical);
  allocator.take("n1", {"g2"}, 3);
  allocator.set_health("g3", Health::kWarning);  // warning still serves

  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(2))), ElementsAre("g3", "g4"));
  auto three = allocator.allocate("n1", gpus(3));
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.error().message, "node n1: asked for 3 GPUs, only 2 are free in zone z1");

  allocator.set_drained("g0", false, "");
  allocator.set_health("g1", Health::kOk);
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(4))), ElementsAre("g0", "g1", "g3", "g4"));
  EXPECT_EQ(allocator.device("g0")->drain_reason, "");
}

TEST(AllocatorAllocate, DrainingAnAttachedDeviceKeepsItOutAfterRelease) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})}, {gpu("g0", "z1"), gpu("g1", "z1")});
  allocator.take("n1", {"g0"}, 1);
  allocator.set_drained("g0", true, "replace");
  EXPECT_EQ(allocator.device("g0")->state(), DeviceState::kDrained);
  allocator.give_back({"g0"});
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(1))), ElementsAre("g1"));
  EXPECT_FALSE(allocator.allocate("n1", gpus(2)).ok());
}

TEST(AllocatorAllocate, SlotsCountWhatTheNodeAlreadyHolds) {
  Allocator allocator;
  std::vector<Device> devices;
  for (int i = 0; i < 8; ++i) devices.push_back(gpu("g" + std::to_string(i), "z1"));
  allocator.load({make_host("n1", {"z1"}, 4), make_host("n2", {"z1"}, 4)}, devices);
  allocator.take("n1", {"g0", "g1", "g2"}, 1);

  auto got = allocator.allocate("n1", gpus(2));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kInsufficient);
  EXPECT_EQ(got.error().message, "node n1: 4 GPU attach slots, 3 in use, asked for 2");
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(1))), ElementsAre("g3"));
  // Another node's holdings do not use n1's slots.
  EXPECT_THAT(ids_ok(allocator.allocate("n2", gpus(4))), ElementsAre("g3", "g4", "g5", "g6"));

  allocator.give_back({"g0"});
  EXPECT_TRUE(allocator.allocate("n1", gpus(2)).ok());
}

TEST(AllocatorAllocate, ZeroSlotsMeansTheNodeCannotTakeThatType) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"}, 0, 0, 0)},
                 {gpu("g0", "z1"), mem("m0", "z1", 64 * kGiB), nvme("d0", "z1")});
  auto g = allocator.allocate("n1", gpus(1));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().message, "node n1 has no GPU attach slots, asked for 1");
  auto m = allocator.allocate("n1", memory(kGiB));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().message, "node n1 has no memory attach slots, asked for 1G of memory");
  auto d = allocator.allocate("n1", drives(1));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message, "node n1 has no NVMe attach slots, asked for 1");
}

TEST(AllocatorAllocate, MemoryUsesOneBestFittingBlockWhenOneCovers) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})},
                 {mem("m-a", "z1", 64 * kGiB), mem("m-b", "z1", 64 * kGiB),
                  mem("m-c", "z1", 128 * kGiB), mem("m-d", "z1", 16 * kGiB)});
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(64 * kGiB))), ElementsAre("m-a"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(20 * kGiB))), ElementsAre("m-a"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(100 * kGiB))), ElementsAre("m-c"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(kGiB))), ElementsAre("m-d"));
}

TEST(AllocatorAllocate, MemoryUsesFewestBlocksAndFinishesWithTheSmallestThatFits) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})}, {mem("m0", "z1", 64 * kGiB), mem("m1", "z1", 64 * kGiB),
                                             mem("m2", "z1", 16 * kGiB), mem("m3", "z1", 16 * kGiB),
                                             mem("m4", "z1", 128 * kGiB)});
  // 128 + 64 = 192 < 200, so three blocks; the third needs only 8G more, so a 16G one.
  auto got = ids_ok(allocator.allocate("n1", memory(200 * kGiB)));
  EXPECT_THAT(got, ElementsAre("m4", "m0", "m2"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(256 * kGiB))), ElementsAre("m4", "m0", "m1"));

  auto too_much = allocator.allocate("n1", memory(512 * kGiB));
  ASSERT_FALSE(too_much.ok());
  EXPECT_EQ(too_much.error().message,
            "node n1: asked for 512G of memory, only 288G free in zone z1");
}

TEST(AllocatorAllocate, MemoryPrefersOneZoneThenSpillsNearestFirst) {
  Allocator allocator;
  allocator.load(
      {make_host("n1", {"z1", "z2"})},
      {mem("a0", "z1", 32 * kGiB), mem("b0", "z2", 64 * kGiB), mem("b1", "z2", 64 * kGiB)});
  // z1 cannot cover 64G alone; z2 can.
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(64 * kGiB))), ElementsAre("b0"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(32 * kGiB))), ElementsAre("a0"));
  // 160G needs both zones.
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(160 * kGiB))), ElementsAre("b0", "b1", "a0"));
}

TEST(AllocatorAllocate, MemoryWidensZonesWhenSlotsAreShort) {
  Allocator allocator;
  allocator.load(
      {make_host("n1", {"z1", "z2"}, 8, 2)},
      {mem("a0", "z1", 16 * kGiB), mem("a1", "z1", 16 * kGiB), mem("a2", "z1", 16 * kGiB),
       mem("a3", "z1", 16 * kGiB), mem("b0", "z2", 48 * kGiB)});
  // z1 alone covers 64G but only with four blocks; two slots are left.
  EXPECT_THAT(ids_ok(allocator.allocate("n1", memory(64 * kGiB))), ElementsAre("b0", "a0"));
}

TEST(AllocatorAllocate, MemorySlotShortageSaysHowManyBlocksItTakes) {
  Allocator allocator;
  allocator.load(
      {make_host("n1", {"z1"}, 8, 1)},
      {mem("m0", "z1", 32 * kGiB), mem("m1", "z1", 32 * kGiB), mem("m2", "z1", 32 * kGiB)});
  auto got = allocator.allocate("n1", memory(64 * kGiB));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kInsufficient);
  EXPECT_EQ(got.error().message,
            "node n1: 1 memory attach slot, 0 in use, asked for 64G of memory, which takes 2 "
            "blocks of the free ones in zone z1");
}

TEST(AllocatorAllocate, NvmeNearestZoneFirst) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1", "z2"})},
                 {nvme("d-z2-0", "z2"), nvme("d-z2-1", "z2"), nvme("d-z1-0", "z1")});
  EXPECT_THAT(ids_ok(allocator.allocate("n1", drives(2))), ElementsAre("d-z1-0", "d-z2-0"));
  auto got = allocator.allocate("n1", drives(4));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message,
            "node n1: asked for 4 NVMe drives, only 3 are free in zones z1, z2");
}

TEST(AllocatorAllocate, MixedRequestIsAllOrNothing) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})},
                 {gpu("g0", "z1"), gpu("g1", "z1"), mem("m0", "z1", 64 * kGiB), nvme("d0", "z1")});
  Request r = gpus(2);
  r.mem_bytes = 32 * kGiB;
  r.nvme = 1;
  EXPECT_THAT(ids_ok(allocator.allocate("n1", r)), ElementsAre("g0", "g1", "m0", "d0"));
  r.nvme = 2;
  auto got = allocator.allocate("n1", r);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.error().message, HasSubstr("NVMe"));
  // Nothing changed by the failed or the successful allocation.
  EXPECT_EQ(allocator.device("g0")->state(), DeviceState::kFree);
}

TEST(AllocatorAllocate, SameStateGivesTheSameAnswerWhateverTheLoadOrder) {
  std::vector<Device> devices;
  for (int z = 0; z < 3; ++z) {
    for (int i = 0; i < 5; ++i) {
      std::string zone = "z" + std::to_string(z);
      devices.push_back(gpu("g-" + zone + "-" + std::to_string(i), zone, i % 2 ? "H100" : "A100"));
      devices.push_back(mem("m-" + zone + "-" + std::to_string(i), zone, (i + 1) * 16 * kGiB));
      devices.push_back(nvme("d-" + zone + "-" + std::to_string(i), zone));
    }
  }
  std::vector<Device> reversed(devices.rbegin(), devices.rend());
  Allocator a;
  Allocator b;
  a.load({make_host("n1", {"z2", "z0", "z1"}, 16, 16, 16)}, devices);
  b.load({make_host("n1", {"z2", "z0", "z1"}, 16, 16, 16)}, reversed);
  a.take("n1", {"g-z2-0", "m-z2-4"}, 1);
  b.take("n1", {"g-z2-0", "m-z2-4"}, 1);
  Request r = gpus(6);
  r.mem_bytes = 300 * kGiB;
  r.nvme = 7;
  auto from_a = ids_ok(a.allocate("n1", r));
  EXPECT_FALSE(from_a.empty());
  EXPECT_EQ(from_a, ids_ok(b.allocate("n1", r)));
  EXPECT_EQ(from_a, ids_ok(a.allocate("n1", r)));
}

TEST(AllocatorTake, RoundTripUpdatesOwnerStateAndSummary) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})}, {gpu("g0", "z1"), gpu("g1", "z1")});
  allocator.take("n1", {"g0"}, 42);
  const Device* d = allocator.device("g0");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->composition_id, 42);
  EXPECT_EQ(d->node, "n1");
  EXPECT_EQ(d->state(), DeviceState::kAttached);
  EXPECT_EQ(allocator.summary().at(0).attached, 1u);
  EXPECT_EQ(allocator.summary().at(0).free, 1u);

  allocator.give_back({"g0"});
  EXPECT_FALSE(d->composition_id.has_value());
  EXPECT_EQ(d->node, "");
  EXPECT_EQ(d->state(), DeviceState::kFree);
  EXPECT_EQ(allocator.summary().at(0).free, 2u);
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(2))), ElementsAre("g0", "g1"));
  // Unknown ids are ignored, not crashed on.
  allocator.take("n1", {"nope"}, 1);
  allocator.give_back({"nope"});
  EXPECT_EQ(allocator.device("nope"), nullptr);
}

TEST(AllocatorLoad, OwnedDevicesCountAgainstSlots) {
  Allocator allocator;
  Device held = gpu("g0", "z1");
  held.composition_id = 5;
  held.node = "n1";
  allocator.load({make_host("n1", {"z1"}, 1)}, {held, gpu("g1", "z1")});
  auto got = allocator.allocate("n1", gpus(1));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message, "node n1: 1 GPU attach slot, 1 in use, asked for 1");
}

TEST(AllocatorUpsert, DeviceKeepsDrainAndOwnerAndMovesZones) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1", "z2"})}, {gpu("g0", "z1"), gpu("g1", "z1")});
  allocator.take("n1", {"g0"}, 9);
  allocator.set_drained("g1", true, "maintenance");

  Device update = gpu("g0", "z2", "A100-40G");
  update.address = "0000:99:00.0";
  allocator.upsert_device(update);
  Device update1 = gpu("g1", "z2");
  allocator.upsert_device(update1);

  const Device* g0 = allocator.device("g0");
  EXPECT_EQ(g0->zone, "z2");
  EXPECT_EQ(g0->model, "A100-40G");
  EXPECT_EQ(g0->address, "0000:99:00.0");
  EXPECT_EQ(g0->composition_id, 9);
  EXPECT_TRUE(allocator.device("g1")->drained);
  EXPECT_EQ(allocator.device("g1")->drain_reason, "maintenance");

  allocator.upsert_device(gpu("g2", "z2"));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(1))), ElementsAre("g2"));
  // The summary follows the move: nothing is left in z1.
  for (const PoolRow& row : allocator.summary()) EXPECT_EQ(row.zone, "z2");
}

TEST(AllocatorUpsert, HostReplacesZonesAndSlots) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"})}, {gpu("g0", "z1"), gpu("g1", "z2")});
  allocator.upsert_host(make_host("n1", {"z2"}, 2));
  EXPECT_THAT(ids_ok(allocator.allocate("n1", gpus(1))), ElementsAre("g1"));
  allocator.upsert_host(make_host("n2", {"z1"}));
  ASSERT_NE(allocator.host("n2"), nullptr);
  EXPECT_EQ(allocator.hosts().size(), 2u);
  EXPECT_EQ(allocator.host("n1")->gpu_slots, 2u);
  EXPECT_EQ(allocator.host("n3"), nullptr);
}

TEST(AllocatorSummary, CountsAddUpPerTypeModelAndZone) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1", "z2"})},
                 {gpu("g0", "z1"), gpu("g1", "z1"), gpu("g2", "z1"), gpu("g3", "z1"),
                  gpu("h0", "z2", "H100"), mem("m0", "z1", 64 * kGiB), mem("m1", "z1", 32 * kGiB),
                  mem("m2", "z1", 32 * kGiB), nvme("d0", "z2", 2 * kTiB)});
  allocator.take("n1", {"g0", "m0"}, 1);
  allocator.set_drained("g1", true, "x");
  allocator.set_health("g2", Health::kCritical);
  allocator.set_drained("g2", true, "both");  // failed wins over drained
  allocator.set_health("m1", Health::kCritical);

  auto rows = allocator.summary();
  ASSERT_EQ(rows.size(), 4u);
  // Sorted by type, model, zone.
  EXPECT_EQ(rows[0].type, DeviceType::kGpu);
  EXPECT_EQ(rows[0].model, "A100-80G");
  EXPECT_EQ(rows[0].zone, "z1");
  EXPECT_EQ(rows[0].total, 4u);
  EXPECT_EQ(rows[0].free, 1u);
  EXPECT_EQ(rows[0].attached, 1u);
  EXPECT_EQ(rows[0].drained, 1u);
  EXPECT_EQ(rows[0].failed, 1u);
  EXPECT_EQ(rows[1].model, "H100");
  EXPECT_EQ(rows[1].total, 1u);
  EXPECT_EQ(rows[1].free, 1u);
  EXPECT_EQ(rows[2].type, DeviceType::kMem);
  EXPECT_EQ(rows[2].total, 3u);
  EXPECT_EQ(rows[2].total_bytes, 128 * kGiB);
  EXPECT_EQ(rows[2].free_bytes, 32 * kGiB);
  EXPECT_EQ(rows[2].attached, 1u);
  EXPECT_EQ(rows[2].failed, 1u);
  EXPECT_EQ(rows[3].type, DeviceType::kNvme);
  EXPECT_EQ(rows[3].zone, "z2");
  EXPECT_EQ(rows[3].total_bytes, 2 * kTiB);
  EXPECT_EQ(rows[3].free_bytes, 2 * kTiB);
  for (const PoolRow& row : rows) {
    EXPECT_EQ(row.total, row.free + row.attached + row.drained + row.failed) << row.model;
  }
}

TEST(AllocatorCheckPossible, RefusesWhatCanNeverBeServed) {
  Allocator allocator;
  allocator.load({make_host("n1", {"z1"}, 4, 2, 1)},
                 {gpu("g0", "z1"), gpu("g1", "z1"), gpu("h0", "z1", "H100"),
                  gpu("x0", "z9", "V100"), mem("m0", "z1", 32 * kGiB), mem("m1", "z1", 32 * kGiB),
                  mem("m2", "z1", 32 * kGiB), nvme("d0", "z1")});
  auto expect_invalid = [&](const Request& r, const std::string& message) {
    Status s = allocator.check_possible("n1", r);
    ASSERT_FALSE(s.ok()) << r.to_string();
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(s.error().message, message);
  };
  expect_invalid(gpus(5), "node n1 has 4 GPU attach slots, so it can never take 5 GPUs");
  expect_invalid(gpus(4), "node n1: asked for 4 GPUs, but zone z1 holds only 3");
  expect_invalid(gpus(1, "V100"),
                 "unknown GPU model 'V100': no such GPU in zone z1 reached by node n1 (known "
                 "models there: A100-80G, H100)");
  expect_invalid(gpus(2, "H100"),
                 "node n1: asked for 2 GPUs of model H100, but zone z1 holds only 1");
  expect_invalid(memory(128 * kGiB),
                 "node n1: asked for 128G of memory, but zone z1 holds only 96G");
  expect_invalid(memory(96 * kGiB),
                 "node n1 has 2 memory attach slots, but 96G of memory takes at least 3 blocks "
                 "from zone z1");
  expect_invalid(drives(2), "node n1 has 1 NVMe attach slot, so it can never take 2 NVMe drives");

  allocator.upsert_host(make_host("lonely", {}));
  Status lonely = allocator.check_possible("lonely", memory(kGiB));
  ASSERT_FALSE(lonely.ok());
  EXPECT_EQ(lonely.error().message,
            "node lonely reaches no fabric zone, so it can never take 1G of memory");

  Status unknown = allocator.check_possible("nx", gpus(1));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);

  // Attached, drained and failed devices still count: they come back.
  allocator.take("n1", {"g0"}, 1);
  allocator.set_drained("g1", true, "x");
  allocator.set_health("m0", Health::kCritical);
  Request fine = gpus(2, "A100-80G");
  fine.mem_bytes = 64 * kGiB;
  fine.nvme = 1;
  EXPECT_TRUE(allocator.check_possible("n1", fine).ok());
  EXPECT_TRUE(allocator.check_possible("n1", Request{}).ok());
}

bool same_rows(const std::vector<PoolRow>& a, const std::vector<PoolRow>& b) {
  auto key = [](const PoolRow& r) {
    return std::make_tuple(r.type, r.model, r.zone, r.total, r.free, r.attached, r.drained,
                           r.failed, r.total_bytes, r.free_bytes);
  };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&](const PoolRow& x, const PoolRow& y) { return key(x) == key(y); });
}

// The indexes are kept in step change by change; an allocator loaded afresh from the same devices
// builds them from scratch. Both must answer alike after any sequence of changes.
TEST(AllocatorIndexes, MatchAFreshLoadAfterRandomChanges) {
  std::vector<Host> hosts = {make_host("n1", {"z1", "z2"}, 6, 4, 3),
                             make_host("n2", {"z2", "z3"}, 6, 4, 3),
                             make_host("n3", {"z3", "z1"}, 6, 4, 3)};
  std::vector<Device> devices;
  std::vector<std::string> ids;
  for (int z = 1; z <= 3; ++z) {
    const std::string zone = "z" + std::to_string(z);
    for (int i = 0; i < 6; ++i) {
      devices.push_back(gpu(zone + "-g" + std::to_string(i), zone, i % 2 ? "H100" : "A100-80G"));
      devices.push_back(mem(zone + "-m" + std::to_string(i), zone, (1 + i % 3) * 32 * kGiB));
      devices.push_back(nvme(zone + "-d" + std::to_string(i), zone));
    }
  }
  for (const Device& d : devices) ids.push_back(d.id);
  Allocator allocator;
  allocator.load(hosts, devices);

  uint32_t seed = 12345;
  auto next = [&seed](uint32_t bound) {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) % bound;
  };
  const std::vector<Request> probes = {gpus(2), gpus(3, "H100"), memory(96 * kGiB),
                                       memory(200 * kGiB), drives(2)};
  int64_t composition = 1;
  for (int step = 0; step < 400; ++step) {
    const std::string& id = ids[next(static_cast<uint32_t>(ids.size()))];
    const Host& h = hosts[next(3)];
    switch (next(6)) {
      case 0: {
        Request r = probes[next(static_cast<uint32_t>(probes.size()))];
        auto got = allocator.allocate(h.node, r);
        if (got.ok()) allocator.take(h.node, *got, composition++);
        break;
      }
      case 1:
        allocator.give_back({id});
        break;
      case 2:
        allocator.set_drained(id, next(2) == 0, "random");
        break;
      case 3:
        allocator.set_health(id, static_cast<Health>(next(3)));
        break;
      case 4: {
        Device moved = *allocator.device(id);
        moved.zone = "z" + std::to_string(1 + next(3));
        allocator.upsert_device(moved);
        break;
      }
      default:
        allocator.give_back({id});
        allocator.take(h.node, {id}, composition++);
        break;
    }
    if (step % 20 != 19) continue;
    std::vector<Device> now;
    for (const std::string& each : ids) now.push_back(*allocator.device(each));
    Allocator fresh;
    fresh.load(hosts, now);
    ASSERT_TRUE(same_rows(allocator.summary(), fresh.summary())) << "step " << step;
    for (const Host& each : hosts) {
      for (const Request& r : probes) {
        auto a = allocator.allocate(each.node, r);
        auto b = fresh.allocate(each.node, r);
        ASSERT_EQ(a.ok(), b.ok()) << "step " << step << " " << each.node << " " << r.to_string();
        if (a.ok()) {
          EXPECT_EQ(*a, *b);
        } else {
          EXPECT_EQ(a.error().message, b.error().message);
        }
      }
    }
  }
}

TEST(AllocatorScale, HundredThousandDevicesAllocateQuickly) {
  constexpr int kZones = 50;
  constexpr int kPerZoneGpus = 1200;
  constexpr int kPerZoneMem = 500;
  constexpr int kPerZoneNvme = 300;
  std::vector<Device> devices;
  devices.reserve(kZones * (kPerZoneGpus + kPerZoneMem + kPerZoneNvme));
  for (int z = 0; z < kZones; ++z) {
    const std::string zone = "z" + std::to_string(z);
    for (int i = 0; i < kPerZoneGpus; ++i) {
      devices.push_back(gpu(zone + "-g" + std::to_string(i), zone, i % 3 ? "A100-80G" : "H100"));
    }
    for (int i = 0; i < kPerZoneMem; ++i) {
      devices.push_back(mem(zone + "-m" + std::to_string(i), zone, (1 + i % 4) * 32 * kGiB));
    }
    for (int i = 0; i < kPerZoneNvme; ++i) {
      devices.push_back(nvme(zone + "-d" + std::to_string(i), zone));
    }
  }
  ASSERT_EQ(devices.size(), 100000u);
  std::vector<Host> hosts;
  for (int n = 0; n < 2000; ++n) {
    const int z = n % kZones;
    hosts.push_back(make_host("node" + std::to_string(n),
                              {"z" + std::to_string(z), "z" + std::to_string((z + 1) % kZones)}));
  }

  Allocator allocator;
  auto t0 = std::chrono::steady_clock::now();
  allocator.load(hosts, devices);
  auto t1 = std::chrono::steady_clock::now();

  Request r = gpus(4);
  r.mem_bytes = 200 * kGiB;
  r.nvme = 1;
  std::set<std::string> handed_out;
  int64_t next_id = 1;
  for (const Host& h : hosts) {
    auto got = allocator.allocate(h.node, r);
    ASSERT_TRUE(got.ok()) << h.node << ": " << got;
    ASSERT_EQ(got->size(), 4u + 2u + 1u) << h.node;  // 200G: a 128G block and a 96G one
    for (const std::string& id : *got) {
      const Device* d = allocator.device(id);
      ASSERT_NE(d, nullptr);
      ASSERT_TRUE(d->allocatable()) << id;
      ASSERT_TRUE(h.zone_rank(d->zone).has_value()) << id << " is out of reach of " << h.node;
      ASSERT_TRUE(handed_out.insert(id).second) << id << " handed out twice";
    }
    allocator.take(h.node, *got, next_id++);
  }
  auto t2 = std::chrono::steady_clock::now();

  uint32_t attached = 0;
  for (const PoolRow& row : allocator.summary()) attached += row.attached;
  EXPECT_EQ(attached, handed_out.size());

  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::cout << "[ scale    ] load of 100000 devices: " << ms(t1 - t0) << " ms; " << hosts.size()
            << " allocate+take: " << ms(t2 - t1) << " ms\n";
  ::testing::Test::RecordProperty("load_ms", static_cast<int>(ms(t1 - t0)));
  ::testing::Test::RecordProperty("allocate_take_ms", static_cast<int>(ms(t2 - t1)));
}

}  // namespace
}  // namespace composer
