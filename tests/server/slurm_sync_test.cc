// Slurm kept in step with the pool, in process: a real pool (tests/core's fixture) and
// policy keeper, and tests/integration's stand-in scontrol, whose state is files in a
// temporary directory. A round that cannot read Slurm changes nothing; a round applies its plan
// and the next finds nothing to do; a dry round runs nothing; a hold deleted outside composerd
// comes back and is counted as drift.
#include "slurm_sync.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "service_fixture.h"

namespace composer::server {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class SlurmSyncTest : public testing::ServiceTest {
 protected:
  void SetUp() override {
    ServiceTest::SetUp();
    ::setenv("FAKE_SLURM", slurm_.path().c_str(), 1);
    // Slurm has the pool's GPU license with two more than the pool's eight GPUs.
    write("licenses", "LicenseName=fabric_gpu Total=10 Used=0 Free=10 Reserved=0 Remote=no\n");
    keeper_ = std::make_unique<PolicyKeeper>(*store_, *pool_, clock_, std::vector<std::string>{});
    ASSERT_TRUE(keeper_->load().ok());
  }

  std::unique_ptr<SlurmSync> sync(std::string scontrol = std::string(FAKE_SCONTROL_DIR) +
                                                         "/scontrol") {
    return std::make_unique<SlurmSync>(*pool_, *keeper_, clock_,
                                       SlurmSyncOptions{.scontrol = std::move(scontrol)});
  }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(slurm_.file(name)) << text;
  }
  std::string read(const std::string& name) {
    std::ifstream in(slurm_.file(name));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  test_support::TempDir slurm_{"slurm-sync-test"};
  std::unique_ptr<PolicyKeeper> keeper_;
};

TEST_F(SlurmSyncTest, ARoundThatCannotReadSlurmChangesNothingAndSaysSo) {
  auto s = sync(slurm_.file("no-scontrol"));
  EXPECT_EQ(s->in_step(), -1);
  SyncReport report = s->round();
  EXPECT_FALSE(report.applied);
  EXPECT_THAT(report.error, HasSubstr("cannot read Slurm's licenses and reservations"));
  EXPECT_EQ(s->in_step(), 0);
}

TEST_F(SlurmSyncTest, ARoundAppliesItsPlanAndTheNextFindsNothingToChange) {
  auto s = sync();
  SyncReport first = s->round();
  EXPECT_TRUE(first.applied) << first.error;
  EXPECT_TRUE(first.plan.changes());
  EXPECT_EQ(s->in_step(), 1);
  const std::string calls = read("calls");
  EXPECT_THAT(calls, HasSubstr("create reservation ReservationName=hold_fabric_gpu"));
  EXPECT_THAT(read("reservations"), HasSubstr("Licenses=fabric_gpu:2"));

  SyncReport second = s->round();
  EXPECT_TRUE(second.applied) << second.error;
  EXPECT_FALSE(second.plan.changes());
  EXPECT_EQ(read("calls"), calls);
  EXPECT_EQ(s->drift_recreated(), 0u);
}

TEST_F(SlurmSyncTest, ADryRoundComputesThePlanAndRunsNothing) {
  auto s = sync();
  SyncReport dry = s->round(false);
  EXPECT_FALSE(dry.applied);
  EXPECT_TRUE(dry.plan.changes());
  EXPECT_EQ(read("calls"), "");
  EXPECT_EQ(read("reservations"), "");
  EXPECT_EQ(s->in_step(), -1);
}

TEST_F(SlurmSyncTest, AHoldDeletedOutsideComposerdComesBackAndCountsAsDrift) {
  auto s = sync();
  ASSERT_TRUE(s->round().applied);
  ASSERT_TRUE(s->round().applied);  // the round that learns what Slurm holds
  write("reservations", "");        // an admin's scontrol delete
  SyncReport again = s->round();
  EXPECT_TRUE(again.applied) << again.error;
  EXPECT_EQ(s->drift_recreated(), 1u);
  EXPECT_THAT(read("reservations"), HasSubstr("ReservationName=hold_fabric_gpu"));
}

TEST_F(SlurmSyncTest, ACommandSlurmRefusesLeavesTheRoundOutOfStep) {
  write("fail", "hold_fabric_gpu");
  auto s = sync();
  SyncReport refused = s->round();
  EXPECT_FALSE(refused.applied);
  EXPECT_THAT(refused.error, HasSubstr("refused"));
  EXPECT_EQ(s->in_step(), 0);
  EXPECT_EQ(read("reservations"), "");
  std::filesystem::remove(slurm_.file("fail"));
  EXPECT_TRUE(s->round().applied);
  EXPECT_EQ(s->in_step(), 1);
}

}  // namespace
}  // namespace composer::server
