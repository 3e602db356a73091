// The plugin's host side against a fake host that behaves like the kernel (test_support's
// FakeHost): devices found by what the fabric reported, jobs given only their own devices, a
// device that never appears, and a real process holding a drive through the real /proc.
#include "composer/slurm/host_devices.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/spank_core.h"
#include "composer/test_support/eventually.h"
#include "composer/test_support/fake_host.h"
#include "fakes.h"
#include "temp_dir.h"

extern char** environ;

namespace composer::slurm {
namespace {

using test_support::FakeHost;
using test_support::FakePciFunction;
using testing::FakeComposer;
using testing::FakeJob;
using testing::TempDir;

// A GPU as the Redfish or Liqid driver reports it: no address, an identity.
Device gpu(const std::string& id, const std::string& uuid, const std::string& serial = "") {
  Device d;
  d.id = id;
  d.type = DeviceType::kGpu;
  d.identity = {"0x10de", "0x20b5", serial, uuid};
  return d;
}

FakePciFunction gpu_function(const std::string& address, const std::string& uuid,
                             bool driver = true) {
  FakePciFunction f = test_support::nvidia_gpu(address, uuid);
  f.nvidia_driver = driver;
  return f;
}

// A GPU the fabric reports nothing for: a Redfish Processor with no ids, UUID or PCIe link,
// as DMTF's OffloadBlock9.
Device bare_gpu() {
  Device d;
  d.id = "OffloadBlock9";
  d.type = DeviceType::kGpu;
  return d;
}

// An NVMe drive's function with the serial its controller shows.
FakePciFunction drive_function(const std::string& address, const std::string& serial) {
  FakePciFunction f;
  f.address = address;
  f.vendor = "0x8086";
  f.device = "0x0b60";
  f.class_code = "0x010802";
  f.serial = serial;
  return f;
}

class HostSideTest : public ::testing::Test {
 protected:
  HostSideTest() : host(tmp.path() / "host") {
    config = testing::fake_host_config(tmp.path().string(), host);
    config.compose_on = ComposeOn::kNode;  // the prolog composes and the epilog releases
    // The node's own GPU, which no composed job may get.
    host.add_present(gpu_function("0000:01:00.0", "GPU-local-0000"));
  }

  FakeJob job(uint32_t id, uint32_t gpus) {
    FakeJob j;
    j.id = id;
    j.options = {{"compose-gpus", std::to_string(gpus)}};
    return j;
  }

  // Another job's prolog found `gpu` at `address` and recorded it in its state file.
  void record_gpu_of(uint32_t other_job, Device gpu, const std::string& address) {
    JobState other;
    other.job_id = other_job;
    other.node = "node1";
    other.composition_id = other_job;
    gpu.address = address;
    other.devices = {gpu};
    ASSERT_TRUE(write_job_state(config.state_dir, other));
  }

  FakeJob memory_job(uint32_t id) {
    FakeJob j;
    j.id = id;
    j.options = {{"compose-mem", "64G"}};
    return j;
  }

  // The driver the fake host's dax device is bound to ("" for none).
  std::string dax_driver(const std::string& name) {
    std::error_code ec;
    return std::filesystem::read_symlink(host.sysfs_root() + "/bus/dax/devices/" + name + "/driver",
                                         ec)
        .filename()
        .string();
  }

  // The prolog of a one-node job fails within host_wait 1 s, with one error that says `why`.
  void expect_prolog_fails(uint32_t job_id, const std::string& why) {
    config.host_wait_s = 1;
    FakeJob j = job(job_id, 1);
    Status s = job_prolog(j, api, config);
    ASSERT_FALSE(s);
    ASSERT_EQ(j.errors.size(), 1u);
    EXPECT_NE(j.errors[0].find(why), std::string::npos) << j.errors[0];
  }

  std::optional<JobState> state(uint32_t id) {
    Expected<std::optional<JobState>> s = read_job_state(config.state_dir, id);
    EXPECT_TRUE(s) << s.error();
    return s ? *s : std::nullopt;
  }

  std::string task_env(uint32_t id, const std::string& name) {
    FakeJob task;
    task.id = id;
    EXPECT_TRUE(task_init(task, config));
    return task.env[name];
  }

