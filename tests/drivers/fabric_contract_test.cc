// The fabric contract: what composerd relies on from every driver, checked against each, and
// against several fabrics behind one MultiFabric: inventory, attach, detach, retries, faults,
// health, restarts, devices attached by someone else, device identity, failure domains and
// batches. A harness per driver sets up two hosts and four free GPUs, injects the faults, and
// states what its driver does not do (no failure domains, no batches), which the suite checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "composer/core/fabric.h"
#include "composer/core/forwarding_fabric.h"
#include "composer/drivers/liqid_fabric.h"
#include "composer/drivers/multi_fabric.h"
#include "composer/drivers/redfish_fabric.h"
#include "composer/drivers/sim_fabric.h"
#include "composer/test_support/inventory.h"
#include "composer/testing/fake_liqid.h"
#include "composer/testing/fake_redfish.h"
#include "composer/testing/redfish_driver.h"

namespace composer {
namespace {

using ::testing::HasSubstr;

// Follows an operation to its end, as composerd does.
Status finish(Fabric& f, Expected<Operation> op) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (op.ok() && op->state == OperationState::kRunning) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Error{ErrorCode::kTimeout, "operation " + op->id + " still running after 10 s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    op = f.operation_status(op->id);
  }
  if (!op.ok()) return op.error();
  if (op->state == OperationState::kFailed) return Error{ErrorCode::kFabric, op->error};
  return Status::Ok();
}

// Another client of the same Redfish service attaches `device` to `host`.
bool other_client(const testing::FakeRedfish& fake, const std::string& host,
                  const std::string& device) {
  auto other = drivers::harness::connect_driver(drivers::harness::driver_options(fake, 10));
  return other != nullptr && finish(*other, other->attach(host, {device})).ok();
}

class Harness {
 public:
  virtual ~Harness() = default;
  virtual Fabric& fabric() = 0;
  virtual std::vector<std::string> hosts() const = 0;  // two fabric host ids
  virtual std::vector<std::string> gpus() const = 0;   // four free GPUs
  // The type of those four devices: GPUs, except for a fabric that pools only memory.
  virtual DeviceType device_type() const { return DeviceType::kGpu; }
  // The next attach (detach) of several devices fails after its first device.
  virtual void fail_next_attach_part_way(const std::string& message) = 0;
  virtual void fail_next_detach_part_way(const std::string& message) = 0;
  virtual void set_health(const std::string& device, Health health) = 0;
  // A composerd restart: a new driver instance against the same fabric. False for a fabric
  // that lives in its driver (sim). writes(): requests that would change the fabric so far.
  virtual bool restart() { return false; }
  virtual uint64_t writes() const { return 0; }
  // What the driver states it can do, which the suite then checks. The failure domain levels
  // every one of the four devices reports (none for a fabric that reports no domains).
  virtual std::vector<std::string> domain_levels() const = 0;
  // Whether the driver takes several changes as one fabric change (apply_batch).
  virtual bool batches() const { return false; }
  // Whether the four devices carry a host-side identity (DeviceIdentity).
  virtual bool identities() const { return true; }
  // Attaches a device to a host the way someone other than composerd would (another client of
  // the fabric manager); false where no one else can (none of the drivers here).
  virtual bool attach_outside(const std::string& host, const std::string& device) = 0;
};

class SimHarness final : public Harness {
 public:
  SimHarness() {
    SimConfig c;
    for (const char* n : {"n1", "n2"}) {
      Host h;
      h.node = n;
      h.fabric_id = std::string("fab-") + n;
      h.zones = {"z1"};
      h.gpu_slots = 8;
      c.hosts.push_back(h);
    }
    SimConfig::Group g;
    g.name = "gpu";
    g.type = DeviceType::kGpu;
    g.model = "A100-80G";
    g.zone = "z1";
    g.count = 4;
    g.domains = {{.level = "enclosure", .name = "enc-1"}};
    c.groups.push_back(g);
    c.latency_ms = 20;  // attach and detach run for a while, as on real fabrics
    auto f = SimFabric::create(c);
    EXPECT_TRUE(f.ok()) << f;
    if (f.ok()) fabric_ = std::move(f).value();
  }
  Fabric& fabric() override { return *fabric_; }
  std::vector<std::string> hosts() const override { return {"fab-n1", "fab-n2"}; }
  std::vector<std::string> gpus() const override { return {"gpu-0", "gpu-1", "gpu-2", "gpu-3"}; }
  void fail_next_attach_part_way(const std::string& m) override {
    fabric_->fail_next_attaches(1, m);
  }
  void fail_next_detach_part_way(const std::string& m) override {
    fabric_->fail_next_detaches(1, m);
  }
  void set_health(const std::string& d, Health h) override {
    EXPECT_TRUE(fabric_->set_health(d, h).ok());
  }
  std::vector<std::string> domain_levels() const override { return {"enclosure"}; }
  bool batches() const override { return true; }
  // The simulated fabric lives in its driver: an attach composerd did not record is one
  // through the same instance.
  bool attach_outside(const std::string& host, const std::string& device) override {
    return finish(*fabric_, fabric_->attach(host, {device})).ok();
  }

