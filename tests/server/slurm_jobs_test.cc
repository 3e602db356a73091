#include "composer/server/slurm_jobs.h"

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

TEST(SlurmJobs, AFailingSqueueIsAnError) {
  auto ids = slurm_active_jobs("false", "", 1000);
  ASSERT_FALSE(ids.ok());
}

}  // namespace
}  // namespace composer::server
