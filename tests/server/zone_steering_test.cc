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

TEST(ZoneSteeringTest, ReadsPendingAndStartingJobsFromScontrol) {
  const std::string text =
      "JobId=7 JobName=wrap UserId=u(1) JobState=PENDING Reason=BeginTime ReqNodeList=(null) "
      "ExcNodeList=cn1 AdminComment=composer: gpus=1 nodes=1 avoid=cn1 Partition=main\n"
      "JobId=8 JobName=wrap JobState=RUNNING ReqNodeList=(null) ExcNodeList=(null)\n"
      "JobId=9 JobState=PENDING ReqNodeList=cn2 ExcNodeList=(null) AdminComment=(null)\n"
      "JobId=10 JobState=CONFIGURING NodeList=cn[1-2] AdminComment=composer: gpus=1 nodes=2\n";
  Expected<SlurmJobs> jobs = parse_slurm_jobs(text);
  ASSERT_TRUE(jobs) << jobs.error();
  ASSERT_EQ(jobs->pending.size(), 2u);
  EXPECT_EQ(jobs->pending[0], (PendingJob{.id = 7,
                                          .exc_nodes = "cn1",
                                          .req_nodes = "",
                                          .admin_comment = "composer: gpus=1 nodes=1 avoid=cn1"}));
  EXPECT_EQ(jobs->pending[1], (PendingJob{.id = 9, .req_nodes = "cn2"}));
  EXPECT_EQ(jobs->starting,
            (std::vector<StartingJob>{
                {.id = 10, .nodes = "cn[1-2]", .admin_comment = "composer: gpus=1 nodes=2"}}));
  ASSERT_TRUE(parse_slurm_jobs("No jobs in the system\n"));
  EXPECT_TRUE(parse_slurm_jobs("No jobs in the system\n")->pending.empty());
  Expected<SlurmJobs> bad = parse_slurm_jobs("JobState=PENDING\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("no JobId"), std::string::npos) << bad.error().message;
}

// Slurm started job 4 on cn1 in the same pass that left job 5 pending; job 4's prolog has not
// composed yet, so z1's one GPU still counts free. It is job 4's: job 5 is kept off cn1.
TEST(ZoneSteeringTest, WhatAStartingJobWillTakeIsNotFree) {
  const std::vector<PendingJob> pending = {{.id = 5, .admin_comment = "composer: gpus=1 nodes=1"}};
  const std::vector<StartingJob> starting = {
      {.id = 4, .nodes = "cn1", .admin_comment = "composer: gpus=1 nodes=1"}};
  const auto not_yet = [](uint32_t) { return false; };
  const api::PoolSnapshot left = less_starting(zones(1, 4), starting, not_yet);
  EXPECT_EQ(left.zones.at("z1").gpus, 0u);
  EXPECT_EQ(left.zones.at("z2").gpus, 4u);
  std::vector<Steer> s = steer_pending(pending, left);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].exc_nodes, "cn1");
  // Once composerd holds job 4's devices the pool's counts say so already: not taken twice.
  const auto composed = [](uint32_t id) { return id == 4; };
  EXPECT_EQ(less_starting(zones(1, 4), starting, composed), zones(1, 4));
  EXPECT_TRUE(steer_pending(pending, less_starting(zones(1, 4), starting, composed)).empty());
  // A job on both nodes takes from each node's zones; never below zero.
  const std::vector<StartingJob> wide = {
      {.id = 6, .nodes = "cn[1-2]", .admin_comment = "composer: gpus=2 nodes=2"}};
  const api::PoolSnapshot both = less_starting(zones(1, 4), wide, not_yet);
  EXPECT_EQ(both.zones.at("z1").gpus, 0u);
  EXPECT_EQ(both.zones.at("z2").gpus, 2u);
  // Not a composed job, or a model the zone lacks: nothing taken.
  const std::vector<StartingJob> other = {
      {.id = 7, .nodes = "cn1"},
      {.id = 8, .nodes = "cn1", .admin_comment = "composer: gpus=H100:1 nodes=1"}};
  EXPECT_EQ(less_starting(zones(1, 4), other, not_yet), zones(1, 4));
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
