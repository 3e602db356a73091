#include "composer/slurm/spank_core.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "composer/common/units.h"
#include "composer/slurm/host_devices.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/mem_policy.h"
#include "fakes.h"
#include "temp_dir.h"

namespace composer::slurm {
namespace {

using testing::device;
using testing::FakeComposer;
using testing::FakeJob;
using testing::TempDir;
namespace fs = std::filesystem;

class SpankCoreTest : public ::testing::Test {
 protected:
  SpankCoreTest() {
    config.state_dir = tmp / "state";
    config.sysfs_root = tmp / "sys";
    config.proc_root = tmp / "proc";
    // Never the host's own cgroups.
    config.devices_cgroup = tmp / "no-cgroup/devices";
    config.cpuset_cgroup = tmp / "no-cgroup/cpuset";
    config.unified_cgroup = tmp / "no-cgroup/unified";
    config.host_wait_s = 1;
    config.busy_wait_s = 0;
    config.free_wait_s = 0;
    config.outage_wait_s = 0;  // a test that rides out an outage says so
    config.retries = 3;
    config.compose_on = ComposeOn::kNode;  // the prolog composes; a test says controller
    tmp.write("sys/bus/pci/rescan", "");
    job.options = {{"compose-gpus", "2"}, {"compose-mem", "64G"}, {"workload", "training"}};
    job.env = {{"SLURM_JOB_USER", "alice"}, {"SLURM_JOB_ACCOUNT", "physics"}};
    api.devices = {device("gpu-00", DeviceType::kGpu, "0000:41:00.0"),
                   device("gpu-01", DeviceType::kGpu, "0000:42:00.0"),
                   device("mem-00", DeviceType::kMem, "numa:2", 64 * kGiB)};
  }

  // What a kernel would show once the devices are attached.
  void show_devices() {
    tmp.write("sys/bus/pci/devices/0000:41:00.0/vendor", "0x10de\n");
    tmp.write("sys/bus/pci/devices/0000:41:00.0/class", "0x030200\n");
    tmp.write("sys/bus/pci/devices/0000:42:00.0/vendor", "0x10de\n");
    tmp.write("sys/bus/pci/devices/0000:42:00.0/class", "0x030200\n");
    fs::create_directories(tmp / "sys/devices/system/node/node2");
  }

  std::optional<JobState> state() {
    Expected<std::optional<JobState>> s = read_job_state(config.state_dir, job.id);
    EXPECT_TRUE(s) << s.error();
    return s ? *s : std::nullopt;
  }

  TempDir tmp;
  SpankConfig config;
  FakeJob job;
  FakeComposer api;
};

TEST_F(SpankCoreTest, PrologComposesRescansAndRecordsDevices) {
  show_devices();
  ASSERT_TRUE(job_prolog(job, api, config));
  ASSERT_EQ(api.composed.size(), 1u);
  const ComposeCall& call = api.composed[0];
  EXPECT_EQ(call.owner.job_id, 4711u);
  EXPECT_EQ(call.node, "node1");
  EXPECT_EQ(call.owner.uid, 1000u);
  EXPECT_EQ(call.owner.user, "alice");
  EXPECT_EQ(call.owner.account, "physics");
  EXPECT_EQ(call.owner.workload, "training");
  EXPECT_EQ(call.request.gpus, 2u);
  EXPECT_EQ(call.request.mem_bytes, 64 * kGiB);
  EXPECT_EQ(tmp.read("sys/bus/pci/rescan"), "1\n");
  std::optional<JobState> s = state();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->composition_id, 12);
  EXPECT_EQ(s->devices.size(), 3u);
  EXPECT_EQ(s->error, "");
  EXPECT_EQ(s->cuda_visible_devices, "0,1");
  ASSERT_EQ(job.infos.size(), 1u);
  EXPECT_NE(job.infos[0].find("job 4711 on node node1: attached gpu-00@0000:41:00.0"),
            std::string::npos);
}

TEST_F(SpankCoreTest, CudaIndicesCountOtherGpusOfTheHost) {
  show_devices();
  // A local GPU sorts before the composed ones; a non-NVIDIA device does not count.
  tmp.write("sys/bus/pci/devices/0000:01:00.0/vendor", "0x10de\n");
  tmp.write("sys/bus/pci/devices/0000:01:00.0/class", "0x030000\n");
  tmp.write("sys/bus/pci/devices/0000:02:00.0/vendor", "0x8086\n");
  tmp.write("sys/bus/pci/devices/0000:02:00.0/class", "0x030000\n");
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_EQ(state()->cuda_visible_devices, "1,2");
}

TEST_F(SpankCoreTest, PrologDoesNothingForJobsThatComposeNothing) {
  job.options = {{"workload", "training"}};
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_TRUE(api.composed.empty());
  EXPECT_FALSE(state());
  EXPECT_TRUE(job.errors.empty());
}

TEST_F(SpankCoreTest, PrologFailsWhenTheHostNeverShowsTheDevices) {
  // Nothing appears after the rescan: a node or fabric fault, so the prolog fails.
  Status s = job_prolog(job, api, config);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kTimeout);
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_NE(job.errors[0].find("job 4711 on node node1"), std::string::npos);
  EXPECT_NE(job.errors[0].find("gpu-00 (" + (tmp / "sys/bus/pci/devices/0000:41:00.0") + ")"),
            std::string::npos)
      << job.errors[0];
  // The epilog must still find what to release.
  EXPECT_EQ(state()->devices.size(), 3u);
}

TEST_F(SpankCoreTest, HostCheckRescanDoesNotWait) {
  config.host_check = HostCheck::kRescan;
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_EQ(tmp.read("sys/bus/pci/rescan"), "1\n");
  // The host does not show the GPUs yet and the fabric gave no UUID: where they sit is not
  // known, and no index is guessed (0,1 could be another job's GPUs); the log says so.
  EXPECT_EQ(state()->cuda_visible_devices, "");
  ASSERT_EQ(job.infos.size(), 2u);
  EXPECT_NE(job.infos[0].find("CUDA_VISIBLE_DEVICES is left empty"), std::string::npos)
      << job.infos[0];
}

