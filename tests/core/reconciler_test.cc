#include "composer/core/reconciler.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <set>

#include "composer/core/forwarding_fabric.h"
#include "service_fixture.h"

namespace composer::testing {
namespace {

class ReconcilerTest : public ServiceTest {
 protected:
  Reconciler make() {
    return Reconciler(
        *service_, *pool_, clock_,
        ReconcilerOptions{.interval_ms = 1000, .orphan_grace_ms = 30000, .stuck_after_ms = 60000});
  }
};

// composerd attached it (the ledger claims it) and no live composition owns it any more:
// a composition failed behind the service's back, then composerd restarted.
void make_orphan(db::Store& store, uint32_t job, const std::string& device, int64_t now) {
  auto live = store.live_composition(job, "n1");
  ASSERT_TRUE(live.ok() && live->has_value());
  ASSERT_TRUE(store
                  .transition((*live)->id, CompositionState::kReady, CompositionState::kFailed,
                              "lost track", now)
                  .ok());
  auto claims = store.claims();
  ASSERT_TRUE(claims.ok());
  ASSERT_EQ(claims->count(device), 1u);
}

TEST_F(ReconcilerTest, DetachesAnOrphanOnlyAfterTheGracePeriod) {
  auto c = service_->compose(job(4, "n1", Request{.gpus = 1}));
  ASSERT_TRUE(c.ok());
  const std::string id = c->devices[0].id;
  make_orphan(*store_, 4, id, clock_.now_ms());
  open();
  EXPECT_EQ(pool_->pooled_device(id)->state(), DeviceState::kFree) << "an orphan is not foreign";
  auto r = make();
  EXPECT_EQ(r.run_once().orphans_detached, 0);
  clock_.advance_ms(10000);
  EXPECT_EQ(r.run_once().orphans_detached, 0);
  EXPECT_EQ(fabric_->inventory()->attached.count(id), 1u);
  clock_.advance_ms(25000);
  EXPECT_EQ(r.run_once().orphans_detached, 1);
  EXPECT_EQ(fabric_->inventory()->attached.count(id), 0u);
  EXPECT_EQ(store_->claims()->count(id), 0u) << "the claim ends with the detach";
}

TEST_F(ReconcilerTest, AForeignDeviceIsNeverAllocatedNorDetachedAndFreesWithTheFabric) {
  ASSERT_TRUE(fabric_->attach_behind_back("gpu-a-3", "host-1").ok());
  auto r = make();
  r.run_once();
  auto d = store_->device("gpu-a-3");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state(), DeviceState::kForeign);
  EXPECT_EQ(d->holder, "host host-1");
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);
  auto foreign = store_->devices({.state = DeviceState::kForeign});
  ASSERT_TRUE(foreign.ok());
  ASSERT_EQ(foreign->size(), 1u);
  // Every other GPU can be had, never this one.
  auto all = service_->compose(job(8, "n1", Request{.gpus = 8}));
  EXPECT_FALSE(all.ok());
  auto seven = service_->compose(job(9, "n1", Request{.gpus = 7}));
  ASSERT_TRUE(seven.ok()) << seven.error();
  for (const auto& dev : seven->devices) EXPECT_NE(dev.id, "gpu-a-3");
  for (int round = 0; round < 20; ++round) {
    clock_.advance_ms(60000);
    EXPECT_EQ(r.run_once().orphans_detached, 0);
  }
  EXPECT_EQ(fabric_->inventory()->attached.at("gpu-a-3"), "host-1");
  ASSERT_TRUE(service_->release(9, "n1").ok());
  // The fabric frees it (its holder let it go): it is pooled again at the next round.
  ASSERT_TRUE(fabric_->detach("host-1", {"gpu-a-3"}).ok());
  r.run_once();
  EXPECT_EQ(store_->device("gpu-a-3")->state(), DeviceState::kFree);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
  std::vector<std::string> kinds;
  auto events = store_->events({});
  ASSERT_TRUE(events.ok());
  for (const auto& e : *events) {
    if (e.devices == std::vector<std::string>{"gpu-a-3"}) kinds.push_back(e.kind);
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"foreign", "foreign"}));
}

