#include "composer/drivers/sim_fabric.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/units.h"
#include "composer/test_support/temp_dir.h"

namespace composer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Host host(std::string node, std::string fabric_id = "") {
  Host h;
  h.node = std::move(node);
  h.fabric_id = std::move(fabric_id);
  h.zones = {"z1"};
  h.gpu_slots = 8;
  h.mem_slots = 8;
  h.nvme_slots = 8;
  return h;
}

SimConfig::Group group(std::string name, DeviceType type, uint32_t count, uint64_t size = 0,
                       std::string zone = "z1") {
  SimConfig::Group g;
  g.name = std::move(name);
  g.type = type;
  g.model = type == DeviceType::kGpu ? "A100-80G" : type == DeviceType::kMem ? "CXL-DDR5" : "P5620";
  g.zone = std::move(zone);
  g.count = count;
  g.size_bytes = size;
  return g;
}

SimConfig small_config(int latency_ms = 0) {
  SimConfig c;
  c.hosts = {host("n1", "fab-n1"), host("n2", "fab-n2")};
  c.groups = {group("gpu-a", DeviceType::kGpu, 4), group("mem", DeviceType::kMem, 2, 64 * kGiB),
              group("nvme", DeviceType::kNvme, 2, 4 * kTiB, "z2")};
  c.latency_ms = latency_ms;
  return c;
}

std::unique_ptr<SimFabric> make(SimConfig c, const Clock& clock = SystemClock::instance()) {
  auto f = SimFabric::create(std::move(c), clock);
  EXPECT_TRUE(f.ok()) << f;
  return f.ok() ? std::move(f).value() : nullptr;
}

std::map<std::string, std::string> attached(SimFabric& f) {
  auto inv = f.inventory();
  EXPECT_TRUE(inv.ok()) << inv;
  return inv.ok() ? inv->attached : std::map<std::string, std::string>{};
}

TEST(SimFabric, InventoryFollowsTheConfiguration) {
  auto f = make(small_config());
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->driver(), "sim");
  auto inv = f->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  ASSERT_EQ(inv->hosts.size(), 2u);
  EXPECT_EQ(inv->hosts[0].fabric_id, "fab-n1");
  ASSERT_EQ(inv->devices.size(), 8u);
  std::vector<std::string> ids;
  for (const Device& d : inv->devices) ids.push_back(d.id);
  EXPECT_THAT(ids, ElementsAre("gpu-a-0", "gpu-a-1", "gpu-a-2", "gpu-a-3", "mem-0", "mem-1",
                               "nvme-0", "nvme-1"));
  const Device& m = inv->devices[4];
  EXPECT_EQ(m.type, DeviceType::kMem);
  EXPECT_EQ(m.model, "CXL-DDR5");
  EXPECT_EQ(m.capacity_bytes, 64 * kGiB);
  EXPECT_EQ(m.zone, "z1");
  EXPECT_EQ(inv->devices[6].zone, "z2");
  EXPECT_EQ(inv->devices[6].capacity_bytes, 4 * kTiB);
  EXPECT_EQ(inv->devices[0].capacity_bytes, 0u);
  for (const Device& d : inv->devices) {
    EXPECT_EQ(d.health, Health::kOk);
    EXPECT_FALSE(d.composition_id.has_value());
  }
  EXPECT_TRUE(inv->attached.empty());
}

TEST(SimFabric, DevicesCarryTheirGroupsFailureDomains) {
  SimConfig c = small_config();
  c.groups[0].domains = {{"enclosure", "enc1"}, {"power", "pdu-a"}};
  auto f = make(c);
  ASSERT_NE(f, nullptr);
  auto inv = f->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  for (const Device& d : inv->devices) {
    if (d.id.starts_with("gpu-a-")) {
      EXPECT_EQ(d.domains, c.groups[0].domains) << d.id;
      ASSERT_NE(d.domain("power"), nullptr);
      EXPECT_EQ(d.domain("power")->name, "pdu-a");
      EXPECT_TRUE(d.in(FailureDomain{"enclosure", "enc1"}));
    } else {
      EXPECT_TRUE(d.domains.empty()) << d.id;
      EXPECT_EQ(d.domain("power"), nullptr);
    }
  }
}

TEST(SimFabric, HostWithoutFabricIdUsesTheNodeName) {
  SimConfig c = small_config();
  c.hosts = {host("n7")};
  auto f = make(c);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->inventory()->hosts[0].fabric_id, "n7");
  EXPECT_TRUE(f->attach("n7", {"gpu-a-0"}).ok());
}