// Without the host's word, the fabric's UUIDs name the GPUs, but only in the driver's form.
TEST_F(SpankCoreTest, TheFabricsGpuUuidsServeWhereTheHostDoesNotShowTheGpus) {
  config.host_check = HostCheck::kRescan;
  api.devices[0].identity.uuid = "GPU-5f2c0a1e-0000-4000-8000-000000000001";
  api.devices[1].identity.uuid = "GPU-5f2c0a1e-0000-4000-8000-000000000002";
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_EQ(state()->cuda_visible_devices,
            "GPU-5f2c0a1e-0000-4000-8000-000000000001,GPU-5f2c0a1e-0000-4000-8000-000000000002");

  for (const char* odd : {"5f2c0a1e-0000-4000-8000-000000000002", "GPU-5f2c",
                          "GPU-5f2c0a1e-0000-4000-8000-00000000000g", ""}) {
    api.devices[1].identity.uuid = odd;
    ASSERT_TRUE(job_prolog(job, api, config));
    EXPECT_EQ(state()->cuda_visible_devices, "") << "uuid '" << odd << "'";
  }
}

TEST_F(SpankCoreTest, HostCheckOffTouchesNothing) {
  config.host_check = HostCheck::kOff;
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_EQ(tmp.read("sys/bus/pci/rescan"), "");
}

TEST_F(SpankCoreTest, FabricFaultFailsThePrologWithOneLine) {
  api.compose_error = Error{ErrorCode::kFabric, "switch z1 refused the attach"};
  Status s = job_prolog(job, api, config);
  ASSERT_FALSE(s);
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_NE(job.errors[0].find("job 4711 on node node1"), std::string::npos);
  EXPECT_NE(job.errors[0].find("switch z1 refused the attach"), std::string::npos);
  EXPECT_FALSE(state());
}

TEST_F(SpankCoreTest, UnavailableDrainsByDefault) {
  api.compose_error = Error{ErrorCode::kUnavailable, "cannot connect to http://127.0.0.1:6830"};
  ASSERT_FALSE(job_prolog(job, api, config));
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_NE(job.errors[0].find("on_unavailable=drain"), std::string::npos);
  EXPECT_NE(job.errors[0].find("composerd unreachable; outage_wait=0 s"), std::string::npos)
      << job.errors[0];
}

// A composerd restart while the node's prolog reads the composition PrologSlurmctld made: the
// prolog asks again every second within outage_wait and runs the host side, instead of failing
// and so draining the node; it says when it starts waiting and when composerd is back.
TEST_F(SpankCoreTest, TheControllerPrologRidesOutAComposerdRestart) {
  show_devices();
  config.compose_on = ComposeOn::kController;
  config.outage_wait_s = 10;
  api.show_error = Error{ErrorCode::kUnavailable, "cannot connect to http://127.0.0.1:6830"};
  api.show_failures = 2;
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_TRUE(job.errors.empty()) << job.errors[0];
  EXPECT_EQ(api.shown.size(), 3u);
  ASSERT_TRUE(state());
  EXPECT_EQ(state()->error, "");
  EXPECT_EQ(state()->devices.size(), 3u);
  bool waits = false;
  bool back = false;
  for (const std::string& line : job.infos) {
    waits = waits || line.find(
                         "cannot connect to http://127.0.0.1:6830; asking again for up to "
                         "10 s") != std::string::npos;
    back = back || line.find("composerd answered again after ") != std::string::npos;
  }
  EXPECT_TRUE(waits);
  EXPECT_TRUE(back);

  // Longer than the bound: the node drains (on_unavailable=drain), as before.
  config.outage_wait_s = 1;
  api.show_failures = -1;
  EXPECT_FALSE(job_prolog(job, api, config));
}

