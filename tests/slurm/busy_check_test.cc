// The busy check the epilogs ending together on a node share (busy_check.h): one walk of the
// processes answers every epilog that asked before it began, and nothing from before an ask
// answers it.
#include "composer/slurm/busy_check.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "composer/slurm/job_state.h"
#include "temp_dir.h"

namespace composer::slurm {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using namespace std::chrono_literals;

Device gpu(const std::string& id, const std::string& address) {
  Device d;
  d.id = id;
  d.type = DeviceType::kGpu;
  d.model = "A100-80G";
  d.address = address;
  return d;
}

class BusyCheckTest : public ::testing::Test {
 protected:
  BusyCheckTest() : host(tmp / "sys", tmp / "proc", tmp / "dev") {
    fs::create_directories(tmp / "proc");
    // Job 10 on gpu-10, job 11 on gpu-11; pid 50 keeps gpu-11's config open.
    for (const auto& [job, d] : {std::pair{10u, gpu("gpu-10", "0000:41:00.0")},
                                 std::pair{11u, gpu("gpu-11", "0000:42:00.0")}}) {
      JobState s;
      s.job_id = job;
      s.node = "node1";
      s.composition_id = job;
      s.devices = {d};
      EXPECT_TRUE(write_job_state(state_dir, s));
      devices[job] = {d};
    }
    fs::create_directories(tmp / "proc/50/fd");
    fs::create_symlink("/sys/bus/pci/devices/0000:42:00.0/config", tmp / "proc/50/fd/3");
  }

  bool exists(const std::string& rel) const { return fs::exists(tmp / rel); }
  // Until `rel` exists, for up to 10 s.
  bool wait_for(const std::string& rel) const {
    for (int i = 0; i < 2000 && !exists(rel); ++i) std::this_thread::sleep_for(5ms);
    return exists(rel);
  }

  TempDir tmp;
  const std::string state_dir = tmp / "state";
  HostDevices host;
  std::map<uint32_t, std::vector<Device>> devices;
};

// Two epilogs ask while a third walk holds the lock: the first of them to get it walks once
// for both, and the other takes its answer. Each walk opens every process's maps once, which
// inotify counts on pid 60's.
TEST_F(BusyCheckTest, OneWalkAnswersEveryEpilogThatAskedBeforeIt) {
  tmp.write("proc/60/maps", "");
  const int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(inotify_add_watch(watch, (tmp / "proc/60/maps").c_str(), IN_OPEN), 0);

  std::optional<Expected<HostLock>> walking(HostLock::take(state_dir, 1s, "busy.lock"));
  ASSERT_TRUE(*walking);
  std::vector<Holder> of10;
  std::vector<Holder> of11;
  std::thread a([&] { of10 = shared_holders(host, state_dir, 10, 10, devices[10], 10s); });
  std::thread b([&] { of11 = shared_holders(host, state_dir, 11, 11, devices[11], 10s); });
  const bool asked = wait_for("state/busy/10.ask") && wait_for("state/busy/11.ask");
  walking.reset();
  a.join();
  b.join();
  ASSERT_TRUE(asked);

  int opens = 0;
  alignas(inotify_event) char events[4096];
  for (ssize_t n; (n = read(watch, events, sizeof events)) > 0;) {
    for (ssize_t at = 0; at < n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(events + at);
      opens += (e->mask & IN_OPEN) != 0;
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  close(watch);
  EXPECT_EQ(opens, 1) << "walks of the processes";
  EXPECT_TRUE(of10.empty());
  ASSERT_EQ(of11.size(), 1u);
  EXPECT_EQ(of11[0].pid, 50);
  EXPECT_EQ(of11[0].device_id, "gpu-11");
  EXPECT_EQ(of11[0].target, "/sys/bus/pci/devices/0000:42:00.0/config");
  EXPECT_TRUE(fs::is_empty(tmp / "state/busy")) << "asks and answers are taken away";
}

// The walk answers the epilogs that asked, each with the holders of its own devices only, as a
// line the waiting epilog reads; the epilog that asked is no holder of what it asked about.
TEST_F(BusyCheckTest, TheWalkLeavesEachAskerTheHoldersOfItsOwnDevices) {
  tmp.write("state/busy/11.ask", "4242\n");
  EXPECT_TRUE(shared_holders(host, state_dir, 10, 10, devices[10], 1s).empty());
  EXPECT_FALSE(exists("state/busy/11.ask"));
  EXPECT_EQ(tmp.read("state/busy/11.holders"),
            "50\tgpu-11\t/sys/bus/pci/devices/0000:42:00.0/config\n");

  fs::remove(tmp / "state/busy/11.holders");
  tmp.write("state/busy/11.ask", "50\n");
  EXPECT_TRUE(shared_holders(host, state_dir, 10, 10, devices[10], 1s).empty());
  EXPECT_EQ(tmp.read("state/busy/11.holders"), "");
}

// An answer left from before the epilog asked (an epilog of the same job killed while it
// waited) says nothing about the processes now: the epilog walks itself.
TEST_F(BusyCheckTest, AnAnswerFromBeforeTheAskIsNotTaken) {
  tmp.write("state/busy/11.holders", "");
  const std::vector<Holder> held = shared_holders(host, state_dir, 11, 11, devices[11], 1s);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].pid, 50);
  EXPECT_FALSE(exists("state/busy/11.holders"));
}

// An answer that does not read wholly is no answer: the epilog walks itself rather than take
// part of it for "nothing holds the devices".
TEST_F(BusyCheckTest, AnAnswerThatDoesNotReadIsNoAnswer) {
  std::optional<Expected<HostLock>> walking(HostLock::take(state_dir, 1s, "busy.lock"));
  ASSERT_TRUE(*walking);
  std::vector<Holder> held;
  std::thread b([&] { held = shared_holders(host, state_dir, 11, 11, devices[11], 10s); });
  const bool asked = wait_for("state/busy/11.ask");
  // As a walk would, under the lock, but cut short.
  tmp.write("state/busy/11.holders", "50\tgpu-11");
  fs::remove(tmp / "state/busy/11.ask");
  walking.reset();
  b.join();
  ASSERT_TRUE(asked);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].pid, 50);
  EXPECT_EQ(held[0].target, "/sys/bus/pci/devices/0000:42:00.0/config");
}