TEST_F(ReconcilerTest, WhatTheFabricHoldsAtStartIsForeignAndARestartWritesNothing) {
  auto c = service_->compose(job(10, "n1", Request{.gpus = 2}));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(fabric_->attach_behind_back("gpu-b-3", "host-2").ok());
  // Count the writes a restart sends to the fabric.
  struct Counting final : public ForwardingFabric {
    using ForwardingFabric::ForwardingFabric;
    Expected<Operation> attach(const std::string& h, const std::vector<std::string>& ids) override {
      ++writes;
      return inner_.attach(h, ids);
    }
    Expected<Operation> detach(const std::string& h, const std::vector<std::string>& ids) override {
      ++writes;
      return inner_.detach(h, ids);
    }
    int writes = 0;
  } counting(*fabric_);
  service_.reset();
  LivePool pool(*store_, clock_);
  CompositionService restarted(*store_, counting, pool, clock_);
  ASSERT_TRUE(restarted.start().ok());
  ASSERT_TRUE(restarted.recover().ok());
  EXPECT_EQ(pool.pooled_device("gpu-b-3")->state(), DeviceState::kForeign);
  Reconciler r(restarted, pool, clock_, ReconcilerOptions{.orphan_grace_ms = 0});
  for (int round = 0; round < 10; ++round) {
    clock_.advance_ms(60000);
    r.run_once();
  }
  EXPECT_EQ(counting.writes, 0);
  EXPECT_EQ(pool.pooled_device(c->devices[0].id)->state(), DeviceState::kAttached);
  EXPECT_EQ(r.totals().lost_marked_failed, 0);
}

TEST_F(ReconcilerTest, AdoptDetachesAForeignDeviceAndPoolsIt) {
  ASSERT_TRUE(fabric_->attach_behind_back("gpu-a-1", "host-1").ok());
  auto r = make();
  r.run_once();
  auto not_foreign = admin_->adopt("gpu-a-0", "uid 0");
  ASSERT_FALSE(not_foreign.ok());
  EXPECT_EQ(not_foreign.error().code, ErrorCode::kConflict);
  EXPECT_NE(not_foreign.error().message.find("not foreign"), std::string::npos)
      << not_foreign.error();
  EXPECT_EQ(admin_->adopt("no-such", "uid 0").error().code, ErrorCode::kNotFound);
  auto adopted = admin_->adopt("gpu-a-1", "uid 0");
  ASSERT_TRUE(adopted.ok()) << adopted.error();
  EXPECT_EQ(adopted->state(), DeviceState::kFree);
  EXPECT_EQ(fabric_->inventory()->attached.count("gpu-a-1"), 0u);
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
  r.run_once();
  EXPECT_EQ(store_->device("gpu-a-1")->state(), DeviceState::kFree);
  bool recorded = false;
  auto events = store_->events({});
  ASSERT_TRUE(events.ok());
  for (const auto& e : *events) {
    if (e.kind == "adopt") recorded = e.owner.user == "uid 0" && e.devices[0] == "gpu-a-1";
  }
  EXPECT_TRUE(recorded);
}

TEST_F(ReconcilerTest, ReleaseForeignLeavesAnOrphanWhereItIsForGood) {
  auto c = service_->compose(job(11, "n1", Request{.gpus = 1}));
  ASSERT_TRUE(c.ok());
  const std::string id = c->devices[0].id;
  auto owned = admin_->release_foreign(id, "uid 0");
  ASSERT_FALSE(owned.ok());
  EXPECT_NE(owned.error().message.find("release the job instead"), std::string::npos)
      << owned.error();
  make_orphan(*store_, 11, id, clock_.now_ms());
  open();
  auto released = admin_->release_foreign(id, "uid 0");
  ASSERT_TRUE(released.ok()) << released.error();
  EXPECT_EQ(released->state(), DeviceState::kForeign);
  EXPECT_EQ(store_->claims()->count(id), 0u);
  auto r = make();
  for (int round = 0; round < 5; ++round) {
    clock_.advance_ms(60000);
    EXPECT_EQ(r.run_once().orphans_detached, 0);
  }
  EXPECT_EQ(fabric_->inventory()->attached.at(id), "host-1");
  EXPECT_EQ(admin_->release_foreign(id, "uid 0").error().code, ErrorCode::kConflict);
  EXPECT_EQ(admin_->release_foreign("gpu-b-0", "uid 0").error().code, ErrorCode::kConflict)
      << "a free device has no attachment to hand over";
}