TEST_F(SpankCoreTest, UnavailableCanFailTheJobInstead) {
  config.on_unavailable = OnUnavailable::kFailJob;
  api.compose_error = Error{ErrorCode::kUnavailable, "cannot connect"};
  ASSERT_TRUE(job_prolog(job, api, config));
  std::optional<JobState> s = state();
  ASSERT_TRUE(s);
  EXPECT_NE(s->error.find("cannot connect"), std::string::npos);
  // The task hook then refuses to start the job's steps.
  Status t = task_init(job, config);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("job 4711 on node node1 cannot run"), std::string::npos);
  EXPECT_EQ(job.env.count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST_F(SpankCoreTest, InsufficientPoolFailsTheJobNotTheNode) {
  api.compose_error = Error{ErrorCode::kInsufficient, "gpu: asked 2, 1 free"};
  config.free_wait_s = 1;
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_GT(api.composed.size(), 1u);  // asked again within free_wait
  EXPECT_NE(state()->error.find("gpu: asked 2, 1 free"), std::string::npos);
  EXPECT_FALSE(task_init(job, config));
}

// Slurm gives a finished job's licenses to the next job before that job's epilog has released
// its devices: the prolog asks again while the release is under way.
TEST_F(SpankCoreTest, AShortfallIsAskedAgainUntilTheDevicesAreFree) {
  show_devices();
  api.compose_error = Error{ErrorCode::kInsufficient, "gpu: asked 2, 1 free"};
  api.compose_failures = 2;
  config.free_wait_s = 10;
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_EQ(api.composed.size(), 3u);
  ASSERT_TRUE(state());
  EXPECT_EQ(state()->error, "");
  EXPECT_EQ(state()->devices.size(), 3u);
  ASSERT_FALSE(job.infos.empty());
  EXPECT_NE(job.infos[0].find("asking again for up to 10 s"), std::string::npos) << job.infos[0];
  // Other refusals are not asked again.
  api.composed.clear();
  api.compose_error = Error{ErrorCode::kInvalidArgument, "no"};
  api.compose_failures = -1;
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_EQ(api.composed.size(), 1u);
}

// compose=controller: PrologSlurmctld composed; the prolog reads the composition and does the
// host side only, and a missing one fails the job, not the node.
TEST_F(SpankCoreTest, UnderControllerComposeThePrologOnlyReadsTheComposition) {
  show_devices();
  config.compose_on = ComposeOn::kController;
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_TRUE(api.composed.empty());
  ASSERT_EQ(api.shown.size(), 1u);
  ASSERT_TRUE(state());
  EXPECT_EQ(state()->devices.size(), 3u);
  EXPECT_EQ(state()->error, "");
  api.show_error = Error{ErrorCode::kNotFound, "no composition"};
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_NE(state()->error.find("PrologSlurmctld=composer-slurmctld"), std::string::npos)
      << state()->error;
  EXPECT_TRUE(api.composed.empty());
}

// A node that died under a job ran no epilog for it: the next composed job's prolog removes
// that job's state file once composerd no longer holds its composition, and keeps the files
// of jobs still composed here, of jobs composerd cannot answer for and of jobs without devices.
TEST_F(SpankCoreTest, PrologRemovesTheStateFilesOfJobsComposerdNoLongerHolds) {
  show_devices();
  auto leave_state = [&](uint32_t id, std::vector<Device> devices) {
    JobState s;
    s.job_id = id;
    s.node = "node1";
    s.devices = std::move(devices);
    ASSERT_TRUE(write_job_state(config.state_dir, s));
  };
  const Device old_gpu = device("gpu-00", DeviceType::kGpu, "0000:41:00.0");
  leave_state(100, {old_gpu});  // released: the node died under it
  leave_state(101, {old_gpu});  // composerd has no record at all
  leave_state(102, {device("gpu-07", DeviceType::kGpu, "0000:47:00.0")});  // still running
  leave_state(103, {});  // refused at its prolog: holds no address
  api.show_states[100] = CompositionState::kReleased;
  api.unknown_jobs.insert(101);
  ASSERT_TRUE(job_prolog(job, api, config));
  auto has_state = [&](uint32_t id) { return fs::exists(state_path(config.state_dir, id)); };
  EXPECT_FALSE(has_state(100));
  EXPECT_FALSE(has_state(101));
  EXPECT_TRUE(has_state(102));
  EXPECT_TRUE(has_state(103));
  ASSERT_TRUE(state());
  EXPECT_EQ(state()->error, "");
  bool said = false;
  for (const std::string& line : job.infos) {
    said = said || line.find(
                       "removed the state file of job 100, whose composition on this "
                       "node composerd released") != std::string::npos;
  }
  EXPECT_TRUE(said);

  // composerd away: nothing is removed.
  leave_state(100, {old_gpu});
  api.show_error = Error{ErrorCode::kUnavailable, "composerd down"};
  (void)job_prolog(job, api, config);
  EXPECT_TRUE(has_state(100));
}

TEST_F(SpankCoreTest, BadOptionValueFailsTheJobNotTheNode) {
  job.options["compose-gpus"] = "lots";
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_TRUE(api.composed.empty());
  EXPECT_NE(state()->error.find("--compose-gpus=lots"), std::string::npos);
}

TEST_F(SpankCoreTest, TaskExportsTheDevices) {
  show_devices();
  api.devices.push_back(device("nvme-07", DeviceType::kNvme, "0000:81:00.0"));
  tmp.write("sys/bus/pci/devices/0000:81:00.0/vendor", "0x144d\n");
  ASSERT_TRUE(job_prolog(job, api, config));
  FakeJob task;
  task.options = job.options;
  ASSERT_TRUE(task_init(task, config));
  EXPECT_EQ(task.env["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_EQ(task.env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(task.env["COMPOSER_GPUS"], "gpu-00,gpu-01");
  EXPECT_EQ(task.env["COMPOSER_MEM_NUMA"], "2");
  EXPECT_EQ(task.env["COMPOSER_NVME"], "nvme-07");
}

TEST_F(SpankCoreTest, MemoryWithoutNumaNodeExportsNoNode) {
  config.host_check = HostCheck::kOff;
  api.devices = {device("mem-00", DeviceType::kMem, "", 32 * kGiB),
                 device("mem-01", DeviceType::kMem, "", 32 * kGiB)};
  ASSERT_TRUE(job_prolog(job, api, config));
  FakeJob task;
  ASSERT_TRUE(task_init(task, config));
  // NUMA node ids only: a size is no node a job could bind to.
  EXPECT_EQ(task.env["COMPOSER_MEM_NUMA"], "");
  EXPECT_EQ(task.env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(task.env["COMPOSER_GPUS"], "");
}

TEST(NumaNode, AcceptsTheAddressFormsOfMemoryDevices) {
  EXPECT_EQ(numa_node("2"), "2");
  EXPECT_EQ(numa_node("node12"), "12");
  EXPECT_EQ(numa_node("numa:3"), "3");
  EXPECT_EQ(numa_node(""), "");
  EXPECT_EQ(numa_node("0000:41:00.0"), "");
  EXPECT_EQ(numa_node("numa:"), "");
}

TEST_F(SpankCoreTest, TaskOfAJobWithoutCompositionSetsNothing) {
  FakeJob task;
  ASSERT_TRUE(task_init(task, config));
  EXPECT_TRUE(task.env.empty());
}

TEST_F(SpankCoreTest, TaskFailsWhenThePrologLeftNoRecord) {
  FakeJob task;
  task.options = job.options;
  Status s = task_init(task, config);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("left no record"), std::string::npos);
}

TEST_F(SpankCoreTest, EpilogRemovesFromHostReleasesAndForgets) {
  show_devices();
  ASSERT_TRUE(job_prolog(job, api, config));
  ASSERT_TRUE(job_epilog(job, api, config));
  EXPECT_EQ(tmp.read("sys/bus/pci/devices/0000:41:00.0/remove"), "1\n");
  EXPECT_EQ(tmp.read("sys/bus/pci/devices/0000:42:00.0/remove"), "1\n");
  ASSERT_EQ(api.released.size(), 1u);
  EXPECT_EQ(api.released[0], std::make_pair(4711u, std::string("node1")));
  EXPECT_FALSE(state());
  // The line says how long the busy check and the release took (array_phases.py reads it).
  ASSERT_FALSE(job.infos.empty());
  EXPECT_TRUE(std::regex_match(job.infos.back(),
                               std::regex("composer: epilog: job 4711 on node node1: released "
                                          "\\(busy check [0-9]+ ms, release [0-9]+ ms\\)")))
      << job.infos.back();
  // The walk of the processes shared with the epilogs beside it leaves nothing behind.
  EXPECT_TRUE(fs::is_empty(tmp / "state/busy"));
}

// compose=controller: the node's epilog releases its own node too, so that it ends after
// EpilogSlurmctld and its end starts Slurm's next scheduling pass with the licenses back.
TEST_F(SpankCoreTest, UnderControllerComposeTheEpilogReleasesItsNode) {
  show_devices();
  config.compose_on = ComposeOn::kController;
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_TRUE(api.composed.empty());
  ASSERT_TRUE(job_epilog(job, api, config));
  EXPECT_EQ(tmp.read("sys/bus/pci/devices/0000:41:00.0/remove"), "1\n");
  ASSERT_EQ(api.released.size(), 1u);
  EXPECT_EQ(api.released[0], std::make_pair(4711u, std::string("node1")));
  EXPECT_FALSE(state());
}

// The batch script's end (its step's exit hook, every process of it gone) asks for the busy
// check and, with no walk under way, walks (busy_check.h), so that this job's epilog finds its
// answer; not another step's end, not with host_check=off, and not for GPUs a gpu_hook must
// first let go. The epilog leaves nothing of it behind.
TEST_F(SpankCoreTest, BatchScriptEndAsksForTheBusyCheck) {
  show_devices();
  ASSERT_TRUE(job_prolog(job, api, config));
  ASSERT_TRUE(state());
  const std::string ask = "state/busy/4711-" + std::to_string(state()->composition_id) + ".holders";
  job.step = 0;
  job_step_ended(job, config);
  EXPECT_FALSE(fs::exists(tmp / ask)) << "only the batch script's end asks";
  job.step = kBatchStep;
  config.host_check = HostCheck::kOff;
  job_step_ended(job, config);
  EXPECT_FALSE(fs::exists(tmp / ask)) << "host_check=off";
  config.host_check = HostCheck::kWait;
  config.gpu_hook = tmp / "gpu-hook";
  job_step_ended(job, config);
  EXPECT_FALSE(fs::exists(tmp / ask)) << "a gpu_hook";
  config.gpu_hook.clear();
  job_step_ended(job, config);
  EXPECT_TRUE(fs::exists(tmp / ask));
  EXPECT_TRUE(job.errors.empty());
  ASSERT_TRUE(job_epilog(job, api, config));
  EXPECT_EQ(tmp.read("sys/bus/pci/devices/0000:41:00.0/remove"), "1\n");
  EXPECT_TRUE(fs::is_empty(tmp / "state/busy"));
}

// Every step but the batch script, the extern step included, leaves its mark before its
// processes start, so that the epilog takes no answer to the batch script's end; also before
// the job has a state file (PrologFlags=RunInJob starts the extern step before the prolog).
// The epilog removes the mark, also of a job that composed nothing. A mark that cannot be left
// fails the step of a job with devices on the node, and is only logged for any other.
TEST_F(SpankCoreTest, StepStartRecordsEveryStepButTheBatchScript) {
  job.step = kBatchStep;
  ASSERT_TRUE(job_step_started(job, config));
  EXPECT_FALSE(fs::exists(tmp / "state/busy/4711.steps")) << "the batch script";
  job.step = 0xfffffffc;  // Slurm's extern step
  ASSERT_TRUE(job_step_started(job, config));
  EXPECT_TRUE(fs::exists(tmp / "state/busy/4711.steps"));
  FakeJob plain = job;
  plain.id = 4712;
  plain.options.clear();
  plain.step = 0;
  ASSERT_TRUE(job_step_started(plain, config));
  EXPECT_TRUE(fs::exists(tmp / "state/busy/4712.steps"));
  ASSERT_TRUE(job_epilog(plain, api, config));
  EXPECT_FALSE(fs::exists(tmp / "state/busy/4712.steps")) << "its epilog removes it";

  fs::remove_all(tmp / "state/busy");
  tmp.write("state/busy", "");  // a file where the directory goes
  job.step = 0;
  ASSERT_TRUE(job_step_started(job, config));
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_NE(job.errors[0].find("cannot record the step for the epilog's busy check"),
            std::string::npos)
      << job.errors[0];
  show_devices();
  ASSERT_TRUE(job_prolog(job, api, config));
  Status s = job_step_started(job, config);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("job 4711 on node node1: cannot record the step for the "
                                   "epilog's busy check"),
            std::string::npos)
      << s.error();
  EXPECT_NE(s.error().message.find("the step does not start"), std::string::npos) << s.error();
}

// A process that outlived the job still holds a device: the epilog succeeds (the node stays in
// service), nothing is removed or released, and composerd is asked to hold the composition.
// Later hooks of other jobs on the node release it once the process is gone.
TEST_F(SpankCoreTest, EpilogHoldsDevicesAProcessStillHoldsAndALaterHookReleasesThem) {
  show_devices();
  ASSERT_TRUE(job_prolog(job, api, config));
  // pid 321 has a GPU's BAR mapped through sysfs.
  fs::create_directories(tmp / "proc/321/fd");
  fs::create_symlink("/sys/devices/pci0000:40/0000:41:00.0/resource0", tmp / "proc/321/fd/7");
  Status s = job_epilog(job, api, config);
  ASSERT_TRUE(s) << s.error();
  ASSERT_EQ(api.holds.size(), 1u);
  const auto& [held_job, held_node, reason] = api.holds[0];
  EXPECT_EQ(held_job, 4711u);
  EXPECT_EQ(held_node, "node1");
  EXPECT_NE(reason.find("pid 321 holds gpu-00"), std::string::npos) << reason;
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_NE(job.errors[0].find("held by this node"), std::string::npos) << job.errors[0];
  EXPECT_TRUE(api.released.empty());
  EXPECT_EQ(tmp.read("sys/bus/pci/devices/0000:41:00.0/remove"), "");
  ASSERT_TRUE(state());
  EXPECT_EQ(state()->held, reason);

  // The next job's prolog: pid 321 still runs, so nothing changes.
  FakeJob next = job;
  next.id = 4712;
  next.options.clear();
  ASSERT_TRUE(job_prolog(next, api, config));
  EXPECT_EQ(api.holds.size(), 1u);
  EXPECT_TRUE(api.released.empty());
  EXPECT_TRUE(state());

  // Once it has gone, the next hook removes the devices, clears the hold and releases.
  fs::remove_all(tmp / "proc/321");
  ASSERT_TRUE(job_epilog(next, api, config));
  ASSERT_EQ(api.holds.size(), 2u);
  EXPECT_EQ(std::get<2>(api.holds[1]), "");
  ASSERT_EQ(api.released.size(), 1u);
  EXPECT_EQ(api.released[0], std::make_pair(4711u, std::string("node1")));
  EXPECT_EQ(tmp.read("sys/bus/pci/devices/0000:41:00.0/remove"), "1\n");
  EXPECT_FALSE(state());
}

// composerd cannot be told to hold them (it would release the ended job's devices): the epilog
// fails, Slurm drains the node, and the compositions of a drained node are kept.
TEST_F(SpankCoreTest, EpilogFailsWhenComposerdCannotHoldDevicesStillInUse) {
  show_devices();
  ASSERT_TRUE(job_prolog(job, api, config));
  fs::create_directories(tmp / "proc/321/fd");
  fs::create_symlink("/sys/devices/pci0000:40/0000:41:00.0/resource0", tmp / "proc/321/fd/7");
  api.hold_error = Error{ErrorCode::kUnavailable, "composerd is down"};
  Status s = job_epilog(job, api, config);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("pid 321 holds gpu-00"), std::string::npos) << s.error();
  EXPECT_NE(s.error().message.find("composerd is down"), std::string::npos) << s.error();
  EXPECT_TRUE(api.released.empty());
  EXPECT_EQ(tmp.read("sys/bus/pci/devices/0000:41:00.0/remove"), "");
  ASSERT_TRUE(state());
  EXPECT_EQ(state()->held, "");
}

TEST_F(SpankCoreTest, EpilogWaitsForHoldersToGoAway) {
  show_devices();
  ASSERT_TRUE(job_prolog(job, api, config));
  config.busy_wait_s = 5;
  fs::create_directories(tmp / "proc/321/fd");
  fs::create_symlink("/sys/bus/pci/devices/0000:42:00.0/config", tmp / "proc/321/fd/3");
  std::thread exiter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    fs::remove_all(tmp / "proc/321");
  });
  Status s = job_epilog(job, api, config);
  exiter.join();
  EXPECT_TRUE(s) << s.error();
  EXPECT_EQ(api.released.size(), 1u);
}