 private:
  std::unique_ptr<SimFabric> fabric_;
};

// The redfish driver against the fake service; `patch` selects a sloppy service that takes
// blocks by PATCH instead of a strict one with actions; `host_blocks` one whose compute nodes
// are ComputerSystem resource blocks, so that the first attach to a host composes its system
// (two hosts of zone 1 then, node01 and node03, and four GPUs of that zone).
template <bool kPatch, bool kHostBlocks = false>
class RedfishHarness final : public Harness {
 public:
  RedfishHarness() {
    testing::FakeRedfishOptions o;
    o.gpus_per_zone = kHostBlocks ? 4 : 2;
    o.memory_per_zone = 0;
    o.drives_per_zone = 0;
    o.hosts = kHostBlocks ? 3 : 2;
    o.host_blocks = kHostBlocks;
    o.task_ms = 20;
    o.patch_only = kPatch;
    o.sloppy = kPatch;
    fake_ = drivers::harness::start_fake(o);
    if (!fake_) return;
    drivers::RedfishOptions r = drivers::harness::driver_options(*fake_, 10);
    r.task_wait_ms = 0;  // hand running tasks back to the caller, as under load
    fabric_ = drivers::harness::connect_driver(std::move(r));
  }
  Fabric& fabric() override { return *fabric_; }
  std::vector<std::string> hosts() const override {
    if (kHostBlocks) return {"node01", "node03"};
    return {"node01", "node02"};
  }
  std::vector<std::string> gpus() const override {
    if (kHostBlocks) return {"gpu-z1-00", "gpu-z1-01", "gpu-z1-02", "gpu-z1-03"};
    return {"gpu-z1-00", "gpu-z1-01", "gpu-z2-00", "gpu-z2-01"};
  }
  void fail_next_attach_part_way(const std::string& m) override { fail("AddResourceBlock", m); }
  void fail_next_detach_part_way(const std::string& m) override { fail("RemoveResourceBlock", m); }
  bool restart() override {
    fabric_.reset();
    fabric_ = drivers::harness::reconnect(*fake_, 10);
    return fabric_ != nullptr;
  }
  uint64_t writes() const override { return fake_->writes(); }
  void set_health(const std::string& d, Health h) override {
    EXPECT_TRUE(fake_->set_health(d, drivers::harness::health_word(h)).ok());
  }
  // The fake's generated resource blocks link no Chassis: no failure domains (the mockup's
  // own blocks do: RedfishFabric tests).
  std::vector<std::string> domain_levels() const override { return {}; }
  bool attach_outside(const std::string& host, const std::string& device) override {
    return other_client(*fake_, host, device);
  }

 private:
  void fail(const std::string& action, const std::string& message) {
    testing::FakeRedfishFault f;
    f.kind = testing::FakeRedfishFault::Kind::kTaskFails;
    f.message = message;
    if (kPatch) {
      f.method = "PATCH";  // one PATCH carries every block: it fails as a whole
    } else {
      f.method = "POST";
      f.path = action;
      f.skip = 1;  // the first block's action succeeds, the second's task fails
    }
    fake_->inject(f);
  }