TEST_F(ReconcilerTest, ASharedBlockIsForeignWithItsHolders) {
  // The fabric shows gpu-b-2 shared by two systems (Redfish SharingEnabled).
  class Sharing final : public ForwardingFabric {
   public:
    using ForwardingFabric::ForwardingFabric;
    Expected<FabricInventory> inventory() override {
      auto inv = inner_.inventory();
      if (inv) inv->held["gpu-b-2"] = "shared by systems host-1, host-2";
      return inv;
    }
  } sharing(*fabric_);
  service_.reset();
  LivePool pool(*store_, clock_);
  CompositionService service(*store_, sharing, pool, clock_);
  DeviceAdmin admin(service, pool, clock_);
  ASSERT_TRUE(service.start().ok());
  EXPECT_EQ(pool.pooled_device("gpu-b-2")->holder, "shared by systems host-1, host-2");
  auto all = service.compose(job(12, "n2", Request{.gpus = 4}));
  EXPECT_FALSE(all.ok()) << "n2 reaches only z2, whose four GPUs include the shared one";
  auto three = service.compose(job(13, "n2", Request{.gpus = 3}));
  ASSERT_TRUE(three.ok()) << three.error();
  for (const auto& d : three->devices) EXPECT_NE(d.id, "gpu-b-2");
  auto adopted = admin.adopt("gpu-b-2", "uid 0");
  ASSERT_FALSE(adopted.ok());
  EXPECT_NE(adopted.error().message.find("shared by systems"), std::string::npos)
      << adopted.error();
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
  class ServedOnly final : public ForwardingFabric {
   public:
    using ForwardingFabric::ForwardingFabric;
    Expected<FabricInventory> inventory() override {
      auto inv = inner_.inventory();
      if (!inv) return inv;
      std::erase_if(inv->hosts, [](const Host& h) { return h.fabric_id == "host-x"; });
      return inv;
    }
  } served(**fabric);

  service_.reset();
  LivePool pool(*store_, clock_);
  CompositionService service(*store_, served, pool, clock_);
  ASSERT_TRUE(service.start().ok());
  // Not handed out: foreign, with its holder.
  auto d = store_->device("gpu-a-0");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state(), DeviceState::kForeign);
  EXPECT_NE(d->holder.find("host-x"), std::string::npos) << d->holder;
  // And never detached as an orphan.
  Reconciler r(service, pool, clock_, ReconcilerOptions{.orphan_grace_ms = 0});
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
  // Released, it does not go back to the pool: it is failed, and drained, so that it stays
  // out when the fabric calls it healthy again, until an admin resumes it.
  ASSERT_TRUE(service_->release(6, "n1").ok());
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);
  r.run_once();
  d = store_->device(id);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->drained);
  EXPECT_EQ(d->drain_reason.rfind("lost by the fabric: the fabric lost the attachment", 0), 0u)
      << d->drain_reason;
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);
  ASSERT_TRUE(admin_->resume(id, "uid 0").ok());
  r.run_once();
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
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

// A device a node's host reports bad (slurm-plugin's GPU health check) is failed for the
// failure reactor, and stays failed through the fabric's "healthy" and a restart until an
// admin resumes it.
TEST_F(ReconcilerTest, AFailureAHostReportedStandsUntilAnAdminResumes) {
  auto c = service_->compose(job(16, "n1", Request{.gpus = 1}));
  ASSERT_TRUE(c.ok()) << c.error();
  const std::string id = c->devices[0].id;
  EXPECT_FALSE(admin_->fail_reported(16, "n1", id, "", "uid 0").ok());  // a reason is needed
  auto failed = admin_->fail_reported(16, "n1", id, "XID 79", "uid 0");
  ASSERT_TRUE(failed.ok()) << failed.error();
  EXPECT_EQ(failed->state(), DeviceState::kFailed);
  EXPECT_EQ(failed->drain_reason, "failed on its host: XID 79");
  auto impacts = pool_->failure_impacts();
  ASSERT_EQ(impacts.size(), 1u);
  EXPECT_EQ(impacts[0].entry.job_id, 16u);
  EXPECT_EQ(impacts[0].failed, std::vector<std::string>{id});
  // Repeated: no new event.
  auto events = store_->events({});
  ASSERT_TRUE(events.ok());
  const size_t before = events->size();
  ASSERT_TRUE(admin_->fail_reported(16, "n1", id, "XID 79", "uid 0").ok());
  EXPECT_EQ(store_->events({})->size(), before);

  auto r = make();
  EXPECT_EQ(r.run_once().health_changes, 0);  // the fabric says ok; the host's report stands
  EXPECT_EQ(store_->device(id)->health, Health::kCritical);
  ASSERT_TRUE(service_->release(16, "n1").ok());
  open();  // as after a composerd restart
  EXPECT_TRUE(pool_->host_failed(id));
  EXPECT_EQ(pool_->pooled_device(id)->state(), DeviceState::kFailed);
  auto again = make();
  again.run_once();
  EXPECT_EQ(free_of(DeviceType::kGpu), 7u);

  auto resumed = admin_->resume(id, "uid 0");
  ASSERT_TRUE(resumed.ok()) << resumed.error();
  EXPECT_EQ(resumed->state(), DeviceState::kFree);
  EXPECT_FALSE(pool_->host_failed(id));
  again.run_once();
  EXPECT_EQ(free_of(DeviceType::kGpu), 8u);
}

