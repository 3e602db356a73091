// The GPU health check (NVML through the real dlopen path, loading tests/slurm's fake
// libnvidia-ml.so.1 whose health is scripted per GPU; a GPU gone from FakeHost's bus), its
// reports to composerd from the epilog and the node check, and the GPU stack told: DCGM-exporter's
// job-mapping files and the site's hook.
#include "composer/slurm/gpu_health.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "composer/common/strings.h"
#include "composer/slurm/gpu_stack.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/spank_core.h"
#include "composer/test_support/fake_host.h"
#include "fakes.h"
#include "temp_dir.h"

namespace composer::slurm {
namespace {

using test_support::FakeHost;
using testing::FakeComposer;
using testing::FakeJob;
using testing::TempDir;

constexpr const char* kA = "0000:41:00.0";
constexpr const char* kB = "0000:42:00.0";

Device gpu_at(const std::string& id, const std::string& address) {
  Device d;
  d.id = id;
  d.type = DeviceType::kGpu;
  d.address = address;
  d.identity = {"0x10de", "0x20b5", "", ""};
  return d;
}

class GpuHealthTest : public ::testing::Test {
 protected:
  GpuHealthTest() : host(tmp.path() / "host") {
    config = testing::fake_host_config(tmp.path().string(), host);
    config.nvml_library = FAKE_NVML_LIBRARY;
    ::setenv("FAKE_NVML_SCRIPT", (tmp / "nvml-script").c_str(), 1);
    ::unsetenv("FAKE_NVML_INIT_FAIL");
    // The node's own GPU below the composed ones: NVML index 0.
    host.add_present(test_support::nvidia_gpu("0000:01:00.0", "GPU-local-0000"));
    host.add_present(test_support::nvidia_gpu(kA, "GPU-aaaa-0001"));
    host.add_present(test_support::nvidia_gpu(kB, "GPU-aaaa-0002"));
    script("0000:01:00.0 ok\n" + std::string(kA) + " ok\n" + kB + " ok\n");
  }
  ~GpuHealthTest() override {
    ::unsetenv("FAKE_NVML_SCRIPT");
    ::unsetenv("FAKE_NVML_INIT_FAIL");
  }

  void script(const std::string& text) { tmp.write("nvml-script", text); }

  std::unique_ptr<Nvml> nvml() {
    Expected<std::unique_ptr<Nvml>> loaded = Nvml::load(FAKE_NVML_LIBRARY);
    EXPECT_TRUE(loaded) << loaded.error();
    return loaded ? std::move(*loaded) : nullptr;
  }

  std::vector<BadGpu> check(const std::vector<Device>& devices, bool with_nvml = true) {
    HostDevices h(config.sysfs_root, config.proc_root, config.dev_root);
    std::unique_ptr<Nvml> n = with_nvml ? nvml() : nullptr;
    return check_gpus(h, n.get(), devices, std::chrono::milliseconds(50));
  }

  // Job `id`'s state file, as its prolog wrote it: GPUs found at their addresses.
  void running(uint32_t id, std::vector<Device> devices) {
    JobState s;
    s.job_id = id;
    s.node = "node1";
    s.composition_id = id;
    s.devices = std::move(devices);
    ASSERT_TRUE(write_job_state(config.state_dir, s));
  }

