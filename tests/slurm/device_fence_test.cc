// DeviceFence against a fake devices hierarchy laid out as Slurm's task/cgroup lays it out on
// cgroup v1 (plain files stand for the kernel's devices.deny; the real hierarchy is exercised by
// device_fence_cgroup_check.cc).
#include "composer/slurm/device_fence.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace composer::slurm {
namespace {

using testing::TempDir;

TEST(DeviceFence, DeviceNumbersAreReadAsSysfsWritesThem) {
  EXPECT_EQ(parse_dev_number("259:4\n"), (std::vector<uint32_t>{259, 4}));
  EXPECT_EQ(parse_dev_number("195:255"), (std::vector<uint32_t>{195, 255}));
  EXPECT_TRUE(parse_dev_number("").empty());
  EXPECT_TRUE(parse_dev_number("259").empty());
  EXPECT_TRUE(parse_dev_number("259:x").empty());
  EXPECT_TRUE(parse_dev_number("-1:2").empty());
  EXPECT_EQ((DeviceNode{'b', 259, 4, "nvme0n1"}.rule()), "b 259:4 rwm");
}

TEST(DeviceFence, FindsTheCgroupsOfSlurmJobsButNotTheirSteps) {
  TempDir tmp;
  tmp.write("devices/devices.deny", "");
  tmp.write("devices/slurm/uid_1000/job_12/step_0/devices.deny", "");
  tmp.write("devices/slurm/uid_1000/job_12/step_extern/devices.deny", "");
  tmp.write("devices/slurm/uid_1001/job_13/devices.deny", "");
  // Several slurmd on one host: one hierarchy per node name.
  tmp.write("devices/slurm_node2/uid_0/job_12/devices.deny", "");
  // Not Slurm's, or not a job: left alone.
  tmp.write("devices/system.slice/job_x/devices.deny", "");
  tmp.write("devices/a/b/c/d/job_99/devices.deny", "");
  tmp.write("devices/slurm/uid_1000/job_14", "a file");
  const DeviceFence fence(tmp / "devices");
  EXPECT_TRUE(fence.available());
  const std::map<uint32_t, std::vector<std::string>> jobs = fence.job_cgroups();
  ASSERT_EQ(jobs.size(), 2u);
  std::vector<std::string> twelve = jobs.at(12);
  std::sort(twelve.begin(), twelve.end());
  EXPECT_EQ(twelve, (std::vector<std::string>{tmp / "devices/slurm/uid_1000/job_12",
                                              tmp / "devices/slurm_node2/uid_0/job_12"}));
  EXPECT_EQ(jobs.at(13), (std::vector<std::string>{tmp / "devices/slurm/uid_1001/job_13"}));
  EXPECT_FALSE(DeviceFence(tmp / "nothing").available());
  EXPECT_TRUE(DeviceFence(tmp / "nothing").job_cgroups().empty());
}

TEST(DeviceFence, DeniesOneRulePerWriteAndAGoneCgroupIsNoError) {
  TempDir tmp;
  tmp.write("devices/slurm/uid_0/job_5/devices.deny", "");
  const DeviceFence fence(tmp / "devices");
  ASSERT_TRUE(fence.deny(tmp / "devices/slurm/uid_0/job_5",
                         {{'c', 195, 3, "nvidia3"}, {'b', 259, 0, "nvme0n1"}}));
  EXPECT_EQ(tmp.read("devices/slurm/uid_0/job_5/devices.deny"), "c 195:3 rwm\nb 259:0 rwm\n");
  EXPECT_TRUE(fence.deny(tmp / "devices/slurm/uid_0/job_6", {{'c', 195, 3, "nvidia3"}}));
  // A cgroup whose devices.deny cannot be written is an error that names it.
  std::filesystem::create_directories(tmp / "devices/slurm/uid_0/job_7/devices.deny");
  const Status s = fence.deny(tmp / "devices/slurm/uid_0/job_7", {{'c', 195, 3, "nvidia3"}});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("job_7/devices.deny"), std::string::npos) << s.error().message;
}

