// The redfish driver against a service whose compute nodes are ComputerSystem resource blocks:
// the first attach composes a system from the node's block, later ones add to it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "composer/drivers/redfish_fabric.h"
#include "composer/test_support/inventory.h"
#include "composer/testing/fake_redfish.h"
#include "composer/testing/redfish_driver.h"

namespace composer::drivers {
namespace {

using composer::testing::FakeRedfish;
using composer::testing::FakeRedfishFault;
using composer::testing::FakeRedfishOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

FakeRedfishOptions blocks(FakeRedfishOptions o = {}) {
  o.host_blocks = true;
  o.gpus_per_zone = 4;
  o.memory_per_zone = 1;
  o.drives_per_zone = 1;
  o.hosts = 4;  // node01 and node03 in zone 1, node02 and node04 in zone 2
  return o;
}

std::unique_ptr<FakeRedfish> serve(FakeRedfishOptions o = blocks()) {
  return harness::start_fake(o);
}

RedfishOptions options(const FakeRedfish& fake) { return harness::driver_options(fake); }

std::unique_ptr<RedfishFabric> connect(RedfishOptions o) {
  return harness::connect_driver(std::move(o));
}

using test_support::find_host;

TEST(RedfishHostBlocks, ComputerSystemBlocksAreHostsWithTheirOwnZones) {
  auto fake = serve();
  ASSERT_TRUE(fake);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  const Host* n1 = find_host(*inv, "node01");
  ASSERT_NE(n1, nullptr);
  EXPECT_EQ(n1->node, "node01");
  // Its block's zone, then the union zone of the mockup's blocks in zones 1 and 2.
  EXPECT_THAT(n1->zones, ElementsAre("1", "1+2"));
  EXPECT_EQ(n1->gpu_slots, 8u);
  const Host* n2 = find_host(*inv, "node02");
  ASSERT_NE(n2, nullptr);
  EXPECT_THAT(n2->zones, ElementsAre("2", "1+2"));
  // The mockup's ComputerSystem blocks are hosts too; the systems composed from them are not,
  // and what sits in those systems is attached to the block's host.
  const Host* b12 = find_host(*inv, "SystemBlock12");
  ASSERT_NE(b12, nullptr);
  EXPECT_THAT(b12->zones, ElementsAre("3"));
  EXPECT_NE(find_host(*inv, "SystemBlock11"), nullptr);
  EXPECT_EQ(find_host(*inv, "SystemAfterAddResourceAction"), nullptr);
  EXPECT_EQ(find_host(*inv, "SystemAfterResourceBlock"), nullptr);
  EXPECT_EQ(inv->attached.at("DriveBlock10"), "SystemBlock12");
  // A Compute block composed into an ordinary system keeps that system as the host.
  EXPECT_NE(find_host(*inv, "ComposedSystem"), nullptr);
}

TEST(RedfishHostBlocks, FirstAttachComposesOneSystemLaterOnesAddAndDetachKeepsIt) {
  auto fake = serve();
  ASSERT_TRUE(fake);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"gpu-z1-00", "mem-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  const auto systems = fake->systems_with_block("node01");
  ASSERT_THAT(systems, SizeIs(1));
  const std::string system = systems.front();
  EXPECT_THAT(fake->system_blocks(system), ElementsAre("node01", "gpu-z1-00", "mem-z1-00"));

  // The host keeps its id; the devices show on it, not on the system's id.
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  EXPECT_EQ(inv->attached.at("gpu-z1-00"), "node01");
  EXPECT_EQ(inv->attached.at("mem-z1-00"), "node01");
  EXPECT_NE(find_host(*inv, "node01"), nullptr);
  EXPECT_EQ(find_host(*inv, system), nullptr);

  op = fabric->attach("node01", {"gpu-z1-01"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_THAT(fake->systems_with_block("node01"), ElementsAre(system));
  EXPECT_THAT(fake->system_blocks(system),
              ElementsAre("node01", "gpu-z1-00", "mem-z1-00", "gpu-z1-01"));

  // A retry: nothing to do, nothing sent.
  const uint64_t posts = fake->requests("POST");
  op = fabric->attach("node01", {"gpu-z1-00", "gpu-z1-01"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_EQ(fake->requests("POST"), posts);

  op = fabric->detach("node01", {"gpu-z1-00", "mem-z1-00", "gpu-z1-01"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  // The system stays, with only the compute block in it.
  EXPECT_THAT(fake->systems_with_block("node01"), ElementsAre(system));
  EXPECT_THAT(fake->system_blocks(system), ElementsAre("node01"));
  EXPECT_TRUE(fabric->detach("node01", {"gpu-z1-00"}).ok());  // a retried detach

  // The next attach goes into that system again; no second one is composed.
  op = fabric->attach("node01", {"gpu-z1-02"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_THAT(fake->systems_with_block("node01"), ElementsAre(system));
  EXPECT_THAT(fake->system_blocks(system), ElementsAre("node01", "gpu-z1-02"));
}

TEST(RedfishHostBlocks, ABlockInAnotherZoneIsRefusedWithTheServicesMessageAndNothingChanges) {
  auto fake = serve();
  ASSERT_TRUE(fake);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  // No system yet: the composition is refused as a whole.
  auto op = fabric->attach("node01", {"gpu-z1-00", "gpu-z2-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_THAT(op.error().message, HasSubstr("gpu-z2-00 is in no resource zone of node01"));
  EXPECT_THAT(fake->systems_with_block("node01"), IsEmpty());
  EXPECT_THAT(fake->systems_with_block("gpu-z1-00"), IsEmpty());
  // A composed system refuses it too, and keeps what it had.
  ASSERT_TRUE(fabric->attach("node01", {"gpu-z1-00"}).ok());
  const std::string system = fake->systems_with_block("node01").at(0);
  op = fabric->attach("node01", {"gpu-z2-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_THAT(op.error().message, HasSubstr("in no resource zone"));
  EXPECT_THAT(fake->system_blocks(system), ElementsAre("node01", "gpu-z1-00"));
}

TEST(RedfishHostBlocks, BlocksInAnotherHostsSystemAreAConflictComposedOrNot) {
  auto fake = serve();
  ASSERT_TRUE(fake);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  ASSERT_TRUE(fabric->attach("node02", {"gpu-z2-00"}).ok());
  // node04 has no system yet.
  const uint64_t posts = fake->requests("POST");
  auto op = fabric->attach("node04", {"gpu-z2-01", "gpu-z2-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kConflict);
  EXPECT_THAT(op.error().message, HasSubstr("of host node02"));
  EXPECT_EQ(fake->requests("POST"), posts);  // refused before anything was sent
  // Detaching it from node04, which does not hold it, is done already: nothing is sent.
  const uint64_t writes = fake->writes();
  auto off = fabric->detach("node04", {"gpu-z2-00"});
  ASSERT_TRUE(off.ok()) << off;
  EXPECT_EQ(fake->writes(), writes);
  EXPECT_TRUE(fabric->detach("node04", {"gpu-z2-01"}).ok());  // never attached
  EXPECT_THAT(fake->systems_with_block("node04"), IsEmpty());
  // node04 composed: the same.
  ASSERT_TRUE(fabric->attach("node04", {"gpu-z2-01"}).ok());
  op = fabric->attach("node04", {"gpu-z2-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kConflict);
  EXPECT_THAT(fake->system_blocks(fake->systems_with_block("node02").at(0)),
              ElementsAre("node02", "gpu-z2-00"));
}

TEST(RedfishHostBlocks, ComposesThroughATaskMonitor) {
  FakeRedfishOptions fo = blocks();
  fo.task_ms = 150;
  auto fake = serve(fo);
  ASSERT_TRUE(fake);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node03", {"gpu-z1-03"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  ASSERT_THAT(fake->systems_with_block("node03"), SizeIs(1));
  // The new system is found from the block: the next attach adds to it.
  op = fabric->attach("node03", {"nvme-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_THAT(fake->systems_with_block("node03"), SizeIs(1));
  EXPECT_THAT(fake->system_blocks(fake->systems_with_block("node03").at(0)),
              ElementsAre("node03", "gpu-z1-03", "nvme-z1-00"));
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  EXPECT_EQ(inv->attached.at("nvme-z1-00"), "node03");
}

TEST(RedfishHostBlocks, ARunningCompositionIsPolledLaterAndAFailedOneLeavesNoSystem) {
  FakeRedfishOptions fo = blocks();
  fo.task_ms = 300;
  auto fake = serve(fo);
  ASSERT_TRUE(fake);
  RedfishOptions o = options(*fake);
  o.task_wait_ms = 0;
  auto fabric = connect(o);
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  ASSERT_EQ(op->state, OperationState::kRunning);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  Expected<Operation> st = *op;
  while (st.ok() && st->state == OperationState::kRunning &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    st = fabric->operation_status(op->id);
  }
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(st->state, OperationState::kDone);
  EXPECT_THAT(fake->systems_with_block("gpu-z1-00"), SizeIs(1));

  FakeRedfishFault f;
  f.kind = FakeRedfishFault::Kind::kTaskFails;
  f.method = "POST";
  f.path = "/redfish/v1/Systems";
  f.message = "the fabric manager lost the compute node";
  fake->inject(f);
  RedfishOptions waiting = options(*fake);
  auto patient = connect(waiting);
  ASSERT_TRUE(patient);
  op = patient->attach("node02", {"gpu-z2-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kFailed);
  EXPECT_THAT(op->error, HasSubstr("lost the compute node"));
  EXPECT_THAT(fake->systems_with_block("node02"), IsEmpty());
  EXPECT_THAT(fake->systems_with_block("gpu-z2-00"), IsEmpty());
}

TEST(RedfishHostBlocks, AComposedSystemWithoutActionsTakesBlocksByPatch) {
  FakeRedfishOptions fo = blocks();
  fo.patch_only = true;
  auto fake = serve(fo);
  ASSERT_TRUE(fake);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  ASSERT_TRUE(fabric->attach("node02", {"gpu-z2-00"}).ok());
  EXPECT_EQ(fake->requests("PATCH"), 0u);
  auto op = fabric->attach("node02", {"nvme-z2-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(fake->requests("PATCH"), 1u);
  ASSERT_TRUE(fabric->detach("node02", {"gpu-z2-00", "nvme-z2-00"}).ok());
  EXPECT_THAT(fake->system_blocks(fake->systems_with_block("node02").at(0)), ElementsAre("node02"));
}

TEST(RedfishHostBlocks, NamesBlockHostsByMapOrByTheHostNameOfTheirSystem) {
  auto fake = serve();
  ASSERT_TRUE(fake);
  RedfishOptions o = options(*fake);
  o.host_map = {{"node03", "cn-3"}};
  auto fabric = connect(o);
  ASSERT_TRUE(fabric);
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  ASSERT_EQ(inv->hosts.size(), 1u);
  EXPECT_EQ(inv->hosts[0].fabric_id, "node03");
  EXPECT_EQ(inv->hosts[0].node, "cn-3");
  ASSERT_TRUE(fabric->attach("node03", {"gpu-z1-01"}).ok());
  inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  ASSERT_EQ(inv->hosts.size(), 1u);
  EXPECT_EQ(inv->hosts[0].fabric_id, "node03");  // the same id once composed
  EXPECT_EQ(inv->attached.at("gpu-z1-01"), "node03");

  o.host_map.clear();
  o.use_host_name = true;
  fabric = connect(o);
  ASSERT_TRUE(fabric);
  inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  for (const std::string id : {"node01", "node03"}) {  // node03 composed, node01 not
    const Host* h = find_host(*inv, id);
    ASSERT_NE(h, nullptr) << id;
    EXPECT_EQ(h->node, id + ".cluster");
  }
}

TEST(RedfishHostBlocks, WorksAgainstASloppyHttp10Service) {
  FakeRedfishOptions fo = blocks();
  fo.sloppy = true;
  fo.patch_only = true;
  fo.task_ms = 50;
  auto fake = serve(fo);
  ASSERT_TRUE(fake);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  op = fabric->attach("node01", {"gpu-z1-01"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  op = fabric->detach("node01", {"gpu-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  ASSERT_THAT(fake->systems_with_block("node01"), SizeIs(1));
  EXPECT_THAT(fake->system_blocks(fake->systems_with_block("node01").at(0)),
              ElementsAre("node01", "gpu-z1-01"));
}

}  // namespace
}  // namespace composer::drivers