  // A real process that opens `path` as its fd 3 and keeps it open until something is written
  // to `stop` (a FIFO made here: `std::ofstream{stop} << "go\n"` lets it go); its pid once it
  // has opened it (0 on failure, with a test failure). The shell waits in its builtin `read`
  // and starts no child, so it alone holds the file, and once it has been waited for nothing
  // of it does.
  pid_t hold_open(const std::string& path, const std::string& stop) {
    if (mkfifo(stop.c_str(), 0600) != 0) {
      ADD_FAILURE() << "cannot make the FIFO " << stop;
      return 0;
    }
    const std::string script = "exec 3<'" + path + "'; read go <'" + stop + "'";
    const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
      ADD_FAILURE() << "cannot start /bin/sh";
      return 0;
    }
    // Until the shell has opened it: its fd 3 may at first be one it inherited from this test.
    const std::string fd = "/proc/" + std::to_string(pid) + "/fd/3";
    const auto opened = [&fd, &path] {
      std::error_code ec;
      return std::filesystem::read_symlink(fd, ec) == path;
    };
    for (int i = 0; i < 2000 && !opened(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    holders_.push_back(pid);
    if (!opened()) {
      ADD_FAILURE() << fd << " never pointed at " << path;
      return 0;
    }
    return pid;
  }
  // A test that stops early leaves no holder behind (it would keep ctest's output pipe open).
  void TearDown() override {
    for (pid_t pid : holders_) {
      // Only one still running: a pid the test has waited for may be another process's now.
      if (waitpid(pid, nullptr, WNOHANG) == 0 && kill(pid, SIGKILL) == 0) waitpid(pid, nullptr, 0);
    }
  }
  std::vector<pid_t> holders_;  // every holder hold_open started

  // The devices cgroup Slurm's task/cgroup makes for a job (cgroup v1, ConstrainDevices=yes),
  // with one step, under a fake hierarchy at config.devices_cgroup; its path.
  std::string job_cgroup(uint32_t id) {
    config.devices_cgroup = tmp / "cgroup/devices";
    tmp.write("cgroup/devices/devices.deny", "");
    const std::string job = "cgroup/devices/slurm/uid_1000/job_" + std::to_string(id);
    tmp.write(job + "/devices.deny", "");
    tmp.write(job + "/step_0/devices.deny", "");
    return tmp / job;
  }
  // Job `id`'s prolog composes one GPU, which the host shows as /dev/nvidia<minor> (at
  // 0000:4<minor>:00.0, UUID GPU-aaaa-000<minor>). False (with a test failure) if it fails.
  bool prolog_with_gpu(uint32_t id, int minor) {
    const std::string n = std::to_string(minor);
    host.attach(test_support::nvidia_gpu("0000:4" + n + ":00.0", "GPU-aaaa-000" + n, minor));
    api.devices = {gpu("gpu-a-" + n, "GPU-aaaa-000" + n)};
    FakeJob j = job(id, 1);
    const Status s = job_prolog(j, api, config);
    EXPECT_TRUE(s) << join(j.errors, "\n");
    return static_cast<bool>(s);
  }
  // The rules written to a cgroup's devices.deny, one per line.
  std::string denied(const std::string& cgroup) {
    std::ifstream in(cgroup + "/devices.deny");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // A job's drive (at `address`) that a real process keeps open past busy_wait: the job's
  // epilog succeeds, leaves the drive attached and on the host, and tells composerd to hold it.
  // The holder's pid (0 after a test failure); it lets go once `stop` exists.
  // The process holds the namespace's block device, or with `generic` its generic character
  // device (/dev/ng<N>n1).
  pid_t held_drive(uint32_t job_id, const std::string& id, const std::string& address,
                   const std::string& stop, bool generic = false) {
    Device drive;
    drive.id = id;
    drive.type = DeviceType::kNvme;
    drive.identity = {"0x8086", "0x0b60", "SERIAL-" + id, ""};
    api.devices = {drive};
    host.attach(drive_function(address, "SERIAL-" + id));
    FakeJob a = job(job_id, 0);
    a.options = {{"compose-nvme", "1"}};
    config.proc_root = "/proc";  // the busy check reads the real processes
    if (!job_prolog(a, api, config)) {
      ADD_FAILURE() << join(a.errors, "\n");
      return 0;
    }
    const std::string ctrl = host.nvme_controller(address);
    const pid_t pid = hold_open(
        host.dev_root() + "/" + (generic ? "ng" + ctrl.substr(4) + "n1" : ctrl + "n1"), stop);
    if (pid == 0) return 0;
    config.busy_wait_s = 1;
    const size_t holds = api.holds.size();
    FakeJob end = job(job_id, 0);
    end.options = a.options;
    Status ended = job_epilog(end, api, config);
    EXPECT_TRUE(ended) << ended.error();
    EXPECT_EQ(api.holds.size(), holds + 1);
    if (api.holds.size() == holds + 1) {
      EXPECT_NE(std::get<2>(api.holds.back()).find("pid " + std::to_string(pid) + " holds " + id),
                std::string::npos)
          << std::get<2>(api.holds.back());
    }
    EXPECT_TRUE(api.released.empty());
    EXPECT_TRUE(host.removed().empty());
    EXPECT_TRUE(state(job_id) && !state(job_id)->held.empty());
    return pid;
  }

  TempDir tmp;
  FakeHost host;
  SpankConfig config;
  FakeComposer api;
};

TEST_F(HostSideTest, TwoJobsOnOneNodeGetTheirOwnGpusByUuid) {
  api.devices = {gpu("gpu-a-2", "GPU-aaaa-0002"), gpu("gpu-a-5", "GPU-aaaa-0005")};
  // The fabric attaches them; the host numbers them in another order than the fabric.
  host.attach(gpu_function("0000:42:00.0", "GPU-aaaa-0005"));
  host.attach(gpu_function("0000:41:00.0", "GPU-aaaa-0002"), std::chrono::milliseconds(300));
  FakeJob a = job(101, 2);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  api.devices = {gpu("gpu-a-0", "GPU-aaaa-0000"), gpu("gpu-a-1", "GPU-aaaa-0001")};
  host.attach(gpu_function("0000:43:00.0", "GPU-aaaa-0000"));
  host.attach(gpu_function("0000:44:00.0", "GPU-aaaa-0001"));
  FakeJob b = job(102, 2);
  ASSERT_TRUE(job_prolog(b, api, config)) << join(b.errors, "\n");
  EXPECT_EQ(host.rescans(), 2);

  EXPECT_EQ(task_env(101, "CUDA_VISIBLE_DEVICES"), "GPU-aaaa-0002,GPU-aaaa-0005");
  EXPECT_EQ(task_env(102, "CUDA_VISIBLE_DEVICES"), "GPU-aaaa-0000,GPU-aaaa-0001");
  EXPECT_EQ(task_env(101, "COMPOSER_GPUS"), "gpu-a-2,gpu-a-5");
  EXPECT_EQ(task_env(101, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  // Each state file records where the host shows each device, for the epilog.
  EXPECT_EQ(state(101)->devices[0].address, "0000:41:00.0");
  EXPECT_EQ(state(101)->devices[1].address, "0000:42:00.0");
  EXPECT_EQ(state(102)->devices[0].address, "0000:43:00.0");
  EXPECT_EQ(state(102)->devices[1].address, "0000:44:00.0");

  // The epilog removes only the job's own functions from the host.
  FakeJob end_a = job(101, 2);
  ASSERT_TRUE(job_epilog(end_a, api, config));
  test_support::eventually([&] { return host.removed().size() >= 2; });
  std::vector<std::string> removed = host.removed();
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{"0000:41:00.0", "0000:42:00.0"}));
  EXPECT_TRUE(std::filesystem::exists(config.sysfs_root + "/bus/pci/devices/0000:43:00.0"));
}

TEST_F(HostSideTest, WithoutUuidsJobsGetDisjointIndicesInPciBusOrder) {
  // No nvidia driver bound, no serial the host can read: the GPUs are told apart only by
  // being the new functions with the fabric's ids.
  api.devices = {gpu("gpu-b-0", ""), gpu("gpu-b-1", "")};
  host.attach(gpu_function("0000:41:00.0", "", false));
  host.attach(gpu_function("0000:42:00.0", "", false));
  FakeJob a = job(201, 2);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  host.attach(gpu_function("0000:81:00.0", "", false));
  host.attach(gpu_function("0000:82:00.0", "", false));
  FakeJob b = job(202, 2);
  ASSERT_TRUE(job_prolog(b, api, config)) << join(b.errors, "\n");
  // Index 0 is the node's own GPU (0000:01:00.0).
  EXPECT_EQ(task_env(201, "CUDA_VISIBLE_DEVICES"), "1,2");
  EXPECT_EQ(task_env(202, "CUDA_VISIBLE_DEVICES"), "3,4");
}

TEST_F(HostSideTest, AFunctionAnotherJobsStateFileHoldsIsNeverACandidate) {
  // Job 700's prolog found its GPU at 0000:41:00.0 while this job's rescan ran: the function
  // is new to this job as well, with the same ids, but it is job 700's.
  host.attach(gpu_function("0000:41:00.0", "", false));
  host.attach(gpu_function("0000:42:00.0", "", false));
  record_gpu_of(700, gpu("gpu-f-9", ""), "0000:41:00.0");
  api.devices = {gpu("gpu-f-0", "")};
  FakeJob a = job(701, 1);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_EQ(state(701)->devices[0].address, "0000:42:00.0");
  EXPECT_EQ(task_env(701, "CUDA_VISIBLE_DEVICES"), "2");
}

TEST_F(HostSideTest, NeverGuessesBetweenItsOwnAndAnotherJobsNewGpus) {
  // Two jobs' GPUs, with nothing but their ids, appear at the same rescan: four new functions
  // for two devices. The prolog cannot tell which are its own, so it fails instead.
  api.devices = {gpu("gpu-c-0", ""), gpu("gpu-c-1", "")};
  for (const char* a : {"0000:41:00.0", "0000:42:00.0", "0000:43:00.0", "0000:44:00.0"}) {
    host.attach(gpu_function(a, "", false));
  }
  config.host_wait_s = 1;
  FakeJob a = job(301, 2);
  Status s = job_prolog(a, api, config);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kTimeout);
  ASSERT_EQ(a.errors.size(), 1u);
  EXPECT_NE(a.errors[0].find("gpu-c-0 (PCI 0x10de:0x20b5; 4 new functions with these ids for 2 "
                             "devices, and no UUID or serial to tell them apart)"),
            std::string::npos)
      << a.errors[0];
  EXPECT_EQ(state(301)->cuda_visible_devices, "");
  // They did appear, only not so that the prolog can tell them apart: nothing is drained.
  EXPECT_TRUE(api.unseen.empty());
}

// A GPU the fabric reports nothing for (a Redfish Processor with no ids, UUID or PCIe link, as
// in DMTF's mockups) is the one new function of a GPU's kind after its attach; a drive that
// appears at the same rescan is not of its kind. Two new GPU functions for it: no guess.
TEST_F(HostSideTest, AGpuTheFabricReportsNothingForIsTheOneNewGpuFunction) {
  api.devices = {bare_gpu()};
  host.attach(gpu_function("0000:45:00.0", "", false));
  host.attach(drive_function("0000:46:00.0", "FRN100000077"));  // another job's drive
  FakeJob a = job(311, 1);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_EQ(state(311)->devices[0].address, "0000:45:00.0");

  host.attach(gpu_function("0000:47:00.0", "", false));
  host.attach(gpu_function("0000:48:00.0", "", false));
  expect_prolog_fails(312,
                      "OffloadBlock9 (any GPU: the fabric reported nothing more; 2 new "
                      "functions with these ids for 1 device");
}

// The host may show a job's devices before its prolog gets to its own rescan: another job's
// prolog rescanned meanwhile (or the kernel's hot-plug enumerated them). A prolog that composes
// compares with what the host showed before its compose, so the GPU the fabric reports nothing
// for is still its one new GPU function.
TEST_F(HostSideTest, AGpuTheFabricReportsNothingForIsFoundWhenAnotherRescanShowedItFirst) {
  api.devices = {bare_gpu()};
  api.on_compose = [this] {
    host.attach(gpu_function("0000:45:00.0", "", false));
    ASSERT_TRUE(HostDevices(config.sysfs_root, config.proc_root, config.dev_root).rescan());
    for (int i = 0; i < 400 && host.present().size() < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(host.present().size(), 2u);
  };
  FakeJob a = job(321, 1);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_EQ(state(321)->devices[0].address, "0000:45:00.0");
  EXPECT_EQ(task_env(321, "CUDA_VISIBLE_DEVICES"), "1");
}

// The address a GPU the fabric reports nothing for comes at may be the one another job's
// device had when the prolog took its snapshot (the compose waited for it to be freed, or its
// epilog's remove did not take and the fabric took it away): a function that came there since
// is new, one that stayed there is not.
TEST_F(HostSideTest, AGpuTheFabricReportsNothingForIsFoundWhereAnotherJobsDeviceWasShown) {
  host.attach(gpu_function("0000:45:00.0", "", false));
  ASSERT_TRUE(HostDevices(config.sysfs_root, config.proc_root, config.dev_root).rescan());
  for (int i = 0; i < 400 && host.present().size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(host.present().size(), 2u);
  api.devices = {bare_gpu()};
  // The function stays: it was there before the attach, so it is not this job's.
  expect_prolog_fails(351,
                      "OffloadBlock9 (any GPU: the fabric reported nothing more; 0 new "
                      "functions with these ids for 1 device");
  // The fabric takes the old one away and attaches this job's GPU to the same slot.
  api.on_compose = [this] {
    host.unplug_now("0000:45:00.0");
    host.attach(gpu_function("0000:45:00.0", "", false));
  };
  config.host_wait_s = 10;
  FakeJob b = job(352, 1);
  ASSERT_TRUE(job_prolog(b, api, config)) << join(b.errors, "\n");
  EXPECT_EQ(state(352)->devices[0].address, "0000:45:00.0");
}

// Another job's GPU appeared at the same time and its prolog has not recorded it yet: two new
// GPU functions for the one the fabric reports nothing for. The prolog looks again without
// keeping the node's lock, the other prolog records its GPU meanwhile, and the one function
// left is this job's.
TEST_F(HostSideTest, AGpuTheFabricReportsNothingForWaitsUntilAnotherPrologRecordsItsOwn) {
  api.devices = {bare_gpu()};
  host.attach(gpu_function("0000:45:00.0", "", false));
  host.attach(gpu_function("0000:46:00.0", "GPU-other-0046"));
  std::thread other([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    Expected<HostLock> lock = HostLock::take(config.state_dir, std::chrono::seconds(5));
    ASSERT_TRUE(lock) << lock.error();
    record_gpu_of(342, gpu("gpu-o-6", "GPU-other-0046"), "0000:46:00.0");
  });
  FakeJob a = job(341, 1);
  Status s = job_prolog(a, api, config);
  other.join();
  ASSERT_TRUE(s) << join(a.errors, "\n");
  EXPECT_EQ(state(341)->devices[0].address, "0000:45:00.0");
}

// Prologs on one node look for their devices one after another: while one holds the node's
// host lock, another waits for it, and gives up with a sentence naming the file.
TEST_F(HostSideTest, TheHostLockIsTakenByOneProcessAtATime) {
  Expected<HostLock> first = HostLock::take(config.state_dir, std::chrono::milliseconds(100));
  ASSERT_TRUE(first) << first.error();
  Expected<HostLock> second = HostLock::take(config.state_dir, std::chrono::milliseconds(100));
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kTimeout);
  EXPECT_NE(second.error().message.find(config.state_dir + "/host.lock"), std::string::npos)
      << second.error().message;
  // A prolog on the node waits for the lock, then finds its GPU.
  api.devices = {gpu("gpu-l-0", "GPU-llll-0000")};
  host.attach(gpu_function("0000:41:00.0", "GPU-llll-0000"));
  std::optional<HostLock> held(std::move(*first));
  std::thread later([&held] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    held.reset();
  });
  FakeJob a = job(331, 1);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  later.join();
  EXPECT_EQ(state(331)->devices[0].address, "0000:41:00.0");
  // The job's other hooks do not take it: a held lock never delays a task or an epilog.
  Expected<HostLock> again = HostLock::take(config.state_dir, std::chrono::milliseconds(100));
  ASSERT_TRUE(again);
  EXPECT_EQ(task_env(331, "CUDA_VISIBLE_DEVICES"), "GPU-llll-0000");
  FakeJob end = job(331, 1);
  EXPECT_TRUE(job_epilog(end, api, config));
}

// Between an epilog's removal of its devices and composerd's detach, no prolog rescans: the
// rescan would show them again at the address their next attach gives them, where the next
// prolog would take them for functions the host had before.
TEST_F(HostSideTest, NoRescanBetweenAnEpilogsRemovalAndTheDetach) {
  api.devices = {gpu("gpu-r-0", "GPU-rrrr-0000")};
  host.attach(gpu_function("0000:41:00.0", "GPU-rrrr-0000"));
  FakeJob a = job(351, 1);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  std::optional<Error> rescan_refused;
  api.on_release = [&] {
    Expected<HostLock> rescan =
        HostLock::take(config.state_dir, std::chrono::milliseconds(50), HostLock::kRescan);
    if (!rescan) rescan_refused = rescan.error();
  };
  FakeJob end = job(351, 1);
  ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
  ASSERT_TRUE(rescan_refused);
  EXPECT_EQ(rescan_refused->code, ErrorCode::kTimeout);
  // Once released, a rescan may run again.
  EXPECT_TRUE(HostLock::take(config.state_dir, std::chrono::milliseconds(50), HostLock::kRescan));
}

// CXL memory: the prolog binds the region's dax device to kmem and onlines its blocks (movable)
// on the node it targets, the job gets that node, and the epilog offlines the blocks and
// gives the region back to device_dax before the release.
TEST_F(HostSideTest, CxlMemoryIsOnlinedOnItsNodeAndOfflinedBeforeTheRelease) {
  api.devices = {testing::device("mem-c-0", DeviceType::kMem, "numa:2", 64 * kGiB)};
  host.add_dax("dax0.0", 2, 64 * kGiB, 4);
  host.add_dax("dax1.0", 3, 64 * kGiB, 4);  // another region, not this job's
  FakeJob a = memory_job(361);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_EQ(host.memory_states(2), std::vector<std::string>(4, "online"));
  EXPECT_TRUE(host.memory_states(3).empty());
  EXPECT_EQ(dax_driver("dax0.0"), "kmem");
  EXPECT_EQ(dax_driver("dax1.0"), "device_dax");
  EXPECT_EQ(task_env(361, "COMPOSER_MEM_NUMA"), "2");

  FakeJob end = memory_job(361);
  ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
  ASSERT_EQ(api.released.size(), 1u);
  test_support::eventually(
      [&] { return dax_driver("dax0.0") == "device_dax" && host.memory_states(2).empty(); });
  EXPECT_TRUE(host.memory_states(2).empty());  // offlined, then removed by kmem's unbind
  EXPECT_EQ(dax_driver("dax0.0"), "device_dax");
  EXPECT_TRUE(api.holds.empty());
}

// A CXL device whose capacity is in no region (QEMU 7.2's persistent Type 3 device present at
// boot, in kvm_hotplug): the prolog makes the region, its namespace and dax device, and onlines
// it; the epilog offlines it and destroys the region, so the next job can make it again.
TEST_F(HostSideTest, CxlMemoryInNoRegionGetsARegionMadeAndDestroyed) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  api.devices = {testing::device("mem-r-0", DeviceType::kMem, "", 512 * kMiB)};
  host.add_cxl_memory("mem0", 512 * kMiB, 2, 3);
  host.add_cxl_memory("mem1", 256 * kMiB, 3, 1);  // another size: not this job's
  config.host_wait_s = 5;
  for (uint32_t id : {401u, 402u}) {
    FakeJob a = memory_job(id);
    ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
    EXPECT_EQ(state(id)->devices[0].address, "numa:2");
    EXPECT_EQ(task_env(id, "COMPOSER_MEM_NUMA"), "2");
    EXPECT_EQ(host.cxl_regions().size(), 1u);
    test_support::eventually(
        [&] { return host.memory_states(2) == std::vector<std::string>(3, "online"); });
    EXPECT_EQ(host.memory_states(2), std::vector<std::string>(3, "online"));

    FakeJob end = memory_job(id);
    ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
    EXPECT_EQ(api.released.size(), id - 400);
    test_support::eventually([&] { return host.dax_names().empty(); });
    EXPECT_TRUE(host.dax_names().empty());
    EXPECT_TRUE(host.cxl_regions().empty());
    EXPECT_TRUE(host.memory_states(2).empty());
  }
}

// Two prologs on one node make regions at once (CXL memory in no region, as QEMU 7.2's
// persistent Type 3 devices in kvm_cxl). The first makes its two regions one after the other;
// the second starts once the first region is there, while the first has chosen its second
// device and not set it yet. Without the node's region lock the second would take that device
// too, and the kernel refuses a decoder to a second region. Under it each job gets devices of
// its own, and their epilogs destroy every region.
TEST_F(HostSideTest, TwoPrologsMakingRegionsAtOnceTakeDevicesOfTheirOwn) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  host.add_cxl_memory("mem0", 512 * kMiB, 2, 2);
  host.add_cxl_memory("mem1", 512 * kMiB, 3, 2);
  host.add_cxl_memory("mem2", 512 * kMiB, 4, 2);
  config.host_wait_s = 10;
  api.devices = {testing::device("mem-t-0", DeviceType::kMem, "", 512 * kMiB),
                 testing::device("mem-t-1", DeviceType::kMem, "", 512 * kMiB)};
  FakeComposer other;  // the second job's composerd answer
  other.devices = {testing::device("mem-t-2", DeviceType::kMem, "", 512 * kMiB)};
  FakeJob a = memory_job(661);
  FakeJob b = memory_job(662);
  Status a_done = Status::Ok();
  Status b_done = Status::Ok();
  std::thread first([&] { a_done = job_prolog(a, api, config); });
  test_support::eventually([&] { return !host.cxl_regions().empty(); });
  std::thread second([&] { b_done = job_prolog(b, other, config); });
  first.join();
  second.join();
  ASSERT_TRUE(a_done) << join(a.errors, "\n");
  ASSERT_TRUE(b_done) << join(b.errors, "\n");
  std::vector<std::string> nodes;
  for (uint32_t id : {661u, 662u}) {
    const std::optional<JobState> recorded = state(id);
    ASSERT_TRUE(recorded);
    for (const Device& d : recorded->devices) nodes.push_back(d.address);
  }
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, (std::vector<std::string>{"numa:2", "numa:3", "numa:4"}));
  EXPECT_EQ(host.cxl_regions().size(), 3u);

