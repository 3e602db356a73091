#include "composer/core/reconciler.h"

#include <set>

#include "composer/test_support/forwarding_fabric.h"
#include "service_fixture.h"

namespace composer::testing {
namespace {

class ReconcilerTest : public ServiceTest {
 protected:
  Reconciler make() {
    return Reconciler(
        *service_, clock_,
        ReconcilerOptions{.interval_ms = 1000, .orphan_grace_ms = 30000, .stuck_after_ms = 60000});
  }
};

TEST_F(ReconcilerTest, DetachesAnOrphanOnlyAfterTheGracePeriod) {
  ASSERT_TRUE(fabric_->attach_behind_back("gpu-a-3", "host-1").ok());
  auto r = make();
  EXPECT_EQ(r.run_once().orphans_detached, 0);
  clock_.advance_ms(10000);
  EXPECT_EQ(r.run_once().orphans_detached, 0);
  EXPECT_EQ(fabric_->inventory()->attached.count("gpu-a-3"), 1u);
  clock_.advance_ms(25000);
  EXPECT_EQ(r.run_once().orphans_detached, 1);
  EXPECT_EQ(fabric_->inventory()->attached.count("gpu-a-3"), 0u);
}

TEST_F(ReconcilerTest, LeavesDevicesOfHostsItDoesNotServeAlone) {
  // The fabric knows a host composerd was not configured for (a login node, say).
  SimConfig config = small_fabric();
  config.hosts.push_back(Host{.node = "other",
                              .fabric_id = "host-x",
                              .zones = {"z1"},
                              .gpu_slots = 8,
                              .mem_slots = 8,
                              .nvme_slots = 4});
  auto fabric = SimFabric::create(config, clock_);
  ASSERT_TRUE(fabric.ok());
  ASSERT_TRUE((*fabric)->attach("host-x", {"gpu-a-0"}).ok());

  // Only n1 and n2 are served: a service over a fabric view that hides host-x.
  class ServedOnly final : public test_support::ForwardingFabric {
   public:
    using ForwardingFabric::ForwardingFabric;
    Expected<FabricInventory> inventory() override {
      auto inv = to_.inventory();
      if (!inv) return inv;
      std::erase_if(inv->hosts, [](const Host& h) { return h.fabric_id == "host-x"; });
      return inv;
    }
  } served(**fabric);

  service_.reset();
  CompositionService service(*store_, served, clock_);
  ASSERT_TRUE(service.start().ok());
  // Not handed out: drained with the reason.
  auto d = store_->device("gpu-a-0");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->drained);
  EXPECT_NE(d->drain_reason.find("host-x"), std::string::npos) << d->drain_reason;
  // And never detached as an orphan.
  Reconciler r(service, clock_, ReconcilerOptions{.orphan_grace_ms = 0});
  r.run_once();
  clock_.advance_ms(100000);
  EXPECT_EQ(r.run_once().orphans_detached, 0);
  EXPECT_EQ((*fabric)->inventory()->attached.at("gpu-a-0"), "host-x");
}

TEST_F(ReconcilerTest, LeavesOwnedDevicesAlone) {
  auto c = service_->compose(job(5, "n1", Request{.gpus = 2}));
  ASSERT_TRUE(c.ok());
  auto r = make();
  clock_.advance_ms(100000);
  auto report = r.run_once();
  EXPECT_EQ(report.orphans_detached, 0);
  EXPECT_EQ(report.lost_marked_failed, 0);
  EXPECT_EQ(fabric_->inventory()->attached.size(), 2u);
}

TEST_F(ReconcilerTest, MarksADeviceTheFabricLostAsFailed) {
  auto c = service_->compose(job(6, "n1", Request{.gpus = 1}));
  ASSERT_TRUE(c.ok());
  const std::string id = c->devices[0].id;
  ASSERT_TRUE(fabric_->lose_attachment(id).ok());
  auto r = make();
  EXPECT_EQ(r.run_once().lost_marked_failed, 1);
  auto d = store_->device(id);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state(), DeviceState::kFailed);
  EXPECT_EQ(r.run_once().lost_marked_failed, 0);  // once is enough
  // Released, it does not go back to the pool: it is failed.
  ASSERT_TRUE(service_->release(6, "n1").ok());
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);
}