  std::unique_ptr<testing::FakeRedfish> fake_;
  std::unique_ptr<drivers::RedfishFabric> fabric_;
};

// The redfish driver's CXL memory: four chunks of the fake's CXL fabric play the four devices,
// attached through memory connections of the hosts' initiator endpoints, with running tasks
// handed back to the caller.
class RedfishCxlHarness final : public Harness {
 public:
  RedfishCxlHarness() {
    testing::FakeRedfishOptions o;
    o.gpus_per_zone = 0;
    o.memory_per_zone = 0;
    o.drives_per_zone = 0;
    o.hosts = 2;
    o.cxl = true;
    o.cxl_chunks = 4;
    o.task_ms = 20;
    fake_ = drivers::harness::start_fake(o);
    if (!fake_) return;
    drivers::RedfishOptions r = drivers::harness::driver_options(*fake_, 10);
    r.task_wait_ms = 0;
    fabric_ = drivers::harness::connect_driver(std::move(r));
  }
  Fabric& fabric() override { return *fabric_; }
  std::vector<std::string> hosts() const override { return {"node01", "node02"}; }
  std::vector<std::string> gpus() const override {
    return {"cxl-TP1", "cxl-TP2", "cxl-TP3", "cxl-TP4"};
  }
  DeviceType device_type() const override { return DeviceType::kMem; }
  void fail_next_attach_part_way(const std::string& m) override {
    fail("POST", "/Fabrics/CXL/Connections", m);
  }
  void fail_next_detach_part_way(const std::string& m) override {
    fail("DELETE", "/Fabrics/CXL/Connections/", m);
  }
  bool restart() override {
    fabric_.reset();
    fabric_ = drivers::harness::reconnect(*fake_, 10);
    return fabric_ != nullptr;
  }
  uint64_t writes() const override { return fake_->writes(); }
  void set_health(const std::string& d, Health h) override {
    EXPECT_TRUE(fake_->set_health(d.substr(4), drivers::harness::health_word(h)).ok());
  }
  std::vector<std::string> domain_levels() const override { return {"enclosure"}; }
  // The generated pool's memory chunks sit behind target endpoints that name no PCI function
  // or serial: no identity (the mockup's type 3 device has one: RedfishCxl tests).
  bool identities() const override { return false; }
  bool attach_outside(const std::string& host, const std::string& device) override {
    return other_client(*fake_, host, device);
  }

 private:
  void fail(const std::string& method, const std::string& path, const std::string& message) {
    testing::FakeRedfishFault f;
    f.kind = testing::FakeRedfishFault::Kind::kTaskFails;
    f.method = method;
    f.path = path;
    f.message = message;
    f.skip = 1;  // the first chunk's connection changes, the second's task fails
    fake_->inject(f);
  }

  std::unique_ptr<testing::FakeRedfish> fake_;
  std::unique_ptr<drivers::RedfishFabric> fabric_;
};

// The liqid driver against the fake Director: one group with both machines and four GPUs.
class LiqidHarness final : public Harness {
 public:
  LiqidHarness() {
    testing::FakeLiqidOptions o;
    o.groups = 1;
    o.machines_per_group = 2;
    o.gpus_per_group = 4;
    o.memory_per_group = 0;
    o.drives_per_group = 0;
    auto s = testing::FakeLiqid::start(o);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return;
    fake_ = std::move(s).value();
    drivers::LiqidOptions l;
    l.base_url = fake_->base_url();
    l.username = o.username;
    l.password = o.password;
    options_ = l;
    auto f = drivers::LiqidFabric::create(l);
    EXPECT_TRUE(f.ok()) << f;
    if (f.ok()) fabric_ = std::move(f).value();
  }
  bool restart() override {
    fabric_.reset();
    auto f = drivers::LiqidFabric::create(options_);
    EXPECT_TRUE(f.ok()) << f;
    if (f.ok()) fabric_ = std::move(f).value();
    return fabric_ != nullptr;
  }
  uint64_t writes() const override { return fake_->writes(); }
  Fabric& fabric() override { return *fabric_; }
  std::vector<std::string> hosts() const override { return {"node01", "node02"}; }
  std::vector<std::string> gpus() const override { return {"gpu0", "gpu1", "gpu2", "gpu3"}; }
  // The second device's relate (or unrelate) is refused inside the edit.
  void fail_next_attach_part_way(const std::string& m) override { fail("POST", m); }
  void fail_next_detach_part_way(const std::string& m) override { fail("DELETE", m); }
  void set_health(const std::string& d, Health h) override {
    EXPECT_TRUE(fake_
                    ->set_state(d, h == Health::kOk        ? "ACTIVE"
                                   : h == Health::kWarning ? "DEGRADED"
                                                           : "FAILED")
                    .ok());
  }
  // The Director reports no chassis or enclosure of a device: no failure domains.
  std::vector<std::string> domain_levels() const override { return {}; }
  bool batches() const override { return true; }
  bool attach_outside(const std::string& host, const std::string& device) override {
    auto other = drivers::LiqidFabric::create(options_);
    EXPECT_TRUE(other.ok()) << other;
    return other.ok() && finish(**other, (*other)->attach(host, {device})).ok();
  }

