// The liqid driver against the fake Liqid Director: inventory mapping, authentication, the
// fabric edit transaction and what every kind of fault leaves behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "composer/drivers/liqid_fabric.h"
#include "composer/drivers/multi_fabric.h"
#include "composer/test_support/temp_dir.h"
#include "composer/testing/fake_liqid.h"

namespace composer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class LiqidDriver : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }

  void start(const testing::FakeLiqidOptions& o) {
    fabric_.reset();
    auto s = testing::FakeLiqid::start(o);
    ASSERT_TRUE(s.ok()) << s;
    fake_ = std::move(s).value();
    options_ = o;
  }

  drivers::LiqidOptions options() const {
    drivers::LiqidOptions r;
    r.base_url = fake_->base_url();
    r.username = options_.username;
    r.password = options_.password;
    r.request_timeout_ms = 2000;
    return r;
  }

  drivers::LiqidFabric& connect(drivers::LiqidOptions o) {
    auto f = drivers::LiqidFabric::create(std::move(o));
    EXPECT_TRUE(f.ok()) << f;
    fabric_ = std::move(f).value();
    return *fabric_;
  }
  drivers::LiqidFabric& connect() { return connect(options()); }

  // No pending edit anywhere, and exactly `devices` related to node01.
  void expect_untouched(const std::vector<std::string>& devices) {
    EXPECT_THAT(fake_->editing(), IsEmpty());
    EXPECT_EQ(fake_->pending(), 0u);
    EXPECT_EQ(fake_->machine_devices("node01"), devices);
  }

  testing::FakeLiqidOptions options_;
  std::unique_ptr<testing::FakeLiqid> fake_;
  std::unique_ptr<drivers::LiqidFabric> fabric_;
};

TEST_F(LiqidDriver, InventoryMapsMachinesGroupsAndDevices) {
  auto inv = connect().inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  ASSERT_EQ(inv->hosts.size(), 2u);
  EXPECT_EQ(inv->hosts[0].fabric_id, "node01");
  EXPECT_EQ(inv->hosts[0].node, "node01");
  EXPECT_THAT(inv->hosts[0].zones, ElementsAre("group1"));
  EXPECT_EQ(inv->hosts[0].gpu_slots, 8u);
  std::map<std::string, Device> by_id;
  for (const Device& d : inv->devices) by_id[d.id] = d;
  // Four GPUs, one memory device and one drive in group1's pool; the free GPU is not offered.
  EXPECT_EQ(by_id.size(), 6u);
  EXPECT_FALSE(by_id.contains("freegpu0"));
  EXPECT_EQ(by_id.at("gpu2").type, DeviceType::kGpu);
  EXPECT_EQ(by_id.at("gpu2").model, "A100-80G");
  EXPECT_EQ(by_id.at("gpu2").zone, "group1");
  EXPECT_EQ(by_id.at("mem0").type, DeviceType::kMem);
  EXPECT_EQ(by_id.at("mem0").capacity_bytes, 64ull << 30);
  EXPECT_EQ(by_id.at("nvme0").type, DeviceType::kNvme);
  EXPECT_EQ(by_id.at("nvme0").model, "P5620");
  EXPECT_GT(by_id.at("nvme0").capacity_bytes, 3'000'000'000'000ull);
  // Identities from the status records (vid, did) and device infos (serial_num).
  EXPECT_EQ(by_id.at("gpu2").identity.pci_vendor, "0x10de");
  EXPECT_EQ(by_id.at("gpu2").identity.pci_device, "0x20b5");
  EXPECT_EQ(by_id.at("gpu2").identity.serial.rfind("LQD", 0), 0u);
  EXPECT_NE(by_id.at("gpu2").identity.serial, by_id.at("gpu1").identity.serial);
  EXPECT_EQ(by_id.at("nvme0").identity.pci_device, "0xa824");
  EXPECT_EQ(by_id.at("mem0").identity.pci_device, "");
  EXPECT_EQ(by_id.at("gpu2").address, "");
  EXPECT_THAT(inv->attached, IsEmpty());
}