TEST_F(SpankCoreTest, NvidiaDeviceNodeAndNvmeNamespacesCountAsHeld) {
  show_devices();
  api.devices.push_back(device("nvme-07", DeviceType::kNvme, "0000:81:00.0"));
  fs::create_directories(tmp / "sys/bus/pci/devices/0000:81:00.0/nvme/nvme3");
  tmp.write("proc/driver/nvidia/gpus/0000:42:00.0/information", "Model: X\nDevice Minor: 5\n");
  ASSERT_TRUE(job_prolog(job, api, config));
  fs::create_directories(tmp / "proc/40/fd");
  fs::create_symlink("/dev/nvidia5", tmp / "proc/40/fd/9");
  fs::create_symlink("/dev/nvme3n1p2", tmp / "proc/40/fd/10");
  fs::create_symlink("/dev/nvidia50", tmp / "proc/40/fd/11");  // another GPU
  fs::create_symlink("/dev/nvme31n1", tmp / "proc/40/fd/12");  // another drive
  ASSERT_TRUE(job_epilog(job, api, config));
  ASSERT_EQ(api.holds.size(), 1u);
  const std::string& m = std::get<2>(api.holds[0]);
  EXPECT_NE(m.find("pid 40 holds gpu-01 (/dev/nvidia5)"), std::string::npos) << m;
  EXPECT_NE(m.find("pid 40 holds nvme-07 (/dev/nvme3n1p2)"), std::string::npos);
  EXPECT_EQ(m.find("nvidia50"), std::string::npos);
  EXPECT_EQ(m.find("nvme31"), std::string::npos);
}

