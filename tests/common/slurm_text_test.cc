// What Slurm's commands print about licenses and reservations (slurm_text.h).
#include "composer/common/slurm_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace composer {
namespace {

using ::testing::HasSubstr;

TEST(SyncParse, ReadsScontrolOneLineOutput) {
  auto state = parse_slurm_state(
      "LicenseName=fabric_gpu Total=8 Used=2 Free=4 Reserved=2 Remote=no\n"
      "LicenseName=matlab Total=10 Used=0 Free=10 Reserved=0 Remote=no\n",
      "ReservationName=hold_fabric_gpu StartTime=2026-12-01T21:00:00 "
      "EndTime=2027-12-01T21:00:00 Duration=365-00:00:00 Nodes=(null) NodeCnt=0 CoreCnt=0 "
      "Features=(null) PartitionName=(null) Flags=ANY_NODES TRES=(null) Users=root "
      "Groups=(null) Accounts=(null) Licenses=fabric_gpu:2 State=ACTIVE BurstBuffer=(null) "
      "Watts=n/a MaxStartDelay=(null)\n");
  ASSERT_TRUE(state) << state.error().message;
  EXPECT_EQ(state->licenses, (std::vector<LicenseCount>{{"fabric_gpu", 8}, {"matlab", 10}}));
  ASSERT_EQ(state->reservations.size(), 1u);
  EXPECT_EQ(state->reservations[0].name, "hold_fabric_gpu");
  EXPECT_EQ(state->reservations[0].duration_min, 365 * 1440);
  EXPECT_EQ(state->reservations[0].licenses, (std::vector<LicenseCount>{{"fabric_gpu", 2}}));
  EXPECT_EQ(state->reservations[0].users, "root");

  auto none = parse_slurm_state("No licenses configured\n", "No reservations in the system\n");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->licenses.empty());
  EXPECT_TRUE(none->reservations.empty());

  auto broken = parse_slurm_state("LicenseName=fabric_gpu Total=eight Used=0\n", "");
  ASSERT_FALSE(broken);
  EXPECT_THAT(broken.error().message, HasSubstr("'eight'"));
}

TEST(SlurmStateTest, ReadsScontrolLinesWithValuesThatHoldSpaces) {
  const ScontrolFields f = parse_scontrol_line(
      "JobId=42 Command=/home/a/my job.sh AdminComment=vip; composer: gpus=2 nodes=1 "
      "TRES=cpu=2,node=1 NodeList= StdIn=/dev/null");
  EXPECT_EQ(scontrol_field(f, "Command"), "/home/a/my job.sh");
  EXPECT_EQ(scontrol_field(f, "AdminComment"), "vip; composer: gpus=2 nodes=1");
  EXPECT_EQ(scontrol_field(f, "TRES"), "cpu=2,node=1");
  EXPECT_EQ(scontrol_field(f, "NodeList"), "");
  EXPECT_EQ(scontrol_field(f, "StdIn"), "/dev/null");
  EXPECT_EQ(scontrol_field(f, "Missing"), "");

  auto l = parse_licenses("fabric_gpu:4,matlab");
  ASSERT_TRUE(l);
  EXPECT_EQ(*l, (std::vector<LicenseCount>{{"fabric_gpu", 4}, {"matlab", 1}}));
  EXPECT_TRUE(parse_licenses("(null)")->empty());
  EXPECT_FALSE(parse_licenses("fabric_gpu:x"));

  auto use = parse_license_use(
      "LicenseName=fabric_gpu Total=8 Used=4 Free=2 Reserved=2 Remote=no\n"
      "LicenseName=old Total=5 Used=1 Free=4 Remote=no\n");
  ASSERT_TRUE(use) << use.error().message;
  ASSERT_EQ(use->size(), 2u);
  EXPECT_EQ((*use)[0], (LicenseUse{"fabric_gpu", 8, 4, 2, 2}));
  EXPECT_EQ((*use)[0].available(), 2u);
  // A release whose Free leaves the reservations in: Slurm still counts them as taken.
  EXPECT_EQ((LicenseUse{"fabric_gpu", 8, 4, 4, 2}).available(), 2u);
  EXPECT_EQ((*use)[1].reserved, 0u);  // no Reserved= before Slurm printed it
  EXPECT_EQ((*use)[1].available(), 4u);
}

}  // namespace
}  // namespace composer
