// The device administration on its live pool, beside the composition service: a node's hold,
// a node's drain of a device it never saw, a failure its host reported, an admin's drains of
// devices and failure domains. Foreign devices (adopt, release-foreign) are in
// reconciler_test.cc, beside the holder round that finds them.
#include <algorithm>
#include <string>
#include <vector>

#include "service_fixture.h"

namespace composer::testing {
namespace {

class DeviceAdminTest : public ServiceTest {
 protected:
  // The small fabric again, its z1 devices in rack r1 and its z2 devices in rack r2.
  void open_with_racks() {
    SimConfig config = small_fabric();
    for (auto& g : config.groups) {
      g.domains = {FailureDomain{.level = "rack", .name = g.zone == "z1" ? "r1" : "r2"}};
    }
    auto fabric = SimFabric::create(config, clock_);
    ASSERT_TRUE(fabric.ok()) << fabric.error();
    admin_.reset();
    service_.reset();
    fabric_ = std::move(fabric).value();
    open();
  }
};

// A node's hold keeps a composition from every release, the job's included, survives a restart
// of the service, and once cleared the composition releases as any other. Each change of the
// hold is one event.
TEST_F(DeviceAdminTest, AHeldCompositionIsReleasedByNoOneUntilTheHoldIsCleared) {
  ASSERT_TRUE(service_->compose_job(job(30, "", Request{.gpus = 1}), {"n1", "n2"}).ok());
  const std::string why = "still in use after 30 s: pid 77 holds gpu-0 (/dev/nvidia0)";
  auto held = admin_->set_hold(30, "n1", why, "uid 0");
  ASSERT_TRUE(held.ok()) << held.error();
  EXPECT_EQ(held->hold, why);
  EXPECT_EQ(held->state, CompositionState::kReady);

  auto refused = service_->release(30, "n1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_NE(refused.error().message.find(why), std::string::npos) << refused.error();
  auto job_released = service_->release_job(30);
  ASSERT_TRUE(job_released.ok()) << job_released.error();
  ASSERT_EQ(job_released->size(), 1u);
  EXPECT_EQ((*job_released)[0].node, "n2");
  auto kept = store_->live_composition(30, "n1");
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ((*kept)->hold, why);
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);

  open();  // as after a composerd restart
  ASSERT_FALSE(service_->release(30, "n1").ok());

  // Setting it on what is not live, or on nothing, changes nothing.
  auto gone = admin_->set_hold(30, "n2", why, "uid 0");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);

  ASSERT_TRUE(admin_->set_hold(30, "n1", "", "uid 0").ok());
  auto released = service_->release(30, "n1");
  ASSERT_TRUE(released.ok()) << released.error();
  ASSERT_TRUE(released->has_value());
  EXPECT_EQ((*released)->state, CompositionState::kReleased);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
  std::vector<std::string> k = kinds(30);
  EXPECT_EQ(std::count(k.begin(), k.end(), "hold"), 1);
  EXPECT_EQ(std::count(k.begin(), k.end(), "unhold"), 1);
}

// A node drains a device of its own job's composition that its host never showed; it cannot
// drain anything else.
TEST_F(DeviceAdminTest, ANodeDrainsOnlyADeviceItsJobWasGiven) {
  auto c = service_->compose(job(31, "n1", Request{.gpus = 1}));
  ASSERT_TRUE(c.ok()) << c.error();
  const std::string mine = c->devices[0].id;
  const std::string other = mine == "gpu-a-0" ? "gpu-a-1" : "gpu-a-0";
  auto refused = admin_->drain_unseen(31, "n1", other, "never showed", "uid 0");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.error().message.find("does not hold '" + other + "'"), std::string::npos)
      << refused.error();
  EXPECT_EQ(admin_->drain_unseen(32, "n1", mine, "never showed", "uid 0").error().code,
            ErrorCode::kNotFound);
  EXPECT_FALSE(store_->device(other)->drained);

  auto drained = admin_->drain_unseen(31, "n1", mine, "never showed", "uid 0");
  ASSERT_TRUE(drained.ok()) << drained.error();
  EXPECT_TRUE(drained->drained);
  EXPECT_EQ(drained->drain_reason, "never showed");
  ASSERT_TRUE(service_->release(31, "n1").ok());
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);  // not handed out again until resumed
}