TEST(SimFabric, IdsArePaddedToTheWidthOfTheLastIndex) {
  SimConfig c;
  c.groups = {group("gpu-a", DeviceType::kGpu, 16), group("g", DeviceType::kGpu, 101)};
  auto f = make(c);
  ASSERT_NE(f, nullptr);
  auto inv = f->inventory();
  EXPECT_EQ(inv->devices[0].id, "gpu-a-00");
  EXPECT_EQ(inv->devices[15].id, "gpu-a-15");
  EXPECT_EQ(inv->devices[16].id, "g-000");
  EXPECT_EQ(inv->devices[116].id, "g-100");
}

TEST(SimFabric, AddressesArePciForGpusAndNvmeAndNumaForMemory) {
  auto f = make(small_config());
  auto inv = f->inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->devices[0].address, "0000:41:00.0");
  EXPECT_EQ(inv->devices[3].address, "0000:44:00.0");
  EXPECT_EQ(inv->devices[4].address, "numa:2");
  EXPECT_EQ(inv->devices[5].address, "numa:3");
  EXPECT_EQ(inv->devices[6].address, "0000:45:00.0");
  EXPECT_EQ(inv->devices[7].address, "0000:46:00.0");
}

TEST(SimFabric, IdentitiesAreSyntheticDeterministicAndDistinct) {
  auto a = SimFabric::create(small_config());
  auto b = SimFabric::create(small_config());
  ASSERT_TRUE(a.ok() && b.ok());
  auto ia = (*a)->inventory();
  auto ib = (*b)->inventory();
  ASSERT_TRUE(ia.ok() && ib.ok());
  std::set<std::string> serials, uuids;
  for (size_t i = 0; i < ia->devices.size(); ++i) {
    const Device& d = ia->devices[i];
    EXPECT_EQ(d.identity, ib->devices[i].identity) << d.id;  // the same on every run
    EXPECT_EQ(d.identity.serial.rfind("SIM", 0), 0u) << d.id;
    EXPECT_TRUE(serials.insert(d.identity.serial).second) << d.id;
    switch (d.type) {
      case DeviceType::kGpu:
        EXPECT_EQ(d.identity.pci_vendor, "0x10de");
        EXPECT_EQ(d.identity.pci_device, "0x20b5");
        EXPECT_EQ(d.identity.uuid.size(), 40u) << d.identity.uuid;
        EXPECT_EQ(d.identity.uuid.rfind("GPU-", 0), 0u);
        EXPECT_TRUE(uuids.insert(d.identity.uuid).second) << d.id;
        break;
      case DeviceType::kNvme:
        EXPECT_EQ(d.identity.pci_vendor, "0x144d");
        EXPECT_EQ(d.identity.uuid, "");
        break;
      case DeviceType::kMem:
        EXPECT_EQ(d.identity.pci_vendor, "");
        break;
    }
  }
  EXPECT_FALSE(uuids.empty());
}

TEST(SimFabric, PciAddressesStayUniqueAcrossBusWrap) {
  SimConfig c;
  c.groups = {group("g", DeviceType::kGpu, 60000), group("d", DeviceType::kNvme, 40000, kTiB)};
  auto f = make(c);
  ASSERT_NE(f, nullptr);
  auto inv = f->inventory();
  ASSERT_EQ(inv->devices.size(), 100000u);
  std::set<std::string> addresses;
  for (const Device& d : inv->devices) {
    EXPECT_TRUE(addresses.insert(d.address).second) << d.address;
  }
  // 0x41 + 190 = 0xff is the last bus of domain 0; the next one carries into the domain.
  EXPECT_EQ(inv->devices[190].address, "0000:ff:00.0");
  EXPECT_EQ(inv->devices[191].address, "0001:00:00.0");
}