TEST_F(LiqidDriver, HostMapRenamesAndFiltersMachines) {
  auto o = options();
  o.host_map = {{"node02", "cn-7"}};
  auto inv = connect(o).inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  ASSERT_EQ(inv->hosts.size(), 1u);
  EXPECT_EQ(inv->hosts[0].fabric_id, "node02");
  EXPECT_EQ(inv->hosts[0].node, "cn-7");
  auto op = fabric_->attach("node01", {"gpu0"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kNotFound);
}

TEST_F(LiqidDriver, ApiKeyComesFromTheDigestAndIsDeletedAtTheEnd) {
  connect();
  EXPECT_EQ(fake_->digests(), 1u);
  ASSERT_TRUE(fabric_->inventory().ok());
  fabric_.reset();
  EXPECT_EQ(fake_->digests(), 0u);
}

TEST_F(LiqidDriver, ARevokedApiKeyIsReplacedOnce) {
  auto& f = connect();
  fake_->revoke_digests();
  auto inv = f.inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  EXPECT_EQ(fake_->digests(), 1u);
  auto op = f.attach("node01", {"gpu0"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
}

TEST_F(LiqidDriver, BasicAuthenticationCreatesNoDigest) {
  auto o = options();
  o.auth = drivers::LiqidOptions::Auth::kBasic;
  ASSERT_TRUE(connect(o).inventory().ok());
  EXPECT_EQ(fake_->digests(), 0u);
}

TEST_F(LiqidDriver, WrongPasswordIsRefusedWithoutQuotingIt) {
  for (auto auth : {drivers::LiqidOptions::Auth::kApiKey, drivers::LiqidOptions::Auth::kBasic}) {
    auto o = options();
    o.auth = auth;
    o.password = "Sup3r-Secret-Word";
    auto f = drivers::LiqidFabric::create(o);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.error().code, ErrorCode::kUnauthenticated) << f.error();
    EXPECT_THAT(f.error().message, Not(HasSubstr("Sup3r-Secret-Word")));
    EXPECT_THAT(f.error().message, HasSubstr("401"));
  }
}

TEST_F(LiqidDriver, CredentialsFileMustBePrivate) {
  test_support::TempDir dir("composer-liqid");
  const std::string path = dir.file("liqid.cred");
  {
    std::ofstream out(path);
    out << "username=" << options_.username << "\npassword=" << options_.password << "\n";
  }
  ::chmod(path.c_str(), 0644);
  auto o = options();
  o.username.clear();
  o.password.clear();
  o.credentials_file = path;
  auto f = drivers::LiqidFabric::create(o);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr("liqid credentials file"));
  EXPECT_THAT(f.error().message, HasSubstr("chmod 600"));
  EXPECT_THAT(f.error().message, Not(HasSubstr(options_.password)));
  ::chmod(path.c_str(), 0600);
  ASSERT_TRUE(connect(o).inventory().ok());
}

TEST_F(LiqidDriver, BadOptionsAreRefusedWithTheRule) {
  auto o = options();
  o.base_url = "http://admin:pw@127.0.0.1:1";
  auto f = drivers::LiqidFabric::create(o);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr("must not carry credentials"));
  EXPECT_THAT(f.error().message, Not(HasSubstr("pw@")));
  o = options();
  o.base_url += "/liqid/api/v2";
  f = drivers::LiqidFabric::create(o);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr("the driver adds /liqid/api/v2"));
  o = options();
  o.base_url = "ftp://127.0.0.1";
  EXPECT_FALSE(drivers::LiqidFabric::create(o).ok());
  o = options();
  o.username.clear();
  f = drivers::LiqidFabric::create(o);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr("no username"));
}

