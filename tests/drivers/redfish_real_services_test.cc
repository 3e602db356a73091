// The redfish driver against the shapes of services that were not written here: the mockups
// served whole (pre-composed, shared, reserved, multi-zone and SAS blocks), paginated
// collections, a redirecting root, a broken capabilities link, a service whose actions answer
// success and change nothing, older error bodies and a session login that is not 201.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <json/json.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "composer/drivers/redfish_fabric.h"
#include "composer/test_support/inventory.h"
#include "composer/test_support/temp_dir.h"
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
using ::testing::Pair;

FakeRedfishOptions small(FakeRedfishOptions o = {}) {
  o.gpus_per_zone = 3;
  o.memory_per_zone = 1;
  o.drives_per_zone = 1;
  o.hosts = 2;
  return o;
}

// The fake started with `fo`, a driver connected to it, and the driver's first inventory.
struct Served {
  std::unique_ptr<FakeRedfish> fake;
  std::unique_ptr<RedfishFabric> fabric;
  FabricInventory inv;
  bool ok = false;
};

Served serve(const FakeRedfishOptions& fo, void (*tweak)(RedfishOptions*) = nullptr) {
  Served s;
  s.fake = harness::start_fake(fo);
  if (!s.fake) return s;
  RedfishOptions o = harness::driver_options(*s.fake, 10);
  if (tweak != nullptr) tweak(&o);
  s.fabric = harness::connect_driver(o);
  if (!s.fabric) return s;
  auto inv = s.fabric->inventory();
  EXPECT_TRUE(inv.ok()) << inv;
  if (!inv.ok()) return s;
  s.inv = std::move(inv).value();
  s.ok = true;
  return s;
}

using test_support::find_device;
using test_support::find_host;

bool skipped(const FabricInventory& inv, const std::string& part, const std::string& why) {
  return std::any_of(inv.skipped.begin(), inv.skipped.end(), [&](const std::string& s) {
    return s.find(part) != std::string::npos && s.find(why) != std::string::npos;
  });
}

// A block of no type, and one whose type starts with a vowel, are told with the right article:
// "an untyped block", "an IO block".
TEST(RedfishRealServices, AnUnpooledBlockIsToldInPlainWords) {
  test_support::TempDir dir("redfish-mockups");
  std::filesystem::copy(COMPOSER_REDFISH_MOCKUPS_DIR, dir.path(),
                        std::filesystem::copy_options::recursive);
  const auto block = dir.path() / "public-composability/CompositionService/ResourceBlocks";
  auto retype = [&](const std::string& id, const Json::Value& types) {
    const auto file = block / id / "index.json";
    Json::Value b;
    {
      std::ifstream in(file);
      ASSERT_TRUE(Json::parseFromStream(Json::CharReaderBuilder(), in, &b, nullptr)) << file;
    }
    b["ResourceBlockType"] = types;
    std::ofstream(file) << b.toStyledString();
  };
  retype("NetworkBlock8", Json::Value(Json::arrayValue));
  Json::Value io(Json::arrayValue);
  io.append("IO");
  retype("DriveBlock7", io);
  FakeRedfishOptions fo = small();
  fo.mockups = dir.path().string();
  Served s = serve(fo);
  ASSERT_TRUE(s.ok);
  EXPECT_TRUE(skipped(s.inv, "NetworkBlock8",
                      "an untyped block; only GPU, memory and NVMe drive blocks are pooled"))
      << ::testing::PrintToString(s.inv.skipped);
  EXPECT_TRUE(skipped(s.inv, "DriveBlock7", "an IO block; only GPU"))
      << ::testing::PrintToString(s.inv.skipped);
}

