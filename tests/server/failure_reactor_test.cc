// The failure reactions on a real composition service (SQLite file, sim fabric): which jobs a
// failed device or domain hits, the class's reaction once per composition, the bound on
// requeues, and what is done when Slurm refuses; Slurm's side is recorded, not run.
#include "failure_reactor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "service_fixture.h"

namespace composer::server {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Action = policies::FailureReaction::Action;

class FailureReactorTest : public testing::ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    reactions_["training"] = {.class_name = "training", .action = Action::kRequeue, .line = 4};
    reactions_["inference"] = {.class_name = "inference", .action = Action::kNotify, .line = 5};
    reactions_["batch"] = {.class_name = "batch", .action = Action::kNone, .line = 6};
    reactor_ = make_reactor();
  }

  std::unique_ptr<FailureReactor> make_reactor() {
    SlurmJobActions slurm;
    slurm.requeue = [this](uint32_t job) -> Status {
      requeued_.push_back(job);
      if (refuse_requeue_) return Error{ErrorCode::kUnavailable, "Job is not requeueable"};
      return Status::Ok();
    };
    slurm.notify = [this](uint32_t job, const std::string& message) -> Status {
      notified_.emplace_back(job, message);
      return Status::Ok();
    };
    return std::make_unique<FailureReactor>(
        *pool_, *store_,
        [this](std::string_view workload) {
          auto it = reactions_.find(std::string(workload));
          if (it != reactions_.end()) return it->second;
          return policies::FailureReaction{.class_name = std::string(workload)};
        },
        std::move(slurm), clock_);
  }

  Composition compose(uint32_t job_id, const std::string& node, const std::string& workload,
                      uint32_t gpus) {
    ComposeInput in = job(job_id, node, Request{.gpus = gpus});
    in.owner.workload = workload;
    auto c = service_->compose(in);
    EXPECT_TRUE(c.ok()) << c.error();
    return c.ok() ? *c : Composition{};
  }

  void fail(const std::string& device) {
    ASSERT_TRUE(pool_->mark_health(device, Health::kCritical, "reported by the fabric").ok());
  }

  std::vector<Event> reactions(uint32_t job_id) {
    auto events = store_->events(db::EventFilter{.job_id = job_id});
    EXPECT_TRUE(events.ok());
    std::vector<Event> out;
    for (const auto& e : *events) {
      if (e.kind == "requeued" || e.kind == "degraded" || e.kind == "failure_ignored")
        out.push_back(e);
    }
    return out;
  }

  std::map<std::string, policies::FailureReaction> reactions_;
  std::vector<uint32_t> requeued_;
  std::vector<std::pair<uint32_t, std::string>> notified_;
  bool refuse_requeue_ = false;
  std::unique_ptr<FailureReactor> reactor_;
};

TEST_F(FailureReactorTest, NothingFailedNothingDone) {
  compose(1, "n1", "training", 2);
  const auto r = reactor_->run_once();
  EXPECT_EQ(r.requeued + r.notified + r.ignored + r.errors, 0);
  EXPECT_THAT(requeued_, IsEmpty());
  EXPECT_THAT(reactions(1), IsEmpty());
}

TEST_F(FailureReactorTest, EachClassGetsItsReactionOnceAndOnlyTheJobsHit) {
  const Composition train = compose(1, "n1", "training", 2);
  const Composition infer = compose(2, "n1", "inference", 1);
  const Composition batch = compose(3, "n1", "batch", 1);
  const Composition spared = compose(4, "n1", "training", 1);
  fail(train.devices[1].id);
  fail(infer.devices[0].id);
  fail(batch.devices[0].id);

  const auto r = reactor_->run_once();
  EXPECT_EQ(r.requeued, 1);
  EXPECT_EQ(r.notified, 1);
  EXPECT_EQ(r.ignored, 1);
  EXPECT_EQ(requeued_, std::vector<uint32_t>{1});
  ASSERT_EQ(notified_.size(), 1u);
  EXPECT_EQ(notified_[0].first, 2u);
  EXPECT_THAT(notified_[0].second, HasSubstr("device " + infer.devices[0].id + " failed"));
  EXPECT_THAT(notified_[0].second, HasSubstr("keeps running without it"));

  const std::vector<Event> first = reactions(1);
  ASSERT_EQ(first.size(), 1u);
  const Event& e = first[0];
  EXPECT_EQ(e.kind, "requeued");
  EXPECT_EQ(e.composition_id, train.id);
  EXPECT_EQ(e.devices, std::vector<std::string>{train.devices[1].id});
  EXPECT_EQ(e.owner.user, "alice");
  EXPECT_THAT(e.detail, HasSubstr("device " + train.devices[1].id + " failed"));
  EXPECT_THAT(e.detail, HasSubstr("class training reacts with requeue: job 1 requeued through "
                                  "Slurm (1 of at most 3)"));
  EXPECT_EQ(reactions(2).at(0).kind, "degraded");
  EXPECT_THAT(reactions(2).at(0).detail, HasSubstr("it keeps running, degraded"));
  EXPECT_EQ(reactions(3).at(0).kind, "failure_ignored");
  EXPECT_THAT(reactions(4), IsEmpty());

  // The next pass, and a reactor of a restarted composerd, find the reactions recorded.
  EXPECT_EQ(reactor_->run_once().requeued, 0);
  reactor_ = make_reactor();
  const auto again = reactor_->run_once();
  EXPECT_EQ(again.requeued + again.notified + again.ignored, 0);
  EXPECT_EQ(requeued_.size(), 1u);
  EXPECT_EQ(notified_.size(), 1u);
}