 private:
  void fail(const std::string& method, const std::string& message) {
    testing::FakeLiqidFault f;
    f.kind = testing::FakeLiqidFault::Kind::kEnvelope;
    f.method = method;
    f.path = "relate/";
    f.skip = 1;
    f.message = message;
    fake_->inject(f);
  }

  drivers::LiqidOptions options_;
  std::unique_ptr<testing::FakeLiqid> fake_;
  std::unique_ptr<drivers::LiqidFabric> fabric_;
};

template <typename H>
class FabricContract : public ::testing::Test {
 protected:
  FabricContract() : h_(std::make_unique<H>()) {}

  Fabric& fabric() { return h_->fabric(); }
  std::string host(size_t i) const { return h_->hosts().at(i); }
  std::string gpu(size_t i) const { return h_->gpus().at(i); }

  // What the fabric shows attached among the harness's GPUs.
  std::map<std::string, std::string> attached() {
    auto inv = fabric().inventory();
    EXPECT_TRUE(inv.ok()) << inv;
    std::map<std::string, std::string> out;
    if (!inv.ok()) return out;
    for (const std::string& g : h_->gpus()) {
      if (auto it = inv->attached.find(g); it != inv->attached.end()) out[g] = it->second;
    }
    return out;
  }

  // A composerd-like record: updated only when an operation succeeded.
  Status attach(size_t host_index, std::vector<std::string> ids) {
    Status s = finish(fabric(), fabric().attach(host(host_index), ids));
    if (s.ok()) {
      for (const std::string& id : ids) records_[id] = host(host_index);
    }
    return s;
  }
  Status detach(size_t host_index, std::vector<std::string> ids) {
    Status s = finish(fabric(), fabric().detach(host(host_index), ids));
    if (s.ok()) {
      for (const std::string& id : ids) records_.erase(id);
    }
    return s;
  }

  std::unique_ptr<H> h_;
  std::map<std::string, std::string> records_;
};

// Several fabrics in one composerd: the Liqid fake's hosts and GPUs, reached through a
// MultiFabric whose other member (the simulated pod) must never be touched.
class MultiHarness final : public Harness {
 public:
  MultiHarness() {
    std::vector<MultiFabric::Member> members;
    members.push_back({"lab", std::make_unique<ForwardingFabric>(bystander_.fabric())});
    members.push_back({"pod-lq", std::make_unique<ForwardingFabric>(liqid_.fabric())});
    auto m = MultiFabric::create(std::move(members));
    EXPECT_TRUE(m.ok()) << m;
    if (m.ok()) fabric_ = std::move(m).value();
  }
  ~MultiHarness() override {
    // The bystander pod was never asked for anything.
    auto inv = bystander_.fabric().inventory();
    EXPECT_TRUE(inv.ok() && inv->attached.empty());
  }
  Fabric& fabric() override { return *fabric_; }
  std::vector<std::string> hosts() const override { return qualified(liqid_.hosts()); }
  std::vector<std::string> gpus() const override { return qualified(liqid_.gpus()); }
  void fail_next_attach_part_way(const std::string& m) override {
    liqid_.fail_next_attach_part_way(m);
  }
  void fail_next_detach_part_way(const std::string& m) override {
    liqid_.fail_next_detach_part_way(m);
  }
  void set_health(const std::string& d, Health h) override {
    liqid_.set_health(d.substr(d.find(':') + 1), h);
  }
  std::vector<std::string> domain_levels() const override { return liqid_.domain_levels(); }
  bool batches() const override { return liqid_.batches(); }
  bool identities() const override { return liqid_.identities(); }
  bool attach_outside(const std::string& host, const std::string& device) override {
    return liqid_.attach_outside(unqualified(host), unqualified(device));
  }