TEST_F(DeviceAdminTest, DrainedDevicesAreNotAllocatedAndResumeBringsThemBack) {
  for (const char* id : {"gpu-a-0", "gpu-a-1", "gpu-a-2", "gpu-a-3"}) {
    ASSERT_TRUE(admin_->drain(id, "firmware update", "uid 0").ok());
  }
  auto c = service_->compose(job(13, "n1", Request{.gpus = 2}));
  ASSERT_TRUE(c.ok()) << c.error();
  for (const auto& d : c->devices) EXPECT_EQ(d.zone, "z2") << d.id;
  auto resumed = admin_->resume("gpu-a-0", "uid 0");
  ASSERT_TRUE(resumed.ok());
  EXPECT_FALSE(resumed->drained);
  EXPECT_FALSE(admin_->drain("gpu-a-0", "", "uid 0").ok());  // a reason is required
  EXPECT_EQ(admin_->drain("no-such", "x", "uid 0").error().code, ErrorCode::kNotFound);
}

// A failure domain is drained whole, in one write, or not at all; a composition keeps its
// devices there until it ends, and nothing new is composed from the domain until it is resumed.
TEST_F(DeviceAdminTest, AFailureDomainIsDrainedWholeAndResumedWhole) {
  open_with_racks();
  const FailureDomain r1{.level = "rack", .name = "r1"};
  auto c = service_->compose(job(40, "n1", Request{.gpus = 1}));
  ASSERT_TRUE(c.ok()) << c.error();

  auto no_reason = admin_->set_domain_drained(r1, true, "", "uid 0");
  ASSERT_FALSE(no_reason.ok());
  EXPECT_EQ(no_reason.error().code, ErrorCode::kInvalidArgument);
  auto unknown = admin_->set_domain_drained({.level = "rack", .name = "r9"}, true, "x", "uid 0");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("rack:r1, rack:r2"), std::string::npos) << unknown.error();
  for (const std::string id : {"gpu-a-1", "mem-a-0"}) EXPECT_FALSE(store_->device(id)->drained);

  auto drained = admin_->set_domain_drained(r1, true, "PDU swap", "uid 0");
  ASSERT_TRUE(drained.ok()) << drained.error();
  EXPECT_EQ(drained->size(), 8u);  // gpu-a and mem-a
  for (const Device& d : *drained) {
    EXPECT_TRUE(d.drained) << d.id;
    EXPECT_EQ(d.drain_reason, "PDU swap");
  }
  EXPECT_TRUE(pool_->pooled_device(c->devices[0].id)->composition_id.has_value());
  EXPECT_FALSE(service_->compose(job(41, "n1", Request{.mem_bytes = 64 * kGiB})).ok());
  ASSERT_TRUE(service_->release(40, "n1").ok());
  EXPECT_EQ(free_of(DeviceType::kGpu), 4u);  // r2's only

  auto resumed = admin_->set_domain_drained(r1, false, "", "uid 0");
  ASSERT_TRUE(resumed.ok()) << resumed.error();
  for (const Device& d : *resumed) EXPECT_FALSE(d.drained) << d.id;
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

// A failure a node's host reports marks the device failed and drained; a second report changes
// nothing, a restart keeps it (start() finds it by its drain reason), and only a resume lifts it.
TEST_F(DeviceAdminTest, AFailureAHostReportedStandsUntilResumed) {
  auto c = service_->compose(job(42, "n1", Request{.gpus = 1}));
  ASSERT_TRUE(c.ok()) << c.error();
  const std::string id = c->devices[0].id;
  EXPECT_EQ(admin_->fail_reported(43, "n1", id, "XID 79", "uid 0").error().code,
            ErrorCode::kNotFound);
  EXPECT_EQ(admin_->fail_reported(42, "n1", "gpu-b-0", "XID 79", "uid 0").error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_FALSE(pool_->host_failed(id));

  auto failed = admin_->fail_reported(42, "n1", id, "XID 79", "uid 0");
  ASSERT_TRUE(failed.ok()) << failed.error();
  EXPECT_EQ(failed->health, Health::kCritical);
  EXPECT_EQ(failed->drain_reason, std::string(LivePool::kHostFailed) + "XID 79");
  auto again = admin_->fail_reported(42, "n1", id, "XID 48", "uid 0");
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->drain_reason, failed->drain_reason);

  open();  // as after a composerd restart
  EXPECT_TRUE(pool_->host_failed(id));
  EXPECT_EQ(pool_->pooled_device(id)->health, Health::kCritical);

  auto resumed = admin_->resume(id, "uid 0");
  ASSERT_TRUE(resumed.ok()) << resumed.error();
  EXPECT_FALSE(resumed->drained);
  EXPECT_EQ(resumed->health, Health::kOk);
  EXPECT_FALSE(pool_->host_failed(id));
}

}  // namespace
}  // namespace composer::testing
