// Fencing in the kernel's own devices cgroups (cgroup v1, /sys/fs/cgroup/devices), as Slurm's
// task/cgroup lays them out with ConstrainDevices=yes: two jobs on one node, each with a
// composed GPU on a fake host; the second job's prolog and its task hook write the rules, and
// real processes in each job's step cgroup try to open both GPUs' device nodes. A device node
// without a driver behind it answers ENXIO when the cgroup lets the open through and EPERM
// when it refuses it, so the kernel's answer says which rule held.
// Needs root and a writable cgroup v1 devices hierarchy; skipped, saying why, without them.
// The job ids are above Slurm's (MaxJobId at most 67,043,328), so that a cluster running on the
// same host meanwhile never takes these cgroups for its jobs' (the plugin looks for job_<id>).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "composer/common/strings.h"
#include "composer/slurm/device_fence.h"
#include "composer/slurm/job_state.h"
#include "composer/slurm/spank_core.h"
#include "composer/test_support/fake_host.h"
#include "fakes.h"
#include "temp_dir.h"

namespace composer::slurm {
namespace {

namespace fs = std::filesystem;
using test_support::FakeHost;
using test_support::FakePciFunction;
using test_support::nvidia_gpu;

constexpr const char* kDevices = "/sys/fs/cgroup/devices";

// A cgroup tree of its own below a real hierarchy, removed (deepest first) at the end. It sits
// in <hierarchy>/composer-tests/<name>: so deep that a prolog of a cluster running on the same
// host meanwhile, which looks for job cgroups down to four levels from the root, never finds its
// jobs' cgroups to write its rules to.
class CgroupTree {
 public:
  CgroupTree(const std::string& hierarchy, const std::string& name)
      : base_(hierarchy + "/composer-tests/" + name + "-" + std::to_string(::getpid())) {
    made(hierarchy + "/composer-tests");
  }
  ~CgroupTree() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir(it->c_str());
  }
  // Makes base/rel and each folder above it; false when the kernel refuses.
  bool make(const std::string& rel) {
    std::string path = base_;
    if (!made(path)) return false;
    for (const std::string& part : split(rel, '/')) {
      path += "/" + part;
      if (!made(path)) return false;
    }
    return true;
  }
  const std::string& base() const { return base_; }