TEST_F(ReconcilerTest, CopiesHealthFromTheFabric) {
  ASSERT_TRUE(fabric_->set_health("gpu-b-1", Health::kCritical).ok());
  auto r = make();
  EXPECT_EQ(r.run_once().health_changes, 1);
  EXPECT_EQ(store_->device("gpu-b-1")->health, Health::kCritical);
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);
  ASSERT_TRUE(fabric_->set_health("gpu-b-1", Health::kOk).ok());
  EXPECT_EQ(r.run_once().health_changes, 1);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

TEST_F(ReconcilerTest, RecoveryFinishesAnAttachThatCompletedBeforeACrash) {
  // A crash between the fabric's attach and the "ready" record: the intent is durable.
  Composition intent;
  intent.job_id = 21;
  intent.node = "n1";
  intent.request = Request{.gpus = 1};
  intent.state = CompositionState::kComposing;
  ASSERT_TRUE(store_->create_composition(intent, {"gpu-a-0"}, clock_.now_ms()).ok());
  ASSERT_TRUE(fabric_->attach("host-1", {"gpu-a-0"}).ok());
  open();
  auto settled = service_->recover();
  ASSERT_TRUE(settled.ok());
  EXPECT_EQ(*settled, 1);
  auto live = store_->live_composition(21, "n1");
  ASSERT_TRUE(live.ok() && live->has_value());
  EXPECT_EQ((*live)->state, CompositionState::kReady);
}

TEST_F(ReconcilerTest, RecoveryRollsBackAnAttachThatNeverHappened) {
  Composition intent;
  intent.job_id = 22;
  intent.node = "n1";
  intent.request = Request{.gpus = 2};
  intent.state = CompositionState::kComposing;
  ASSERT_TRUE(store_->create_composition(intent, {"gpu-a-0", "gpu-a-1"}, clock_.now_ms()).ok());
  ASSERT_TRUE(fabric_->attach("host-1", {"gpu-a-0"}).ok());  // half done
  open();
  ASSERT_EQ(*service_->recover(), 1);
  EXPECT_FALSE(store_->live_composition(22, "n1")->has_value());
  EXPECT_TRUE(fabric_->inventory()->attached.empty());
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

TEST_F(ReconcilerTest, SettlesACompositionStuckReleasing) {
  ASSERT_TRUE(service_->compose(job(23, "n1", Request{.gpus = 1})).ok());
  fabric_->fail_next_detaches(1, "timeout talking to switch");
  ASSERT_FALSE(service_->release(23, "n1").ok());
  auto r = make();
  EXPECT_EQ(r.run_once().stuck_settled, 0);  // not stuck yet
  clock_.advance_ms(61000);
  EXPECT_EQ(r.run_once().stuck_settled, 1);
  db::CompositionFilter f;
  f.job_id = 23;
  EXPECT_EQ(store_->compositions(f)->front().state, CompositionState::kReleased);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

TEST_F(ReconcilerTest, ReleasesTheDevicesOfAJobSlurmNoLongerRunsAfterTheGrace) {
  ASSERT_TRUE(service_->compose(job(31, "n1", Request{.gpus = 1})).ok());
  ASSERT_TRUE(service_->compose(job(32, "n1", Request{.gpus = 1})).ok());
  std::set<uint32_t> running{31, 32};
  bool slurm_up = true;
  Reconciler r(*service_, clock_,
               ReconcilerOptions{.interval_ms = 1000,
                                 .orphan_grace_ms = 30000,
                                 .stuck_after_ms = 60000,
                                 .active_jobs = [&]() -> Expected<std::set<uint32_t>> {
                                   if (!slurm_up) return Error{ErrorCode::kUnavailable, "down"};
                                   return running;
                                 }});
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);
  running.erase(32);                               // job 32 ended, its epilog never ran
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);  // first seen gone
  clock_.advance_ms(31000);
  slurm_up = false;  // an unreachable slurmctld releases nothing
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);
  EXPECT_TRUE(store_->live_composition(32, "n1")->has_value());
  slurm_up = true;
  EXPECT_EQ(r.run_once().ended_jobs_released, 1);
  EXPECT_FALSE(store_->live_composition(32, "n1")->has_value());
  EXPECT_TRUE(store_->live_composition(31, "n1")->has_value());
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);
}

}  // namespace
}  // namespace composer::testing