  // One after the other: the fake kernel's driver files keep one name a round, where two
  // epilogs at once would each write kmem/unbind.
  FakeJob end_a = memory_job(661);
  ASSERT_TRUE(job_epilog(end_a, api, config)) << join(end_a.errors, "\n");
  FakeJob end_b = memory_job(662);
  ASSERT_TRUE(job_epilog(end_b, other, config)) << join(end_b.errors, "\n");
  test_support::eventually([&] { return host.dax_names().empty(); });
  EXPECT_TRUE(host.dax_names().empty());
  EXPECT_TRUE(host.cxl_regions().empty());
}

// A host with two fixed memory windows (root decoders), each for other host bridges: the
// region of a CXL memory device is made in a window that targets the device's host bridge and
// has room for it, and does not interleave (the kernel commits it in no other). When none does, the
// prolog fails with one sentence naming each window and why it does not take the device, rather
// than let the job run without its memory.
TEST_F(HostSideTest, AMemoryDeviceGetsItsRegionInAWindowThatTargetsItsHostBridge) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  host.add_cxl_window("decoder0.0", {32}, 4096 * kMiB);
  host.add_cxl_window("decoder0.1", {33}, 512 * kMiB);
  host.add_cxl_window("decoder0.2", {33, 34}, 4096 * kMiB);  // interleaved: not for one device
  host.add_cxl_memory("mem0", 512 * kMiB, 2, 2, 33);
  host.add_cxl_memory("mem1", 512 * kMiB, 3, 2, 33);
  config.host_wait_s = 5;
  api.devices = {testing::device("mem-w-0", DeviceType::kMem, "", 512 * kMiB)};
  FakeJob a = memory_job(671);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_EQ(state(671)->devices[0].address, "numa:2");
  const std::vector<std::string> regions = host.cxl_regions();
  ASSERT_EQ(regions.size(), 1u);
  std::error_code ec;
  EXPECT_EQ(std::filesystem::canonical(host.sysfs_root() + "/bus/cxl/devices/" + regions[0], ec)
                .parent_path()
                .filename(),
            "decoder0.1");

  // The window of host bridge 33 is full, and the other does not target it.
  FakeJob b = memory_job(672);
  ASSERT_FALSE(job_prolog(b, api, config));
  ASSERT_FALSE(b.errors.empty());
  EXPECT_NE(b.errors[0].find("but the host cannot use them: mem-w-0: no CXL window takes 512M "
                             "of mem1 (behind host bridge 33): decoder0.0 targets host bridge "
                             "32; decoder0.1 has 0 free of 512M; decoder0.2 interleaves across 2 "
                             "host bridges"),
            std::string::npos)
      << b.errors[0];
  EXPECT_EQ(host.cxl_regions().size(), 1u);

  FakeJob end = memory_job(671);
  ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
  test_support::eventually([&] { return host.cxl_regions().empty(); });
  EXPECT_TRUE(host.cxl_regions().empty());
}