TEST(RedfishRealServices, TheMockupsWholeReportWhatIsAlreadyHeld) {
  FakeRedfishOptions fo = small();
  fo.reserved = {"DriveBlock6"};
  Served s = serve(fo);
  ASSERT_TRUE(s.ok);
  const FabricInventory* inv = &s.inv;
  // Pre-composed: DriveBlock4 in ComposedSystem only, DriveBlock10 in the system composed
  // from SystemBlock12. Both are attached where the fabric shows them, whoever did it.
  EXPECT_THAT(inv->attached, Contains(Pair("DriveBlock4", "ComposedSystem")));
  EXPECT_THAT(inv->attached, Contains(Pair("DriveBlock10", "SystemBlock12")));
  // Shared by two systems: held by both, attached to neither.
  EXPECT_FALSE(inv->attached.contains("DriveBlock3"));
  EXPECT_THAT(inv->held.at("DriveBlock3"), HasSubstr("ComposedSystem, ComposedSystem2"));
  // Reserved: held.
  EXPECT_THAT(inv->held.at("DriveBlock6"), HasSubstr("Reserved"));
  EXPECT_FALSE(inv->attached.contains("DriveBlock6"));
  // The SAS block and the network block: not pooled, each with its reason.
  EXPECT_EQ(find_device(*inv, "DriveBlock7"), nullptr);
  EXPECT_TRUE(skipped(*inv, "DriveBlock7", "only NVMe drives are pooled"))
      << ::testing::PrintToString(inv->skipped);
  EXPECT_TRUE(skipped(*inv, "NetworkBlock8", "only GPU, memory and NVMe drive blocks"));
  // A block in zones 1 and 2 is in both: its zone is their union, which hosts of either reach.
  const Device* d5 = find_device(*inv, "DriveBlock5");
  ASSERT_NE(d5, nullptr);
  EXPECT_EQ(d5->zone, "1+2");
  EXPECT_EQ(d5->type, DeviceType::kNvme);
  const Host* cs = find_host(*inv, "ComposedSystem");
  ASSERT_NE(cs, nullptr);
  EXPECT_THAT(cs->zones, ElementsAre("1", "1+2"));  // its compute block is in zone 1 only
  const Host* b12 = find_host(*inv, "SystemBlock12");
  ASSERT_NE(b12, nullptr);
  EXPECT_THAT(b12->zones, ElementsAre("3"));  // zone 3 only: no union zone of 1 and 2
}

TEST(RedfishRealServices, DrivesOtherThanNvmeAreSkippedWithTheirProtocol) {
  Served s = serve(small());
  ASSERT_TRUE(s.ok);
  const FabricInventory* inv = &s.inv;
  for (const Device& d : inv->devices) {
    if (d.type == DeviceType::kNvme) {
      EXPECT_NE(d.id, "DriveBlock7");
      EXPECT_GT(d.capacity_bytes, 0u) << d.id;
    }
  }
}

TEST(RedfishRealServices, FollowsNextLinkOnEveryCollection) {
  FakeRedfishOptions fo = small();
  fo.page_size = 2;
  Served s = serve(fo);
  ASSERT_TRUE(s.ok);
  auto& fake = s.fake;
  auto& fabric = s.fabric;
  const FabricInventory* inv = &s.inv;
  for (const std::string& g : fake->generated("gpu")) EXPECT_NE(find_device(*inv, g), nullptr) << g;
  EXPECT_NE(find_device(*inv, "DriveBlock10"), nullptr);  // far down the first collection
  EXPECT_NE(find_host(*inv, "node02"), nullptr);          // on a later page of Systems
  const std::vector<std::string> log = fake->request_log();
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) {
    return l.find("ResourceBlocks?$skip=") != std::string::npos;
  }));
  ASSERT_TRUE(fabric->attach("node02", {"gpu-z2-02"}).ok());
  EXPECT_THAT(fake->system_blocks("node02"), Contains("gpu-z2-02"));
}

TEST(RedfishRealServices, FollowsARedirectOfTheRootWithinTheServiceOnly) {
  FakeRedfishOptions fo = small();
  fo.root_redirect = "/";
  Served s = serve(fo);
  ASSERT_TRUE(s.ok);
  const FabricInventory* inv = &s.inv;
  EXPECT_NE(find_host(*inv, "node01"), nullptr);

  fo.root_redirect = "http://127.0.0.2:9";  // another origin
  auto elsewhere = harness::start_fake(fo);
  ASSERT_TRUE(elsewhere);
  auto refused = RedfishFabric::create(harness::driver_options(*elsewhere));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("redirected to http://127.0.0.2:9"));
  EXPECT_THAT(refused.error().message, HasSubstr("within the service's own origin"));
}