TEST(SimFabric, AttachAndDetachAreIdempotent) {
  auto f = make(small_config());
  auto op = f->attach("fab-n1", {"gpu-a-0", "mem-1"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_FALSE(op->id.empty());
  EXPECT_EQ(attached(*f),
            (std::map<std::string, std::string>{{"gpu-a-0", "fab-n1"}, {"mem-1", "fab-n1"}}));

  auto again = f->attach("fab-n1", {"gpu-a-0"});
  ASSERT_TRUE(again.ok()) << again;
  EXPECT_EQ(again->state, OperationState::kDone);
  EXPECT_NE(again->id, op->id);

  auto off = f->detach("fab-n1", {"gpu-a-0"});
  ASSERT_TRUE(off.ok()) << off;
  EXPECT_EQ(off->state, OperationState::kDone);
  auto off_again = f->detach("fab-n1", {"gpu-a-0", "gpu-a-3"});
  ASSERT_TRUE(off_again.ok()) << off_again;
  EXPECT_EQ(attached(*f), (std::map<std::string, std::string>{{"mem-1", "fab-n1"}}));

  auto status = f->operation_status(op->id);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->state, OperationState::kDone);
}

TEST(SimFabric, AttachToAnotherHostConflictsAndChangesNothing) {
  auto f = make(small_config());
  ASSERT_TRUE(f->attach("fab-n1", {"gpu-a-0"}).ok());
  auto clash = f->attach("fab-n2", {"gpu-a-1", "gpu-a-0"});
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().code, ErrorCode::kConflict);
  EXPECT_THAT(clash.error().message, HasSubstr("gpu-a-0 is attached to fab-n1"));
  // All or nothing: gpu-a-1 was not attached either.
  EXPECT_EQ(attached(*f), (std::map<std::string, std::string>{{"gpu-a-0", "fab-n1"}}));

  // Detaching it from a host it is not attached to is done already: it stays on fab-n1.
  auto wrong_detach = f->detach("fab-n2", {"gpu-a-0"});
  ASSERT_TRUE(wrong_detach.ok()) << wrong_detach;
  EXPECT_EQ(attached(*f), (std::map<std::string, std::string>{{"gpu-a-0", "fab-n1"}}));
}

