// A GPU the host finds bad, end to end: the real composer-node-check, with tests/slurm's fake
// libnvidia-ml.so.1 scripting an XID, reports it to a real composerd, which marks it failed,
// keeps it so through reconciler rounds (the sim fabric calls it healthy) and a restart, gives
// the job holding it its class's reaction through the stand-in scontrol, and offers it back
// once an admin resumes it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "composer/slurm/job_state.h"
#include "composerd_process.h"
#include "fake_slurm.h"

namespace composer::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<Device> device(const client::Client& c, const std::string& id) {
  auto all = c.devices({});
  EXPECT_TRUE(all.ok()) << all.error();
  if (!all) return std::nullopt;
  for (const Device& d : *all) {
    if (d.id == id) return d;
  }
  return std::nullopt;
}

TEST(ComposerdGpuHealth, ABadGpuReportedByTheNodeCheckFailsItsJobNotTheNodeAndComesBack) {
  test_support::TempDir files("composer-gpu-health");
  const std::string slurm = fake_slurm_dir(files);
  const std::string health = files.file("sim-health");
  std::ofstream(health) << "";
  ComposerdProcess daemon("Workloads=training\nSimHealthFile=" + health + "\n" + fake_slurm_conf(),
                          "NodeName=n1 Zones=z1 GpuSlots=8\n"
                          "DeviceGroup=ga Type=gpu Model=A100 Zone=z1 Count=2\n");
  auto c = daemon.client();
  ASSERT_TRUE(c.put_policy({.file = "site.policy",
                            .text = "Class=training\nDefaultClass=training\n"
                                    "OnFailure=training Action=requeue MaxRequeues=2\n"})
                  .ok());
  auto composed =
      c.compose(61, "n1",
                api::ComposeBody{.owner = {.uid = 1000, .user = "alice", .workload = "training"},
                                 .request = Request{.gpus = 1}});
  ASSERT_TRUE(composed.ok()) << composed.error();
  const std::string gpu = composed->devices[0].id;

  // The node: job 61's state file names the GPU where its prolog found it, the host shows that
  // function, and NVML (the fake) knows it.
  const std::string address = "0000:41:00.0";
  slurm::JobState state;
  state.job_id = 61;
  state.node = "n1";
  state.composition_id = composed->id;
  state.devices = composed->devices;
  state.devices[0].address = address;
  ASSERT_TRUE(slurm::write_job_state(files.file("node-state"), state));
  std::filesystem::create_directories(files.file("sys/bus/pci/devices/" + address));
  const std::string script = files.file("nvml-script");
  std::ofstream(script) << address << " ok\n";
  std::ofstream(files.file("plugstack.conf"))
      << "required spank_composer.so server=" << daemon.url()
      << " munge_socket=" << daemon.munge_socket() << " state_dir=" << files.file("node-state")
      << " sysfs_root=" << files.file("sys") << " nvml_library=" << FAKE_NVML_LIBRARY << "\n";
  const std::string node_check = "COMPOSER_PLUGSTACK=" + files.file("plugstack.conf") +
                                 " FAKE_NVML_SCRIPT=" + script + " SLURMD_NODENAME=n1 " +
                                 NODE_CHECK_PATH;

  CommandResult clean = run_command(node_check);
  ASSERT_EQ(clean.code, 0) << clean.out;
  EXPECT_EQ(device(c, gpu)->state(), DeviceState::kAttached);

  std::ofstream(script) << address << " xid 79\n";
  CommandResult bad = run_command(node_check);
  ASSERT_EQ(bad.code, 0) << bad.out;
  EXPECT_NE(bad.out.find(gpu + " reported failed to composerd: NVML reports critical XID 79"),
            std::string::npos)
      << bad.out;
  std::optional<Device> failed = device(c, gpu);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->state(), DeviceState::kFailed);
  EXPECT_EQ(failed->health, Health::kCritical);
  EXPECT_TRUE(
      failed->drain_reason.starts_with("failed on its host: the host of node n1 found it "
                                       "bad while job 61 held it: NVML reports critical "
                                       "XID 79"))
      << failed->drain_reason;

  // The failure reactor requeues the job holding it, once; the fabric's "healthy" in the
  // reconciler's rounds (ReconcileInterval=1) does not lift the failure.
  std::string calls;
  for (int i = 0; i < 200 && calls.find("requeue 61\n") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    calls = slurp(slurm + "/calls");
  }
  EXPECT_NE(calls.find("requeue 61\n"), std::string::npos) << calls << daemon.log();
  // The node is never drained for it: composerd asks Slurm nothing about nodes.
  EXPECT_EQ(calls.find("update nodename"), std::string::npos) << calls;
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(device(c, gpu)->state(), DeviceState::kFailed);
  // Repeated reports change nothing.
  ASSERT_EQ(run_command(node_check).code, 0);

  // Released, it stays out of the pool, also across a restart.
  ASSERT_TRUE(c.release(61, "n1").ok());
  daemon.stop();
  daemon.start();
  auto after = daemon.client();
  EXPECT_EQ(device(after, gpu)->state(), DeviceState::kFailed);
  auto refused = after.compose(
      62, "n1",
      api::ComposeBody{.owner = {.uid = 1000, .user = "alice", .workload = "training"},
                       .request = Request{.gpus = 2}});
  EXPECT_FALSE(refused.ok());

  // An admin's resume offers it back.
  CommandResult resumed = ctl(daemon, "devices resume " + gpu);
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_EQ(device(after, gpu)->state(), DeviceState::kFree);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(device(after, gpu)->state(), DeviceState::kFree);
  auto both = after.compose(
      63, "n1",
      api::ComposeBody{.owner = {.uid = 1000, .user = "alice", .workload = "training"},
                       .request = Request{.gpus = 2}});
  ASSERT_TRUE(both.ok()) << both.error();
  ASSERT_TRUE(after.release(63, "n1").ok());
}

// Only a device of the node's own job's composition may be reported, with a reason.
TEST(ComposerdGpuHealth, ANodeReportsOnlyWhatItsJobHolds) {
  ComposerdProcess daemon("",
                          "NodeName=n1 Zones=z1 GpuSlots=8\n"
                          "DeviceGroup=ga Type=gpu Model=A100 Zone=z1 Count=2\n");
  auto c = daemon.client();
  auto composed = c.compose(
      71, "n1",
      api::ComposeBody{.owner = {.uid = 1000, .user = "alice"}, .request = Request{.gpus = 1}});
  ASSERT_TRUE(composed.ok()) << composed.error();
  const std::string mine = composed->devices[0].id;
  const std::string other = mine == "ga-0" ? "ga-1" : "ga-0";
  auto refused = c.fail_reported(71, "n1", other, "XID 79");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  auto no_job = c.fail_reported(72, "n1", mine, "XID 79");
  ASSERT_FALSE(no_job.ok());
  EXPECT_EQ(no_job.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(device(c, other)->state(), DeviceState::kFree);
  EXPECT_EQ(device(c, mine)->state(), DeviceState::kAttached);
  ASSERT_TRUE(c.release(71, "n1").ok());
}

}  // namespace
}  // namespace composer::testing