 private:
  bool made(const std::string& path) {
    if (::mkdir(path.c_str(), 0755) == 0) {
      made_.push_back(path);
      return true;
    }
    return errno == EEXIST;
  }
  std::string base_;
  std::vector<std::string> made_;
};

// The errno a process in `cgroup` (v1 or v2) gets opening `path` (0 when the open succeeds).
int open_errno_in(const std::string& cgroup, const std::string& path) {
  const std::string procs = cgroup + "/cgroup.procs";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(procs.c_str(), O_WRONLY);
    if (fd < 0 || ::write(fd, "0\n", 2) != 2) ::_exit(100);
    ::close(fd);
    const int dev = ::open(path.c_str(), O_RDWR);
    ::_exit(dev >= 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The plugin's settings for a node whose host is `host` (compose=node: the prolog composes).
SpankConfig host_side_config(const testing::TempDir& tmp, const FakeHost& host) {
  SpankConfig config;
  config.state_dir = tmp / "state";
  config.sysfs_root = host.sysfs_root();
  config.proc_root = host.proc_root();
  config.dev_root = host.dev_root();
  config.host_wait_s = 5;
  config.compose_on = ComposeOn::kNode;
  return config;
}

// A composed GPU as composerd reports it.
Device gpu(const std::string& id, const std::string& uuid) {
  Device d;
  d.id = id;
  d.type = DeviceType::kGpu;
  d.identity = {"0x10de", "0x20b5", "", uuid};
  return d;
}

// Job `id` runs with a composed GPU (minor 5 at 0000:41:00.0): the host shows it, and the
// job's state file names it.
void running_with_gpu(FakeHost& host, const SpankConfig& config, uint32_t id) {
  host.add_present(nvidia_gpu("0000:41:00.0", "GPU-aaaa-0005", 5));
  JobState a;
  a.job_id = id;
  a.node = "node1";
  a.devices = {gpu("gpu-a-5", "GPU-aaaa-0005")};
  a.devices[0].address = "0000:41:00.0";
  ASSERT_TRUE(write_job_state(config.state_dir, a));
}

// Job `id`'s prolog composes a GPU (minor 6 at 0000:42:00.0) through `api`.
bool prolog_composes_gpu(FakeHost& host, testing::FakeComposer& api, const SpankConfig& config,
                         uint32_t id) {
  host.attach(nvidia_gpu("0000:42:00.0", "GPU-aaaa-0006", 6));
  api.devices = {gpu("gpu-a-6", "GPU-aaaa-0006")};
  testing::FakeJob prolog;
  prolog.id = id;
  prolog.options = {{"compose-gpus", "1"}};
  const Status s = job_prolog(prolog, api, config);
  EXPECT_TRUE(s) << join(prolog.errors, "\n");
  return static_cast<bool>(s);
}

TEST(DeviceFenceInTheKernel, JobsCannotOpenEachOthersComposedGpus) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to write cgroup rules";
  if (!fs::exists(std::string(kDevices) + "/devices.deny")) {
    GTEST_SKIP() << "no cgroup v1 devices hierarchy at " << kDevices
                 << " (a cgroup v2 host: the cgroup v2 test below fences there)";
  }
  testing::TempDir tmp;
  CgroupTree tree(kDevices, "fence-check");
  const std::string job_a = "slurm/uid_0/job_4000000801";
  const std::string job_b = "slurm/uid_0/job_4000000802";
  if (!tree.make(job_a + "/step_0")) GTEST_SKIP() << "the kernel refuses new devices cgroups";

  FakeHost host(tmp.path() / "host");
  SpankConfig config = host_side_config(tmp, host);
  config.devices_cgroup = tree.base();

  // Job A (4000000801) runs with its GPU (minor 5); job B's prolog composes one (minor 6).
  running_with_gpu(host, config, 4000000801);
  if (HasFatalFailure()) return;
  testing::FakeComposer api;
  ASSERT_TRUE(prolog_composes_gpu(host, api, config, 4000000802));
  // Job B's first step: Slurm makes its cgroup, then its task hook runs.
  ASSERT_TRUE(tree.make(job_b + "/step_0"));
  testing::FakeJob task;
  task.id = 4000000802;
  ASSERT_TRUE(task_init_privileged(task, config)) << join(task.errors, "\n");

  // The GPUs' device nodes, with the numbers the fake host's nvidia driver gave them.
  const std::string gpu5 = tmp / "nvidia5";
  const std::string gpu6 = tmp / "nvidia6";
  ASSERT_EQ(::mknod(gpu5.c_str(), S_IFCHR | 0666, makedev(195, 5)), 0);
  ASSERT_EQ(::mknod(gpu6.c_str(), S_IFCHR | 0666, makedev(195, 6)), 0);
  const std::string step_a = tree.base() + "/" + job_a + "/step_0";
  const std::string step_b = tree.base() + "/" + job_b + "/step_0";
  EXPECT_EQ(open_errno_in(step_a, gpu5), ENXIO) << "its own GPU: let through";
  EXPECT_EQ(open_errno_in(step_a, gpu6), EPERM) << "job B's GPU: refused";
  EXPECT_EQ(open_errno_in(step_b, gpu6), ENXIO) << "its own GPU: let through";
  EXPECT_EQ(open_errno_in(step_b, gpu5), EPERM) << "job A's GPU: refused";
  // Outside both jobs (slurmd, an admin's shell): nothing is refused.
  EXPECT_EQ(open_errno_in(tree.base(), gpu5), ENXIO);
  EXPECT_EQ(open_errno_in(tree.base(), gpu6), ENXIO);
}

// cgroup v2, as Slurm's cgroup/v2 lays it out (<scope>/job_<id>/step_<n>/user/task_<n>, beside
// slurmstepd's own <scope>/system), in a tree of its own below the real cgroup v2 hierarchy
// (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a hybrid host). The plugin's device program is
// attached to the scope; real processes in each cgroup open the GPUs' device nodes.
TEST(DeviceFenceInTheKernel, CgroupV2JobsCannotOpenEachOthersComposedGpus) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to attach device programs";
  const std::string mount = unified_mount("");
  if (mount.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy at /sys/fs/cgroup[/unified]";
  testing::TempDir tmp;
  CgroupTree tree(mount, "fence-v2-check");
  const std::string scope = tree.base() + "/slurmstepd.scope";
  const std::string job_a = "slurmstepd.scope/job_4000000811";
  const std::string job_b = "slurmstepd.scope/job_4000000812";
  const std::string job_c = "slurmstepd.scope/job_4000000813";
  if (!tree.make(job_a + "/step_0/user/task_0") || !tree.make("slurmstepd.scope/system")) {
    GTEST_SKIP() << "the kernel refuses new cgroups below " << mount;
  }

  FakeHost host(tmp.path() / "host");
  SpankConfig config = host_side_config(tmp, host);
  config.devices_cgroup = tmp / "no-devices-hierarchy";
  config.unified_cgroup = mount;
  // What /proc/self/cgroup says in a task of `job` (the hook reads it below proc_root).
  auto in_task_of = [&](const std::string& job) {
    fs::create_directories(fs::path(config.proc_root) / "self");
    std::ofstream(fs::path(config.proc_root) / "self" / "cgroup")
        << "0::/" << fs::path(tree.base()).lexically_relative(mount).string() << "/" << job
        << "/step_0/user/task_0\n";
  };
  const std::string gpu5 = tmp / "nvidia5";
  const std::string gpu6 = tmp / "nvidia6";
  const std::string gpu7 = tmp / "nvidia7";
  ASSERT_EQ(::mknod(gpu5.c_str(), S_IFCHR | 0666, makedev(195, 5)), 0);
  ASSERT_EQ(::mknod(gpu6.c_str(), S_IFCHR | 0666, makedev(195, 6)), 0);
  ASSERT_EQ(::mknod(gpu7.c_str(), S_IFCHR | 0666, makedev(195, 7)), 0);
  const std::string task_a = tree.base() + "/" + job_a + "/step_0/user/task_0";
  const std::string task_b = tree.base() + "/" + job_b + "/step_0/user/task_0";
  const std::string task_c = tree.base() + "/" + job_c + "/step_0/user/task_0";
  const std::string system = scope + "/system";
  const UnifiedFence fence(mount, scope);

  // Job A (4000000811) runs with its GPU (minor 5); its task is the first fenced on the node.
  running_with_gpu(host, config, 4000000811);
  if (HasFatalFailure()) return;
  testing::FakeJob task;
  task.id = 4000000811;
  in_task_of(job_a);
  ASSERT_TRUE(task_init_privileged(task, config)) << join(task.errors, "\n");
  auto programs = [&] {
    Expected<size_t> n = fence.programs();
    EXPECT_TRUE(n) << n.error().message;
    return n ? *n : 99;
  };
  EXPECT_EQ(programs(), 1u);

  // Job B's prolog composes a GPU (minor 6); job B has no cgroup yet, then gets one.
  testing::FakeComposer api;
  ASSERT_TRUE(prolog_composes_gpu(host, api, config, 4000000812));
  // The prolog fenced job B's GPU at once, from job A too: no job may open it yet.
  EXPECT_EQ(open_errno_in(task_a, gpu6), EPERM) << "job B's GPU, before job B's task";
  ASSERT_TRUE(tree.make(job_b + "/step_0/user/task_0"));
  EXPECT_EQ(open_errno_in(task_b, gpu6), EPERM) << "before its own task hook ran";
  testing::FakeJob task_of_b;
  task_of_b.id = 4000000812;
  in_task_of(job_b);
  ASSERT_TRUE(task_init_privileged(task_of_b, config)) << join(task_of_b.errors, "\n");

  // A job without composed devices (C) whose cgroup came after the last update.
  ASSERT_TRUE(tree.make(job_c + "/step_0/user/task_0"));

  EXPECT_EQ(open_errno_in(task_a, gpu5), ENXIO) << "its own GPU: let through";
  EXPECT_EQ(open_errno_in(task_a, gpu6), EPERM) << "job B's GPU: refused";
  EXPECT_EQ(open_errno_in(task_b, gpu6), ENXIO) << "its own GPU: let through";
  EXPECT_EQ(open_errno_in(task_b, gpu5), EPERM) << "job A's GPU: refused";
  EXPECT_EQ(open_errno_in(task_c, gpu5), EPERM) << "a job with none: refused";
  EXPECT_EQ(open_errno_in(task_c, gpu6), EPERM) << "a job with none: refused";
  EXPECT_EQ(open_errno_in(task_c, gpu7), ENXIO) << "a device no job holds: let through";
  // slurmstepd's own cgroup, and outside the scope (slurmd, an admin's shell): let through.
  EXPECT_EQ(open_errno_in(system, gpu5), ENXIO);
  EXPECT_EQ(open_errno_in(tree.base(), gpu6), ENXIO);
  EXPECT_EQ(programs(), 1u) << "one program, replaced, never two";

  // Job A ends: its epilog releases the GPU and drops it from the fence.
  testing::FakeJob epilog;
  epilog.id = 4000000811;
  epilog.options = {{"compose-gpus", "1"}};
  ASSERT_TRUE(job_epilog(epilog, api, config)) << join(epilog.errors, "\n");
  EXPECT_EQ(open_errno_in(task_c, gpu5), ENXIO) << "no job holds it any more";
  EXPECT_EQ(open_errno_in(task_c, gpu6), EPERM);
  // Job B ends: no job holds a device, and the program goes.
  testing::FakeJob epilog_b;
  epilog_b.id = 4000000812;
  epilog_b.options = {{"compose-gpus", "1"}};
  ASSERT_TRUE(job_epilog(epilog_b, api, config)) << join(epilog_b.errors, "\n");
  EXPECT_EQ(programs(), 0u);
  EXPECT_EQ(open_errno_in(task_c, gpu6), ENXIO);
}

// The cpuset half: Slurm's cpusets below the real cpuset hierarchy start with no memory node
// (as cgroup v1 makes them); the job's is widened top down to a node, which the kernel only
// takes when each parent already has it.
TEST(DeviceFenceInTheKernel, AJobsCpusetIsWidenedTopDown) {
  constexpr const char* kCpuset = "/sys/fs/cgroup/cpuset";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to write cgroup files";
  const std::string root_mems = [&] {
    std::ifstream in(std::string(kCpuset) + "/cpuset.mems");
    std::string line;
    std::getline(in, line);
    return line;
  }();
  const std::optional<std::set<int>> nodes = parse_node_list(root_mems);
  if (!nodes || nodes->empty()) {
    GTEST_SKIP() << "no cgroup v1 cpuset hierarchy at " << kCpuset;
  }
  const int node = *nodes->begin();
  CgroupTree tree(kCpuset, "cpuset-check");
  if (!tree.make("slurm/uid_0/job_4000000901/step_0"))
    GTEST_SKIP() << "the kernel refuses new cpusets";
  // The tree's top stands for the hierarchy's root, whose mems the kernel keeps.
  std::ofstream(std::string(kCpuset) + "/composer-tests/cpuset.mems") << node << "\n";
  std::ofstream(tree.base() + "/cpuset.mems") << node << "\n";
  const std::string job = tree.base() + "/slurm/uid_0/job_4000000901";
  auto mems = [](const std::string& cgroup) {
    std::ifstream in(cgroup + "/cpuset.mems");
    std::string line;
    std::getline(in, line);
    return line;
  };
  ASSERT_EQ(mems(job + "/step_0"), "");
  {
    // A step's mems before its job's: the kernel refuses.
    std::ofstream direct(job + "/step_0/cpuset.mems");
    direct << node << "\n";
    direct.flush();
    EXPECT_FALSE(direct.good());
  }
  ASSERT_TRUE(widen_mems(tree.base(), job, {node}));
  for (const std::string& cgroup :
       {tree.base() + "/slurm", tree.base() + "/slurm/uid_0", job, job + "/step_0"}) {
    EXPECT_EQ(mems(cgroup), std::to_string(node)) << cgroup;
  }
}

}  // namespace
}  // namespace composer::slurm
