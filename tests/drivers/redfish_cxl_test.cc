// The redfish driver's CXL memory: the Fabrics model (endpoints, zones, memory connections) of
// the public-cxl mockup, served by the fake beside its composition service.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "composer/drivers/redfish_fabric.h"
#include "composer/test_support/inventory.h"
#include "composer/testing/fake_redfish.h"
#include "composer/testing/redfish_driver.h"

namespace composer::drivers {
namespace {

using composer::testing::FakeRedfish;
using composer::testing::FakeRedfishFault;
using composer::testing::FakeRedfishOptions;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;

FakeRedfishOptions cxl(int task_ms = 0) {
  FakeRedfishOptions o;
  o.gpus_per_zone = 2;
  o.memory_per_zone = 0;
  o.drives_per_zone = 0;
  o.hosts = 2;
  o.cxl = true;
  o.cxl_chunks = 3;
  o.task_ms = task_ms;
  return o;
}

std::unique_ptr<FakeRedfish> serve(FakeRedfishOptions o) { return harness::start_fake(o); }

std::unique_ptr<RedfishFabric> connect(const FakeRedfish& fake) {
  return harness::connect_driver(harness::driver_options(fake, 10));
}

using test_support::find_device;
using test_support::find_host;

TEST(RedfishCxl, MemoryChunksBehindTargetEndpointsArePooledMemory) {
  auto fake = serve(cxl());
  ASSERT_TRUE(fake);
  auto fabric = connect(*fake);
  ASSERT_TRUE(fabric);
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;

  // The mockup's pooled type 3 device: 16 GiB of persistent memory in CXL zone 3, connected
  // to the CXL-System's initiator I3 (connection 13).
  const Device* t3 = find_device(*inv, "cxl-T3");
  ASSERT_NE(t3, nullptr);
  EXPECT_EQ(t3->type, DeviceType::kMem);
  EXPECT_EQ(t3->capacity_bytes, uint64_t{16384} << 20);
  EXPECT_EQ(t3->model, "CXL PMEM");
  EXPECT_EQ(t3->zone, "cxl-3");
  EXPECT_EQ(t3->health, Health::kOk);
  EXPECT_THAT(inv->attached, Contains(Pair("cxl-T3", "CXL-System")));
  // What the host recognises the CXL memory device by: the PCI ids of the PCIe device under
  // the endpoint's logical device, and the serial of its Global CXL ID as Linux shows it
  // (/sys/bus/cxl/devices/memN/serial).
  EXPECT_EQ(t3->identity.pci_vendor, "0xabcd");
  EXPECT_EQ(t3->identity.pci_device, "0xabcd");
  EXPECT_EQ(t3->identity.serial, "0x4c1d96fffeddd835");
  EXPECT_EQ(t3->identity.uuid, "");
  const Device* t2 = find_device(*inv, "cxl-T2");
  ASSERT_NE(t2, nullptr);
  EXPECT_EQ(t2->capacity_bytes, uint64_t{4096} << 20);
  EXPECT_EQ(t2->zone, "cxl-2");
  // Failure domains: the chassis each chunk sits under, and the chassis containing that.
  EXPECT_THAT(t2->domains, ElementsAre(FailureDomain{"blade", "PooledCXLType2"}));
  EXPECT_THAT(t3->domains, ElementsAre(FailureDomain{"module", "PooledCXLType3"}));
  // T5 is in no connection: free.
  ASSERT_NE(find_device(*inv, "cxl-T5"), nullptr);
  EXPECT_THAT(
      find_device(*inv, "cxl-T5")->domains,
      ElementsAre(FailureDomain{"blade", "CXL-Chassis"}, FailureDomain{"module", "CXLType3"}));
  EXPECT_FALSE(inv->attached.contains("cxl-T5"));
  // Generated pool memory.
  const Device* tp1 = find_device(*inv, "cxl-TP1");
  ASSERT_NE(tp1, nullptr);
  EXPECT_EQ(tp1->capacity_bytes, uint64_t{64} << 30);
  EXPECT_EQ(tp1->model, "CXL Volatile");
  EXPECT_FALSE(inv->attached.contains("cxl-TP1"));
  // Endpoints that expose no memory (the type 1 device, the switch) are no devices.
  EXPECT_EQ(find_device(*inv, "cxl-T1"), nullptr);
  EXPECT_EQ(find_device(*inv, "cxl-1"), nullptr);
  // The composition service's blocks are still there.
  EXPECT_NE(find_device(*inv, "gpu-z1-00"), nullptr);

  // Hosts: the system behind the initiators, with the zones its initiators sit in; a composed
  // system that also has an initiator is one host reaching both.
  const Host* sys = find_host(*inv, "CXL-System");
  ASSERT_NE(sys, nullptr);
  EXPECT_EQ(sys->node, "CXL-System");
  EXPECT_THAT(sys->zones, Contains("cxl-1"));
  EXPECT_THAT(sys->zones, Contains("cxl-3"));
  EXPECT_GT(sys->mem_slots, 0u);
  const Host* n1 = find_host(*inv, "node01");
  ASSERT_NE(n1, nullptr);
  EXPECT_THAT(n1->zones, Contains("cxl-3"));
  EXPECT_THAT(n1->zones, Contains("1"));
  EXPECT_GT(n1->gpu_slots, 0u);
  EXPECT_EQ(std::count_if(inv->hosts.begin(), inv->hosts.end(),
                          [](const Host& h) { return h.fabric_id == "node01"; }),
            1);
}

TEST(RedfishCxl, AttachPostsAMemoryConnectionAndDetachDeletesIt) {
  auto fake = serve(cxl());
  ASSERT_TRUE(fake);
  auto fabric = connect(*fake);
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"cxl-TP1", "cxl-T5"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
  EXPECT_THAT(fake->memory_connections(), Contains(Pair("I-node01", "TP1")));
  EXPECT_THAT(fake->memory_connections(), Contains(Pair("I-node01", "T5")));
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  EXPECT_THAT(inv->attached, Contains(Pair("cxl-TP1", "node01")));
  EXPECT_THAT(inv->attached, Contains(Pair("cxl-T5", "node01")));

  op = fabric->detach("node01", {"cxl-TP1"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
  EXPECT_THAT(fake->memory_connections(), Not(Contains(Pair("I-node01", "TP1"))));
  EXPECT_THAT(fake->memory_connections(), Contains(Pair("I-node01", "T5")));
  inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  EXPECT_FALSE(inv->attached.contains("cxl-TP1"));

  // The mockup's own connection goes the same way.
  op = fabric->detach("CXL-System", {"cxl-T3"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_THAT(fake->memory_connections(), Not(Contains(Pair("I3", "T3"))));
}

TEST(RedfishCxl, RepeatingAnAttachOrDetachChangesNothing) {
  auto fake = serve(cxl());
  ASSERT_TRUE(fake);
  auto fabric = connect(*fake);
  ASSERT_TRUE(fabric);
  ASSERT_TRUE(fabric->attach("node02", {"cxl-TP2"}).ok());
  const uint64_t posts = fake->requests("POST");
  auto again = fabric->attach("node02", {"cxl-TP2"});
  ASSERT_TRUE(again.ok()) << again;
  EXPECT_EQ(again->state, OperationState::kDone);
  EXPECT_EQ(fake->requests("POST"), posts);
  const auto conns = fake->memory_connections();
  EXPECT_EQ(std::count(conns.begin(), conns.end(),
                       std::make_pair(std::string("I-node02"), std::string("TP2"))),
            1);

  ASSERT_TRUE(fabric->detach("node02", {"cxl-TP2"}).ok());
  const uint64_t deletes = fake->requests("DELETE");
  auto gone = fabric->detach("node02", {"cxl-TP2"});
  ASSERT_TRUE(gone.ok()) << gone;
  EXPECT_EQ(gone->state, OperationState::kDone);
  EXPECT_EQ(fake->requests("DELETE"), deletes);
}

TEST(RedfishCxl, MemoryConnectedToAnotherHostIsAConflict) {
  auto fake = serve(cxl());
  ASSERT_TRUE(fake);
  auto fabric = connect(*fake);
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"cxl-T3"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kConflict);
  EXPECT_THAT(op.error().message, HasSubstr("connected to host CXL-System"));
  // Detaching it from node01, which it is not connected to, deletes nothing.
  const uint64_t writes = fake->writes();
  auto off = fabric->detach("node01", {"cxl-T3"});
  ASSERT_TRUE(off.ok()) << off;
  EXPECT_EQ(fake->writes(), writes);
  EXPECT_THAT(fake->memory_connections(), Contains(Pair("I3", "T3")));
  // Memory in a zone none of the host's initiators reach (T2, once free, is in zone 2).
  ASSERT_TRUE(fabric->detach("CXL-System", {"cxl-T2"}).ok());
  auto far = fabric->attach("node01", {"cxl-T2"});
  ASSERT_FALSE(far.ok());
  EXPECT_THAT(far.error().message, HasSubstr("no CXL initiator endpoint in zone cxl-2"));
  // A host that is no composed system takes no resource blocks.
  auto block = fabric->attach("CXL-System", {"gpu-z1-00"});
  ASSERT_FALSE(block.ok());
  EXPECT_EQ(block.error().code, ErrorCode::kInvalidArgument);
}

TEST(RedfishCxl, AFailingConnectionPostReachesTheErrorAndLeavesNothingBehind) {
  auto fake = serve(cxl());
  ASSERT_TRUE(fake);
  auto fabric = connect(*fake);
  ASSERT_TRUE(fabric);
  FakeRedfishFault f;
  f.method = "POST";
  f.path = "/Fabrics/CXL/Connections";
  f.status = 503;
  f.message = "the fabric manager is reprogramming the switch";
  f.skip = 1;  // the first chunk connects, the second's POST fails
  fake->inject(f);
  auto op = fabric->attach("node01", {"cxl-TP1", "cxl-TP2"});
  ASSERT_FALSE(op.ok());
  EXPECT_THAT(op.error().message, HasSubstr("reprogramming the switch"));
  // The first connection was deleted again: all or nothing.
  EXPECT_THAT(fake->memory_connections(), Not(Contains(Pair("I-node01", "TP1"))));
  EXPECT_THAT(fake->memory_connections(), Not(Contains(Pair("I-node01", "TP2"))));

  // A task that fails after its 202: the operation fails with the task's message.
  FakeRedfishFault t;
  t.kind = FakeRedfishFault::Kind::kTaskFails;
  t.method = "POST";
  t.path = "/Fabrics/CXL/Connections";
  t.message = "memory chunk offline";
  t.skip = 1;
  fake->inject(t);
  auto failed = fabric->attach("node01", {"cxl-TP1", "cxl-TP2"});
  ASSERT_TRUE(failed.ok()) << failed;
  EXPECT_EQ(failed->state, OperationState::kFailed);
  EXPECT_THAT(failed->error, HasSubstr("memory chunk offline"));
  EXPECT_THAT(fake->memory_connections(), Not(Contains(Pair("I-node01", "TP1"))));
}

TEST(RedfishCxl, FollowsTaskMonitorsAndAttachesBlocksAndMemoryTogether) {
  auto fake = serve(cxl(30));
  ASSERT_TRUE(fake);
  auto fabric = connect(*fake);
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"gpu-z1-00", "cxl-TP3"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
  EXPECT_THAT(fake->system_blocks("node01"), Contains("gpu-z1-00"));
  EXPECT_THAT(fake->memory_connections(), Contains(Pair("I-node01", "TP3")));
  op = fabric->detach("node01", {"gpu-z1-00", "cxl-TP3"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
  EXPECT_THAT(fake->system_blocks("node01"), Not(Contains("gpu-z1-00")));
  EXPECT_THAT(fake->memory_connections(), Not(Contains(Pair("I-node01", "TP3"))));
}

TEST(RedfishCxl, ChunkHealthIsTheDeviceHealth) {
  auto fake = serve(cxl());
  ASSERT_TRUE(fake);
  auto fabric = connect(*fake);
  ASSERT_TRUE(fabric);
  ASSERT_TRUE(fake->set_health("TP2", "Critical").ok());
  auto health = fabric->health();
  ASSERT_TRUE(health.ok()) << health;
  EXPECT_THAT(*health, Contains(Pair("cxl-TP2", Health::kCritical)));
  EXPECT_THAT(*health, Contains(Pair("cxl-TP1", Health::kOk)));
}

TEST(RedfishCxl, WorksAgainstASloppyServiceAndNamesHostsByTheMap) {
  FakeRedfishOptions o = cxl();
  o.sloppy = true;  // members under Links, 204 without a body, one answer per connection
  auto fake = serve(o);
  ASSERT_TRUE(fake);
  RedfishOptions r;
  r.base_url = fake->base_url();
  r.username = "admin";
  r.password = "composer-test-pw";
  r.poll_interval_ms = 10;
  r.host_map = {{"CXL-System", "bigmem1"}, {"node02", "cn2"}};
  auto f = RedfishFabric::create(r);
  ASSERT_TRUE(f.ok()) << f;
  auto fabric = std::move(f).value();
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  const Host* sys = find_host(*inv, "CXL-System");
  ASSERT_NE(sys, nullptr);
  EXPECT_EQ(sys->node, "bigmem1");
  EXPECT_EQ(find_host(*inv, "node01"), nullptr);  // not in the map: not a host
  ASSERT_NE(find_device(*inv, "cxl-TP1"), nullptr);

  auto op = fabric->attach("node02", {"cxl-TP1"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
  EXPECT_THAT(fake->memory_connections(), Contains(Pair("I-node02", "TP1")));
  op = fabric->detach("node02", {"cxl-TP1"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_THAT(fake->memory_connections(), Not(Contains(Pair("I-node02", "TP1"))));
  auto unmapped = fabric->attach("node01", {"cxl-TP1"});
  ASSERT_FALSE(unmapped.ok());
  EXPECT_EQ(unmapped.error().code, ErrorCode::kNotFound);
}

TEST(RedfishCxl, AServiceWithOnlyACxlFabricIsEnough) {
  FakeRedfishOptions o = cxl();
  o.cxl_only = true;
  auto fake = serve(o);
  ASSERT_TRUE(fake);
  auto fabric = connect(*fake);
  ASSERT_TRUE(fabric);
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  for (const Device& d : inv->devices) {
    EXPECT_EQ(d.type, DeviceType::kMem) << d.id;
    EXPECT_TRUE(d.id.starts_with("cxl-")) << d.id;
  }
  const Host* n1 = find_host(*inv, "node01");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(n1->gpu_slots, 0u);
  EXPECT_GT(n1->mem_slots, 0u);
  EXPECT_THAT(n1->zones, ::testing::ElementsAre("cxl-3"));
  auto op = fabric->attach("node01", {"cxl-TP2"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_THAT(fake->memory_connections(), Contains(Pair("I-node01", "TP2")));
  auto block = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_FALSE(block.ok());
  EXPECT_EQ(block.error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace composer::drivers