// The region's dax device appears some time after the attach (as a PCI function may): the
// prolog waits for it within host_wait.
TEST_F(HostSideTest, ARegionThatAppearsLateIsWaitedFor) {
  api.devices = {testing::device("mem-c-3", DeviceType::kMem, "numa:4", 64 * kGiB)};
  std::thread late([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    host.add_dax("dax4.0", 4, 64 * kGiB, 2);
  });
  FakeJob a = memory_job(391);
  Status s = job_prolog(a, api, config);
  late.join();
  ASSERT_TRUE(s) << join(a.errors, "\n");
  EXPECT_EQ(host.memory_states(4), std::vector<std::string>(2, "online"));
}

// Memory the fabric names no node for is the one dax device in devdax mode of its size.
TEST_F(HostSideTest, MemoryWithoutANodeIsTheDaxDeviceOfItsSize) {
  api.devices = {testing::device("mem-c-1", DeviceType::kMem, "", 32 * kGiB)};
  host.add_dax("dax0.0", 2, 16 * kGiB, 2);
  host.add_dax("dax1.0", 3, 32 * kGiB, 2);
  FakeJob a = memory_job(371);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_EQ(state(371)->devices[0].address, "numa:3");
  EXPECT_EQ(task_env(371, "COMPOSER_MEM_NUMA"), "3");
  EXPECT_EQ(host.memory_states(3), std::vector<std::string>(2, "online"));

  // Two regions of the size and no node to tell them apart: no guess, the prolog fails.
  host.add_dax("dax2.0", 4, 32 * kGiB, 2);
  host.add_dax("dax3.0", 5, 32 * kGiB, 2);
  FakeJob b = memory_job(372);
  Status s = job_prolog(b, api, config);
  ASSERT_FALSE(s);
  ASSERT_FALSE(b.errors.empty());
  EXPECT_NE(b.errors[0].find("mem-c-1: 2 dax devices of 32G"), std::string::npos) << b.errors[0];
  EXPECT_TRUE(host.memory_states(4).empty());
}

// A job with two regions of one size and no node from the fabric: the two dax devices of that
// size are both its own, whichever gets which.
TEST_F(HostSideTest, TwoRegionsOfOneSizeWithoutANodeTakeTheTwoDaxDevicesOfThatSize) {
  api.devices = {testing::device("mem-c-3", DeviceType::kMem, "", 32 * kGiB),
                 testing::device("mem-c-4", DeviceType::kMem, "", 32 * kGiB)};
  host.add_dax("dax4.0", 6, 32 * kGiB, 2);
  FakeJob a = memory_job(373);
  std::thread late([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    host.add_dax("dax5.0", 7, 32 * kGiB, 2);  // appears some time after the attach
  });
  const Status s = job_prolog(a, api, config);
  late.join();
  ASSERT_TRUE(s) << join(a.errors, "\n");
  EXPECT_EQ(state(373)->devices[0].address, "numa:6");
  EXPECT_EQ(state(373)->devices[1].address, "numa:7");
  EXPECT_EQ(task_env(373, "COMPOSER_MEM_NUMA"), "6,7");
  // The fake kernel applies a write to a block's state on its own thread.
  test_support::eventually([&] {
    return host.memory_states(6) == std::vector<std::string>(2, "online") &&
           host.memory_states(7) == std::vector<std::string>(2, "online");
  });
  EXPECT_EQ(host.memory_states(6), std::vector<std::string>(2, "online"));
  EXPECT_EQ(host.memory_states(7), std::vector<std::string>(2, "online"));
}

// Pages the kernel cannot move keep the memory online: the epilog holds the composition
// instead of detaching memory in use, and a later hook releases it once it goes offline.
TEST_F(HostSideTest, MemoryInUseIsHeldNotDetached) {
  api.devices = {testing::device("mem-c-2", DeviceType::kMem, "numa:2", 64 * kGiB)};
  host.add_dax("dax0.0", 2, 64 * kGiB, 2);
  config.host_wait_s = 1;
  FakeJob a = memory_job(381);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  host.set_memory_busy(2, true);
  FakeJob end = memory_job(381);
  ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
  EXPECT_TRUE(api.released.empty());
  ASSERT_EQ(api.holds.size(), 1u);
  EXPECT_NE(std::get<2>(api.holds[0]).find("mem-c-2: memory of NUMA node 2 still in use"),
            std::string::npos)
      << std::get<2>(api.holds[0]);
  // The kernel refused the offline: the blocks stay online.
  test_support::eventually(
      [&] { return host.memory_states(2) == std::vector<std::string>(2, "online"); });
  EXPECT_EQ(host.memory_states(2), std::vector<std::string>(2, "online"));
  EXPECT_FALSE(state(381)->held.empty());

  // Still busy at the next job's prolog: still held.
  FakeJob next = job(382, 0);
  next.options = {};
  ASSERT_TRUE(job_prolog(next, api, config));
  EXPECT_TRUE(api.released.empty());
  host.set_memory_busy(2, false);
  FakeJob later = job(383, 0);
  later.options = {};
  ASSERT_TRUE(job_prolog(later, api, config));
  ASSERT_EQ(api.released.size(), 1u);
  EXPECT_EQ(api.released[0].first, 381u);
  EXPECT_FALSE(state(381));
}