TEST(SimFabric, UnknownHostDeviceOrOperationIsNotFound) {
  auto f = make(small_config());
  auto no_host = f->attach("fab-n9", {"gpu-a-0"});
  ASSERT_FALSE(no_host.ok());
  EXPECT_EQ(no_host.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(no_host.error().message, HasSubstr("fab-n9"));
  // Node names are not fabric ids.
  EXPECT_FALSE(f->attach("n1", {"gpu-a-0"}).ok());

  auto no_device = f->attach("fab-n1", {"gpu-a-0", "gpu-z-9"});
  ASSERT_FALSE(no_device.ok());
  EXPECT_EQ(no_device.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(no_device.error().message, HasSubstr("gpu-z-9"));
  EXPECT_TRUE(attached(*f).empty());

  EXPECT_EQ(f->detach("fab-n1", {"gpu-z-9"}).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(f->operation_status("sim-op-999").error().code, ErrorCode::kNotFound);
}

TEST(SimFabric, LatencyKeepsOperationsRunningUntilItHasPassed) {
  ManualClock clock(1000000);
  auto f = make(small_config(250), clock);
  auto op = f->attach("fab-n1", {"gpu-a-2"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kRunning);
  EXPECT_EQ(f->operation_status(op->id)->state, OperationState::kRunning);
  clock.advance_ms(249);
  EXPECT_EQ(f->operation_status(op->id)->state, OperationState::kRunning);
  clock.advance_ms(1);
  EXPECT_EQ(f->operation_status(op->id)->state, OperationState::kDone);

  auto off = f->detach("fab-n1", {"gpu-a-2"});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->state, OperationState::kRunning);
  clock.advance_ms(300);
  EXPECT_EQ(f->operation_status(off->id)->state, OperationState::kDone);
  EXPECT_TRUE(attached(*f).empty());
}

TEST(SimFabric, InjectedAttachFailureAttachesNothing) {
  auto f = make(small_config());
  f->fail_next_attaches(2, "switch port down");
  for (int i = 0; i < 2; ++i) {
    auto op = f->attach("fab-n1", {"gpu-a-0", "gpu-a-1"});
    ASSERT_TRUE(op.ok()) << op;
    EXPECT_EQ(op->state, OperationState::kFailed);
    EXPECT_EQ(op->error, "switch port down");
    EXPECT_EQ(f->operation_status(op->id)->state, OperationState::kFailed);
    EXPECT_TRUE(attached(*f).empty());
  }
  auto op = f->attach("fab-n1", {"gpu-a-0", "gpu-a-1"});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->state, OperationState::kDone);
  EXPECT_EQ(attached(*f).size(), 2u);
}

TEST(SimFabric, FailuresFromTheConfigurationFailTheFirstCalls) {
  SimConfig c = small_config();
  c.fail_attaches = 1;
  c.fail_detaches = 1;
  auto f = make(c);
  EXPECT_EQ(f->attach("fab-n1", {"gpu-a-0"})->state, OperationState::kFailed);
  EXPECT_TRUE(attached(*f).empty());
  EXPECT_EQ(f->attach("fab-n1", {"gpu-a-0"})->state, OperationState::kDone);
  EXPECT_EQ(f->detach("fab-n1", {"gpu-a-0"})->state, OperationState::kFailed);
  EXPECT_EQ(attached(*f).size(), 1u);
  EXPECT_EQ(f->detach("fab-n1", {"gpu-a-0"})->state, OperationState::kDone);
  EXPECT_TRUE(attached(*f).empty());
}

// The health file fails and heals devices from outside, read at each health check.
TEST(SimFabric, TheHealthFileSaysWhatTheFabricReports) {
  test_support::TempDir dir("composer-sim-health");
  SimConfig c = small_config();
  c.health_file = dir.file("health");
  auto f = make(c);
  auto health_of = [&](const std::string& id) {
    auto h = f->health();
    EXPECT_TRUE(h.ok()) << h;
    if (!h.ok()) return Health::kOk;
    for (const auto& [device, health] : *h) {
      if (device == id) return health;
    }
    ADD_FAILURE() << "no health for " << id;
    return Health::kOk;
  };
  EXPECT_EQ(health_of("gpu-a-1"), Health::kOk);  // no file yet: all healthy
  std::ofstream(c.health_file) << "# fan failure\ngpu-a-1 critical\n\n  mem-0   warning # hot\n";
  EXPECT_EQ(health_of("gpu-a-1"), Health::kCritical);
  EXPECT_EQ(health_of("mem-0"), Health::kWarning);
  EXPECT_EQ(health_of("gpu-a-0"), Health::kOk);
  // The inventory reports the same (the reconciler reads health from it).
  auto inv = f->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  for (const Device& d : inv->devices) {
    EXPECT_EQ(d.health, d.id == "gpu-a-1" ? Health::kCritical
                        : d.id == "mem-0" ? Health::kWarning
                                          : Health::kOk)
        << d.id;
  }
  std::ofstream(c.health_file) << "gpu-a-1 ok\n";
  EXPECT_EQ(health_of("gpu-a-1"), Health::kOk);
  EXPECT_EQ(health_of("mem-0"), Health::kOk);
  // What does not parse fails the check, naming the file and line, not its content.
  for (const char* bad :
       {"gpu-a-1 broken\n", "gpu-a-1\n", "gpu-a-1 ok extra\n", "ok\ngpu-a-9 critical\n"}) {
    std::ofstream(c.health_file) << bad;
    auto h = f->health();
    ASSERT_FALSE(h.ok()) << bad;
    EXPECT_FALSE(f->inventory().ok()) << bad;
    EXPECT_NE(h.error().message.find("SimHealthFile " + c.health_file + " line "),
              std::string::npos)
        << h.error().message;
  }
  std::ofstream(c.health_file) << "gpu-a-9 critical\n";
  EXPECT_NE(f->health().error().message.find("line 1: the fabric has no device named so"),
            std::string::npos);
}

// A fabric with a state file remembers what is attached across its owner's restarts, as a
// real fabric manager does.
TEST(SimFabric, StateFileKeepsAttachmentsAcrossRestarts) {
  test_support::TempDir dir("composer-sim");
  SimConfig c = small_config();
  c.state_file = dir.file("fabric.sim");
  {
    auto f = make(c);
    ASSERT_TRUE(f->attach("fab-n1", {"gpu-a-0", "gpu-a-1"}).ok());
    ASSERT_TRUE(f->attach("fab-n2", {"mem-0"}).ok());
    ASSERT_TRUE(f->detach("fab-n1", {"gpu-a-1"}).ok());
    ASSERT_TRUE(f->attach_behind_back("nvme-0", "fab-n2").ok());
    ASSERT_TRUE(f->lose_attachment("mem-0").ok());
  }
  struct stat st {};
  ASSERT_EQ(::stat(c.state_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = make(c);
  const std::map<std::string, std::string> want = {{"gpu-a-0", "fab-n1"}, {"nvme-0", "fab-n2"}};
  EXPECT_EQ(attached(*again), want);
  // A device or host the configuration no longer has is dropped.
  SimConfig fewer = c;
  fewer.hosts = {host("n1", "fab-n1")};
  EXPECT_EQ(attached(*make(fewer)), (std::map<std::string, std::string>{{"gpu-a-0", "fab-n1"}}));
}

TEST(SimFabric, AChangeTheStateFileCannotRecordIsUndone) {
  test_support::TempDir dir("composer-sim");
  SimConfig c = small_config();
  c.state_file = dir.file("gone/fabric.sim");  // its directory does not exist
  auto f = make(c);
  auto op = f->attach("fab-n1", {"gpu-a-0"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(op.error().message, HasSubstr(dir.file("gone/fabric.sim")));
  EXPECT_TRUE(attached(*f).empty());
}

TEST(SimFabric, AMalformedStateFileIsRefusedNamingTheLine) {
  test_support::TempDir dir("composer-sim");
  SimConfig c = small_config();
  c.state_file = dir.file("fabric.sim");
  std::ofstream(c.state_file) << "gpu-a-0 fab-n1\ngpu-a-1 fab-n1 fab-n2\n";
  auto f = SimFabric::create(c);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr(c.state_file + " line 2: expected DEVICE HOST"));
}

TEST(SimFabric, InjectedFailureWithLatencyFailsAfterTheWait) {
  ManualClock clock(0);
  auto f = make(small_config(100), clock);
  f->fail_next_attaches(1, "");
  auto op = f->attach("fab-n1", {"gpu-a-0"});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->state, OperationState::kRunning);
  clock.advance_ms(100);
  auto status = f->operation_status(op->id);
  EXPECT_EQ(status->state, OperationState::kFailed);
  EXPECT_EQ(status->error, "injected attach failure");
  EXPECT_TRUE(attached(*f).empty());
}

TEST(SimFabric, InjectedDetachFailureKeepsTheAttachment) {
  auto f = make(small_config());
  ASSERT_TRUE(f->attach("fab-n2", {"nvme-0", "nvme-1"}).ok());
  f->fail_next_detaches(1, "device busy");
  auto op = f->detach("fab-n2", {"nvme-0", "nvme-1"});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->state, OperationState::kFailed);
  EXPECT_EQ(op->error, "device busy");
  EXPECT_EQ(attached(*f).size(), 2u);
  // Attaches are not affected by detach failures.
  EXPECT_EQ(f->attach("fab-n2", {"gpu-a-3"})->state, OperationState::kDone);
  EXPECT_EQ(f->detach("fab-n2", {"nvme-0", "nvme-1"})->state, OperationState::kDone);
  EXPECT_EQ(attached(*f).size(), 1u);
}

TEST(SimFabric, SetHealthShowsInHealthAndInventory) {
  auto f = make(small_config());
  ASSERT_TRUE(f->set_health("mem-0", Health::kCritical).ok());
  ASSERT_TRUE(f->set_health("gpu-a-1", Health::kWarning).ok());
  auto h = f->health();
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), 8u);
  std::map<std::string, Health> by_id(h->begin(), h->end());
  EXPECT_EQ(by_id["mem-0"], Health::kCritical);
  EXPECT_EQ(by_id["gpu-a-1"], Health::kWarning);
  EXPECT_EQ(by_id["gpu-a-0"], Health::kOk);
  EXPECT_EQ(f->inventory()->devices[4].health, Health::kCritical);
  EXPECT_EQ(f->set_health("nope", Health::kOk).error().code, ErrorCode::kNotFound);
}

TEST(SimFabric, LostAttachmentDisappearsFromTheInventory) {
  auto f = make(small_config());
  ASSERT_TRUE(f->attach("fab-n1", {"gpu-a-0", "gpu-a-1"}).ok());
  ASSERT_TRUE(f->lose_attachment("gpu-a-0").ok());
  EXPECT_EQ(attached(*f), (std::map<std::string, std::string>{{"gpu-a-1", "fab-n1"}}));
  EXPECT_TRUE(f->lose_attachment("gpu-a-0").ok());
  EXPECT_EQ(f->detach("fab-n1", {"gpu-a-0", "gpu-a-1"})->state, OperationState::kDone);
  EXPECT_EQ(f->lose_attachment("nope").error().code, ErrorCode::kNotFound);
}

TEST(SimFabric, AttachBehindBackMakesAnOrphan) {
  auto f = make(small_config());
  ASSERT_TRUE(f->attach_behind_back("gpu-a-3", "fab-n2").ok());
  EXPECT_EQ(attached(*f), (std::map<std::string, std::string>{{"gpu-a-3", "fab-n2"}}));
  auto clash = f->attach("fab-n1", {"gpu-a-3"});
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.error().code, ErrorCode::kConflict);
  EXPECT_EQ(f->attach_behind_back("gpu-a-3", "fab-n9").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(f->attach_behind_back("nope", "fab-n1").error().code, ErrorCode::kNotFound);
}

TEST(SimFabric, ConcurrentAttachesOfOneDeviceHaveOneWinner) {
  auto f = make(small_config());
  std::atomic<int> wins{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string target = t % 2 ? "fab-n1" : "fab-n2";
      for (int i = 0; i < 200; ++i) {
        const std::string dev = "gpu-a-" + std::to_string(i % 4);
        auto op = f->attach(target, {dev});
        if (op.ok()) {
          ++wins;
          (void)f->detach(target, {dev});
        } else {
          EXPECT_EQ(op.error().code, ErrorCode::kConflict);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(wins.load(), 0);
  EXPECT_TRUE(attached(*f).empty());
}

TEST(SimFabric, BadConfigurationIsRefusedWithASentence) {
  auto expect_refused = [](SimConfig c, const std::string& fragment) {
    auto f = SimFabric::create(std::move(c));
    ASSERT_FALSE(f.ok()) << fragment;
    EXPECT_EQ(f.error().code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(f.error().message, HasSubstr(fragment));
  };
  SimConfig c = small_config();
  c.latency_ms = -5;
  expect_refused(c, "latency -5 ms is negative");

  c = small_config();
  c.groups.push_back(group("gpu-a", DeviceType::kGpu, 1));
  expect_refused(c, "device group 'gpu-a' is listed twice");

  c = small_config();
  c.groups.push_back(group("x", DeviceType::kGpu, 0));
  expect_refused(c, "device group 'x' has a count of 0");

  c = small_config();
  c.groups.push_back(group("m2", DeviceType::kMem, 2, 0));
  expect_refused(c, "memory group 'm2' has no block size");

  c = small_config();
  c.groups.push_back(group("x", DeviceType::kGpu, 1, 0, ""));
  expect_refused(c, "device group 'x' has no zone");

  c = small_config();
  c.hosts.push_back(host("n1", "fab-other"));
  expect_refused(c, "node 'n1' is listed twice");

  c = small_config();
  c.hosts.push_back(host("n3", "fab-n1"));
  expect_refused(c, "fabric host id 'fab-n1' is used by two hosts");
}

// SimSerialize: one change at a time, as a Liqid Director edits; a batch is one change, and
// what the fabric refuses in it is refused alone.
TEST(SimFabric, ASerialisingFabricTakesChangesInTurnAndABatchAsOne) {
  ManualClock clock{1000};
  SimConfig c = small_config(100);
  c.serialise = true;
  auto f = make(c, clock);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->serialises_changes(""));
  auto first = f->attach("fab-n1", {"gpu-a-0"});
  auto second = f->attach("fab-n2", {"gpu-a-1"});
  ASSERT_TRUE(first.ok() && second.ok());
  clock.advance_ms(100);
  EXPECT_EQ(f->operation_status(first->id)->state, OperationState::kDone);
  EXPECT_EQ(f->operation_status(second->id)->state, OperationState::kRunning)
      << "the second change starts when the first has ended";
  clock.advance_ms(100);
  EXPECT_EQ(f->operation_status(second->id)->state, OperationState::kDone);

  auto batch = f->apply_batch({{true, "fab-n1", {"gpu-a-2"}},
                               {true, "fab-n2", {"gpu-a-0"}},  // on fab-n1 already
                               {false, "fab-n2", {"gpu-a-1"}},
                               {true, "fab-n9", {"gpu-a-3"}}});
  ASSERT_TRUE(batch.ok()) << batch.error();
  ASSERT_EQ(batch->refused.size(), 2u);
  EXPECT_EQ(batch->refused.at(1).code, ErrorCode::kConflict);
  EXPECT_EQ(batch->refused.at(3).code, ErrorCode::kNotFound);
  EXPECT_EQ(batch->operation.state, OperationState::kRunning);
  clock.advance_ms(100);
  EXPECT_EQ(f->operation_status(batch->operation.id)->state, OperationState::kDone);
  auto inv = f->inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->attached,
            (std::map<std::string, std::string>{{"gpu-a-0", "fab-n1"}, {"gpu-a-2", "fab-n1"}}));
}

}  // namespace
}  // namespace composer
