#include "composer/server/zone_steering.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace composer::server {
namespace {

// z1 dry, z2 with `z2_free` GPUs; cn1 reaches z1, cn2 z2.
api::PoolSnapshot zones(uint32_t z1_free, uint32_t z2_free) {
  api::PoolSnapshot s;
  s.zones["z1"].gpus = z1_free;
  s.zones["z2"].gpus = z2_free;
  s.node_zones = {{"cn1", {"z1"}}, {"cn2", {"z2"}}};
  return s;
}

TEST(ZoneSteeringTest, ReadsPendingJobsFromScontrol) {
  const std::string text =
      "JobId=7 JobName=wrap UserId=u(1) JobState=PENDING Reason=BeginTime ReqNodeList=(null) "
      "ExcNodeList=cn1 AdminComment=composer: gpus=1 nodes=1 avoid=cn1 Partition=main\n"
      "JobId=8 JobName=wrap JobState=RUNNING ReqNodeList=(null) ExcNodeList=(null)\n"
      "JobId=9 JobState=PENDING ReqNodeList=cn2 ExcNodeList=(null) AdminComment=(null)\n";
  Expected<std::vector<PendingJob>> jobs = parse_pending_jobs(text);
  ASSERT_TRUE(jobs) << jobs.error();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0], (PendingJob{.id = 7,
                                    .exc_nodes = "cn1",
                                    .req_nodes = "",
                                    .admin_comment = "composer: gpus=1 nodes=1 avoid=cn1"}));
  EXPECT_EQ((*jobs)[1], (PendingJob{.id = 9, .req_nodes = "cn2"}));
  ASSERT_TRUE(parse_pending_jobs("No jobs in the system\n"));
  EXPECT_TRUE(parse_pending_jobs("No jobs in the system\n")->empty());
  Expected<std::vector<PendingJob>> bad = parse_pending_jobs("JobState=PENDING\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("no JobId"), std::string::npos) << bad.error().message;
}

TEST(ZoneSteeringTest, AJobIsKeptOffADryZoneAndLetBackWhenItHasRoom) {
  // Submitted when every zone had room: no exclusion yet. z1 runs dry: kept off cn1.
  std::vector<PendingJob> jobs = {{.id = 5, .admin_comment = "vip; composer: gpus=1 nodes=1"}};
  std::vector<Steer> s = steer_pending(jobs, zones(0, 4));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0], (Steer{.job_id = 5,
                         .exc_nodes = "cn1",
                         .admin_comment = "vip; composer: gpus=1 nodes=1 avoid=cn1"}));
  EXPECT_EQ(s[0].scontrol_args(),
            (std::vector<std::string>{"update", "JobId=5", "ExcNodeList=cn1",
                                      "AdminComment=vip; composer: gpus=1 nodes=1 avoid=cn1"}));
  // Already so (Slurm prints the list in its own form): nothing to do.
  jobs = {{.id = 5, .exc_nodes = "cn[1]", .admin_comment = "composer: gpus=1 nodes=1 avoid=cn1"}};
  EXPECT_TRUE(steer_pending(jobs, zones(0, 4)).empty());
  // z1 has room again and z2 runs dry: the other way round.
  s = steer_pending(jobs, zones(4, 0));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].exc_nodes, "cn2");
  EXPECT_EQ(s[0].admin_comment, "composer: gpus=1 nodes=1 avoid=cn2");
  // Both have room: the exclusion is lifted.
  s = steer_pending(jobs, zones(4, 4));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].exc_nodes, "");
  EXPECT_EQ(s[0].admin_comment, "composer: gpus=1 nodes=1");
}

TEST(ZoneSteeringTest, TheUsersOwnChoicesAndOtherJobsAreLeftAlone) {
  const std::vector<PendingJob> jobs = {
      {.id = 1, .exc_nodes = "cn2", .admin_comment = "composer: gpus=1 nodes=1"},  // -x cn2
      {.id = 2, .req_nodes = "cn1", .admin_comment = "composer: gpus=1 nodes=1"},  // -w cn1
      {.id = 3, .admin_comment = "not ours"},
      {.id = 4},
      {.id = 5, .admin_comment = "composer: gpus=two nodes=1"},
  };
  EXPECT_TRUE(steer_pending(jobs, zones(0, 4)).empty());
  // No zones in the snapshot (every node reaches the same ones): nothing is touched.
  const std::vector<PendingJob> plain = {{.id = 6, .admin_comment = "composer: gpus=1 nodes=1"}};
  EXPECT_TRUE(steer_pending(plain, api::PoolSnapshot{}).empty());
  // No node can serve it: no exclusion (licenses hold it), none added.
  EXPECT_TRUE(steer_pending(plain, zones(0, 0)).empty());
}

}  // namespace
}  // namespace composer::server