TEST_F(ReconcilerTest, RecoveryFinishesAnAttachThatCompletedBeforeACrash) {
  // A crash between the fabric's attach and the "ready" record: the intent is durable.
  Composition intent;
  intent.owner.job_id = 21;
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
  intent.owner.job_id = 22;
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

// Detaches that report running until `want` of them have started (or 3 s have passed): they
// end at once when started together, one after another (3 s for the first) when not. Counts how
// many had started when the first ended.
class GatedDetaches : public ForwardingFabric {
 public:
  GatedDetaches(Fabric& to, size_t want) : ForwardingFabric(to), want_(want) {}
  Expected<Operation> detach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    auto op = inner_.detach(host, ids);
    if (!op) return op;
    std::lock_guard lock(mu_);
    if (started_++ == 0) first_ = std::chrono::steady_clock::now();
    return Operation{.id = "gated-" + std::to_string(started_), .state = OperationState::kRunning};
  }
  Expected<Operation> operation_status(const std::string& id) override {
    if (!id.starts_with("gated-")) return inner_.operation_status(id);
    std::lock_guard lock(mu_);
    const bool open =
        started_ >= want_ || std::chrono::steady_clock::now() - first_ > std::chrono::seconds(3);
    if (open && started_when_first_done_ == 0) started_when_first_done_ = started_;
    return Operation{.id = id, .state = open ? OperationState::kDone : OperationState::kRunning};
  }
  size_t started_when_first_done() {
    std::lock_guard lock(mu_);
    return started_when_first_done_;
  }

 private:
  const size_t want_;
  std::mutex mu_;
  size_t started_ = 0;
  size_t started_when_first_done_ = 0;
  std::chrono::steady_clock::time_point first_;
};

// The service again on the same store, over `fabric`.
std::unique_ptr<CompositionService> service_over(db::Store& store, Fabric& fabric, LivePool& pool,
                                                 const Clock& clock) {
  auto s = std::make_unique<CompositionService>(
      store, fabric, pool, clock,
      ServiceOptions{
          .compose_timeout_ms = 2000, .release_timeout_ms = 2000, .poll_interval_ms = 1});
  EXPECT_TRUE(s->start().ok());
  return s;
}

// Compositions a crash left releasing are settled at once at start-up, not one detach after
// another (composerd listens only once they are).
TEST_F(ReconcilerTest, RecoverySettlesManyAtOnce) {
  constexpr uint32_t kJobs = 4;
  for (uint32_t j = 0; j < kJobs; ++j) {
    ASSERT_TRUE(service_->compose(job(60 + j, "n1", Request{.gpus = 1})).ok());
    auto live = store_->live_composition(60 + j, "n1");
    ASSERT_TRUE(live.ok() && live->has_value());
    ASSERT_TRUE(store_
                    ->transition((*live)->id, CompositionState::kReady,
                                 CompositionState::kReleasing, "", clock_.now_ms())
                    .ok());
  }
  service_.reset();
  GatedDetaches gated(*fabric_, kJobs);
  LivePool pool(*store_, clock_);
  auto service = service_over(*store_, gated, pool, clock_);
  auto settled = service->recover();
  ASSERT_TRUE(settled.ok()) << settled.error();
  EXPECT_EQ(*settled, static_cast<int>(kJobs));
  EXPECT_EQ(gated.started_when_first_done(), kJobs);
  EXPECT_TRUE(fabric_->inventory()->attached.empty());
}