TEST_F(HostSideTest, ADeviceThatNeverAppearsFailsTheCompositionWithOneLine) {
  api.devices = {gpu("gpu-d-0", "GPU-dddd-0000"), gpu("gpu-d-1", "GPU-dddd-0001")};
  host.attach(gpu_function("0000:41:00.0", "GPU-dddd-0000"));  // only one of them comes
  config.host_wait_s = 1;
  FakeJob a = job(401, 2);
  Status s = job_prolog(a, api, config);
  ASSERT_FALSE(s);
  ASSERT_EQ(a.errors.size(), 1u);
  EXPECT_NE(a.errors[0].find("job 401 on node node1: composerd attached gpu-d-0,gpu-d-1 but the "
                             "host cannot use them: the host does not show gpu-d-1 (PCI "
                             "0x10de:0x20b5, UUID GPU-dddd-0001) after 1.00 s"),
            std::string::npos)
      << a.errors[0];
  EXPECT_EQ(a.errors[0].find("gpu-d-0 ("), std::string::npos) << "gpu-d-0 was found";
  // The one the host never showed is drained in composerd before it goes back.
  ASSERT_EQ(api.unseen.size(), 1u);
  EXPECT_EQ(std::get<2>(api.unseen[0]), "gpu-d-1");
  EXPECT_NE(std::get<3>(api.unseen[0])
                .find("the host of node node1 never showed it after the "
                      "attach for job 401"),
            std::string::npos)
      << std::get<3>(api.unseen[0]);
  // Nothing of the job runs yet: the devices go back at once, whichever side composes.
  ASSERT_EQ(api.released.size(), 1u);
  EXPECT_EQ(api.released[0], (std::pair<uint32_t, std::string>{401u, "node1"}));
  // The state file stays, so the epilog removes what appeared and releases again (idempotent).
  ASSERT_TRUE(state(401));
  FakeJob end = job(401, 2);
  ASSERT_TRUE(job_epilog(end, api, config));
  ASSERT_EQ(api.released.size(), 2u);
  EXPECT_EQ(api.released[1].first, 401u);
}

// compose=controller: the failed prolog drains the node, and neither EpilogSlurmctld nor the
// reconciler releases the compositions of a drained node; the prolog gives the devices back.
TEST_F(HostSideTest, UnderControllerComposeADeviceThatNeverAppearsIsGivenBackByTheProlog) {
  config.compose_on = ComposeOn::kController;
  api.devices = {gpu("gpu-d-0", "GPU-dddd-0000")};
  config.host_wait_s = 0;
  FakeJob a = job(402, 1);
  ASSERT_FALSE(job_prolog(a, api, config));
  ASSERT_EQ(api.released.size(), 1u);
  EXPECT_EQ(api.released[0], (std::pair<uint32_t, std::string>{402u, "node1"}));
  EXPECT_TRUE(api.composed.empty()) << "the controller composed it, not the prolog";
}

TEST_F(HostSideTest, AnAddressWithOtherIdsIsNotTheDevice) {
  Device d = gpu("gpu-e-0", "");
  d.address = "0000:01:00.0";  // the local GPU's address, but that one is another model
  d.identity.pci_device = "0x2331";
  api.devices = {d};
  config.host_wait_s = 0;
  FakeJob a = job(501, 1);
  ASSERT_FALSE(job_prolog(a, api, config));
  ASSERT_EQ(a.errors.size(), 1u);
  EXPECT_NE(a.errors[0].find("gpu-e-0 (0000:01:00.0 is PCI 0x10de:0x20b5, not the PCI "
                             "0x10de:0x2331 the fabric reported)"),
            std::string::npos)
      << a.errors[0];
}

TEST_F(HostSideTest, DrivesAreFoundBySerialAndHeldByARealProcessDelayRelease) {
  Device drive;
  drive.id = "nvme-z1-01";
  drive.type = DeviceType::kNvme;
  drive.identity = {"0x8086", "0x0b60", "FRN100000001", ""};
  api.devices = {drive};
  // Another drive of the same model appears too: not this one.
  host.attach(drive_function("0000:85:00.0", "FRN100000009"));
  host.attach(drive_function("0000:86:00.0", "FRN100000001"));
  FakeJob a = job(601, 0);
  a.options = {{"compose-nvme", "1"}};
  config.proc_root = "/proc";  // the busy check reads the real processes
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  ASSERT_EQ(state(601)->devices[0].address, "0000:86:00.0");
  const std::string ctrl = host.nvme_controller("0000:86:00.0");
  ASSERT_FALSE(ctrl.empty());
  const std::string node = host.dev_root() + "/" + ctrl + "n1";
  EXPECT_EQ(task_env(601, "COMPOSER_NVME"), node);
  EXPECT_EQ(task_env(601, "COMPOSER_MEM_NUMA"), "");

  // A real process of the job still has the namespace open, until the test lets it go: two
  // seconds into the epilog, so the epilog has seen it busy however loaded the machine is.
  const std::string stop = tmp / "let-go";
  const pid_t pid = hold_open(node, stop);
  ASSERT_GT(pid, 0);
  config.busy_wait_s = 10;
  FakeJob end = job(601, 0);
  end.options = a.options;
  std::thread releaser([&stop] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::ofstream{stop} << "go\n";
  });
  const auto ended = job_epilog(end, api, config);
  releaser.join();
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(ended) << join(end.errors, "\n");
  ASSERT_FALSE(end.infos.empty());
  EXPECT_NE(end.infos[0].find("job 601 on node node1: waiting up to 10 s before releasing: pid " +
                              std::to_string(pid) + " holds nvme-z1-01 (" + node + ")"),
            std::string::npos)
      << end.infos[0];
  EXPECT_EQ(api.released.size(), 1u);
}

// On a real kernel (tests/kvm) the nvme driver shows a hot-added controller, with its serial,
// before it has scanned the namespaces: the prolog finds the drive by its serial at once and
// waits for its block device, so that COMPOSER_NVME names the namespace, not the drive's id.
TEST_F(HostSideTest, PrologWaitsForTheNamespaceOfADriveFoundBeforeIt) {
  Device drive;
  drive.id = "nvme-z1-02";
  drive.type = DeviceType::kNvme;
  drive.identity = {"0x8086", "0x0b60", "FRN100000002", ""};
  api.devices = {drive};
  host.set_namespace_delay(std::chrono::milliseconds(700));
  host.attach(drive_function("0000:87:00.0", "FRN100000002"));
  FakeJob a = job(602, 0);
  a.options = {{"compose-nvme", "1"}};
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  ASSERT_EQ(state(602)->devices[0].address, "0000:87:00.0");
  const std::string ctrl = host.nvme_controller("0000:87:00.0");
  ASSERT_FALSE(ctrl.empty());
  EXPECT_EQ(task_env(602, "COMPOSER_NVME"), host.dev_root() + "/" + ctrl + "n1");
}

// A drive that never shows a namespace is named by its id after host_wait, with one line.
TEST_F(HostSideTest, ADriveWithoutANamespaceIsNamedByItsIdAfterHostWait) {
  Device drive;
  drive.id = "nvme-z1-03";
  drive.type = DeviceType::kNvme;
  drive.identity = {"0x8086", "0x0b60", "FRN100000003", ""};
  api.devices = {drive};
  host.set_namespace_delay(std::chrono::hours(1));
  host.attach(drive_function("0000:88:00.0", "FRN100000003"));
  config.host_wait_s = 1;
  FakeJob a = job(603, 0);
  a.options = {{"compose-nvme", "1"}};
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_EQ(task_env(603, "COMPOSER_NVME"), "nvme-z1-03");
  EXPECT_NE(join(a.infos, "\n")
                .find("drive nvme-z1-03 at 0000:88:00.0 shows no namespace after "
                      "1 s; COMPOSER_NVME names it by its id"),
            std::string::npos)
      << join(a.infos, "\n");
}