// A mapping outlives the descriptor it was made from: a process that closed the device node but
// keeps the GPU's memory mapped, or maps a BAR through sysfs, still holds the device.
TEST_F(SpankCoreTest, AMappingWithoutADescriptorStillCountsAsHeld) {
  show_devices();
  tmp.write("proc/driver/nvidia/gpus/0000:42:00.0/information", "Model: X\nDevice Minor: 5\n");
  ASSERT_TRUE(job_prolog(job, api, config));
  tmp.write("proc/41/maps",
            "7f0000000000-7f0000200000 rw-s 00000000 00:05 1234                       "
            "/dev/nvidia5\n"
            "7f1000000000-7f1000001000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n"
            "7f1000002000-7f1000003000 rw-p 00000000 00:00 0 \n"
            "7f1000003000-7f1000004000 rw-s 00000000 00:05 1234 /dev/nvidia5\n");
  tmp.write("proc/42/maps",
            "7f2000000000-7f2001000000 rw-s 00000000 00:15 77 "
            "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0/resource1\n");
  tmp.write("proc/43/maps", "7f3000000000-7f3000200000 rw-s 00000000 00:05 1 /dev/nvidia50\n");
  ASSERT_TRUE(job_epilog(job, api, config));
  ASSERT_EQ(api.holds.size(), 1u);
  const std::string& m = std::get<2>(api.holds[0]);
  EXPECT_NE(m.find("pid 41 holds gpu-01 (/dev/nvidia5)"), std::string::npos) << m;
  EXPECT_EQ(m.find("pid 41 holds gpu-01 (/dev/nvidia5), pid 41"), std::string::npos)
      << "named twice: " << m;
  EXPECT_NE(m.find("pid 42 holds gpu-00 (/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0/"
                   "resource1)"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("pid 43"), std::string::npos) << m;
  EXPECT_TRUE(api.released.empty());
}

// A maps file is read in pieces of 64 KiB: a process with many mappings (a big program, a
// language runtime) holds the device by a line that one piece cuts in two, and by a last line
// without its newline, as by any other.
TEST_F(SpankCoreTest, AMappingFarDownALongMapsFileStillCountsAsHeld) {
  show_devices();
  tmp.write("proc/driver/nvidia/gpus/0000:42:00.0/information", "Model: X\nDevice Minor: 5\n");
  ASSERT_TRUE(job_prolog(job, api, config));
  const std::string lib = "7f1000000000-7f1000001000 r-xp 00000000 08:01 99 /usr/lib/libc.so.6\n";
  const std::string held = "7f0000000000-7f0000200000 rw-s 00000000 00:05 1234 /dev/nvidia5\n";
  std::string cut;  // the held line across the first 64 KiB
  while (cut.size() + lib.size() < 64 * 1024 - held.size() / 2) cut += lib;
  cut += std::string(64 * 1024 - held.size() / 2 - cut.size() - 1, ' ') + "\n";
  ASSERT_EQ(cut.size(), 64 * 1024 - held.size() / 2);
  tmp.write("proc/44/maps", cut + held + lib);
  std::string last;  // the held line last, with no newline
  for (int i = 0; i < 3000; ++i) last += lib;
  tmp.write("proc/45/maps", last +
                                "7f2000000000-7f2001000000 rw-s 00000000 00:15 77 "
                                "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0/resource1");
  ASSERT_TRUE(job_epilog(job, api, config));
  ASSERT_EQ(api.holds.size(), 1u);
  const std::string& m = std::get<2>(api.holds[0]);
  EXPECT_NE(m.find("pid 44 holds gpu-01 (/dev/nvidia5)"), std::string::npos) << m;
  EXPECT_NE(m.find("pid 45 holds gpu-00 (/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0/"
                   "resource1)"),
            std::string::npos)
      << m;
  EXPECT_TRUE(api.released.empty());
}

TEST_F(SpankCoreTest, ReleaseFailureNeverFailsTheEpilog) {
  config.host_check = HostCheck::kOff;
  ASSERT_TRUE(job_prolog(job, api, config));
  api.release_error = Error{ErrorCode::kUnavailable, "composerd is down"};
  config.outage_wait_s = 0;
  ASSERT_TRUE(job_epilog(job, api, config));
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_NE(job.errors[0].find("reconciler"), std::string::npos);
  EXPECT_FALSE(state());
}

// A composerd restart while the epilog releases: asked again every second within
// outage_wait, with a line when the wait starts and one when composerd is back, so that the
// ended job's devices go back to the pool without waiting for the reconciler.
TEST_F(SpankCoreTest, EpilogRidesOutAComposerdRestart) {
  config.host_check = HostCheck::kOff;
  config.outage_wait_s = 10;
  ASSERT_TRUE(job_prolog(job, api, config));
  api.release_error = Error{ErrorCode::kUnavailable, "cannot connect to http://127.0.0.1:6830"};
  api.release_failures = 1;
  ASSERT_TRUE(job_epilog(job, api, config));
  EXPECT_TRUE(job.errors.empty()) << job.errors[0];
  EXPECT_EQ(api.released.size(), 2u);
  bool waits = false;
  bool back = false;
  for (const std::string& line : job.infos) {
    waits = waits || line.find(
                         "cannot connect to http://127.0.0.1:6830; asking again for up "
                         "to 10 s") != std::string::npos;
    back = back || line.find("composerd answered again after ") != std::string::npos;
  }
  EXPECT_TRUE(waits);
  EXPECT_TRUE(back);
  EXPECT_FALSE(state());
}

TEST_F(SpankCoreTest, EpilogReleasesEvenWithoutStateFile) {
  // The prolog never got an answer (composerd down): release anyway, it is idempotent.
  ASSERT_TRUE(job_epilog(job, api, config));
  EXPECT_EQ(api.released.size(), 1u);
}

TEST_F(SpankCoreTest, EpilogOfAJobWithoutCompositionCallsNothing) {
  job.options.clear();
  ASSERT_TRUE(job_epilog(job, api, config));
  EXPECT_TRUE(api.released.empty());
}

}  // namespace
}  // namespace composer::slurm