  TempDir tmp;
  FakeHost host;
  SpankConfig config;
  FakeComposer api;
};

TEST_F(GpuHealthTest, NvmlThatDoesNotLoadOrStartSaysWhy) {
  Expected<std::unique_ptr<Nvml>> missing = Nvml::load(tmp / "no-such/libnvidia-ml.so.1");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(missing.error().message.find("NVML not loaded"), std::string::npos);
  ::setenv("FAKE_NVML_INIT_FAIL", "1", 1);
  Expected<std::unique_ptr<Nvml>> no_driver = Nvml::load(FAKE_NVML_LIBRARY);
  ASSERT_FALSE(no_driver);
  EXPECT_NE(no_driver.error().message.find("nvmlInit_v2: Driver Not Loaded (9)"), std::string::npos)
      << no_driver.error().message;
}

TEST_F(GpuHealthTest, HealthyGpusPass) {
  EXPECT_TRUE(check({gpu_at("gpu-a", kA), gpu_at("gpu-b", kB)}).empty());
}

TEST_F(GpuHealthTest, NvmlVerdictsPerGpu) {
  const std::vector<Device> both = {gpu_at("gpu-a", kA), gpu_at("gpu-b", kB)};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lost", "NVML reports the GPU lost"},
      {"remap_failure", "row remapping failure"},
      {"ecc 3", "NVML reports 3 uncorrectable ECC error(s)"},
      {"xid 79", "NVML reports critical XID 79 at 0000:42:00.0"},
      {"xid 48", "critical XID 48"},
  };
  for (const auto& [state, why] : cases) {
    script(std::string(kA) + " ok\n" + kB + " " + state + "\n");
    std::vector<BadGpu> bad = check(both);
    ASSERT_EQ(bad.size(), 1u) << state;
    EXPECT_EQ(bad[0].device_id, "gpu-b");
    EXPECT_NE(bad[0].why.find(why), std::string::npos) << bad[0].why;
  }
  // An XID a program causes (13: graphics engine exception) is not the GPU's fault.
  script(std::string(kA) + " xid 13\n" + kB + " ok\n");
  EXPECT_TRUE(check(both).empty());
  // A GPU NVML does not know gives no verdict.
  script("");
  EXPECT_TRUE(check(both).empty());
}

TEST_F(GpuHealthTest, AGpuGoneFromTheBusIsBadWithOrWithoutNvml) {
  host.unplug_now(kB);
  for (bool with_nvml : {false, true}) {
    std::vector<BadGpu> bad = check({gpu_at("gpu-a", kA), gpu_at("gpu-b", kB)}, with_nvml);
    ASSERT_EQ(bad.size(), 1u);
    EXPECT_EQ(bad[0].device_id, "gpu-b");
    EXPECT_NE(bad[0].why.find("gone from the bus: the host no longer shows PCI function " +
                              std::string(kB)),
              std::string::npos)
        << bad[0].why;
  }
  // Memory, drives, and GPUs the prolog found no address for are not looked at.
  Device drive = gpu_at("nvme-1", "0000:77:00.0");
  drive.type = DeviceType::kNvme;
  EXPECT_TRUE(check({drive, gpu_at("gpu-c", "")}).empty());
}

TEST_F(GpuHealthTest, TheDefaultLibraryNameGoesThroughTheLoadersSearch) {
  // The fake's folder on LD_LIBRARY_PATH (set for this test binary by ctest) makes the
  // default name load it, as libnvidia-ml.so.1 loads on a GPU host.
  const char* path = std::getenv("LD_LIBRARY_PATH");
  if (path == nullptr ||
      std::string(path).find(std::filesystem::path(FAKE_NVML_LIBRARY).parent_path().string()) ==
          std::string::npos) {
    GTEST_SKIP() << "LD_LIBRARY_PATH does not name the fake's folder (run through ctest)";
  }
  EXPECT_TRUE(Nvml::load());
}

TEST_F(GpuHealthTest, TheNodeCheckReportsBadGpusAndNeverFailsForThem) {
  running(12, {gpu_at("gpu-a", kA), gpu_at("gpu-b", kB)});
  FakeJob node;
  EXPECT_EQ(check_gpu_health_on_node(node, api, config), 0u);
  EXPECT_TRUE(api.failed.empty());

  script(std::string(kA) + " ok\n" + kB + " xid 79\n");
  EXPECT_EQ(check_gpu_health_on_node(node, api, config), 1u);
  ASSERT_EQ(api.failed.size(), 1u);
  EXPECT_EQ(std::get<0>(api.failed[0]), 12u);
  EXPECT_EQ(std::get<1>(api.failed[0]), "node1");
  EXPECT_EQ(std::get<2>(api.failed[0]), "gpu-b");
  EXPECT_NE(std::get<3>(api.failed[0])
                .find("the host of node node1 found it bad while job 12 "
                      "held it: NVML reports critical XID 79"),
            std::string::npos)
      << std::get<3>(api.failed[0]);

  // gpu_health=off looks at nothing; bus looks only at the bus.
  config.gpu_health = GpuHealth::kOff;
  EXPECT_EQ(check_gpu_health_on_node(node, api, config), 0u);
  config.gpu_health = GpuHealth::kBus;
  EXPECT_EQ(check_gpu_health_on_node(node, api, config), 0u);
  host.unplug_now(kA);
  EXPECT_EQ(check_gpu_health_on_node(node, api, config), 1u);
  EXPECT_EQ(std::get<2>(api.failed.back()), "gpu-a");

  // host_check=rescan: addresses are the fabric's, which the host need not show: no verdict.
  config.host_check = HostCheck::kRescan;
  EXPECT_EQ(check_gpu_health_on_node(node, api, config), 0u);
  config.host_check = HostCheck::kWait;

  // composerd away: logged, still no failure of the check.
  api.fail_error = Error{ErrorCode::kUnavailable, "connection refused"};
  EXPECT_EQ(check_gpu_health_on_node(node, api, config), 1u);
  EXPECT_NE(join(node.errors, "\n").find("connection refused"), std::string::npos);
}

TEST_F(GpuHealthTest, TheEpilogReportsABadGpuAndSucceeds) {
  config.compose_on = ComposeOn::kNode;
  running(12, {gpu_at("gpu-a", kA), gpu_at("gpu-b", kB)});
  script(std::string(kA) + " remap_failure\n" + kB + " ok\n");
  FakeJob end;
  end.id = 12;
  end.options = {{"compose-gpus", "2"}};
  ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
  ASSERT_EQ(api.failed.size(), 1u);
  EXPECT_EQ(std::get<2>(api.failed[0]), "gpu-a");
  // Released as usual: the failed GPU goes back to the pool, where composerd keeps it out.
  ASSERT_EQ(api.released.size(), 1u);

  // host_check=rescan: the prolog did not look for the GPUs, so nothing is judged by address.
  config.host_check = HostCheck::kRescan;
  running(13, {gpu_at("gpu-c", "0000:99:00.0")});
  FakeJob other;
  other.id = 13;
  other.options = end.options;
  ASSERT_TRUE(job_epilog(other, api, config)) << join(other.errors, "\n");
  EXPECT_EQ(api.failed.size(), 1u);
}

TEST_F(GpuHealthTest, NvmlMissingOnTheHostLeavesTheBusCheck) {
  config.nvml_library = tmp / "none/libnvidia-ml.so.1";
  running(12, {gpu_at("gpu-a", kA)});
  host.unplug_now(kA);
  FakeJob node;
  EXPECT_EQ(check_gpu_health_on_node(node, api, config), 1u);
  EXPECT_NE(join(node.infos, "\n").find("the GPU health check looks at the bus only"),
            std::string::npos);
}

// The GPU stack told: DCGM-exporter's job-mapping files (one per NVML index, the job id in it)
// and the site's hook, around a real prolog and epilog on the fake host.
TEST_F(GpuHealthTest, DcgmJobMapAndHookFollowAttachAndRelease) {
  config.compose_on = ComposeOn::kNode;
  config.dcgm_job_dir = tmp / "dcgm-map";
  config.gpu_hook = tmp / "hook.sh";
  tmp.write("hook.sh", "#!/bin/sh\necho \"$@\" >>'" + (tmp / "hook.log") + "'\n");
  ASSERT_EQ(::chmod((tmp / "hook.sh").c_str(), 0755), 0);
  const auto map_file = [&](const std::string& index) { return tmp.read("dcgm-map/" + index); };
  const auto exists = [&](const std::string& index) {
    return std::filesystem::exists(tmp / ("dcgm-map/" + index));
  };
  // A file of the site's own in the folder is left alone.
  tmp.write("dcgm-map/README", "site notes\n");

  // Job 21 gets a GPU at 0000:43:00.0, above the node's own and the two already present
  // (indices 0, 1, 2): NVML index 3.
  host.attach(test_support::nvidia_gpu("0000:43:00.0", "GPU-cccc-0003"));
  Device c;
  c.id = "gpu-c";
  c.type = DeviceType::kGpu;
  c.identity = {"0x10de", "0x20b5", "", "GPU-cccc-0003"};
  api.devices = {c};
  FakeJob a;
  a.id = 21;
  a.options = {{"compose-gpus", "1"}};
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_EQ(map_file("3"), "21\n");
  EXPECT_FALSE(exists("0"));
  EXPECT_EQ(tmp.read("hook.log"), "attach 21 0000:43:00.0\n");
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "dcgm-map/3").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  // Job 22's GPU comes at a lower address (0000:3f:00.0): index 1, and job 21's moves to 4.
  host.attach(test_support::nvidia_gpu("0000:3f:00.0", "GPU-dddd-0004"));
  Device d = c;
  d.id = "gpu-d";
  d.identity.uuid = "GPU-dddd-0004";
  api.devices = {d};
  FakeJob b;
  b.id = 22;
  b.options = {{"compose-gpus", "1"}};
  ASSERT_TRUE(job_prolog(b, api, config)) << join(b.errors, "\n");
  EXPECT_EQ(map_file("1"), "22\n");
  EXPECT_EQ(map_file("4"), "21\n");
  EXPECT_FALSE(exists("3"));

