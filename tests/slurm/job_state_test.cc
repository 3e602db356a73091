// The job state file: the API's Device form, read strictly, and files of the earlier form.
#include "composer/slurm/job_state.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "composer/api/codec.h"
#include "composer/common/units.h"
#include "fakes.h"
#include "temp_dir.h"

namespace composer::slurm {
namespace {

using testing::device;
using testing::TempDir;

// Two devices as composerd answers them: in a zone, attached to the job's composition.
JobState example() {
  JobState s;
  s.job_id = 4711;
  s.node = "node1";
  s.composition_id = 12;
  s.cuda_visible_devices = "GPU-1";
  s.devices = {device("gpu-00", DeviceType::kGpu, "0000:41:00.0"),
               device("mem-00", DeviceType::kMem, "numa:2", 64 * kGiB)};
  for (Device& d : s.devices) {
    d.zone = "z1";
    d.composition_id = s.composition_id;
    d.node = s.node;
  }
  s.devices[0].model = "A100-80G";
  return s;
}

TEST(JobState, KeepsTheDevicesAsTheApiWritesThem) {
  TempDir tmp;
  const JobState s = example();
  ASSERT_TRUE(write_job_state(tmp / "state", s));
  const std::string text = tmp.read("state/job-4711.json");
  EXPECT_NE(text.find("\"zone\" : \"z1\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"state\" : \"attached\""), std::string::npos) << text;
  Expected<std::optional<JobState>> back = read_job_state(tmp / "state", 4711);
  ASSERT_TRUE(back) << back.error();
  ASSERT_TRUE(back->has_value());
  const JobState& b = **back;
  EXPECT_EQ(b.job_id, s.job_id);
  EXPECT_EQ(b.node, s.node);
  EXPECT_EQ(b.composition_id, s.composition_id);
  EXPECT_EQ(b.cuda_visible_devices, s.cuda_visible_devices);
  EXPECT_EQ(api::devices_to_json(b.devices), api::devices_to_json(s.devices));
}

TEST(JobState, ReadsFilesOfTheEarlierForm) {
  TempDir tmp;
  tmp.write("state/job-4711.json", R"({"job_id": 4711, "node": "node1", "composition_id": 12,
    "cuda_visible_devices": "GPU-1", "error": "",
    "devices": [{"id": "mem-00", "type": "mem", "model": "", "address": "numa:2",
                 "capacity_bytes": 68719476736}]})");
  Expected<std::optional<JobState>> s = read_job_state(tmp / "state", 4711);
  ASSERT_TRUE(s) << s.error();
  ASSERT_TRUE(s->has_value());
  ASSERT_EQ((*s)->devices.size(), 1u);
  const Device& d = (*s)->devices[0];
  EXPECT_EQ(d.id, "mem-00");
  EXPECT_EQ(d.type, DeviceType::kMem);
  EXPECT_EQ(d.address, "numa:2");
  EXPECT_EQ(d.capacity_bytes, 64 * kGiB);
  EXPECT_EQ(d.composition_id, 12);
  EXPECT_EQ(d.node, "node1");
}

TEST(JobState, ReadsFilesOfThePreviousVersion) {
  // Written before devices carried their identity and the drives' paths were recorded.
  TempDir tmp;
  tmp.write("state/job-4711.json", R"({"job_id": 4711, "node": "node1", "composition_id": 12,
    "cuda_visible_devices": "0", "error": "",
    "devices": [{"id": "nvme-07", "type": "nvme", "model": "P5620", "capacity_bytes": 0,
                 "zone": "z1", "address": "0000:81:00.0", "health": "ok", "state": "attached",
                 "drained": false, "drain_reason": "", "holder": "", "composition_id": 12,
                 "node": "node1"}]})");
  Expected<std::optional<JobState>> s = read_job_state(tmp / "state", 4711);
  ASSERT_TRUE(s) << s.error();
  ASSERT_TRUE(s->has_value());
  EXPECT_TRUE((*s)->devices[0].identity.empty());
  EXPECT_FALSE((*s)->nvme_paths.has_value());
  // Its job gets what that version gave it: the drives' ids.
  for (const auto& [name, value] : task_environment(**s)) {
    if (name == "COMPOSER_NVME") {
      EXPECT_EQ(value, "nvme-07");
    }
  }
  // Its addresses are another job's devices for a prolog of job 4712.
  EXPECT_EQ(addresses_of_other_jobs(tmp / "state", 4712), std::set<std::string>{"0000:81:00.0"});
  EXPECT_TRUE(addresses_of_other_jobs(tmp / "state", 4711).empty());
}