// A real process keeps a job's drive open past busy_wait: the epilog succeeds without removing
// or releasing it and tells composerd to hold it; the next job's prolog on the node, once the
// process has gone, removes the drive from the host and releases it.
TEST_F(HostSideTest, ADriveARealProcessKeepsOpenIsHeldUntilTheNextJobFindsItFree) {
  const std::string stop = tmp / "let-go-611";
  const pid_t pid = held_drive(611, "nvme-z1-02", "0000:87:00.0", stop);
  ASSERT_GT(pid, 0);

  // The next job on the node, while the process still runs: nothing is released.
  FakeJob b = job(612, 0);
  b.options.clear();
  ASSERT_TRUE(job_prolog(b, api, config));
  EXPECT_TRUE(api.released.empty());

  std::ofstream{stop} << "go\n";
  int status = 0;
  waitpid(pid, &status, 0);
  FakeJob c = job(613, 0);
  c.options.clear();
  ASSERT_TRUE(job_prolog(c, api, config)) << join(c.errors, "\n");
  ASSERT_EQ(api.released.size(), 1u);
  EXPECT_EQ(api.released[0], std::make_pair(611u, std::string("node1")));
  ASSERT_EQ(api.holds.size(), 2u);
  EXPECT_EQ(std::get<2>(api.holds[1]), "");
  // The fake kernel acts on the write to `remove` on its own thread, as the kernel does.
  test_support::eventually([&] { return !host.removed().empty(); });
  EXPECT_EQ(host.removed(), (std::vector<std::string>{"0000:87:00.0"}));
  EXPECT_FALSE(state(611));
}

// The kernel shows each namespace twice: the block device nvme<N>n1 and the generic character
// device ng<N>n1 (NVMe passthrough), seen beside it in a QEMU guest (tests/kvm). A process that
// holds only the latter uses the drive as much, and holds its release.
TEST_F(HostSideTest, AProcessHoldingTheDrivesGenericCharacterDeviceHoldsItsRelease) {
  const std::string stop = tmp / "let-go-621";
  const pid_t pid = held_drive(621, "nvme-z1-04", "0000:89:00.0", stop, /*generic=*/true);
  ASSERT_GT(pid, 0);
  std::ofstream{stop} << "go\n";
  int status = 0;
  waitpid(pid, &status, 0);
}

// A drive the fabric pulls while the job keeps its namespace open (a surprise removal; on
// Linux 6.1 in kvm_slurm): the job's reads of it end, 0 bytes and no error, and the process's
// descriptor points at "<dev>/nvme<N>n1 (deleted)". The drive is no longer the host's, so the
// busy check finds no holder of it: the epilog releases at once rather than wait busy_wait for
// a process that holds nothing the fabric still has, and asks composerd to hold nothing.
TEST_F(HostSideTest, ADrivePulledUnderAnOpenFileReadsNothingAndHoldsNoRelease) {
  Device drive;
  drive.id = "nvme-z1-05";
  drive.type = DeviceType::kNvme;
  drive.identity = {"0x8086", "0x0b60", "FRN100000005", ""};
  api.devices = {drive};
  host.attach(drive_function("0000:8a:00.0", "FRN100000005"));
  FakeJob a = job(641, 0);
  a.options = {{"compose-nvme", "1"}};
  config.proc_root = "/proc";  // the busy check reads the real processes
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  const std::string node = host.dev_root() + "/" + host.nvme_controller("0000:8a:00.0") + "n1";
  ASSERT_EQ(task_env(641, "COMPOSER_NVME"), node);
  // The job reads its drive (this test's own descriptor: the busy check leaves out its caller),
  // and a real process of the job holds it open.
  const int fd = ::open(node.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::vector<char> block(4096);
  EXPECT_EQ(::read(fd, block.data(), block.size()), 4096);
  const std::string stop = tmp / "let-go-641";
  const pid_t pid = hold_open(node, stop);
  ASSERT_GT(pid, 0);

  host.unplug_now("0000:8a:00.0");
  errno = 0;
  EXPECT_EQ(::read(fd, block.data(), block.size()), 0);
  EXPECT_EQ(::pread(fd, block.data(), block.size(), 0), 0);
  EXPECT_EQ(errno, 0);
  ::close(fd);
  std::error_code ec;
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/fd/3", ec).string(),
            node + " (deleted)");

  config.busy_wait_s = 10;
  FakeJob end = job(641, 0);
  end.options = a.options;
  const auto start = std::chrono::steady_clock::now();
  const Status ended = job_epilog(end, api, config);
  const auto took = std::chrono::steady_clock::now() - start;
  std::ofstream{stop} << "go\n";
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(ended) << join(end.errors, "\n");
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_EQ(join(end.infos, "\n").find("waiting up to"), std::string::npos)
      << join(end.infos, "\n");
  EXPECT_TRUE(api.holds.empty());
  EXPECT_EQ(api.released, (std::vector<std::pair<uint32_t, std::string>>{{641u, "node1"}}));
  EXPECT_FALSE(state(641));
}

// composerd's reconciler marks a drive the fabric pulled failed and drained ("lost by the
// fabric: ..."), and its release answers the job's devices so: the epilog's line says that the
// drive was lost and released, not only "released". A device that failed otherwise is named
// with its drain reason; a release with no failed device says nothing more.
TEST_F(HostSideTest, AnEpilogSaysWhichDevicesWereLostWhenItReleasesThem) {
  Device drive;
  drive.id = "nvme-z1-06";
  drive.type = DeviceType::kNvme;
  drive.identity = {"0x8086", "0x0b60", "FRN100000006", ""};
  api.devices = {drive, gpu("gpu-l-6", "GPU-llll-0006")};
  host.attach(drive_function("0000:8b:00.0", "FRN100000006"));
  host.attach(gpu_function("0000:4b:00.0", "GPU-llll-0006"));
  FakeJob a = job(651, 1);
  a.options["compose-nvme"] = "1";
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  host.unplug_now("0000:8b:00.0");
  api.devices[0].health = Health::kCritical;
  api.devices[0].drained = true;
  api.devices[0].drain_reason =
      std::string(kLostByTheFabric) +
      "the fabric lost the attachment to node node1 while job 651 held it";
  FakeJob end = job(651, 1);
  end.options = a.options;
  ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
  ASSERT_FALSE(end.infos.empty());
  EXPECT_TRUE(std::regex_match(
      end.infos.back(),
      std::regex("composer: epilog: job 651 on node node1: released \\(busy check [0-9]+ ms, "
                 "release [0-9]+ ms\\); nvme-z1-06 was lost by the fabric while the job held it "
                 "and stays drained until an admin resumes it")))
      << end.infos.back();
  EXPECT_EQ(api.released, (std::vector<std::pair<uint32_t, std::string>>{{651u, "node1"}}));

  // Another job: its GPU failed as the node reported it, and the drive is fine.
  api.devices = {drive, gpu("gpu-l-7", "GPU-llll-0007")};
  api.devices[0].identity.serial = "FRN100000007";
  host.attach(drive_function("0000:8c:00.0", "FRN100000007"));
  host.attach(gpu_function("0000:4c:00.0", "GPU-llll-0007"));
  FakeJob b = job(652, 1);
  b.options["compose-nvme"] = "1";
  ASSERT_TRUE(job_prolog(b, api, config)) << join(b.errors, "\n");
  api.devices[1].health = Health::kCritical;
  api.devices[1].drained = true;
  api.devices[1].drain_reason = "reported by node node1: Xid 79";
  FakeJob end_b = job(652, 1);
  end_b.options = b.options;
  ASSERT_TRUE(job_epilog(end_b, api, config)) << join(end_b.errors, "\n");
  ASSERT_FALSE(end_b.infos.empty());
  EXPECT_NE(end_b.infos.back().find(" ms); gpu-l-7 (reported by node node1: Xid 79) failed while "
                                    "the job held it"),
            std::string::npos)
      << end_b.infos.back();
  EXPECT_EQ(end_b.infos.back().find("lost"), std::string::npos) << end_b.infos.back();
}

// The epilog returns once the host no longer shows the job's functions, as the kernel's remove
// does (the fake kernel acts on its own thread): a snapshot the next prolog takes right after
// must not hold a function on its way out, which a later rescan would show again at the same
// address, where that prolog would take it for one the host had before.
TEST_F(HostSideTest, TheEpilogReturnsOnceTheHostNoLongerShowsTheFunctions) {
  ASSERT_TRUE(prolog_with_gpu(631, 5));
  ASSERT_EQ(state(631)->devices[0].address, "0000:45:00.0");
  FakeJob end = job(631, 1);
  ASSERT_TRUE(job_epilog(end, api, config)) << join(end.errors, "\n");
  const std::vector<std::string> present = host.present();
  EXPECT_EQ(std::count(present.begin(), present.end(), "0000:45:00.0"), 0);
  EXPECT_FALSE(HostDevices(config.sysfs_root, config.proc_root, config.dev_root)
                   .pci_functions()
                   .contains("0000:45:00.0"));
}