namespace composer::slurm {
namespace {

// The set_mempolicy(2) calls of the task hook, seen instead of made.
class MemPolicyTest : public SpankCoreTest {
 protected:
  MemPolicyTest() {
    before = replace_mempolicy_call([this](MempolicyMode mode, const std::set<int>& nodes) {
      calls.emplace_back(mode, nodes);
      return answer;
    });
    show_devices();  // CXL memory on NUMA node 2 beside DRAM nodes 0 and 1
    fs::create_directories(tmp / "sys/devices/system/node/node0");
    fs::create_directories(tmp / "sys/devices/system/node/node1");
  }
  ~MemPolicyTest() override { replace_mempolicy_call(std::move(before)); }

  // A kernel with weighted interleave (6.9 and later).
  void offer_weighted_interleave() {
    for (int n : {0, 1, 2, 3}) {
      tmp.write("sys/kernel/mm/mempolicy/weighted_interleave/node" + std::to_string(n), "1\n");
    }
  }
  std::string weight(int node) {
    std::ifstream in(tmp /
                     ("sys/kernel/mm/mempolicy/weighted_interleave/node" + std::to_string(node)));
    std::string w;
    std::getline(in, w);
    return w;
  }

  // The prolog, then one task of the job; answers the task hook's status.
  Status run_task(FakeJob& task) {
    EXPECT_TRUE(job_prolog(job, api, config));
    task.id = job.id;
    task.options = job.options;
    return task_init(task, config);
  }

