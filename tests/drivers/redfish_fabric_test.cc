// The redfish driver against the fake Redfish service over loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
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
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

FakeRedfishOptions small(FakeRedfishOptions o = {}) {
  o.gpus_per_zone = 4;
  o.memory_per_zone = 1;
  o.drives_per_zone = 1;
  o.hosts = 2;
  return o;
}

std::unique_ptr<FakeRedfish> serve(FakeRedfishOptions o = small()) {
  return harness::start_fake(o);
}

RedfishOptions options(const FakeRedfish& fake) { return harness::driver_options(fake); }

std::unique_ptr<RedfishFabric> connect(RedfishOptions o) {
  return harness::connect_driver(std::move(o));
}

using test_support::find_device;
using test_support::find_host;

TEST(RedfishFabric, InventoryMapsBlocksZonesAndComposedSystems) {
  auto fake = serve();
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;

  const Device* gpu = find_device(*inv, "gpu-z2-03");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->type, DeviceType::kGpu);
  EXPECT_EQ(gpu->model, "H100-80G");
  EXPECT_EQ(gpu->zone, "2");
  // What the host will recognise it by: the Processor's serial and UUID, the ids of function
  // 0 of its PCIeDevice (upper case on the wire, one form in the model). No host address.
  EXPECT_EQ(gpu->identity.serial, "FRG200000003");
  EXPECT_EQ(gpu->identity.uuid, "GPU-f00dcafe-0002-4000-8000-000000000003");
  EXPECT_EQ(gpu->identity.pci_vendor, "0x10de");
  EXPECT_EQ(gpu->identity.pci_device, "0x2331");
  EXPECT_EQ(gpu->address, "");
  const Device* nvme = find_device(*inv, "nvme-z2-00");
  ASSERT_NE(nvme, nullptr);
  EXPECT_EQ(nvme->identity,
            (DeviceIdentity{"0x8086", "0x0b60", "FRN200000000", ""}));  // Links.PCIeFunctions
  // The mockup's own offload block: a GPU with the processor's model.
  const Device* mock_gpu = find_device(*inv, "OffloadBlock9");
  ASSERT_NE(mock_gpu, nullptr);
  EXPECT_EQ(mock_gpu->model, "Contoso Workstation VID2000");
  EXPECT_TRUE(mock_gpu->identity.empty());  // the mockup names none
  const Device* mem = find_device(*inv, "mem-z1-00");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->type, DeviceType::kMem);
  EXPECT_EQ(mem->capacity_bytes, uint64_t{64} << 30);
  const Device* drive = find_device(*inv, "DriveBlock3");
  ASSERT_NE(drive, nullptr);
  EXPECT_EQ(drive->type, DeviceType::kNvme);
  EXPECT_EQ(drive->capacity_bytes, 274877906944u);
  // Failure domains: the block's Links.Chassis (a Module) and the chassis containing it.
  EXPECT_THAT(drive->domains, ElementsAre(FailureDomain{"enclosure", "ComposableEnclosure"},
                                          FailureDomain{"module", "ComposableModule3"}));
  // Compute blocks and the network block are not pooled devices.
  EXPECT_EQ(find_device(*inv, "ComputeBlock1"), nullptr);
  EXPECT_EQ(find_device(*inv, "NetworkBlock8"), nullptr);
  EXPECT_EQ(find_device(*inv, "compute-node01"), nullptr);

  const Host* n2 = find_host(*inv, "node02");
  ASSERT_NE(n2, nullptr);
  EXPECT_EQ(n2->node, "node02");
  // Its compute block's zones, then the union zone of the mockup's blocks in both zones.
  EXPECT_THAT(n2->zones, ElementsAre("2", "1", "1+2"));
  EXPECT_EQ(n2->nvme_slots, 8u);  // MaxStorage of the composition capabilities
  ASSERT_NE(find_host(*inv, "ComposedSystem"), nullptr);
  EXPECT_EQ(inv->attached.at("DriveBlock4"), "ComposedSystem");
  EXPECT_FALSE(inv->attached.contains("gpu-z1-00"));
}