// A file of a device's sysfs directory open in another process holds the device (a user-space
// driver's BAR, an fd on its config); open in the process that asks (an attribute it reads, a
// `remove` it writes, as the fake kernel's thread here does every few milliseconds) it does not.
TEST_F(HostSideTest, WhatTheAskingProcessHasOpenHoldsNothing) {
  const std::string config_file = tmp / "sys/bus/pci/devices/0000:99:00.0/config";
  tmp.write("sys/bus/pci/devices/0000:99:00.0/config", "");
  Device d = gpu("gpu-h-0", "GPU-hhhh-0000");
  d.address = "0000:99:00.0";
  const HostDevices devices(config.sysfs_root, "/proc", config.dev_root);
  std::ifstream mine(config_file);
  ASSERT_TRUE(mine.is_open());
  EXPECT_TRUE(devices.holders({d}).empty());

  const std::string stop = tmp / "let-go-99";
  const pid_t pid = hold_open(config_file, stop);
  ASSERT_GT(pid, 0);
  const std::vector<Holder> held = devices.holders({d});
  std::ofstream{stop} << "go\n";
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].pid, pid);
  EXPECT_EQ(held[0].device_id, "gpu-h-0");
  EXPECT_EQ(held[0].target, config_file);
}

// A node that runs no further job: the node check (composer-node-check, HealthCheckProgram)
// releases the held drive once its holder has gone, and not before.
TEST_F(HostSideTest, TheNodeCheckReleasesAHeldDriveOnAnIdleNode) {
  const std::string stop = tmp / "let-go-621";
  const pid_t pid = held_drive(621, "nvme-z1-03", "0000:88:00.0", stop);
  ASSERT_GT(pid, 0);
  FakeJob busy;
  EXPECT_EQ(release_held_on_node(busy, api, config), 1u);
  EXPECT_TRUE(api.released.empty());
  ASSERT_EQ(busy.infos.size(), 1u);
  EXPECT_EQ(
      busy.infos[0].rfind("composer: node check: node node1: job 621's devices stay held: ", 0), 0u)
      << busy.infos[0];
  EXPECT_NE(
      busy.infos[0].find("pid " + std::to_string(pid) + " holds nvme-z1-03 (" + host.dev_root() +
                         "/" + host.nvme_controller("0000:88:00.0") + "n1)"),
      std::string::npos)
      << busy.infos[0];

  std::ofstream{stop} << "go\n";
  int status = 0;
  waitpid(pid, &status, 0);
  FakeJob free;
  EXPECT_EQ(release_held_on_node(free, api, config), 0u) << join(free.errors, "\n");
  EXPECT_EQ(api.released, (std::vector<std::pair<uint32_t, std::string>>{{621u, "node1"}}));
  EXPECT_EQ(std::get<2>(api.holds.back()), "");
  test_support::eventually([&] { return !host.removed().empty(); });
  EXPECT_EQ(host.removed(), (std::vector<std::string>{"0000:88:00.0"}));
  EXPECT_FALSE(state(621));
  // Nothing held any more: a later check does nothing.
  FakeJob idle;
  EXPECT_EQ(release_held_on_node(idle, api, config), 0u);
  EXPECT_TRUE(idle.infos.empty() && idle.errors.empty());
  EXPECT_EQ(api.released.size(), 1u);
}

// Fencing (DeviceFence): whichever of two jobs on a node starts second, neither can open the
// other's composed devices. A prolog denies its job's devices in the cgroups of the jobs
// already running; a task denies the devices other jobs' state files name in its own job's.
TEST_F(HostSideTest, APrologFencesItsDevicesFromTheJobsAlreadyRunning) {
  const std::string running = job_cgroup(700);
  FakePciFunction g = gpu_function("0000:41:00.0", "GPU-aaaa-0007");
  g.nvidia_minor = 7;
  host.attach(g);
  host.attach(drive_function("0000:86:00.0", "FRN100000001"));
  Device drive;
  drive.id = "nvme-z1-01";
  drive.type = DeviceType::kNvme;
  drive.identity = {"0x8086", "0x0b60", "FRN100000001", ""};
  api.devices = {gpu("gpu-a-7", "GPU-aaaa-0007"), drive};
  FakeJob b = job(701, 1);
  b.options["compose-nvme"] = "1";
  ASSERT_TRUE(job_prolog(b, api, config)) << join(b.errors, "\n");
  const std::string n = host.nvme_controller("0000:86:00.0").substr(4);
  // The namespace's block device, the GPU, the generic character device of the namespace
  // (ng<N>n1: passthrough to the same drive) and the controller.
  EXPECT_EQ(denied(running),
            "b 259:" + n + " rwm\nc 195:7 rwm\nc 240:" + n + " rwm\nc 241:" + n + " rwm\n");
  EXPECT_EQ(denied(running + "/step_0"), "");  // the kernel passes the job's rules down
  // Its own cgroup, made later by its first step, is not fenced from its own devices.
  const std::string own = job_cgroup(701);
  FakeJob task;
  task.id = 701;
  ASSERT_TRUE(task_init_privileged(task, config)) << join(task.errors, "\n");
  EXPECT_EQ(denied(own), "");
  EXPECT_TRUE(b.errors.empty()) << join(b.errors, "\n");
}

TEST_F(HostSideTest, ATaskDeniesTheDevicesOfOtherJobsButNotItsOwn) {
  ASSERT_TRUE(prolog_with_gpu(711, 3));
  ASSERT_TRUE(prolog_with_gpu(712, 4));

  // Both prologs ran before Slurm made either job's cgroup (their first steps make them).
  const std::string cgroup_a = job_cgroup(711);
  const std::string cgroup_b = job_cgroup(712);
  FakeJob task_b;
  task_b.id = 712;
  ASSERT_TRUE(task_init_privileged(task_b, config)) << join(task_b.errors, "\n");
  EXPECT_EQ(denied(cgroup_b), "c 195:3 rwm\n");
  FakeJob task_a;
  task_a.id = 711;
  ASSERT_TRUE(task_init_privileged(task_a, config)) << join(task_a.errors, "\n");
  EXPECT_EQ(denied(cgroup_a), "c 195:4 rwm\n");
  // The node's own GPU (minor 0) is Slurm's GRES, not the plugin's: left alone.
}

TEST_F(HostSideTest, WithoutTheJobsCgroupFenceAutoLogsAndFenceRequiredRefusesTheStep) {
  ASSERT_TRUE(prolog_with_gpu(721, 3));
  // As the fixture has it: no devices cgroup, e.g. task/affinity alone.

  FakeJob task;
  task.id = 722;
  ASSERT_TRUE(task_init_privileged(task, config));
  ASSERT_EQ(task.infos.size(), 1u);
  EXPECT_EQ(task.infos[0],
            "composer: task: job 722 on node node1: the composed devices of other jobs on this "
            "node (nvidia3 (c 195:3 rwm)) are not fenced from it: there is no devices cgroup "
            "job_722 under " +
                config.devices_cgroup +
                " (cgroup v1, TaskPlugin=task/cgroup with ConstrainDevices=yes) and its task "
                "is in no job_722 cgroup v2 (TaskPlugin=task/cgroup)");
  config.fence = Fence::kRequired;
  FakeJob refused;
  refused.id = 722;
  const Status s = task_init_privileged(refused, config);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  ASSERT_EQ(refused.errors.size(), 1u);
  EXPECT_NE(refused.errors[0].find("fence=required refuses the step"), std::string::npos);
  // Job 721 is the only one with composed devices: nothing to fence it from.
  FakeJob alone;
  alone.id = 721;
  EXPECT_TRUE(task_init_privileged(alone, config));
  EXPECT_TRUE(alone.errors.empty());
  // fence=off: nothing is looked at.
  config.fence = Fence::kOff;
  FakeJob off;
  off.id = 722;
  EXPECT_TRUE(task_init_privileged(off, config));
  EXPECT_TRUE(off.infos.empty() && off.errors.empty());
}

// Slurm made the job's cpuset (ConstrainCores) before its CXL memory was online: the task
// hook widens it, from the top of Slurm's tree down to the job's steps; another job's cpuset
// does not get the node.
TEST_F(HostSideTest, TheJobsCpusetIsWidenedToItsCxlMemory) {
  api.devices = {testing::device("mem-c-0", DeviceType::kMem, "numa:2", 64 * kGiB)};
  host.add_dax("dax0.0", 2, 64 * kGiB, 4);
  FakeJob a = memory_job(731);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  config.cpuset_cgroup = tmp / "cgroup/cpuset";
  for (const std::string rel : {"", "/slurm", "/slurm/uid_1000", "/slurm/uid_1000/job_731",
                                "/slurm/uid_1000/job_731/step_0", "/slurm/uid_1000/job_732"}) {
    tmp.write("cgroup/cpuset" + rel + "/cpuset.mems", rel.empty() ? "0-3\n" : "0-1\n");
  }
  FakeJob task;
  task.id = 731;
  ASSERT_TRUE(task_init_privileged(task, config)) << join(task.errors, "\n");
  EXPECT_TRUE(task.errors.empty()) << join(task.errors, "\n");
  EXPECT_EQ(tmp.read("cgroup/cpuset/cpuset.mems"), "0-3\n");  // the kernel's own
  for (const std::string rel :
       {"/slurm", "/slurm/uid_1000", "/slurm/uid_1000/job_731", "/slurm/uid_1000/job_731/step_0"}) {
    EXPECT_EQ(tmp.read("cgroup/cpuset" + rel + "/cpuset.mems"), "0-2\n") << rel;
  }
  EXPECT_EQ(tmp.read("cgroup/cpuset/slurm/uid_1000/job_732/cpuset.mems"), "0-1\n");
  // A job without memory, and one without a cpuset of its own, change nothing.
  FakeJob other;
  other.id = 732;
  ASSERT_TRUE(task_init_privileged(other, config));
  EXPECT_EQ(tmp.read("cgroup/cpuset/slurm/uid_1000/job_732/cpuset.mems"), "0-1\n");
}

