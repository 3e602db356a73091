#include "composer/server/slurm_jobs.h"

#include "composer/common/slurm_text.h"

#include <gtest/gtest.h>

namespace composer::server {
namespace {

TEST(SlurmJobs, ParsesSqueueOutput) {
  auto ids = parse_job_ids("12\n4711\n\n99\n");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::set<uint32_t>{12, 99, 4711}));
  EXPECT_TRUE(parse_job_ids("")->empty());
}

TEST(SlurmJobs, RefusesWhatIsNotAJobId) {
  EXPECT_FALSE(parse_job_ids("12\nslurm_load_jobs error: Unable to contact\n").ok());
  EXPECT_FALSE(parse_job_ids("12_3\n").ok());
}

TEST(SlurmJobs, AMissingSqueueIsAnErrorNotAnEmptyList) {
  auto ids = slurm_active_jobs("/nonexistent/squeue", "", 1000);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.error().code, ErrorCode::kUnavailable);
}

TEST(SlurmJobs, AMissingOrFailingSinfoIsAnErrorNotAnEmptyList) {
  auto missing = slurm_drained_nodes("/nonexistent/sinfo", "", 1000);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kUnavailable);
  EXPECT_FALSE(slurm_drained_nodes("false", "", 1000).ok());
}

TEST(SlurmJobs, DrainedNodesAreReadFromSinfosNodeStates) {
  // sinfo -N prints a node once per partition; states carry suffixes (*, ~, #, +DRAIN ...).
  EXPECT_EQ(drained_nodes("n1|idle\nn2|drained\nn3|draining\nn2|drained\nn4|mixed+drain\n"
                          "n5|allocated\nn6|drained*\nbad line\n|drained\n"),
            (std::vector<std::string>{"n2", "n3", "n4", "n6"}));
  EXPECT_TRUE(drained_nodes("").empty());
}

TEST(SlurmJobs, AFailingSqueueIsAnError) {
  auto ids = slurm_active_jobs("false", "", 1000);
  ASSERT_FALSE(ids.ok());
}

}  // namespace
}  // namespace composer::server