TEST(RedfishRealServices, ABrokenCapabilitiesLinkIsNoStartUpFailure) {
  FakeRedfishOptions fo = small();
  fo.broken_capabilities = true;
  Served s = serve(fo, [](RedfishOptions* o) { o->default_slots = 3; });
  ASSERT_TRUE(s.ok);
  const FabricInventory* inv = &s.inv;
  const Host* h = find_host(*inv, "node01");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->nvme_slots, 3u);  // the default, as MaxStorage could not be read
  EXPECT_EQ(h->gpu_slots, 3u);
}

TEST(RedfishRealServices, ASuccessThatChangedNothingFailsTheCallAtOnce) {
  for (bool patch : {false, true}) {
    FakeRedfishOptions fo = small();
    fo.noop_actions = true;
    fo.patch_only = patch;
    Served s = serve(fo);
    ASSERT_TRUE(s.ok);
    auto& fake = s.fake;
    auto& fabric = s.fabric;
    auto op = fabric->attach("node01", {"gpu-z1-00"});
    ASSERT_FALSE(op.ok()) << "patch " << patch;
    EXPECT_EQ(op.error().code, ErrorCode::kFabric);
    EXPECT_THAT(op.error().message, HasSubstr("answered success"));
    EXPECT_THAT(op.error().message, HasSubstr("does not list gpu-z1-00"));
    EXPECT_THAT(fake->system_blocks("node01"), ElementsAre("compute-node01"));
  }
}