TEST_F(FailureReactorTest, AJobOnSeveralNodesReactsOnceNamingEveryNode) {
  const Composition a = compose(7, "n1", "training", 1);
  const Composition b = compose(7, "n2", "training", 1);
  fail(a.devices[0].id);
  fail(b.devices[0].id);
  EXPECT_EQ(reactor_->run_once().requeued, 1);
  EXPECT_EQ(requeued_, std::vector<uint32_t>{7});
  ASSERT_EQ(reactions(7).size(), 1u);
  EXPECT_EQ(reactions(7)[0].node, "n1,n2");
  EXPECT_THAT(reactions(7)[0].detail,
              HasSubstr("devices " + a.devices[0].id + " and " + b.devices[0].id + " failed"));
}

TEST_F(FailureReactorTest, ARequeueIsBoundedPerJob) {
  reactions_["training"].max_requeues = 2;
  for (int round = 1; round <= 3; ++round) {
    // The job starts again after each requeue: a new composition, and its device fails too.
    const Composition c = compose(9, "n1", "training", 1);
    fail(c.devices[0].id);
    (void)reactor_->run_once();
    ASSERT_TRUE(service_->release(9, "n1").ok());
    // The failed device stays failed; the next compose takes another.
  }
  EXPECT_EQ(requeued_, (std::vector<uint32_t>{9, 9}));
  const auto r = reactions(9);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[2].kind, "degraded");
  EXPECT_THAT(r[2].detail, HasSubstr("not requeued: it was requeued 2 times for failed devices "
                                     "already (MaxRequeues=2); it keeps running, degraded"));
  ASSERT_EQ(notified_.size(), 1u);
}

TEST_F(FailureReactorTest, ARequeueSlurmRefusesLeavesTheJobDegraded) {
  refuse_requeue_ = true;
  const Composition c = compose(11, "n1", "training", 1);
  fail(c.devices[0].id);
  const auto r = reactor_->run_once();
  EXPECT_EQ(r.requeued, 0);
  EXPECT_EQ(r.notified, 1);
  ASSERT_EQ(reactions(11).size(), 1u);
  EXPECT_EQ(reactions(11)[0].kind, "degraded");
  EXPECT_THAT(reactions(11)[0].detail,
              HasSubstr("Slurm did not requeue it (Job is not requeueable); it keeps running"));
  EXPECT_EQ(notified_.size(), 1u);
}

TEST_F(FailureReactorTest, TheDefaultIsNotifySaidSo) {
  const Composition c = compose(12, "n1", "interactive", 1);
  fail(c.devices[0].id);
  EXPECT_EQ(reactor_->run_once().notified, 1);
  EXPECT_THAT(reactions(12).at(0).detail,
              HasSubstr("class interactive reacts with notify (no OnFailure line: the default)"));
}

TEST_F(FailureReactorTest, TheJobIsToldOfEveryFailedDeviceInOneSentence) {
  const Composition c = compose(14, "n1", "inference", 2);
  fail(c.devices[0].id);
  fail(c.devices[1].id);
  EXPECT_EQ(reactor_->run_once().notified, 1);
  ASSERT_EQ(notified_.size(), 1u);
  EXPECT_THAT(notified_[0].second,
              HasSubstr("devices " + c.devices[0].id + " and " + c.devices[1].id + " failed"));
  EXPECT_THAT(notified_[0].second, HasSubstr("job 14 keeps running without them"));
}

TEST_F(FailureReactorTest, ImpactsNameOnlyTheFailedDevices) {
  const Composition c = compose(13, "n1", "batch", 2);
  fail(c.devices[0].id);
  const auto impacts = pool_->failure_impacts();
  ASSERT_EQ(impacts.size(), 1u);
  EXPECT_EQ(impacts[0].entry.job_id, 13u);
  EXPECT_EQ(impacts[0].failed, std::vector<std::string>{c.devices[0].id});
}

}  // namespace
}  // namespace composer::server