TEST_F(LiqidDriver, AttachRelatesInsideOneEditAndReprograms) {
  auto& f = connect();
  const uint64_t posts = fake_->requests("POST");
  auto op = f.attach("node01", {"gpu0", "mem0", "nvme0"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
  // edit, three relates, reprogram.
  EXPECT_EQ(fake_->requests("POST") - posts, 5u);
  expect_untouched({"gpu0", "mem0", "nvme0"});
  auto polled = f.operation_status(op->id);
  ASSERT_TRUE(polled.ok());
  EXPECT_EQ(polled->state, OperationState::kDone);
  auto inv = f.inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->attached.at("mem0"), "node01");

  op = f.detach("node01", {"gpu0", "nvme0"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
  expect_untouched({"mem0"});
}

// Several composerd on one PostgreSQL store: every change carries the leadership epoch of the
// one that made it, as the Redfish driver's do, so the fabric's side can tell.
TEST_F(LiqidDriver, EveryChangeCarriesTheLeadershipEpoch) {
  drivers::LiqidOptions o = options();
  o.epoch = 7;
  auto& f = connect(o);
  ASSERT_TRUE(f.inventory().ok());
  EXPECT_THAT(fake_->write_epochs(), IsEmpty());  // reads carry none
  auto op = f.attach("node01", {"gpu0"});
  ASSERT_TRUE(op.ok()) << op;
  ASSERT_FALSE(fake_->write_epochs().empty());
  for (int64_t e : fake_->write_epochs()) EXPECT_EQ(e, 7);
}

// A batch: every change planned against one read, one edit per machine carrying all of that
// machine's changes (attaches and detaches together), a change the Director cannot take
// refused alone, and a machine whose edit fails failing only its own changes.
TEST_F(LiqidDriver, ABatchIsOneEditPerMachineAndFailsOnlyWhatItCannotServe) {
  auto& f = connect();
  EXPECT_TRUE(f.serialises_changes(""));
  ASSERT_TRUE(f.attach("node01", {"gpu3"}).ok());
  const uint64_t posts = fake_->requests("POST");
  const uint64_t deletes = fake_->requests("DELETE");
  auto batch = f.apply_batch({{true, "node01", {"gpu0"}},
                              {true, "node02", {"gpu1", "nvme0"}},
                              {true, "node01", {"mem0"}},
                              {false, "node01", {"gpu3"}},
                              {true, "node02", {"gpu0"}},  // node01 takes it in this batch
                              {true, "node09", {"gpu2"}}});
  ASSERT_TRUE(batch.ok()) << batch.error();
  ASSERT_EQ(batch->refused.size(), 2u);
  EXPECT_THAT(batch->refused.at(4).message, HasSubstr("another machine in the same edit"));
  EXPECT_THAT(batch->refused.at(5).message, HasSubstr("no machine named 'node09'"));
  EXPECT_EQ(batch->operation.state, OperationState::kDone);
  // Two edits: node01 (edit, two relates, one unrelate, reprogram), node02 (edit, two relates,
  // reprogram).
  EXPECT_EQ(fake_->requests("POST") - posts, 4u + 4u);
  EXPECT_EQ(fake_->requests("DELETE") - deletes, 1u);
  EXPECT_EQ(fake_->machine_devices("node01"), (std::vector<std::string>{"gpu0", "mem0"}));
  EXPECT_EQ(fake_->machine_devices("node02"), (std::vector<std::string>{"gpu1", "nvme0"}));

  testing::FakeLiqidFault fault;
  fault.kind = testing::FakeLiqidFault::Kind::kEnvelope;
  fault.method = "POST";
  fault.path = "fabric/reprogram";
  fault.message = "PCIe switch 2 did not answer";
  fake_->inject(fault);  // the first machine's reprogram
  batch = f.apply_batch({{false, "node01", {"gpu0"}}, {false, "node02", {"gpu1"}}});
  ASSERT_TRUE(batch.ok()) << batch.error();
  ASSERT_EQ(batch->refused.size(), 1u);
  EXPECT_THAT(batch->refused.at(0).message, HasSubstr("PCIe switch 2 did not answer"));
  EXPECT_THAT(fake_->editing(), IsEmpty());
  EXPECT_EQ(fake_->machine_devices("node01"), (std::vector<std::string>{"gpu0", "mem0"}));
  EXPECT_EQ(fake_->machine_devices("node02"), (std::vector<std::string>{"nvme0"}));
}

// Against a Director that edits one machine at a time and takes its time to reprogram, changes
// sent at once from several threads, and a batch, all succeed: the driver never opens a second
// edit (the fake would refuse it), and a batch costs one reprogram per machine it touches.
TEST_F(LiqidDriver, ADirectorThatEditsOneMachineAtATimeGetsOneEditAtATime) {
  start({.machines_per_group = 4,
         .gpus_per_group = 8,
         .reprogram_ms = 50,
         .one_edit_at_a_time = true});
  auto& f = connect();
  std::vector<std::thread> threads;
  std::vector<Expected<Operation>> got(4, Error{ErrorCode::kInternal, "not run"});
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      got[static_cast<size_t>(i)] =
          f.attach("node0" + std::to_string(i + 1), {"gpu" + std::to_string(i)});
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& op : got) {
    ASSERT_TRUE(op.ok()) << op.error();
    EXPECT_EQ(op->state, OperationState::kDone);
  }
  EXPECT_EQ(fake_->reprograms(), 4u);
  auto batch = f.apply_batch({{true, "node01", {"gpu4"}},
                              {true, "node02", {"gpu5"}},
                              {false, "node01", {"gpu0"}},
                              {true, "node03", {"gpu6"}},
                              {true, "node01", {"gpu7"}}});
  ASSERT_TRUE(batch.ok()) << batch.error();
  EXPECT_TRUE(batch->refused.empty());
  EXPECT_EQ(fake_->reprograms(), 4u + 3u);
  EXPECT_EQ(fake_->most_edits_at_once(), 1u);
  EXPECT_THAT(fake_->editing(), IsEmpty());
  EXPECT_EQ(fake_->machine_devices("node01"), (std::vector<std::string>{"gpu4", "gpu7"}));
}

TEST_F(LiqidDriver, NothingToDoSendsNoEdit) {
  auto& f = connect();
  ASSERT_TRUE(f.attach("node01", {"gpu0"}).ok());
  const uint64_t posts = fake_->requests("POST");
  auto op = f.attach("node01", {"gpu0", "gpu0"});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->state, OperationState::kDone);
  op = f.detach("node02", {"gpu1"});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(fake_->requests("POST"), posts);
}

TEST_F(LiqidDriver, AReprogramErrorCancelsTheEdit) {
  auto& f = connect();
  ASSERT_TRUE(f.attach("node01", {"gpu3"}).ok());
  testing::FakeLiqidFault fault;
  fault.kind = testing::FakeLiqidFault::Kind::kEnvelope;
  fault.method = "POST";
  fault.path = "fabric/reprogram";
  fault.message = "PCIe switch 2 did not answer";
  fake_->inject(fault);
  auto op = f.attach("node01", {"gpu0", "gpu1"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kFailed);
  EXPECT_THAT(op->error, HasSubstr("PCIe switch 2 did not answer"));
  EXPECT_THAT(op->error, HasSubstr("fabric/reprogram"));
  EXPECT_THAT(op->error, HasSubstr("cancelled"));
  expect_untouched({"gpu3"});
  auto polled = f.operation_status(op->id);
  ASSERT_TRUE(polled.ok());
  EXPECT_EQ(polled->state, OperationState::kFailed);
}

TEST_F(LiqidDriver, AServerErrorOnARelateCancelsTheEdit) {
  auto& f = connect();
  testing::FakeLiqidFault fault;
  fault.kind = testing::FakeLiqidFault::Kind::kStatus;
  fault.status = 503;
  fault.method = "POST";
  fault.path = "relate/";
  fault.skip = 1;
  fault.message = "director busy";
  fake_->inject(fault);
  auto op = f.attach("node01", {"gpu0", "gpu1"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kFailed);
  EXPECT_THAT(op->error, HasSubstr("HTTP 503"));
  EXPECT_THAT(op->error, HasSubstr("director busy"));
  expect_untouched({});
}

TEST_F(LiqidDriver, AConnectionResetDuringReprogramCancelsTheEdit) {
  auto& f = connect();
  testing::FakeLiqidFault fault;
  fault.kind = testing::FakeLiqidFault::Kind::kReset;
  fault.method = "POST";
  fault.path = "fabric/reprogram";
  fake_->inject(fault);
  auto op = f.attach("node01", {"gpu0"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kFailed);
  expect_untouched({});
  // Usable again at once.
  op = f.attach("node01", {"gpu0"});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->state, OperationState::kDone) << op->error;
}

TEST_F(LiqidDriver, AFailedDetachLeavesTheDevicesAttached) {
  auto& f = connect();
  ASSERT_TRUE(f.attach("node01", {"gpu0", "gpu1"}).ok());
  testing::FakeLiqidFault fault;
  fault.kind = testing::FakeLiqidFault::Kind::kEnvelope;
  fault.method = "DELETE";
  fault.path = "relate/gpu";
  fault.skip = 1;
  fault.message = "device busy";
  fake_->inject(fault);
  auto op = f.detach("node01", {"gpu0", "gpu1"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(op->state, OperationState::kFailed);
  EXPECT_THAT(op->error, HasSubstr("device busy"));
  expect_untouched({"gpu0", "gpu1"});
}

TEST_F(LiqidDriver, ARefusedEditIsNotCancelled) {
  auto& f = connect();
  testing::FakeLiqidFault fault;
  fault.kind = testing::FakeLiqidFault::Kind::kEnvelope;
  fault.method = "POST";
  fault.path = "fabric/edit";
  fault.message = "another edit is under way";
  fake_->inject(fault);
  const uint64_t posts = fake_->requests("POST");
  auto op = f.attach("node01", {"gpu0"});
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->state, OperationState::kFailed);
  EXPECT_THAT(op->error, HasSubstr("another edit is under way"));
  EXPECT_EQ(fake_->requests("POST") - posts, 1u);  // no cancel of someone else's edit
}

TEST_F(LiqidDriver, EnvelopeErrorsOnReadsNameTheCallCodeAndMessage) {
  auto& f = connect();
  testing::FakeLiqidFault fault;
  fault.kind = testing::FakeLiqidFault::Kind::kEnvelope;
  fault.method = "GET";
  fault.path = "status/mem";
  fault.message = "memory controller offline";
  fake_->inject(fault);
  auto inv = f.inventory();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.error().code, ErrorCode::kFabric);
  EXPECT_THAT(inv.error().message, HasSubstr("GET status/mem"));
  EXPECT_THAT(inv.error().message, HasSubstr("code 1"));
  EXPECT_THAT(inv.error().message, HasSubstr("memory controller offline"));
}

TEST_F(LiqidDriver, ReadsAreRetriedAfterAServerErrorAndTimeOut) {
  auto& f = connect();
  testing::FakeLiqidFault fault;
  fault.kind = testing::FakeLiqidFault::Kind::kStatus;
  fault.status = 503;
  fault.method = "GET";
  fault.path = "group";
  fake_->inject(fault);
  EXPECT_TRUE(f.inventory().ok());  // the second attempt succeeds

  auto o = options();
  o.request_timeout_ms = 200;
  o.get_retries = 0;
  auto& slow = connect(o);
  fault.kind = testing::FakeLiqidFault::Kind::kDelay;
  fault.delay_ms = 1500;
  fault.path = "predevice";
  fake_->inject(fault);
  auto inv = slow.inventory();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.error().code, ErrorCode::kTimeout) << inv.error();
}

TEST_F(LiqidDriver, DevicesOutsideTheMachinesGroupAreRefused) {
  testing::FakeLiqidOptions o;
  o.groups = 2;
  o.machines_per_group = 1;
  o.gpus_per_group = 1;
  start(o);
  auto& f = connect();
  // node01 is in group1 (gpu0), node02 in group2 (gpu1); freegpu0 is in no group.
  auto op = f.attach("node01", {"gpu1"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kConflict);
  EXPECT_THAT(op.error().message, HasSubstr("group 'group2'"));
  op = f.attach("node01", {"freegpu0"});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kConflict);
  EXPECT_THAT(op.error().message, HasSubstr("system free pool"));
  auto inv = f.inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_THAT(inv->hosts[1].zones, ElementsAre("group2"));
  EXPECT_TRUE(fake_->editing().empty());
}

TEST_F(LiqidDriver, OrphansAndHealthAreReported) {
  auto& f = connect();
  ASSERT_TRUE(fake_->relate_behind_back("gpu2", "node02").ok());
  ASSERT_TRUE(fake_->set_state("gpu1", "FAILED").ok());
  ASSERT_TRUE(fake_->set_state("gpu3", "DEGRADED").ok());
  auto inv = f.inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->attached.at("gpu2"), "node02");
  auto h = f.health();
  ASSERT_TRUE(h.ok());
  std::map<std::string, Health> by_id(h->begin(), h->end());
  EXPECT_EQ(by_id.at("gpu0"), Health::kOk);
  EXPECT_EQ(by_id.at("gpu1"), Health::kCritical);
  EXPECT_EQ(by_id.at("gpu3"), Health::kWarning);
  // Detaching it from another machine is done already: nothing is sent, it stays on node02.
  const uint64_t writes = fake_->requests("POST") + fake_->requests("DELETE");
  auto op = f.detach("node01", {"gpu2"});
  ASSERT_TRUE(op.ok()) << op;
  EXPECT_EQ(fake_->requests("POST") + fake_->requests("DELETE"), writes);
  EXPECT_EQ(fake_->machine_devices("node02"), std::vector<std::string>{"gpu2"});
  EXPECT_EQ(f.operation_status("liqid-999").error().code, ErrorCode::kNotFound);
}

TEST_F(LiqidDriver, DevicesOfMachinesNotServedAreHeldAndTheFreePoolIsSkipped) {
  drivers::LiqidOptions o = options();
  o.host_map = {{"node01", "node01"}};  // node02 is not served here
  auto& f = connect(o);
  ASSERT_TRUE(fake_->relate_behind_back("gpu3", "node02").ok());
  ASSERT_TRUE(fake_->relate_behind_back("gpu1", "node01").ok());
  auto inv = f.inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  EXPECT_EQ(inv->attached.at("gpu1"), "node01");  // whoever related it
  EXPECT_FALSE(inv->attached.contains("gpu3"));
  ASSERT_TRUE(inv->held.contains("gpu3"));
  EXPECT_THAT(inv->held.at("gpu3"), HasSubstr("machine 'node02'"));
  ASSERT_EQ(inv->skipped.size(), 1u);
  EXPECT_THAT(inv->skipped[0], HasSubstr("freegpu0"));
  EXPECT_THAT(inv->skipped[0], HasSubstr("system free pool"));
}

// Several fabrics: what a member holds or skips comes through the router, qualified.
TEST_F(LiqidDriver, AMultiFabricCarriesHeldAndSkippedOfItsMembers) {
  drivers::LiqidOptions o = options();
  o.host_map = {{"node01", "node01"}};
  auto lq = drivers::LiqidFabric::create(o);
  ASSERT_TRUE(lq.ok()) << lq;
  ASSERT_TRUE(fake_->relate_behind_back("gpu3", "node02").ok());
  std::vector<MultiFabric::Member> members;
  members.push_back({"pod-lq", std::move(lq).value()});
  auto multi = MultiFabric::create(std::move(members));
  ASSERT_TRUE(multi.ok()) << multi;
  auto inv = (*multi)->inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  ASSERT_TRUE(inv->held.contains("pod-lq:gpu3")) << ::testing::PrintToString(inv->held);
  EXPECT_THAT(inv->held.at("pod-lq:gpu3"), HasSubstr("node02"));
  ASSERT_EQ(inv->skipped.size(), 1u);
  EXPECT_THAT(inv->skipped[0], HasSubstr("pod-lq: device freegpu0"));
}

}  // namespace
}  // namespace composer