  // Job 22 ends: its file goes and the hook is told before the GPU leaves the host; job 21's
  // GPU is back at index 3 once it has.
  FakeJob end = b;
  ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
  EXPECT_EQ(tmp.read("hook.log"),
            "attach 21 0000:43:00.0\nattach 22 0000:3f:00.0\ndetach 22 0000:3f:00.0\n"
            "detached 22 0000:3f:00.0\n");
  EXPECT_FALSE(exists("1"));
  EXPECT_FALSE(exists("4"));
  EXPECT_EQ(map_file("3"), "21\n");
  EXPECT_EQ(map_file("README"), "site notes\n");

  // A hook that fails is logged; the epilog still succeeds.
  tmp.write("hook.sh", "#!/bin/sh\necho cannot reach nv-hostengine >&2\nexit 3\n");
  FakeJob end_a = a;
  ASSERT_TRUE(job_epilog(end_a, api, config));
  EXPECT_NE(join(end_a.errors, "\n")
                .find("gpu_hook detach: 'hook.sh detach 21 0000:43:00.0' "
                      "failed (exit 3): cannot reach nv-hostengine"),
            std::string::npos)
      << join(end_a.errors, "\n");
  EXPECT_FALSE(exists("3"));
}

// A composition an epilog left held (its GPU was still in use) is released later by the node
// check: the hook hears "detached" then, and the job map is rebuilt without it.
TEST_F(GpuHealthTest, AHeldGpuReleasedLaterTellsTheHookDetached) {
  config.gpu_hook = tmp / "hook.sh";
  config.dcgm_job_dir = tmp / "dcgm-map";
  tmp.write("hook.sh", "#!/bin/sh\necho \"$@\" >>'" + (tmp / "hook.log") + "'\n");
  ASSERT_EQ(::chmod((tmp / "hook.sh").c_str(), 0755), 0);
  tmp.write("dcgm-map/1", "31\n");  // as written before the epilog
  JobState held;
  held.job_id = 31;
  held.node = "node1";
  held.composition_id = 31;
  held.devices = {gpu_at("gpu-a", kA)};
  held.held = "still in use after 10 s: pid 4242 holds gpu-a (/dev/nvidia1)";
  ASSERT_TRUE(write_job_state(config.state_dir, held));
  FakeJob node;
  EXPECT_EQ(release_held_on_node(node, api, config), 0u) << join(node.errors, "\n");
  ASSERT_EQ(api.released.size(), 1u);
  EXPECT_EQ(tmp.read("hook.log"), "detached 31 0000:41:00.0\n");
  EXPECT_FALSE(std::filesystem::exists(tmp / "dcgm-map/1"));
}

}  // namespace
}  // namespace composer::slurm