// The batch script's end asks (ask_at_batch_end) as <job>-<composition>; while another walk
// is under way it waits for none, and the walk of an epilog ending meanwhile answers it. The
// job's epilog takes that answer rather than walk: it is told of pid 50's hold, which has gone
// since, and leaves nothing behind.
TEST_F(BusyCheckTest, TheBatchScriptsEndIsAnsweredByAWalkBeforeItsEpilog) {
  std::optional<Expected<HostLock>> walking(HostLock::take(state_dir, 1s, "busy.lock"));
  ASSERT_TRUE(*walking);
  ASSERT_TRUE(ask_at_batch_end(host, state_dir, 11, 11));
  EXPECT_TRUE(exists("state/busy/11-11.ask"));
  EXPECT_FALSE(exists("state/busy/11-11.holders"));
  walking.reset();
  EXPECT_TRUE(shared_holders(host, state_dir, 10, 10, devices[10], 1s).empty());
  EXPECT_EQ(tmp.read("state/busy/11-11.holders"),
            "50\tgpu-11\t/sys/bus/pci/devices/0000:42:00.0/config\n");
  fs::remove_all(tmp / "proc/50");
  const std::vector<Holder> held = shared_holders(host, state_dir, 11, 11, devices[11], 1s);
  ASSERT_EQ(held.size(), 1u) << "the answer, not a walk of its own";
  EXPECT_EQ(held[0].pid, 50);
  EXPECT_TRUE(fs::is_empty(tmp / "state/busy"));
}

// With no walk under way the batch script's end walks at once, for itself and for every ask
// it finds (job 10's epilog here), and its epilog takes the answer.
TEST_F(BusyCheckTest, TheBatchScriptsEndWalksWhenNoWalkIsUnderWay) {
  tmp.write("state/busy/10.ask", "4242\n");
  ASSERT_TRUE(ask_at_batch_end(host, state_dir, 11, 11));
  EXPECT_FALSE(exists("state/busy/11-11.ask"));
  EXPECT_FALSE(exists("state/busy/10.ask"));
  EXPECT_EQ(tmp.read("state/busy/10.holders"), "");
  EXPECT_EQ(tmp.read("state/busy/11-11.holders"),
            "50\tgpu-11\t/sys/bus/pci/devices/0000:42:00.0/config\n");
  fs::remove_all(tmp / "proc/50");
  const std::vector<Holder> held = shared_holders(host, state_dir, 11, 11, devices[11], 1s);
  ASSERT_EQ(held.size(), 1u) << "the answer, not a walk of its own";
  EXPECT_EQ(held[0].pid, 50);
}

// Another step of the job (srun, the extern step) may run processes after the walk that
// answered the batch script's end: once one has started (note_step), that answer is not taken,
// and pid 70, which opened the device after that walk, is found. A step that started before
// the batch script's end leaves it nothing to ask.
TEST_F(BusyCheckTest, AfterAnotherStepOfTheJobTheBatchScriptsAnswerIsNotTaken) {
  ASSERT_TRUE(ask_at_batch_end(host, state_dir, 11, 11));
  ASSERT_TRUE(exists("state/busy/11-11.holders"));
  ASSERT_TRUE(note_step(state_dir, 11));
  fs::create_directories(tmp / "proc/70/fd");
  fs::create_symlink("/sys/bus/pci/devices/0000:42:00.0/resource0", tmp / "proc/70/fd/4");
  std::set<int> pids;
  for (const Holder& h : shared_holders(host, state_dir, 11, 11, devices[11], 1s)) {
    pids.insert(h.pid);
  }
  EXPECT_EQ(pids, (std::set<int>{50, 70}));
  EXPECT_TRUE(fs::is_empty(tmp / "state/busy")) << "the step's mark goes with the answer";

  ASSERT_TRUE(note_step(state_dir, 11));
  ASSERT_TRUE(ask_at_batch_end(host, state_dir, 11, 11));
  EXPECT_FALSE(exists("state/busy/11-11.ask"));
  EXPECT_FALSE(exists("state/busy/11-11.holders"));
}

// A requeued job runs again under its id: an answer to an earlier run's batch script end (its
// composition another) is not taken; without a composition id the batch script's end asks
// nothing.
TEST_F(BusyCheckTest, AnAnswerToAnEarlierRunOfTheJobIsNotTaken) {
  ASSERT_TRUE(ask_at_batch_end(host, state_dir, 11, 5));
  ASSERT_TRUE(exists("state/busy/11-5.holders"));
  fs::create_directories(tmp / "proc/70/fd");
  fs::create_symlink("/sys/bus/pci/devices/0000:42:00.0/resource0", tmp / "proc/70/fd/4");
  EXPECT_EQ(shared_holders(host, state_dir, 11, 11, devices[11], 1s).size(), 2u);

  ASSERT_TRUE(ask_at_batch_end(host, state_dir, 11, 0));
  EXPECT_FALSE(exists("state/busy/11-0.ask"));
  EXPECT_FALSE(exists("state/busy/11-0.holders"));
}

}  // namespace
}  // namespace composer::slurm