  using Call = std::pair<MempolicyMode, std::set<int>>;
  std::vector<Call> calls;
  int answer = 0;
  MempolicyCall before;
};

// The call the task hook makes by default, against this machine's kernel: each test runs it
// in a thread of its own, whose policy goes with it.
TEST(MempolicyCall, TheDefaultCallGivesTheKernelTheNodesAsAMask) {
  const MempolicyCall real = replace_mempolicy_call({});
  replace_mempolicy_call(real);
  int bound = -1;
  long mode = -1;
  unsigned long mask[4] = {};
  int empty = -1;
  int missing = -1;
  std::thread([&] {
    bound = real(MempolicyMode::kBind, {0});
    if (bound == 0) {
      int m = -1;
      if (::syscall(SYS_get_mempolicy, &m, mask, sizeof(mask) * 8, nullptr, 0UL) == 0) mode = m;
    }
    empty = real(MempolicyMode::kBind, {});
    missing = real(MempolicyMode::kInterleave, {200});
  }).join();
  if (bound == ENOSYS) GTEST_SKIP() << "this kernel was built without NUMA";
  ASSERT_EQ(bound, 0) << std::strerror(bound);
  EXPECT_EQ(mode, static_cast<long>(MempolicyMode::kBind));
  EXPECT_EQ(mask[0], 1UL);  // node 0, and no other
  EXPECT_EQ(empty, EINVAL);
  EXPECT_EQ(missing, EINVAL);  // a node the host does not have
}

TEST_F(MemPolicyTest, BindPlacesTheJobsMemoryOnItsCxlNodesOnly) {
  job.options["compose-mem-policy"] = "bind";
  FakeJob task;
  ASSERT_TRUE(run_task(task));
  EXPECT_EQ(calls, (std::vector<Call>{{MempolicyMode::kBind, {2}}}));
  EXPECT_EQ(state()->mem_policy, "bind");
  EXPECT_EQ(task.env["COMPOSER_MEM_POLICY"], "bind");
}

TEST_F(MemPolicyTest, PreferredIsTheDefaultAndPutsDramFirst) {
  FakeJob task;
  ASSERT_TRUE(run_task(task));
  EXPECT_EQ(calls, (std::vector<Call>{{MempolicyMode::kPreferredMany, {0, 1}}}));
  EXPECT_EQ(state()->mem_policy, "preferred");
  EXPECT_EQ(task.env["COMPOSER_MEM_POLICY"], "preferred");
}

TEST_F(MemPolicyTest, PreferredRunsAsBeforeWhereTheKernelLacksPreferredMany) {
  job.options["compose-mem-policy"] = "preferred";
  answer = EINVAL;  // before Linux 5.15
  FakeJob task;
  ASSERT_TRUE(run_task(task));
  EXPECT_EQ(calls.size(), 1u);
  EXPECT_TRUE(task.errors.empty());
}

// The workload class's default (the policy's MemPolicy line) reaches the task through the
// composition composerd answers, under either compose= mode.
TEST_F(MemPolicyTest, AJobThatAsksForNoneRunsUnderItsClasssDefault) {
  api.class_mem_policy = "interleave";
  FakeJob task;
  ASSERT_TRUE(run_task(task));
  ASSERT_EQ(api.composed.size(), 1u);
  EXPECT_FALSE(api.composed[0].mem_policy);  // composerd is asked for no policy
  EXPECT_EQ(calls, (std::vector<Call>{{MempolicyMode::kInterleave, {0, 1, 2}}}));
  EXPECT_EQ(state()->mem_policy, "interleave");
  EXPECT_EQ(task.env["COMPOSER_MEM_POLICY"], "interleave");

  config.compose_on = ComposeOn::kController;
  api.class_mem_policy = "bind";
  FakeJob second;
  second.id = job.id + 1;
  second.options = job.options;
  ASSERT_TRUE(job_prolog(second, api, config));
  Expected<std::optional<JobState>> file = read_job_state(config.state_dir, second.id);
  ASSERT_TRUE(file && file->has_value());
  EXPECT_EQ((*file)->mem_policy, "bind");
}

TEST_F(MemPolicyTest, TheJobsOwnPolicyGoesToComposerd) {
  job.options["compose-mem-policy"] = "weighted:6:2";
  offer_weighted_interleave();
  FakeJob task;
  ASSERT_TRUE(run_task(task));
  ASSERT_EQ(api.composed.size(), 1u);
  ASSERT_TRUE(api.composed[0].mem_policy);
  EXPECT_EQ(to_string(*api.composed[0].mem_policy), "weighted:3:1");
}

TEST_F(MemPolicyTest, AWeightedClassDefaultFailsTheStepsWhereTheKernelLacksIt) {
  api.class_mem_policy = "weighted:3:1";
  FakeJob task;
  Status s = run_task(task);
  ASSERT_FALSE(s);
  EXPECT_NE(state()->error.find("--compose-mem-policy=weighted:3:1 needs Linux 6.9 or later"),
            std::string::npos)
      << state()->error;
  EXPECT_EQ(state()->devices.size(), api.devices.size());  // kept for the epilog to give back
  EXPECT_TRUE(calls.empty());
}

TEST_F(MemPolicyTest, InterleaveSpreadsOverDramAndCxlNodes) {
  job.options["compose-mem-policy"] = "interleave";
  // Another job's CXL memory on the node is no DRAM of this one's.
  JobState other;
  other.job_id = job.id + 1;
  other.node = job.node_name;
  other.composition_id = 99;
  other.devices = {device("mem-09", DeviceType::kMem, "numa:3", 8 * kGiB)};
  ASSERT_TRUE(write_job_state(config.state_dir, other));
  fs::create_directories(tmp / "sys/devices/system/node/node3");
  FakeJob task;
  ASSERT_TRUE(run_task(task));
  EXPECT_EQ(calls, (std::vector<Call>{{MempolicyMode::kInterleave, {0, 1, 2}}}));
  EXPECT_EQ(task.env["COMPOSER_MEM_POLICY"], "interleave");
}

TEST_F(MemPolicyTest, WeightedGivesTheNodeTheRatioAndInterleavesByIt) {
  offer_weighted_interleave();
  job.options["compose-mem-policy"] = "weighted:6:2";
  FakeJob task;
  ASSERT_TRUE(run_task(task));
  EXPECT_EQ(calls, (std::vector<Call>{{MempolicyMode::kWeightedInterleave, {0, 1, 2}}}));
  EXPECT_EQ(weight(0), "3");
  EXPECT_EQ(weight(1), "3");
  EXPECT_EQ(weight(2), "1");
  EXPECT_EQ(weight(3), "1");  // no node of the job's: untouched
  EXPECT_EQ(task.env["COMPOSER_MEM_POLICY"], "weighted:3:1");
}

TEST_F(MemPolicyTest, WeightedIsRefusedBeforeComposingWhereTheKernelLacksIt) {
  job.options["compose-mem-policy"] = "weighted:3:1";
  FakeJob task;
  Status s = run_task(task);
  ASSERT_FALSE(s);
  EXPECT_TRUE(api.composed.empty());
  EXPECT_NE(state()->error.find("--compose-mem-policy=weighted:3:1 needs Linux 6.9 or later"),
            std::string::npos)
      << state()->error;
  EXPECT_NE(s.error().message.find("needs Linux 6.9 or later"), std::string::npos);
  EXPECT_TRUE(calls.empty());
}

TEST_F(MemPolicyTest, ASecondJobCannotChangeTheWeightsAnotherJobInterleavesBy) {
  offer_weighted_interleave();
  job.options["compose-mem-policy"] = "weighted:3:1";
  ASSERT_TRUE(job_prolog(job, api, config));
  FakeJob second;
  second.id = job.id + 1;
  second.options = {{"compose-mem", "8G"}, {"compose-mem-policy", "weighted:2:1"}};
  api.devices = {device("mem-01", DeviceType::kMem, "numa:3", 8 * kGiB)};
  fs::create_directories(tmp / "sys/devices/system/node/node3");
  ASSERT_TRUE(job_prolog(second, api, config));  // the job's fault, not the node's
  Expected<std::optional<JobState>> file = read_job_state(config.state_dir, second.id);
  ASSERT_TRUE(file && file->has_value());
  EXPECT_NE((*file)->error.find("job 4711 on this node interleaves by weighted:3:1"),
            std::string::npos)
      << (*file)->error;
  EXPECT_EQ((*file)->devices.size(), 1u);  // kept for its epilog to give back
  EXPECT_EQ(weight(0), "3");
  EXPECT_EQ(weight(3), "1");
  // The same ratio changes nothing for the first job: it is served.
  FakeJob third;
  third.id = job.id + 2;
  third.options = {{"compose-mem", "8G"}, {"compose-mem-policy", "weighted:3:1"}};
  ASSERT_TRUE(job_prolog(third, api, config));
  file = read_job_state(config.state_dir, third.id);
  ASSERT_TRUE(file && file->has_value());
  EXPECT_EQ((*file)->error, "");
}

TEST_F(MemPolicyTest, APolicyThatCannotBeSetFailsTheStep) {
  job.options["compose-mem-policy"] = "bind";
  answer = EINVAL;
  FakeJob task;
  Status s = run_task(task);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find(
                "--compose-mem-policy=bind: set_mempolicy(MPOL_BIND, nodes 2) failed: "),
            std::string::npos)
      << s.error().message;
}

TEST_F(MemPolicyTest, APolicyWithoutComposedMemoryFailsTheJob) {
  job.options = {{"compose-gpus", "2"}, {"compose-mem-policy", "interleave"}};
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_TRUE(api.composed.empty());
  EXPECT_NE(state()->error.find("give --compose-mem=SIZE with it"), std::string::npos);
}

TEST_F(MemPolicyTest, AJobWithoutCxlMemorySetsNoPolicy) {
  job.options = {{"compose-gpus", "2"}};
  api.devices.pop_back();
  FakeJob task;
  ASSERT_TRUE(run_task(task));
  EXPECT_TRUE(calls.empty());
  EXPECT_EQ(task.env.count("COMPOSER_MEM_POLICY"), 0u);
}

// The weights of weighted interleave are the node's: each job's epilog gives back what its
// prolog changed, except where a job still running interleaves by them. No task runs here: the
// epilog restores also after a task that crashed.
TEST_F(MemPolicyTest, RestoresTheWeightsOnlyWhenNoRunningJobInterleavesByThem) {
  offer_weighted_interleave();
  const char* first[] = {"4", "4", "2", "9"};
  for (int n : {0, 1, 2, 3}) {
    tmp.write("sys/kernel/mm/mempolicy/weighted_interleave/node" + std::to_string(n),
              std::string(first[n]) + "\n");
  }
  job.options["compose-mem-policy"] = "weighted:3:1";
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_EQ(weight(0), "3");
  EXPECT_EQ(weight(2), "1");
  // A second job with the same ratio on CXL node 3.
  FakeJob second;
  second.id = job.id + 1;
  second.options = {{"compose-mem", "8G"}, {"compose-mem-policy", "weighted:3:1"}};
  api.devices = {device("mem-01", DeviceType::kMem, "numa:3", 8 * kGiB)};
  fs::create_directories(tmp / "sys/devices/system/node/node3");
  ASSERT_TRUE(job_prolog(second, api, config));
  EXPECT_EQ(weight(3), "1");

  // The first job ends: its CXL node gets its weight back, the DRAM nodes the second job
  // interleaves over keep theirs.
  ASSERT_TRUE(job_epilog(job, api, config));
  EXPECT_EQ(weight(0), "3");
  EXPECT_EQ(weight(1), "3");
  EXPECT_EQ(weight(2), "2");
  EXPECT_EQ(weight(3), "1");
  // The last one ends: every node has what it had before the first job, DRAM included.
  ASSERT_TRUE(job_epilog(second, api, config));
  EXPECT_EQ(weight(0), "4");
  EXPECT_EQ(weight(1), "4");
  EXPECT_EQ(weight(2), "2");
  EXPECT_EQ(weight(3), "9");
}

TEST_F(MemPolicyTest, TheKernelsAutomaticWeightsComeBackAfterTheLastWeightedJob) {
  offer_weighted_interleave();
  tmp.write("sys/kernel/mm/mempolicy/weighted_interleave/auto", "true\n");
  job.options["compose-mem-policy"] = "weighted:3:1";
  ASSERT_TRUE(job_prolog(job, api, config));
  // The kernel leaves auto mode at the first write of a weight.
  tmp.write("sys/kernel/mm/mempolicy/weighted_interleave/auto", "false\n");
  FakeJob other;  // a job that interleaves without weights changes nothing
  other.id = job.id + 1;
  other.options = {{"compose-mem", "8G"}, {"compose-mem-policy", "interleave"}};
  ASSERT_TRUE(job_prolog(other, api, config));
  ASSERT_TRUE(job_epilog(job, api, config));
  std::ifstream in(tmp / "sys/kernel/mm/mempolicy/weighted_interleave/auto");
  std::string mode;
  std::getline(in, mode);
  EXPECT_EQ(mode, "true");
  EXPECT_EQ(weight(0), "1");
}

TEST_F(MemPolicyTest, AHeldJobsWeightsBindNoLaterJob) {
  offer_weighted_interleave();
  job.options["compose-mem-policy"] = "weighted:2:1";
  ASSERT_TRUE(job_prolog(job, api, config));
  EXPECT_EQ(weight(0), "2");
  // Its epilog finds the devices held; the job has ended all the same.
  JobState s = *state();
  s.held = "still in use";
  ASSERT_TRUE(write_job_state(config.state_dir, s));
  // A later weighted job with another ratio is not refused for the held one, which stays
  // while composerd cannot take its devices back.
  api.hold_error = Error{ErrorCode::kUnavailable, "composerd is down"};
  FakeJob later;
  later.id = job.id + 1;
  later.options = {{"compose-mem", "8G"}, {"compose-mem-policy", "weighted:3:1"}};
  ASSERT_TRUE(job_prolog(later, api, config));
  Expected<std::optional<JobState>> file = read_job_state(config.state_dir, later.id);
  ASSERT_TRUE(file && file->has_value());
  EXPECT_EQ((*file)->error, "");
  EXPECT_EQ(weight(0), "3");
  EXPECT_TRUE(read_job_state(config.state_dir, job.id)->has_value());
}

}  // namespace
}  // namespace composer::slurm