 private:
  static std::string unqualified(const std::string& id) { return id.substr(id.find(':') + 1); }
  static std::vector<std::string> qualified(std::vector<std::string> ids) {
    for (std::string& id : ids) id = MultiFabric::qualify("pod-lq", id);
    return ids;
  }
  SimHarness bystander_;
  LiqidHarness liqid_;
  std::unique_ptr<MultiFabric> fabric_;
};

using Drivers =
    ::testing::Types<SimHarness, RedfishHarness<false>, RedfishHarness<true>,
                     RedfishHarness<false, true>, RedfishCxlHarness, LiqidHarness, MultiHarness>;
class DriverNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if constexpr (std::is_same_v<T, SimHarness>) return "sim";
    if constexpr (std::is_same_v<T, RedfishHarness<false>>) return "redfish_actions_strict";
    if constexpr (std::is_same_v<T, LiqidHarness>) return "liqid";
    if constexpr (std::is_same_v<T, RedfishCxlHarness>) return "redfish_cxl";
    if constexpr (std::is_same_v<T, RedfishHarness<false, true>>) return "redfish_host_blocks";
    if constexpr (std::is_same_v<T, MultiHarness>) return "multi_liqid_beside_sim";
    return "redfish_patch_sloppy";
  }
};
TYPED_TEST_SUITE(FabricContract, Drivers, DriverNames);

TYPED_TEST(FabricContract, InventoryListsHostsAndFreeGpus) {
  auto inv = this->fabric().inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  std::set<std::string> hosts;
  for (const Host& h : inv->hosts) {
    EXPECT_FALSE(h.node.empty());
    EXPECT_FALSE(h.zones.empty()) << h.fabric_id;
    EXPECT_GT(h.slots(this->h_->device_type()), 0u) << h.fabric_id;
    hosts.insert(h.fabric_id);
  }
  EXPECT_TRUE(hosts.contains(this->host(0)));
  EXPECT_TRUE(hosts.contains(this->host(1)));
  std::set<std::string> ids;
  for (const Device& d : inv->devices) {
    EXPECT_TRUE(ids.insert(d.id).second) << d.id << " listed twice";
    EXPECT_FALSE(d.zone.empty()) << d.id;
    EXPECT_FALSE(d.composition_id.has_value());
  }
  for (const std::string& g : this->h_->gpus()) {
    ASSERT_TRUE(ids.contains(g)) << g;
    for (const Device& d : inv->devices) {
      if (d.id == g) {
        EXPECT_EQ(d.type, this->h_->device_type());
        EXPECT_FALSE(d.model.empty());
        EXPECT_EQ(d.health, Health::kOk);
      }
    }
  }
  EXPECT_TRUE(this->attached().empty());
}

TYPED_TEST(FabricContract, AttachShowsTheDevicesOnTheHost) {
  ASSERT_TRUE(this->attach(0, {this->gpu(0), this->gpu(1)}).ok());
  ASSERT_TRUE(this->attach(1, {this->gpu(2)}).ok());
  EXPECT_EQ(this->attached(), this->records_);
  EXPECT_EQ(this->attached().at(this->gpu(1)), this->host(0));
  EXPECT_EQ(this->attached().at(this->gpu(2)), this->host(1));
}

TYPED_TEST(FabricContract, DetachFreesTheDevices) {
  ASSERT_TRUE(this->attach(0, {this->gpu(0), this->gpu(1)}).ok());
  ASSERT_TRUE(this->detach(0, {this->gpu(0)}).ok());
  EXPECT_EQ(this->attached(), this->records_);
  ASSERT_EQ(this->attached().size(), 1u);
  ASSERT_TRUE(this->detach(0, {this->gpu(1)}).ok());
  EXPECT_TRUE(this->attached().empty());
}