// cgroup v2 (Slurm's cgroup/v2 with ConstrainCores): the task's job cgroup, from its
// /proc/self/cgroup, and each cgroup below it that has mems of its own get the node; those with
// none (they take their parent's) and everything above the job stay as they are.
TEST_F(HostSideTest, OnCgroupV2TheJobsCpusetIsWidenedToItsCxlMemory) {
  api.devices = {testing::device("mem-c-0", DeviceType::kMem, "numa:2", 64 * kGiB)};
  host.add_dax("dax0.0", 2, 64 * kGiB, 4);
  FakeJob a = memory_job(741);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  const std::string scope = "cgroup2/system.slice/slurmstepd.scope";
  tmp.write("cgroup2/cgroup.procs", "");
  tmp.write("cgroup2/system.slice/cpuset.mems", "");
  tmp.write(scope + "/cpuset.mems", "");
  tmp.write(scope + "/job_741/cpuset.mems", "0-1\n");
  tmp.write(scope + "/job_741/step_0/cpuset.mems", "0-1\n");
  tmp.write(scope + "/job_741/step_0/user/cpuset.mems", "");
  tmp.write(scope + "/job_741/step_0/user/task_0/cpuset.mems", "0\n");
  tmp.write(scope + "/job_742/cpuset.mems", "0-1\n");
  tmp.write("host/proc/self/cgroup",
            "0::/system.slice/slurmstepd.scope/job_741/step_0/user/task_0\n");
  config.unified_cgroup = tmp / "cgroup2";
  FakeJob task;
  task.id = 741;
  ASSERT_TRUE(task_init_privileged(task, config)) << join(task.errors, "\n");
  EXPECT_TRUE(task.errors.empty()) << join(task.errors, "\n");
  EXPECT_EQ(tmp.read(scope + "/job_741/cpuset.mems"), "0-2\n");
  EXPECT_EQ(tmp.read(scope + "/job_741/step_0/cpuset.mems"), "0-2\n");
  EXPECT_EQ(tmp.read(scope + "/job_741/step_0/user/cpuset.mems"), "");
  EXPECT_EQ(tmp.read(scope + "/job_741/step_0/user/task_0/cpuset.mems"), "0,2\n");
  EXPECT_EQ(tmp.read(scope + "/cpuset.mems"), "");
  EXPECT_EQ(tmp.read("cgroup2/system.slice/cpuset.mems"), "");
  EXPECT_EQ(tmp.read(scope + "/job_742/cpuset.mems"), "0-1\n");
}

// Slurm gives a job that starts beside another job's online CXL memory that node in its cpuset
// too (kvm_slurm_cxl: cpuset.mems "0-1" for a job without memory): its task hook takes it out,
// from the job's cgroup and every cgroup below it with mems of its own. The job that composed
// the node keeps it; with fence=off nothing is narrowed.
TEST_F(HostSideTest, AJobBesideAnotherJobsCxlMemoryIsFencedFromItsNode) {
  api.devices = {testing::device("mem-c-0", DeviceType::kMem, "numa:2", 64 * kGiB)};
  host.add_dax("dax0.0", 2, 64 * kGiB, 4);
  FakeJob a = memory_job(751);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  const std::string scope = "cgroup2/system.slice/slurmstepd.scope";
  tmp.write("cgroup2/cgroup.procs", "");
  for (const char* job : {"job_751", "job_752"}) {
    tmp.write(scope + "/" + job + "/cpuset.mems", "0-2\n");
    tmp.write(scope + "/" + job + "/step_0/user/cpuset.mems", "0-2\n");
    tmp.write(scope + "/" + job + "/step_0/user/task_0/cpuset.mems", "");
  }
  config.unified_cgroup = tmp / "cgroup2";
  FakeJob beside;
  beside.id = 752;
  tmp.write("host/proc/self/cgroup",
            "0::/system.slice/slurmstepd.scope/job_752/step_0/user/task_0\n");
  config.fence = Fence::kOff;
  ASSERT_TRUE(task_init_privileged(beside, config)) << join(beside.errors, "\n");
  EXPECT_EQ(tmp.read(scope + "/job_752/cpuset.mems"), "0-2\n");
  config.fence = Fence::kAuto;
  ASSERT_TRUE(task_init_privileged(beside, config)) << join(beside.errors, "\n");
  EXPECT_TRUE(beside.errors.empty()) << join(beside.errors, "\n");
  EXPECT_EQ(tmp.read(scope + "/job_752/cpuset.mems"), "0-1\n");
  EXPECT_EQ(tmp.read(scope + "/job_752/step_0/user/cpuset.mems"), "0-1\n");
  EXPECT_EQ(tmp.read(scope + "/job_752/step_0/user/task_0/cpuset.mems"), "");
  FakeJob owner;
  owner.id = 751;
  tmp.write("host/proc/self/cgroup",
            "0::/system.slice/slurmstepd.scope/job_751/step_0/user/task_0\n");
  ASSERT_TRUE(task_init_privileged(owner, config)) << join(owner.errors, "\n");
  EXPECT_EQ(tmp.read(scope + "/job_751/cpuset.mems"), "0-2\n");
  EXPECT_EQ(tmp.read(scope + "/job_751/step_0/user/cpuset.mems"), "0-2\n");
}

// The prolog's half: a job whose task ran while this job's memory was online but before its
// state file named it kept the node in its cpuset; the prolog, once its state file is written,
// takes the node out of every other job's cpuset (cgroup v1, and on cgroup v2 the job cgroups
// under the scope a task recorded), not out of its own job's.
TEST_F(HostSideTest, APrologTakesItsCxlNodeOutOfTheOtherJobsCpusets) {
  api.devices = {testing::device("mem-c-0", DeviceType::kMem, "numa:2", 64 * kGiB)};
  host.add_dax("dax0.0", 2, 64 * kGiB, 4);
  config.cpuset_cgroup = tmp / "cgroup/cpuset";
  tmp.write("cgroup/cpuset/cpuset.mems", "0-3\n");
  const std::string scope = tmp / "cgroup2/system.slice/slurmstepd.scope";
  tmp.write("state/fence-scope", (tmp / "cgroup2") + "\n" + scope + "\n");  // a task's record
  for (const std::string job : {"job_781", "job_782"}) {
    tmp.write("cgroup/cpuset/slurm/uid_1000/" + job + "/cpuset.mems", "0-2\n");
    tmp.write("cgroup/cpuset/slurm/uid_1000/" + job + "/step_0/cpuset.mems", "0-2\n");
    tmp.write("cgroup2/system.slice/slurmstepd.scope/" + job + "/cpuset.mems", "0-2\n");
  }
  FakeJob a = memory_job(781);
  ASSERT_TRUE(job_prolog(a, api, config)) << join(a.errors, "\n");
  EXPECT_TRUE(a.errors.empty()) << join(a.errors, "\n");
  EXPECT_EQ(tmp.read("cgroup/cpuset/slurm/uid_1000/job_782/cpuset.mems"), "0-1\n");
  EXPECT_EQ(tmp.read("cgroup/cpuset/slurm/uid_1000/job_782/step_0/cpuset.mems"), "0-1\n");
  EXPECT_EQ(tmp.read("cgroup/cpuset/slurm/uid_1000/job_781/cpuset.mems"), "0-2\n");
  EXPECT_EQ(tmp.read("cgroup/cpuset/cpuset.mems"), "0-3\n");
  EXPECT_EQ(tmp.read("cgroup2/system.slice/slurmstepd.scope/job_782/cpuset.mems"), "0-1\n");
  EXPECT_EQ(tmp.read("cgroup2/system.slice/slurmstepd.scope/job_781/cpuset.mems"), "0-2\n");
}

}  // namespace
}  // namespace composer::slurm