TEST(JobState, KeepsTheMemoryPolicyAndFilesWithoutOneArePreferred) {
  TempDir tmp;
  JobState s = example();
  s.mem_policy = "weighted:3:1";
  ASSERT_TRUE(write_job_state(tmp / "state", s));
  Expected<std::optional<JobState>> back = read_job_state(tmp / "state", 4711);
  ASSERT_TRUE(back && back->has_value());
  EXPECT_EQ((*back)->mem_policy, "weighted:3:1");
  auto exported = [](const JobState& state) {
    std::map<std::string, std::string> env;
    for (const auto& [name, value] : task_environment(state)) env[name] = value;
    return env;
  };
  EXPECT_EQ(exported(**back)["COMPOSER_MEM_POLICY"], "weighted:3:1");
  // A file of the version before the option: its job had the kernel's default, DRAM first.
  s.mem_policy = "";
  ASSERT_TRUE(write_job_state(tmp / "state", s));
  back = read_job_state(tmp / "state", 4711);
  ASSERT_TRUE(back && back->has_value());
  EXPECT_EQ(exported(**back)["COMPOSER_MEM_POLICY"], "preferred");
  // Without CXL memory there is no policy to tell.
  s.devices.pop_back();
  EXPECT_EQ(exported(s).count("COMPOSER_MEM_POLICY"), 0u);
}

TEST(JobState, KeepsTheDrivesPathsAndIdentities) {
  TempDir tmp;
  JobState s = example();
  s.devices[0].identity = {"0x10de", "0x20b5", "", "GPU-1"};
  s.nvme_paths = std::vector<std::string>{"/dev/nvme3n1"};
  ASSERT_TRUE(write_job_state(tmp / "state", s));
  Expected<std::optional<JobState>> back = read_job_state(tmp / "state", 4711);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ((*back)->nvme_paths, s.nvme_paths);
  EXPECT_EQ((*back)->devices[0].identity, s.devices[0].identity);
  EXPECT_EQ(api::devices_to_json((*back)->devices), api::devices_to_json(s.devices));
  for (const auto& [name, value] : task_environment(**back)) {
    if (name == "COMPOSER_NVME") {
      EXPECT_EQ(value, "/dev/nvme3n1");
    }
    if (name == "COMPOSER_MEM_NUMA") {
      EXPECT_EQ(value, "2");
    }
  }
}

TEST(JobState, RefusesWhatDoesNotFollowTheFormat) {
  TempDir tmp;
  const std::string file = tmp / "state/job-4711.json";
  const std::pair<const char*, std::string> cases[] = {
      {R"({"job_id": 4711, "node": "node1", "composition_id": 12, "cuda_visible_devices": "",
           "error": "", "devices": [], "colour": "red"})",
       "colour: unknown field; a job state has only these fields: job_id, node, composition_id, "
       "cuda_visible_devices, error, devices, nvme_paths"},
      {R"({"job_id": 4711, "node": "node1", "composition_id": 12, "cuda_visible_devices": "",
           "error": "", "devices": [{"id": "x", "type": "fpga", "model": "", "address": "",
           "capacity_bytes": 0}]})",
       "devices[0].type: 'fpga' is not a device type; expected one of gpu, mem, nvme"},
      {R"({"job_id": 4711, "node": "node1", "cuda_visible_devices": "", "error": "",
           "devices": []})",
       "composition_id: required field is missing"},
      {R"({"job_id": 4711, "node": "node1", "composition_id": 12, "cuda_visible_devices": "",
           "error": "", "devices": [)",
       "malformed JSON at line 2"},
  };
  for (const auto& [text, why] : cases) {
    tmp.write("state/job-4711.json", text);
    Expected<std::optional<JobState>> s = read_job_state(tmp / "state", 4711);
    ASSERT_FALSE(s) << text;
    EXPECT_EQ(s.error().code, ErrorCode::kInternal);
    EXPECT_EQ(s.error().message.rfind("state file " + file + ": " + why, 0), 0u) << s.error();
  }
  tmp.write("state/job-4711.json", R"({"job_id": 5, "node": "node1", "composition_id": 12,
    "cuda_visible_devices": "", "error": "", "devices": []})");
  Expected<std::optional<JobState>> other = read_job_state(tmp / "state", 4711);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().message, "state file " + file + " belongs to job 5, not 4711");
}

}  // namespace
}  // namespace composer::slurm