TEST(DeviceFence, NodeListsAreReadAndWrittenAsCpusetMemsHoldsThem) {
  EXPECT_EQ(parse_node_list("0-2,5\n"), (std::set<int>{0, 1, 2, 5}));
  EXPECT_EQ(parse_node_list(""), std::set<int>{});
  EXPECT_EQ(parse_node_list("3"), std::set<int>{3});
  EXPECT_FALSE(parse_node_list("2-1"));
  EXPECT_FALSE(parse_node_list("a"));
  EXPECT_EQ(node_list_text({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(node_list_text({}), "");
}

TEST(DeviceFence, MemsAreWidenedTopDownToTheJobsSteps) {
  TempDir tmp;
  tmp.write("cpuset/cpuset.mems", "0-2\n");
  tmp.write("cpuset/slurm/cpuset.mems", "0\n");
  tmp.write("cpuset/slurm/uid_0/cpuset.mems", "0\n");
  tmp.write("cpuset/slurm/uid_0/job_5/cpuset.mems", "0\n");
  tmp.write("cpuset/slurm/uid_0/job_5/step_0/cpuset.mems", "0\n");
  tmp.write("cpuset/slurm/uid_0/job_5/step_extern/cpuset.mems", "0\n");
  ASSERT_TRUE(widen_mems(tmp / "cpuset", tmp / "cpuset/slurm/uid_0/job_5", {2}));
  EXPECT_EQ(tmp.read("cpuset/cpuset.mems"), "0-2\n");
  for (const char* rel : {"slurm", "slurm/uid_0", "slurm/uid_0/job_5", "slurm/uid_0/job_5/step_0",
                          "slurm/uid_0/job_5/step_extern"}) {
    EXPECT_EQ(tmp.read(std::string("cpuset/") + rel + "/cpuset.mems"), "0,2\n") << rel;
  }
  // A cgroup outside the hierarchy, and one whose mems cannot be read, are errors.
  EXPECT_FALSE(widen_mems(tmp / "cpuset", tmp / "elsewhere/job_5", {2}));
  const Status s = widen_mems(tmp / "cpuset", tmp / "cpuset/slurm/uid_1/job_6", {2});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("uid_1/cpuset.mems"), std::string::npos) << s.error().message;
}

// Other jobs' CXL nodes leave the job's cpuset and those of its steps that have mems of their
// own; one with none of its own (its parent's) stays so, and nothing above the job changes.
TEST(DeviceFence, OtherJobsNodesLeaveTheJobAndItsSteps) {
  TempDir tmp;
  tmp.write("cg/cpuset.mems", "0-3\n");
  tmp.write("cg/job_5/cpuset.mems", "0-3\n");
  tmp.write("cg/job_5/step_0/cpuset.mems", "0,2\n");
  tmp.write("cg/job_5/step_0/user/cpuset.mems", "");
  tmp.write("cg/job_5/step_0/user/task_0/cpuset.mems", "0\n");
  ASSERT_TRUE(narrow_mems(tmp / "cg/job_5", {2, 3}));
  EXPECT_EQ(tmp.read("cg/cpuset.mems"), "0-3\n");
  EXPECT_EQ(tmp.read("cg/job_5/cpuset.mems"), "0-1\n");
  EXPECT_EQ(tmp.read("cg/job_5/step_0/cpuset.mems"), "0\n");
  EXPECT_EQ(tmp.read("cg/job_5/step_0/user/cpuset.mems"), "");
  EXPECT_EQ(tmp.read("cg/job_5/step_0/user/task_0/cpuset.mems"), "0\n");
  // A cgroup that would have no node left is not written, and named.
  tmp.write("cg/job_6/cpuset.mems", "0-3\n");
  tmp.write("cg/job_6/step_0/cpuset.mems", "2\n");
  const Status s = narrow_mems(tmp / "cg/job_6", {2});
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("job_6/step_0/cpuset.mems holds only NUMA nodes of other jobs"),
            std::string::npos)
      << s.error().message;
  EXPECT_EQ(tmp.read("cg/job_6/step_0/cpuset.mems"), "2\n");
}

TEST(UnifiedFence, ATasksScopeIsTheCgroupAboveItsJob) {
  const std::string self =
      "12:devices:/\n1:name=systemd:/system.slice/slurmstepd.scope\n"
      "0::/system.slice/slurmstepd.scope/job_12/step_0/user/task_3\n";
  const std::optional<UnifiedFence> fence = UnifiedFence::of_task("/sys/fs/cgroup", self, 12);
  ASSERT_TRUE(fence);
  EXPECT_EQ(fence->scope(), "/sys/fs/cgroup/system.slice/slurmstepd.scope");
  EXPECT_EQ(fence->mount(), "/sys/fs/cgroup");
  // Another job's id, no v2 line, or no cgroup v2 at all: not a job cgroup of this job's.
  EXPECT_FALSE(UnifiedFence::of_task("/sys/fs/cgroup", self, 13));
  EXPECT_FALSE(UnifiedFence::of_task("/sys/fs/cgroup", "5:devices:/slurm/uid_0/job_12\n", 12));
  EXPECT_FALSE(UnifiedFence::of_task("", self, 12));
  EXPECT_FALSE(UnifiedFence::of_task("/sys/fs/cgroup", "0::/system.slice/slurmd.service\n", 12));
  // job_120 is not job_12.
  EXPECT_FALSE(UnifiedFence::of_task("/sys/fs/cgroup", "0::/s.scope/job_120/step_0\n", 12));
}

// The program's jumps: every one lands inside it, and each rule's misses go to the next rule.
TEST(UnifiedFence, EveryJumpOfTheProgramLandsInIt) {
  const std::vector<FenceRule> rules = {{{'c', 195, 3, "nvidia3"}, 77},
                                        {{'b', 259, 1, "nvme1n1"}, 0}};
  const std::vector<uint64_t> words = fence_program(3, {41, 42}, rules);
  // 6 to read the request, 1 for "above the jobs", 3 for each cgroup that is not a job's, 8 for
  // each rule, 2 to let the rest through.
  ASSERT_EQ(words.size(), 6u + 1 + 3 * 2 + 8 * 2 + 2);
  for (size_t at = 0; at < words.size(); ++at) {
    const uint8_t code = words[at] & 0xff;
    const auto off = static_cast<int16_t>((words[at] >> 16) & 0xffff);
    const uint8_t op = code & 0xf0;
    const bool jump = (code & 0x07) == 0x05 && op != 0x80 && op != 0x90;  // not call, not exit
    if (!jump) continue;
    const long target = static_cast<long>(at) + 1 + off;
    EXPECT_GT(target, static_cast<long>(at)) << at;
    EXPECT_LT(target, static_cast<long>(words.size())) << at;
  }
  // The last two let through (r0 = 1; exit); each rule's refusal is r0 = 0; exit.
  EXPECT_EQ(words[words.size() - 2] >> 32, 1u);
  EXPECT_EQ(std::count(words.begin(), words.end(), words.back()), 3) << "three exits";
}

}  // namespace
}  // namespace composer::slurm