TYPED_TEST(FabricContract, RetriesAreIdempotentAndOtherHostsAreRefused) {
  ASSERT_TRUE(this->attach(0, {this->gpu(0)}).ok());
  EXPECT_TRUE(this->attach(0, {this->gpu(0)}).ok());  // a retried attach
  Status other = this->attach(1, {this->gpu(0)});
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, ErrorCode::kConflict);
  // Detaching from another host what it does not hold succeeds and leaves it where it is.
  EXPECT_TRUE(this->detach(1, {this->gpu(0)}).ok());
  EXPECT_EQ(this->attached().at(this->gpu(0)), this->host(0));
  ASSERT_TRUE(this->detach(0, {this->gpu(0)}).ok());
  EXPECT_TRUE(this->detach(0, {this->gpu(0)}).ok());  // a retried detach
  EXPECT_TRUE(this->detach(1, {this->gpu(3)}).ok());  // never attached
  EXPECT_TRUE(this->attached().empty());
}

TYPED_TEST(FabricContract, UnknownHostsAndDevicesAreNotFoundAndChangeNothing) {
  Status s = this->attach(0, {this->gpu(0), "no-such-device"});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound);
  auto op = this->fabric().attach("no-such-host", {this->gpu(0)});
  ASSERT_FALSE(op.ok());
  EXPECT_EQ(op.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(this->attached().empty());
}

TYPED_TEST(FabricContract, AFailedAttachLeavesFabricAndRecordsConsistent) {
  ASSERT_TRUE(this->attach(0, {this->gpu(3)}).ok());
  this->h_->fail_next_attach_part_way("switch port 7 went down");
  Status s = this->attach(0, {this->gpu(0), this->gpu(1)});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("switch port 7 went down"));
  // Nothing of the failed call stays attached; what was there before stays.
  EXPECT_EQ(this->attached(), this->records_);
  EXPECT_EQ(this->attached().size(), 1u);
  // The fabric is usable again at once.
  ASSERT_TRUE(this->attach(0, {this->gpu(0), this->gpu(1)}).ok());
  EXPECT_EQ(this->attached(), this->records_);
}

TYPED_TEST(FabricContract, AFailedDetachLeavesFabricAndRecordsConsistent) {
  ASSERT_TRUE(this->attach(1, {this->gpu(0), this->gpu(2)}).ok());
  this->h_->fail_next_detach_part_way("device busy");
  Status s = this->detach(1, {this->gpu(0), this->gpu(2)});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("device busy"));
  EXPECT_EQ(this->attached(), this->records_);
  EXPECT_EQ(this->attached().size(), 2u);
  ASSERT_TRUE(this->detach(1, {this->gpu(0), this->gpu(2)}).ok());
  EXPECT_TRUE(this->attached().empty());
}

TYPED_TEST(FabricContract, HealthChangesAreReported) {
  this->h_->set_health(this->gpu(1), Health::kCritical);
  this->h_->set_health(this->gpu(2), Health::kWarning);
  auto h = this->fabric().health();
  ASSERT_TRUE(h.ok()) << h;
  std::map<std::string, Health> by_id(h->begin(), h->end());
  EXPECT_EQ(by_id.at(this->gpu(0)), Health::kOk);
  EXPECT_EQ(by_id.at(this->gpu(1)), Health::kCritical);
  EXPECT_EQ(by_id.at(this->gpu(2)), Health::kWarning);
  auto inv = this->fabric().inventory();
  ASSERT_TRUE(inv.ok());
  for (const Device& d : inv->devices) {
    if (d.id == this->gpu(1)) {
      EXPECT_EQ(d.state(), DeviceState::kFailed);
    }
  }
}

}  // namespace
}  // namespace composer