TEST(RedfishFabric, AttachAndDetachThroughTheActions) {
  auto fake = serve();
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"gpu-z1-00", "gpu-z1-01"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_THAT(fake->system_blocks("node01"),
              ElementsAre("compute-node01", "gpu-z1-00", "gpu-z1-01"));
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->attached.at("gpu-z1-01"), "node01");

  // Again: nothing to do, nothing sent.
  const uint64_t posts = fake->requests("POST");
  op = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_EQ(fake->requests("POST"), posts);

  auto conflict = fabric->attach("node02", {"gpu-z1-00"});
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.error().code, ErrorCode::kConflict);
  EXPECT_THAT(conflict.error().message, HasSubstr("node01"));

  op = fabric->detach("node01", {"gpu-z1-00", "gpu-z1-01", "gpu-z1-02"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_THAT(fake->system_blocks("node01"), ElementsAre("compute-node01"));
}

// A composerd that lost its leadership while a change was under way (stopped after the change
// began): the driver asks again as each changing request leaves, and sends none; reads go on.
TEST(RedfishFabric, SendsNoChangeOnceItMayNoLonger) {
  auto fake = serve();
  RedfishOptions o = options(*fake);
  std::atomic<bool> may{true};
  o.epoch = 3;
  o.may_change = [&may] { return may.load(); };
  auto fabric = connect(o);
  ASSERT_TRUE(fabric);
  ASSERT_TRUE(fabric->attach("node01", {"gpu-z1-00"}).ok());
  ASSERT_EQ(fake->changes().size(), 1u);
  EXPECT_EQ(fake->changes().front().epoch, 3);

  may = false;
  auto op = fabric->attach("node01", {"gpu-z1-01"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(op.error().message, HasSubstr("may no longer change the fabric"));
  op = fabric->detach("node01", {"gpu-z1-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(fake->changes().size(), 1u);
  EXPECT_THAT(fake->system_blocks("node01"), ElementsAre("compute-node01", "gpu-z1-00"));
  EXPECT_TRUE(fabric->inventory().ok());
}

TEST(RedfishFabric, UnknownHostOrDeviceIsNotFound) {
  auto fake = serve();
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node09", {"gpu-z1-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(op.error().message, HasSubstr("node09"));
  op = fabric->attach("node01", {"gpu-z1-00", "gpu-z9-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(op.error().message, HasSubstr("gpu-z9-00"));
  EXPECT_THAT(fake->system_blocks("node01"), ElementsAre("compute-node01"));
}

TEST(RedfishFabric, PatchesLinksWithIfMatchWhenNoActionIsAdvertised) {
  FakeRedfishOptions fo = small();
  fo.patch_only = true;  // strict mode refuses a PATCH without If-Match
  auto fake = serve(fo);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node02", {"gpu-z2-00", "nvme-z2-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_THAT(fake->system_blocks("node02"),
              ElementsAre("compute-node02", "gpu-z2-00", "nvme-z2-00"));
  EXPECT_EQ(fake->requests("PATCH"), 1u);
  op = fabric->detach("node02", {"gpu-z2-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_THAT(fake->system_blocks("node02"), ElementsAre("compute-node02", "nvme-z2-00"));
}

TEST(RedfishFabric, FollowsTaskMonitorsUntilDone) {
  FakeRedfishOptions fo = small();
  fo.task_ms = 150;
  auto fake = serve(fo);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"mem-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_THAT(fake->system_blocks("node01"), Contains("mem-z1-00"));
}

TEST(RedfishFabric, AnswersRunningWhenTheTaskOutlastsTheWaitAndPollsItLater) {
  FakeRedfishOptions fo = small();
  fo.task_ms = 400;
  auto fake = serve(fo);
  RedfishOptions o = options(*fake);
  o.task_wait_ms = 0;
  auto fabric = connect(o);
  ASSERT_TRUE(fabric);
  auto op = fabric->attach("node01", {"gpu-z1-03"});
  ASSERT_TRUE(op.ok()) << op;
  ASSERT_EQ(op->state, OperationState::kRunning);
  EXPECT_THAT(op->id, HasSubstr("TaskMonitors"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  Expected<Operation> st = *op;
  while (st.ok() && st->state == OperationState::kRunning &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    st = fabric->operation_status(op->id);
  }
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(st->state, OperationState::kDone);
  EXPECT_THAT(fake->system_blocks("node01"), Contains("gpu-z1-03"));
  auto unknown = fabric->operation_status("nonsense");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
}

TEST(RedfishFabric, AFailedTaskHalfWayUndoesTheBlocksAlreadyAdded) {
  auto fake = serve();
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  FakeRedfishFault f;
  f.kind = FakeRedfishFault::Kind::kTaskFails;
  f.path = "AddResourceBlock";
  f.message = "PCIe link training failed";
  auto op1 = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_TRUE(op1.ok()) << op1;
  // The second block's task fails after the first block went in.
  f.path = "node01/Actions/ComputerSystem.AddResourceBlock";
  f.skip = 1;
  fake->inject(f);
  auto op = fabric->attach("node01", {"gpu-z1-01", "gpu-z1-02"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kFailed);
  EXPECT_THAT(op->error, HasSubstr("PCIe link training failed"));
  // The first call's block stays; neither block of the failed call does.
  EXPECT_THAT(fake->system_blocks("node01"), ElementsAre("compute-node01", "gpu-z1-00"));
}

TEST(RedfishFabric, ARedfishErrorMessageReachesTheError) {
  auto fake = serve();
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  FakeRedfishFault f;
  f.method = "POST";
  f.path = "AddResourceBlock";
  f.status = 500;
  f.message = "the fabric manager is busy reprogramming switch 3";
  fake->inject(f);
  const uint64_t posts = fake->requests("POST");
  auto op = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kFabric);
  EXPECT_THAT(op.error().message, HasSubstr("busy reprogramming switch 3"));
  EXPECT_THAT(op.error().message, Not(HasSubstr("composer-test-pw")));
  EXPECT_EQ(fake->requests("POST"), posts + 1);  // an action is never retried
}

TEST(RedfishFabric, RetriesGetsButNotActionsAfterABrokenConnection) {
  auto fake = serve();
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  fake->inject({.kind = FakeRedfishFault::Kind::kReset,
                .method = "GET",
                .path = "ResourceBlocks",
                .status = 0,
                .delay_ms = 0,
                .message = "",
                .count = 1});
  fake->inject({.kind = FakeRedfishFault::Kind::kStatus,
                .method = "GET",
                .path = "Systems",
                .status = 503,
                .delay_ms = 0,
                .message = "warming up",
                .count = 1});
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;

  fake->inject({.kind = FakeRedfishFault::Kind::kReset,
                .method = "POST",
                .path = "AddResourceBlock",
                .status = 0,
                .delay_ms = 0,
                .message = "",
                .count = 1});
  const uint64_t posts = fake->requests("POST");
  auto op = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(fake->requests("POST"), posts + 1);
}

TEST(RedfishFabric, EveryCallIsBoundedByTheRequestTimeout) {
  auto fake = serve();
  RedfishOptions o = options(*fake);
  o.request_timeout_ms = 300;
  o.get_retries = 0;
  auto fabric = connect(o);
  ASSERT_TRUE(fabric);
  fake->inject({.kind = FakeRedfishFault::Kind::kDelay,
                .method = "GET",
                .path = "ResourceBlocks",
                .status = 0,
                .delay_ms = 2000,
                .message = "",
                .count = 1});
  const auto start = std::chrono::steady_clock::now();
  auto inv = fabric->inventory();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.error().code, ErrorCode::kTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

TEST(RedfishFabric, OpensOneSessionAndClosesItOnShutdown) {
  auto fake = serve();
  {
    auto fabric = connect(options(*fake));
    ASSERT_TRUE(fabric);
    EXPECT_EQ(fake->open_sessions(), 1u);
    ASSERT_TRUE(fabric->inventory().ok());
  }
  EXPECT_EQ(fake->open_sessions(), 0u);
}

TEST(RedfishFabric, LogsInAgainWhenTheSessionExpired) {
  auto fake = serve();
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  fake->expire_sessions();
  ASSERT_EQ(fake->open_sessions(), 0u);
  auto op = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(fake->open_sessions(), 1u);
  EXPECT_THAT(fake->system_blocks("node01"), Contains("gpu-z1-00"));
}

TEST(RedfishFabric, FindsCompositionCapabilitiesOnTheSystemsCollectionOrOnEachZone) {
  for (bool on_zones : {false, true}) {
    FakeRedfishOptions fo = small();
    fo.capabilities_on_zones = on_zones;
    auto fake = serve(fo);
    RedfishOptions o = options(*fake);
    o.default_slots = 4;
    auto fabric = connect(o);
    ASSERT_TRUE(fabric);
    auto inv = fabric->inventory();
    ASSERT_TRUE(inv.ok()) << inv;
    // ComposedSystem's own compute block sits in zone 1, and so it reaches zone 1 only (and
    // the blocks in zones 1 and 2), whatever zones the capabilities compose in.
    const Host* h = find_host(*inv, "ComposedSystem");
    ASSERT_NE(h, nullptr);
    EXPECT_THAT(h->zones, ElementsAre("1", "1+2")) << "capabilities on zones: " << on_zones;
    EXPECT_EQ(h->nvme_slots, 8u);  // MaxStorage of the capabilities object
    EXPECT_EQ(h->gpu_slots, 4u);   // no MaxProcessor limit: the default
  }
}

TEST(RedfishFabric, BasicAuthOpensNoSession) {
  auto fake = serve();
  RedfishOptions o = options(*fake);
  o.auth = RedfishOptions::Auth::kBasic;
  auto fabric = connect(o);
  ASSERT_TRUE(fabric);
  ASSERT_TRUE(fabric->attach("node02", {"gpu-z2-01"}).ok());
  EXPECT_EQ(fake->open_sessions(), 0u);
  EXPECT_THAT(fake->system_blocks("node02"), Contains("gpu-z2-01"));
}

TEST(RedfishFabric, AWrongPasswordIsRefusedWithoutQuotingIt) {
  auto fake = serve();
  for (auto auth : {RedfishOptions::Auth::kSession, RedfishOptions::Auth::kBasic}) {
    RedfishOptions o = options(*fake);
    o.auth = auth;
    o.password = "wrong-pass-123";
    auto fabric = RedfishFabric::create(o);
    ASSERT_FALSE(fabric.ok());
    EXPECT_EQ(fabric.error().code, ErrorCode::kUnauthenticated);
    EXPECT_THAT(fabric.error().message, Not(HasSubstr("wrong-pass-123")));
  }
}

TEST(RedfishFabric, NamesHostsByMapOrHostName) {
  auto fake = serve();
  RedfishOptions o = options(*fake);
  o.host_map = {{"node01", "cn-17"}};
  auto fabric = connect(o);
  ASSERT_TRUE(fabric);
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->hosts.size(), 1u);
  EXPECT_EQ(inv->hosts[0].node, "cn-17");
  EXPECT_EQ(inv->hosts[0].fabric_id, "node01");

  o.host_map.clear();
  o.use_host_name = true;
  fabric = connect(o);
  ASSERT_TRUE(fabric);
  inv = fabric->inventory();
  ASSERT_TRUE(inv.ok());
  const Host* h = find_host(*inv, "node02");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->node, "node02");
  // The mockup's two composed systems share HostName composed-system: neither is served, and
  // a sentence names both; what is composed into them is held, not attached.
  EXPECT_EQ(find_host(*inv, "ComposedSystem"), nullptr);
  EXPECT_EQ(find_host(*inv, "ComposedSystem2"), nullptr);
  bool named = false;
  for (const std::string& why : inv->skipped) {
    named = named || (why.find("'ComposedSystem' and 'ComposedSystem2'") != std::string::npos &&
                      why.find("composed-system") != std::string::npos);
  }
  EXPECT_TRUE(named) << ::testing::PrintToString(inv->skipped);
  EXPECT_FALSE(inv->attached.contains("DriveBlock4"));
  EXPECT_THAT(inv->held.at("DriveBlock4"), HasSubstr("ComposedSystem"));
}

TEST(RedfishFabric, ReportsHealthChanges) {
  auto fake = serve();
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  ASSERT_TRUE(fake->set_health("gpu-z1-02", "Critical").ok());
  ASSERT_TRUE(fake->set_health("mem-z2-00", "Warning").ok());
  auto h = fabric->health();
  ASSERT_TRUE(h.ok()) << h;
  std::map<std::string, Health> by_id(h->begin(), h->end());
  EXPECT_EQ(by_id.at("gpu-z1-02"), Health::kCritical);
  EXPECT_EQ(by_id.at("mem-z2-00"), Health::kWarning);
  EXPECT_EQ(by_id.at("gpu-z1-03"), Health::kOk);
}

TEST(RedfishFabric, WorksAgainstASloppyService) {
  FakeRedfishOptions fo = small();
  fo.sloppy = true;
  fo.task_ms = 50;
  auto fake = serve(fo);
  auto fabric = connect(options(*fake));
  ASSERT_TRUE(fabric);
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  EXPECT_NE(find_device(*inv, "gpu-z1-00"), nullptr);
  EXPECT_NE(find_host(*inv, "node01"), nullptr);
  auto op = fabric->attach("node01", {"gpu-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  op = fabric->detach("node01", {"gpu-z1-00"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_THAT(fake->system_blocks("node01"), ElementsAre("compute-node01"));
}

}  // namespace
}  // namespace composer::drivers