// Jobs Slurm ended are released at once, not one detach after another: a slow fabric keeps no
// device attached long past the grace.
TEST_F(ReconcilerTest, ReleasesEndedJobsAtOnce) {
  constexpr uint32_t kJobs = 4;
  for (uint32_t j = 0; j < kJobs; ++j) {
    ASSERT_TRUE(service_->compose(job(70 + j, "n1", Request{.gpus = 1})).ok());
  }
  service_.reset();
  GatedDetaches gated(*fabric_, kJobs);
  LivePool pool(*store_, clock_);
  auto service = service_over(*store_, gated, pool, clock_);
  Reconciler r(*service, pool, clock_,
               ReconcilerOptions{.interval_ms = 1000,
                                 .orphan_grace_ms = 30000,
                                 .stuck_after_ms = 60000,
                                 .active_jobs = []() -> Expected<std::set<uint32_t>> {
                                   return std::set<uint32_t>{};
                                 }});
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);  // first seen gone
  clock_.advance_ms(31000);
  EXPECT_EQ(r.run_once().ended_jobs_released, static_cast<int>(kJobs));
  EXPECT_EQ(gated.started_when_first_done(), kJobs);
  EXPECT_TRUE(fabric_->inventory()->attached.empty());
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
  Reconciler r(*service_, *pool_, clock_,
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

// A job whose node epilog found its devices still in use drains the node: the reconciler keeps
// that job's composition as long as the node is drained (detaching would pull the devices from
// under the holder), releases it once the node is resumed and the grace has passed again, and
// releases nothing of ended jobs while it cannot tell which nodes are drained.
TEST_F(ReconcilerTest, KeepsTheDevicesOfAnEndedJobWhileItsNodeIsDrained) {
  ASSERT_TRUE(service_->compose(job(41, "n1", Request{.gpus = 1})).ok());
  ASSERT_TRUE(service_->compose(job(42, "n2", Request{.gpus = 1})).ok());
  std::set<uint32_t> running{};
  std::set<std::string> drained{"n1"};
  bool sinfo_up = true;
  Reconciler r(
      *service_, *pool_, clock_,
      ReconcilerOptions{.interval_ms = 1000,
                        .orphan_grace_ms = 30000,
                        .stuck_after_ms = 60000,
                        .active_jobs = [&]() -> Expected<std::set<uint32_t>> { return running; },
                        .drained_nodes = [&]() -> Expected<std::set<std::string>> {
                          if (!sinfo_up) return Error{ErrorCode::kUnavailable, "down"};
                          return drained;
                        }});
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);  // both first seen gone
  clock_.advance_ms(31000);
  EXPECT_EQ(r.run_once().ended_jobs_released, 1);  // job 42 on n2; job 41's node is drained
  EXPECT_TRUE(store_->live_composition(41, "n1")->has_value());
  EXPECT_FALSE(store_->live_composition(42, "n2")->has_value());
  clock_.advance_ms(600000);
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);  // drained for ten minutes: still kept
  EXPECT_TRUE(store_->live_composition(41, "n1")->has_value());

  drained.clear();  // an admin resumed n1: the grace starts again
  sinfo_up = false;
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);  // cannot tell: nothing released
  sinfo_up = true;
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);  // first seen gone on a resumed node
  clock_.advance_ms(31000);
  EXPECT_EQ(r.run_once().ended_jobs_released, 1);
  EXPECT_FALSE(store_->live_composition(41, "n1")->has_value());
}

// A node that found an ended job's devices still in use holds the composition: the reconciler
// keeps it however long the job has been gone, and releases it after the grace once the hold is
// cleared.
TEST_F(ReconcilerTest, KeepsTheDevicesOfAnEndedJobWhileItsNodeHoldsThem) {
  ASSERT_TRUE(service_->compose(job(43, "n1", Request{.gpus = 1})).ok());
  ASSERT_TRUE(admin_->set_hold(43, "n1", "pid 9 holds gpu-0", "uid 0").ok());
  Reconciler r(*service_, *pool_, clock_,
               ReconcilerOptions{.interval_ms = 1000,
                                 .orphan_grace_ms = 30000,
                                 .stuck_after_ms = 60000,
                                 .active_jobs = [&]() -> Expected<std::set<uint32_t>> {
                                   return std::set<uint32_t>{};
                                 },
                                 .drained_nodes = [&]() -> Expected<std::set<std::string>> {
                                   return std::set<std::string>{};
                                 }});
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);
  clock_.advance_ms(600000);
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);
  EXPECT_TRUE(store_->live_composition(43, "n1")->has_value());

  ASSERT_TRUE(admin_->set_hold(43, "n1", "", "uid 0").ok());
  EXPECT_EQ(r.run_once().ended_jobs_released, 0);  // first seen gone without a hold
  clock_.advance_ms(31000);
  EXPECT_EQ(r.run_once().ended_jobs_released, 1);
  EXPECT_FALSE(store_->live_composition(43, "n1")->has_value());
}

}  // namespace
}  // namespace composer::testing