namespace composer {
namespace {

// A restart of composerd (a new driver instance that reads the inventory and the health, as
// start-up does) with devices attached sends nothing that changes the fabric.
TYPED_TEST(FabricContract, ARestartSendsNoWriteToTheFabric) {
  ASSERT_TRUE(this->attach(0, {this->gpu(0), this->gpu(1)}).ok());
  ASSERT_TRUE(this->attach(1, {this->gpu(2)}).ok());
  const uint64_t writes = this->h_->writes();
  if (!this->h_->restart()) GTEST_SKIP() << "this fabric lives in its driver: no restart";
  EXPECT_EQ(this->attached(), this->records_);
  auto h = this->fabric().health();
  ASSERT_TRUE(h.ok()) << h;
  EXPECT_EQ(this->attached(), this->records_);
  EXPECT_EQ(this->h_->writes(), writes);
}

// A device someone else attached is reported attached to its host, as composerd's own are, so
// composerd can tell it foreign by its ledger; composerd's attach of it elsewhere is refused.
TYPED_TEST(FabricContract, ADeviceAttachedOutsideComposerdIsReportedWithItsHost) {
  ASSERT_TRUE(this->h_->attach_outside(this->host(1), this->gpu(3)));
  auto inv = this->fabric().inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  ASSERT_TRUE(inv->attached.contains(this->gpu(3)));
  EXPECT_EQ(inv->attached.at(this->gpu(3)), this->host(1));
  EXPECT_FALSE(inv->held.contains(this->gpu(3)));
  for (const Device& d : inv->devices) EXPECT_FALSE(d.composition_id.has_value()) << d.id;
  Status elsewhere = this->attach(0, {this->gpu(3)});
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.error().code, ErrorCode::kConflict);
  EXPECT_EQ(this->attached().at(this->gpu(3)), this->host(1));
}

// Every device carries what its host can recognise it by, and no two devices the same; or,
// where the harness states none, none at all.
TYPED_TEST(FabricContract, EveryDeviceHasAnIdentityOfItsOwn) {
  auto inv = this->fabric().inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  std::map<std::string, std::string> owner;  // identity -> device
  for (const std::string& g : this->h_->gpus()) {
    const Device* d = test_support::find_device(*inv, g);
    ASSERT_NE(d, nullptr) << g;
    if (!this->h_->identities()) {
      EXPECT_TRUE(d->identity.empty()) << g;
      continue;
    }
    EXPECT_FALSE(d->identity.empty()) << g;
    const std::string key = d->identity.pci_vendor + "/" + d->identity.pci_device + "/" +
                            d->identity.serial + "/" + d->identity.uuid;
    auto [it, fresh] = owner.emplace(key, g);
    EXPECT_TRUE(fresh) << g << " has the identity of " << it->second << ": " << key;
  }
}

// Failure domains: the levels the driver states, one domain per level, sorted by level.
TYPED_TEST(FabricContract, EveryDeviceReportsTheFailureDomainsTheDriverStates) {
  auto inv = this->fabric().inventory();
  ASSERT_TRUE(inv.ok()) << inv;
  for (const std::string& g : this->h_->gpus()) {
    const Device* d = test_support::find_device(*inv, g);
    ASSERT_NE(d, nullptr) << g;
    std::vector<std::string> levels;
    for (const FailureDomain& dom : d->domains) {
      levels.push_back(dom.level);
      EXPECT_FALSE(dom.name.empty()) << g;
    }
    EXPECT_EQ(levels, this->h_->domain_levels()) << g;
  }
}

// Batches: a driver that states it batches takes several changes as one operation, refusing
// alone the one it cannot take; one that does not says so and changes nothing. A fabric that
// applies changes one at a time gets every change as a batch from composerd: it must batch.
TYPED_TEST(FabricContract, BatchesAreTakenWholeOrRefusedAsTheDriverStates) {
  Fabric& f = this->fabric();
  if (f.serialises_changes(f.lane(this->host(0)))) {
    EXPECT_TRUE(this->h_->batches());
  }
  const std::vector<FabricChange> changes = {
      {.attach = true, .fabric_host = this->host(0), .device_ids = {this->gpu(0)}},
      {.attach = true, .fabric_host = this->host(1), .device_ids = {"no-such-device"}},
      {.attach = true, .fabric_host = this->host(1), .device_ids = {this->gpu(2)}}};
  auto started = f.apply_batch(changes);
  if (!this->h_->batches()) {
    ASSERT_FALSE(started.ok());
    EXPECT_THAT(started.error().message, HasSubstr("no batches of changes"));
    EXPECT_TRUE(this->attached().empty());
    return;
  }
  ASSERT_TRUE(started.ok()) << started;
  ASSERT_EQ(started->refused.size(), 1u);
  EXPECT_EQ(started->refused.begin()->first, 1u);
  EXPECT_EQ(started->refused.begin()->second.code, ErrorCode::kNotFound);
  ASSERT_TRUE(finish(f, started->operation).ok());
  const std::map<std::string, std::string> want = {{this->gpu(0), this->host(0)},
                                                   {this->gpu(2), this->host(1)}};
  EXPECT_EQ(this->attached(), want);
}

}  // namespace
}  // namespace composer