TEST(RedfishRealServices, DetachingABlockOfAnotherSystemSendsNoWrite) {
  Served s = serve(small());
  ASSERT_TRUE(s.ok);
  auto& fake = s.fake;
  auto& fabric = s.fabric;
  ASSERT_TRUE(fabric->attach("node01", {"gpu-z1-00"}).ok());
  const uint64_t writes = fake->writes();
  // gpu-z1-00 sits in node01, DriveBlock4 in the mockup's ComposedSystem: node02 holds neither.
  auto op = fabric->detach("node02", {"gpu-z1-00", "DriveBlock4"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_EQ(fake->writes(), writes);
  EXPECT_THAT(fake->system_blocks("node01"), Contains("gpu-z1-00"));
  EXPECT_THAT(fake->systems_with_block("DriveBlock4"), ElementsAre("ComposedSystem"));
  // The shared block: not node01's either.
  op = fabric->detach("node01", {"DriveBlock3"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(fake->writes(), writes);
  EXPECT_EQ(fake->systems_with_block("DriveBlock3").size(), 2u);
}

TEST(RedfishRealServices, ErrorBodiesOfBothShapesReachTheErrorText) {
  for (bool old_style : {false, true}) {
    FakeRedfishOptions fo = small();
    fo.old_style_errors = old_style;
    Served s = serve(fo);
    ASSERT_TRUE(s.ok);
    auto& fake = s.fake;
    auto& fabric = s.fabric;
    FakeRedfishFault f;
    f.method = "POST";
    f.path = "AddResourceBlock";
    f.status = 400;
    f.message = "slot 4 of the enclosure is fenced";
    fake->inject(f);
    auto op = fabric->attach("node01", {"gpu-z1-01"});
    ASSERT_FALSE(op.ok());
    EXPECT_THAT(op.error().message, HasSubstr("slot 4 of the enclosure is fenced"))
        << "old style " << old_style;
    // A refusal of the service itself (a block already composed elsewhere) as well.
    ASSERT_TRUE(fabric->attach("node02", {"gpu-z1-02"}).ok());
  }
}

TEST(RedfishRealServices, ALoginOtherThan201NamesTheStatusAndSuggestsBasic) {
  for (int status : {200, 405}) {
    FakeRedfishOptions fo = small();
    fo.login_status = status;
    auto fake = harness::start_fake(fo);
    ASSERT_TRUE(fake);
    auto refused = RedfishFabric::create(harness::driver_options(*fake));
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(refused.error().message, HasSubstr("answered " + std::to_string(status)));
    EXPECT_THAT(refused.error().message, HasSubstr("FabricAuth=basic"));
    RedfishOptions basic = harness::driver_options(*fake);
    basic.auth = RedfishOptions::Auth::kBasic;
    EXPECT_TRUE(harness::connect_driver(basic));
  }
}

TEST(RedfishRealServices, SharedHostNamesAreRefusedNotMerged) {
  Served s = serve(small(), [](RedfishOptions* o) { o->use_host_name = true; });
  ASSERT_TRUE(s.ok);
  auto& fabric = s.fabric;
  const FabricInventory* inv = &s.inv;
  std::vector<std::string> nodes;
  for (const Host& h : inv->hosts) nodes.push_back(h.node);
  EXPECT_THAT(nodes, ::testing::Not(Contains("composed-system")));
  EXPECT_TRUE(
      skipped(*inv, "'ComposedSystem' and 'ComposedSystem2'", "HostName 'composed-system'"));
  auto op = fabric->attach("ComposedSystem", {"gpu-z1-00"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kNotFound);
}

TEST(RedfishRealServices, CxlConnectionsLinkedOnlyFromEndpointsCount) {
  FakeRedfishOptions fo = small();
  fo.cxl = true;
  fo.cxl_chunks = 2;
  Served s = serve(fo);
  ASSERT_TRUE(s.ok);
  auto& fake = s.fake;
  auto& fabric = s.fabric;
  const FabricInventory* inv = &s.inv;
  // Connection 14 (I4 to T4) is not in the Connections collection, only in the endpoints'
  // Links.Connections: T4's memory is connected all the same, to I4, an initiator the
  // Endpoints collection does not list either, so held by it rather than free.
  EXPECT_FALSE(inv->attached.contains("cxl-T4"));
  ASSERT_TRUE(inv->held.contains("cxl-T4")) << ::testing::PrintToString(inv->held);
  EXPECT_THAT(inv->held.at("cxl-T4"), HasSubstr("I4"));
  const uint64_t writes = fake->writes();
  auto op = fabric->attach("node01", {"cxl-T4"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kConflict);
  ASSERT_TRUE(fabric->detach("node01", {"cxl-T4"}).ok());
  EXPECT_EQ(fake->writes(), writes);
  EXPECT_THAT(fake->memory_connections(), Contains(Pair("I4", "T4")));
}

TEST(RedfishRealServices, ACxlConnectionThatHoldsMoreIsNeverTakenOverNorDeleted) {
  FakeRedfishOptions fo = small();
  fo.cxl = true;
  fo.cxl_chunks = 3;
  auto fake = harness::start_fake(fo);
  ASSERT_TRUE(fake);
  // Someone connected node01 to two chunks in one connection, and both hosts to a third.
  ASSERT_TRUE(fake->connect_behind_back({"I-node01"}, {"TP1", "TP2"}).ok());
  ASSERT_TRUE(fake->connect_behind_back({"I-node01", "I-node02"}, {"TP3"}).ok());
  auto fabric = harness::connect_driver(harness::driver_options(*fake, 10));
  ASSERT_TRUE(fabric);
  auto inv = fabric->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  for (const char* id : {"cxl-TP1", "cxl-TP2", "cxl-TP3"}) {
    EXPECT_FALSE(inv->attached.contains(id)) << id;
    ASSERT_TRUE(inv->held.contains(id)) << id;
    EXPECT_THAT(inv->held.at(id), HasSubstr("node01")) << id;
  }
  const uint64_t writes = fake->writes();
  auto op = fabric->attach("node01", {"cxl-TP1"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kConflict);
  EXPECT_THAT(op.error().message, HasSubstr("holds more than this host and this chunk"));
  ASSERT_TRUE(fabric->detach("node01", {"cxl-TP1", "cxl-TP3"}).ok());
  EXPECT_EQ(fake->writes(), writes);
  EXPECT_EQ(fake->memory_connections().size(), 2u + 3u);  // the mockup's three and these two
}

}  // namespace
}  // namespace composer::drivers
