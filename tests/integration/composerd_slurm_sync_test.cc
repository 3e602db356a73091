// SlurmSync=yes in a real composerd against a stand-in scontrol with state
// (fake_scontrol/scontrol): the hold reservation follows drains and resumes within a round,
// is updated in place and never deleted, comes back after a deletion by hand (and the log says
// so, and /metrics counts the repair), and a plan Slurm refuses is undone whole (and /metrics
// says Slurm is out of step until it is applied); composerctl policy explain --job reads a
// pending job from the same stand-in and says which license holds it and why.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "composerd_process.h"
#include "day_night_policy.h"
#include "fake_slurm.h"

namespace composer::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class SlurmSyncTest : public ::testing::Test {
 protected:
  SlurmSyncTest() : slurm_(fake_slurm_dir(files_)), daemon_(fake_slurm_conf()) {}

  std::string reservations() const { return slurp(slurm_ + "/reservations"); }
  std::string calls() const { return slurp(slurm_ + "/calls"); }

  // Waits up to 5 s (five rounds) for the reservations to contain `text`.
  bool eventually(const std::string& text) const {
    for (int i = 0; i < 100; ++i) {
      if (reservations().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits up to 5 s for the reservations to lose `text`.
  bool eventually_not(const std::string& text) const {
    for (int i = 0; i < 100; ++i) {
      if (reservations().find(text) == std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits up to 5 s for composerd's log to contain `text` (it logs after scontrol returns).
  bool logged(const std::string& text) const {
    for (int i = 0; i < 100; ++i) {
      if (daemon_.log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Waits up to 5 s for composerd's /metrics to contain `text`; says what it had otherwise.
  ::testing::AssertionResult scraped(const std::string& text) const {
    std::string body;
    for (int i = 0; i < 100; ++i) {
      const auto url = daemon_.url();
      httplib::Client cli("127.0.0.1", std::stoi(url.substr(url.rfind(':') + 1)));
      if (auto r = cli.Get("/metrics")) body = r->body;
      if (body.find(text) != std::string::npos) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return ::testing::AssertionFailure() << "no '" << text << "' in /metrics:\n" << body;
  }

  test_support::TempDir files_{"composer-sync"};
  std::string slurm_;
  ComposerdProcess daemon_;
};

TEST_F(SlurmSyncTest, TheHoldFollowsDrainsAndResumes) {
  // The whole pool is schedulable: nothing to hold back, nothing created.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(calls(), "");
  auto c = daemon_.client();
  ASSERT_TRUE(c.drain("gpu-a-0", "fan").ok());
  ASSERT_TRUE(c.drain("gpu-a-1", "fan").ok());
  ASSERT_TRUE(eventually("ReservationName=hold_fabric_gpu")) << calls() << daemon_.log();
  EXPECT_TRUE(eventually("Licenses=fabric_gpu:2 ")) << reservations();
  EXPECT_NE(reservations().find("Flags=ANY_NODES"), std::string::npos);
  EXPECT_NE(reservations().find("Users=root"), std::string::npos);
  EXPECT_TRUE(logged("plan applied whole")) << daemon_.log();

  ASSERT_TRUE(c.resume("gpu-a-0").ok());
  EXPECT_TRUE(eventually("Licenses=fabric_gpu:1 ")) << reservations();
  EXPECT_EQ(calls().find("delete"), std::string::npos) << calls();
  // Nothing left to hold back: the hold is deleted, not brought to 0 (26.05 refuses that).
  ASSERT_TRUE(c.resume("gpu-a-1").ok());
  EXPECT_TRUE(eventually_not("hold_fabric_gpu")) << reservations();
  EXPECT_NE(calls().find("delete ReservationName=hold_fabric_gpu"), std::string::npos) << calls();
  EXPECT_EQ(calls().find("Licenses=fabric_gpu:0"), std::string::npos) << calls();
  // Held again later: created, and not taken for a reservation deleted by hand.
  ASSERT_TRUE(c.drain("gpu-a-2", "fan").ok());
  EXPECT_TRUE(eventually("Licenses=fabric_gpu:1 ")) << reservations();
  EXPECT_FALSE(logged("deleted outside composerd")) << daemon_.log();
  // Licenses composerd does not manage are never touched.
  EXPECT_EQ(calls().find("matlab"), std::string::npos) << calls();
}

TEST_F(SlurmSyncTest, AHoldDeletedByHandIsBackWithinARound) {
  ASSERT_TRUE(daemon_.client().drain("gpu-b-3", "fan").ok());
  ASSERT_TRUE(eventually("Licenses=fabric_gpu:1 ")) << calls();
  EXPECT_TRUE(scraped("composer_slurm_in_step 1\n"));
  EXPECT_TRUE(scraped("composer_slurm_drift_repairs_total{change=\"recreated\"} 0\n"));
  std::ofstream(slurm_ + "/reservations").close();  // scontrol delete, by hand
  ASSERT_TRUE(eventually("ReservationName=hold_fabric_gpu")) << calls();
  EXPECT_TRUE(logged("deleted outside composerd")) << daemon_.log();
  // The repair counts as drift, for the alert on it; Slurm is in step again.
  EXPECT_TRUE(scraped("composer_slurm_drift_repairs_total{change=\"recreated\"} 1\n"));
  EXPECT_TRUE(scraped("composer_slurm_in_step 1\n"));
}

TEST_F(SlurmSyncTest, OnlyAChangeMadeOutsideComposerdCountsAsDrift) {
  auto c = daemon_.client();
  ASSERT_TRUE(c.drain("gpu-b-3", "fan").ok());
  ASSERT_TRUE(eventually("Licenses=fabric_gpu:1 ")) << calls();
  // composerd's own change of the hold (a second drain) is no drift.
  ASSERT_TRUE(c.drain("gpu-b-2", "fan").ok());
  ASSERT_TRUE(eventually("Licenses=fabric_gpu:2 ")) << calls();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(scraped("composer_slurm_drift_repairs_total{change=\"updated\"} 0\n"));
  EXPECT_EQ(daemon_.log().find("differs from what composerd keeps"), std::string::npos)
      << daemon_.log();
  // A count changed by hand is.
  std::string text = reservations();
  text.replace(text.find("Licenses=fabric_gpu:2 "), 22, "Licenses=fabric_gpu:5 ");
  {
    // Replaced whole, as slurmctld's answer would be: a round never reads half a file (it
    // would take the reservation for deleted).
    std::ofstream(slurm_ + "/reservations.new") << text;
    std::filesystem::rename(slurm_ + "/reservations.new", slurm_ + "/reservations");
  }
  EXPECT_TRUE(scraped("composer_slurm_drift_repairs_total{change=\"updated\"} 1\n"));
  EXPECT_TRUE(eventually("Licenses=fabric_gpu:2 ")) << calls();
  EXPECT_TRUE(logged("differs from what composerd keeps")) << daemon_.log();
}

TEST_F(SlurmSyncTest, APlanSlurmRefusesPartWayIsUndoneWhole) {
  // Two holds to create in one round; Slurm refuses the second.
  std::ofstream(slurm_ + "/fail") << "Licenses=fabric_nvme";
  auto c = daemon_.client();
  ASSERT_TRUE(c.drain("nvme-b-0", "worn").ok());
  ASSERT_TRUE(c.drain("gpu-a-0", "fan").ok());
  for (int i = 0; i < 100 && daemon_.log().find("changes made were undone") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(daemon_.log().find("plan not applied, the changes made were undone"), std::string::npos)
      << daemon_.log();
  // Whatever ran before the refusal was deleted again: nothing half-applied stays. Every round
  // while Slurm refuses creates the GPU hold (when it gets there) and deletes it again, so the
  // two are counted once no round is half-way (a round may be under way right now: the first
  // one may have seen only the NVMe drain).
  const auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  std::string ran;
  for (int i = 0; i < 100; ++i) {
    ran = calls();
    if (count(ran, "create reservation ReservationName=hold_fabric_gpu") ==
        count(ran, "delete ReservationName=hold_fabric_gpu")) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(count(ran, "create reservation ReservationName=hold_fabric_gpu"),
            count(ran, "delete ReservationName=hold_fabric_gpu"))
      << ran;
  EXPECT_EQ(reservations().find("hold_fabric_nvme"), std::string::npos) << reservations();
  EXPECT_TRUE(scraped("composer_slurm_in_step 0\n"));
  // Once Slurm accepts it, the next round applies the plan whole.
  std::filesystem::remove(slurm_ + "/fail");
  EXPECT_TRUE(eventually("Licenses=fabric_nvme:1 ")) << calls();
  EXPECT_TRUE(eventually("Licenses=fabric_gpu:1 ")) << calls();
  EXPECT_TRUE(scraped("composer_slurm_in_step 1\n"));
}

// composerctl policy apply goes through composerd: the dry run shows the diff and changes
// nothing, a policy Slurm lacks a license for is refused whole, a real apply runs the planned
// commands at once and stores the policy, the same policy again changes nothing, and a blocker
// deleted by hand comes back within a round.
TEST_F(SlurmSyncTest, PolicyApplyGoesThroughComposerdAndTheBlockersAreKept) {
  const std::string file = files_.file("day.policy");
  std::ofstream(file) << kDayNight;
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // a round with no policy
  ASSERT_EQ(calls(), "");

  // slurm.conf lacks the cap licenses: refused, nothing stored, nothing run.
  auto refused = ctl(daemon_, "policy apply " + file);
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_NE(refused.out.find("Slurm has no license training_gpu_cap: add training_gpu_cap:12"),
            std::string::npos)
      << refused.out;
  EXPECT_NE(refused.out.find("nothing was changed"), std::string::npos) << refused.out;
  EXPECT_FALSE(daemon_.client().policy().ok());
  EXPECT_EQ(calls(), "");

  // The site gives each cap license the pool's size once; the holds bring it to the plan.
  std::ofstream(slurm_ + "/licenses", std::ios::app)
      << "LicenseName=training_gpu_cap Total=16 Used=0 Free=16 Reserved=0 Remote=no\n"
         "LicenseName=inference_gpu_cap Total=16 Used=0 Free=16 Reserved=0 Remote=no\n";
  auto dry = ctl(daemon_, "policy apply --dry-run " + file);
  EXPECT_EQ(dry.code, 0) << dry.out;
  EXPECT_NE(dry.out.find("create  day_block_inference"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("create  hold_training_gpu_cap  hold back 4 of training_gpu_cap"),
            std::string::npos)
      << dry.out;
  EXPECT_NE(dry.out.find("Dry run: nothing was changed."), std::string::npos) << dry.out;
  EXPECT_EQ(calls(), "");
  EXPECT_FALSE(daemon_.client().policy().ok());

  auto applied = ctl(daemon_, "policy apply " + file);
  EXPECT_EQ(applied.code, 0) << applied.out;
  EXPECT_NE(applied.out.find("Slurm: applied"), std::string::npos) << applied.out;
  EXPECT_NE(applied.out.find("composerd stored the policy as version 1"), std::string::npos)
      << applied.out;
  const std::string ran = calls();
  EXPECT_NE(ran.find("create reservation ReservationName=day_block_inference"), std::string::npos)
      << ran;
  EXPECT_NE(ran.find("create reservation ReservationName=hold_inference_gpu_cap StartTime=now "
                     "Duration=infinite Flags=ANY_NODES Licenses=inference_gpu_cap:2 Users=root"),
            std::string::npos)
      << ran;
  EXPECT_EQ(ran.find("delete"), std::string::npos) << ran;
  EXPECT_EQ(ran.find("reconfigure"), std::string::npos) << ran;
  auto stored = daemon_.client().policy();
  ASSERT_TRUE(stored.ok()) << stored.error();
  EXPECT_EQ(stored->text, kDayNight);

  // Rounds and the same policy again change nothing.
  std::filesystem::remove(slurm_ + "/calls");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto again = ctl(daemon_, "policy apply " + file);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("Changes to Slurm: none."), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("composerd already has this policy (version 1)"), std::string::npos)
      << again.out;
  EXPECT_EQ(calls(), "");

  // A blocker deleted by hand is back within a round, and the log says so.
  std::string kept;
  std::istringstream lines(reservations());
  for (std::string l; std::getline(lines, l);) {
    if (l.find("ReservationName=day_block_inference ") == std::string::npos) kept += l + "\n";
  }
  std::ofstream(slurm_ + "/reservations") << kept;
  EXPECT_TRUE(eventually("ReservationName=day_block_inference ")) << calls();
  EXPECT_TRUE(logged("deleted outside composerd")) << daemon_.log();
}

// composerctl policy explain --job against this composerd and the stand-in scontrol first on
// PATH (as an admin's composerctl finds scontrol): a job pending on fabric_gpu while two GPUs
// are drained names the drained GPUs and the hold; with the policy in force, a job over its
// class's cap names the cap license and composerd's own explanation; an unknown job is named.
TEST_F(SlurmSyncTest, ExplainJobSaysWhichLicenseHoldsAPendingJobAndWhy) {
  auto c = daemon_.client();
  ASSERT_TRUE(c.drain("gpu-a-0", "fan").ok());
  ASSERT_TRUE(c.drain("gpu-a-1", "fan").ok());
  ASSERT_TRUE(eventually("Licenses=fabric_gpu:2 ")) << calls() << daemon_.log();
  std::ofstream(slurm_ + "/jobs")
      << "JobId=42 JobName=train UserId=alice(1000) Account=ml QOS=normal JobState=PENDING "
         "Reason=Licenses TimeLimit=01:00:00 Partition=gpu NumNodes=1 "
         "Licenses=fabric_gpu:15 Command=/home/alice/job.sh "
         "AdminComment=composer: gpus=15 nodes=1 StdIn=/dev/null\n"
         "JobId=43 JobName=big Account=ml QOS=normal JobState=PENDING Reason=Licenses "
         "TimeLimit=01:00:00 Partition=gpu NumNodes=1 Licenses=fabric_gpu:14,training_gpu_cap:14 "
         "AdminComment=composer: gpus=14 workload=training nodes=1 StdIn=/dev/null\n"
         "JobId=44 JobState=RUNNING Reason=None TimeLimit=01:00:00 NumNodes=1 "
         "Licenses=fabric_gpu:1\n";
  const std::string path = "PATH=" + std::string(FAKE_SCONTROL_DIR) + ":/usr/sbin:/usr/bin:/bin";

  auto pool = ctl(daemon_, "policy explain --job 42", "", path);
  EXPECT_EQ(pool.code, 0) << pool.out;
  EXPECT_NE(
      pool.out.find("Job 42 is pending on licenses: fabric_gpu (15 asked, 14 free) holds it."),
      std::string::npos)
      << pool.out;
  EXPECT_NE(pool.out.find("fabric_gpu: The pool's 16 GPUs: 2 drained, 0 attached to other jobs "
                          "and 14 free. Of Slurm's 16, 2 are reserved (composerd's "
                          "hold_fabric_gpu keeps back what the pool cannot serve)"),
            std::string::npos)
      << pool.out;
  auto parsable =
      ctl(daemon_, "policy explain --job 42 -P -o license,asked,total,used,reserved,free,holds", "",
          path);
  EXPECT_EQ(parsable.code, 0) << parsable.out;
  EXPECT_EQ(parsable.out,
            "LICENSE|ASKED|TOTAL|USED|RESERVED|FREE|HOLDS\nfabric_gpu|15|16|0|2|14|yes\n");

  // The policy in force: training may never hold more than 12 GPUs, so a job asking for 14 is
  // over its cap at every hour (the answer does not depend on when the test runs).
  std::ofstream(slurm_ + "/licenses", std::ios::app)
      << "LicenseName=training_gpu_cap Total=16 Used=0 Free=16 Reserved=0 Remote=no\n"
         "LicenseName=inference_gpu_cap Total=16 Used=0 Free=16 Reserved=0 Remote=no\n";
  const std::string file = files_.file("day.policy");
  std::ofstream(file) << kDayNight;
  auto applied = ctl(daemon_, "policy apply " + file, "", path);
  ASSERT_EQ(applied.code, 0) << applied.out;
  auto cap = ctl(daemon_, "policy explain --job 43 --json", "", path);
  EXPECT_EQ(cap.code, 0) << cap.out;
  EXPECT_NE(cap.out.find("\"license\" : \"training_gpu_cap\""), std::string::npos) << cap.out;
  EXPECT_NE(cap.out.find("The policy caps all training jobs together through training_gpu_cap"),
            std::string::npos)
      << cap.out;
  EXPECT_NE(cap.out.find("A training job asking for 14 GPUs for 1h cannot start"),
            std::string::npos)
      << cap.out;
  EXPECT_NE(cap.out.find("caps training jobs at"), std::string::npos) << cap.out;
  EXPECT_NE(cap.out.find("\"workload\" : \"training\""), std::string::npos) << cap.out;

  auto running = ctl(daemon_, "policy explain --job 44", "", path);
  EXPECT_EQ(running.code, 0) << running.out;
  EXPECT_EQ(running.out, "Job 44 is RUNNING, not pending: no license holds it.\n");
  auto unknown = ctl(daemon_, "policy explain --job 99", "", path);
  EXPECT_EQ(unknown.code, 1) << unknown.out;
  EXPECT_NE(unknown.out.find("composerctl: error: Slurm knows no job 99"), std::string::npos)
      << unknown.out;
}

// A model's license (fabric_gpu_h100 beside fabric_gpu) is kept in step like the pool's, from
// the devices of that model alone; once Slurm has it, the snapshot tells job_submit to add it.
// A model whose license Slurm lacks is a warning, never a refusal of the whole plan.
TEST_F(SlurmSyncTest, AModelsLicenseFollowsTheDevicesOfThatModel) {
  std::ofstream(slurm_ + "/licenses", std::ios::app)
      << "LicenseName=fabric_gpu_h100 Total=8 Used=0 Free=8 Reserved=0 Remote=no\n";
  const std::string snapshot = daemon_.state_dir() + "/snapshot.json";
  bool listed = false;
  for (int i = 0; i < 100 && !listed; ++i) {
    listed = slurp(snapshot).find("\"fabric_gpu_h100\"") != std::string::npos;
    if (!listed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(listed) << slurp(snapshot);
  EXPECT_EQ(slurp(snapshot).find("\"fabric_gpu_a100-80g\""), std::string::npos) << slurp(snapshot);
  EXPECT_TRUE(
      logged("Slurm has no license fabric_gpu_a100-80g, so jobs cannot ask for it; add "
             "fabric_gpu_a100-80g:8"))
      << daemon_.log();

  auto c = daemon_.client();
  ASSERT_TRUE(c.drain("gpu-b-0", "fan").ok());  // an H100
  ASSERT_TRUE(c.drain("gpu-b-1", "fan").ok());
  ASSERT_TRUE(c.drain("gpu-a-0", "fan").ok());  // an A100
  EXPECT_TRUE(eventually("ReservationName=hold_fabric_gpu_h100 ")) << calls() << daemon_.log();
  EXPECT_TRUE(eventually("Licenses=fabric_gpu_h100:2 ")) << reservations();
  EXPECT_TRUE(eventually("Licenses=fabric_gpu:3 ")) << reservations();
  EXPECT_TRUE(scraped("composer_slurm_in_step 1\n"));

  std::ofstream(slurm_ + "/jobs")
      << "JobId=45 JobName=h JobState=PENDING Reason=Licenses TimeLimit=01:00:00 NumNodes=1 "
         "Licenses=fabric_gpu:8,fabric_gpu_h100:8 "
         "AdminComment=composer: gpus=H100:8 nodes=1 StdIn=/dev/null\n";
  auto explained = ctl(daemon_, "explain 45", "",
                       "PATH=" + std::string(FAKE_SCONTROL_DIR) + ":/usr/sbin:/usr/bin:/bin");
  EXPECT_EQ(explained.code, 0) << explained.out;
  EXPECT_NE(explained.out.find("Job 45 is pending on licenses: fabric_gpu_h100 (8 asked, 6 free) "
                               "holds it."),
            std::string::npos)
      << explained.out;
  EXPECT_NE(explained.out.find("fabric_gpu_h100: The pool's 8 GPUs of model H100: 2 drained, 0 "
                               "attached to other jobs and 6 free. Of Slurm's 8, 2 are reserved "
                               "(composerd's hold_fabric_gpu_h100"),
            std::string::npos)
      << explained.out;

  // Resumed: both holds go; the pool's hold keeps the A100 back.
  ASSERT_TRUE(c.resume("gpu-b-0").ok());
  ASSERT_TRUE(c.resume("gpu-b-1").ok());
  EXPECT_TRUE(eventually_not("hold_fabric_gpu_h100")) << reservations();
  EXPECT_TRUE(eventually("Licenses=fabric_gpu:1 ")) << reservations();
}

// SlurmLicenses=remote against a stand-in sacctmgr whose changes reach the stand-in scontrol
// as slurmdbd's reach slurmctld: composerd creates the pool's and the models' remote licenses,
// sets their counts to what the pool can serve (a drain lowers one, a resume raises it), keeps
// no hold reservation for them, never deletes one, and publishes the server for job_submit.
TEST(SlurmSyncRemote, CountsFollowThePoolWithoutReservations) {
  test_support::TempDir files{"composer-remote"};
  const std::string slurm = fake_slurm_dir(files);
  // A cap license stays local; the pool's come from slurmdbd.
  std::ofstream(slurm + "/licenses")
      << "LicenseName=training_gpu_cap Total=16 Used=0 Free=16 Reserved=0 Remote=no\n";
  // Given to no cluster yet, as an admin may have added it by hand.
  std::ofstream(slurm + "/resources") << "fabric_nvme|composer|4||\n";
  ComposerdProcess daemon(fake_slurm_conf() + "SlurmLicenses=remote\nSlurmCluster=c1\n" +
                          "SlurmSacctmgr=" + std::string(FAKE_SCONTROL_DIR) + "/sacctmgr\n");
  auto wait_for = [&](const std::string& file, const std::string& text) {
    const std::string path = file.starts_with("/") ? file : slurm + "/" + file;
    for (int i = 0; i < 100; ++i) {
      if (slurp(path).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  EXPECT_TRUE(wait_for("licenses", "LicenseName=fabric_gpu@composer Total=16 ")) << daemon.log();
  EXPECT_TRUE(wait_for("licenses", "LicenseName=fabric_gpu_h100@composer Total=8 "));
  EXPECT_TRUE(wait_for("licenses", "LicenseName=fabric_mem@composer Total=1024 "));
  EXPECT_TRUE(wait_for("licenses", "LicenseName=fabric_nvme@composer Total=4 "));
  EXPECT_TRUE(wait_for("calls",
                       "sacctmgr -i add resource name=fabric_gpu server=composer "
                       "servertype=composer type=license count=16 cluster=c1 "
                       "percentallowed=100"))
      << slurp(slurm + "/calls");
  EXPECT_TRUE(wait_for("calls",
                       "sacctmgr -i add resource name=fabric_nvme server=composer "
                       "cluster=c1 percentallowed=100"));
  const std::string snapshot = daemon.state_dir() + "/snapshot.json";
  EXPECT_TRUE(wait_for(snapshot, "\"license_server\" : \"composer\"")) << slurp(snapshot);

  auto c = daemon.client();
  ASSERT_TRUE(c.drain("gpu-b-0", "fan").ok());  // an H100
  EXPECT_TRUE(wait_for("licenses", "LicenseName=fabric_gpu@composer Total=15 ")) << daemon.log();
  EXPECT_TRUE(wait_for("licenses", "LicenseName=fabric_gpu_h100@composer Total=7 "));
  ASSERT_TRUE(c.resume("gpu-b-0").ok());
  EXPECT_TRUE(wait_for("licenses", "LicenseName=fabric_gpu@composer Total=16 ")) << daemon.log();
  // No hold reservation for the pool, nothing deleted, and the snapshot lists the models'
  // licenses Slurm has.
  const std::string calls = slurp(slurm + "/calls");
  EXPECT_EQ(calls.find("reservation"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("delete"), std::string::npos) << calls;
  EXPECT_TRUE(wait_for(snapshot, "\"fabric_gpu_h100\"")) << slurp(snapshot);

  // A count changed by hand in slurmdbd is set back within a round, and counts as drift.
  EXPECT_TRUE(wait_for("resources", "fabric_gpu|composer|16|c1|100"));
  // A round (1 s) must read what composerd set before the change, so that the next one can
  // tell a change from outside; on a loaded machine a round can come late, so the change is
  // made again (up to five times) until one is seen as drift.
  bool logged_drift = false;
  for (int attempt = 0; attempt < 5 && !logged_drift; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    auto res = slurp(slurm + "/resources");
    const size_t at = res.find("fabric_gpu|composer|16|");
    ASSERT_NE(at, std::string::npos) << res;
    res.replace(at, 23, "fabric_gpu|composer|12|");
    {
      // Replaced whole, as sacctmgr's database would: a round never reads half a file.
      std::ofstream(slurm + "/resources.new") << res;
      std::filesystem::rename(slurm + "/resources.new", slurm + "/resources");
    }
    EXPECT_TRUE(wait_for("resources", "fabric_gpu|composer|16|c1|100")) << daemon.log();
    for (int i = 0; i < 40 && !logged_drift; ++i) {
      logged_drift = daemon.log().find(
                         "a remote license differs from what composerd keeps; "
                         "setting it back") != std::string::npos;
      if (!logged_drift) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  EXPECT_TRUE(logged_drift) << daemon.log();

  // slurm-config tells a site with remote licenses what it needs instead of Licenses=.
  auto config = ctl(daemon, "slurm-config");
  EXPECT_EQ(config.code, 0) << config.out;
  EXPECT_EQ(config.out.find("\nLicenses="), std::string::npos) << config.out;
  EXPECT_NE(config.out.find("\nSchedulerParameters=bf_licenses,allow_zero_lic\n"),
            std::string::npos)
      << config.out;
  EXPECT_NE(config.out.find("\nAccountingStorageTRES=license/fabric_gpu@composer,"),
            std::string::npos)
      << config.out;

  // slurmdbd away: the round fails, nothing half-applied, Slurm keeps the last count.
  std::ofstream(slurm + "/fail") << "modify resource";
  ASSERT_TRUE(c.drain("gpu-a-0", "fan").ok());
  bool refused = false;
  for (int i = 0; i < 100 && !refused; ++i) {
    refused = daemon.log().find("slurm: plan not applied") != std::string::npos;
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(refused) << daemon.log();
  EXPECT_NE(slurp(slurm + "/licenses").find("LicenseName=fabric_gpu@composer Total=16 "),
            std::string::npos);
  std::filesystem::remove(slurm + "/fail");
  EXPECT_TRUE(wait_for("licenses", "LicenseName=fabric_gpu@composer Total=15 ")) << daemon.log();
}

TEST(SlurmSyncConfig, CheckRefusesAnScontrolThatIsNotExecutable) {
  test_support::TempDir dir{"composer-sync-check"};
  const std::string conf = dir.file("composer.conf");
  std::ofstream(conf) << "StateDir=" << dir.file("state") << "\nSlurmSync=yes\n"
                      << "SlurmScontrol=" << dir.file("nowhere/scontrol") << "\n"
                      << default_pool_lines();
  auto r = run_command(std::string(COMPOSERD_PATH) + " --check -f " + conf + " 2>&1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("line 3: SlurmScontrol=" + dir.file("nowhere/scontrol") +
                       " is not an executable file"),
            std::string::npos)
      << r.out;
  // The same for the sacctmgr of remote licenses.
  std::ofstream(conf) << "StateDir=" << dir.file("state") << "\nSlurmSync=yes\n"
                      << "SlurmLicenses=remote\nSlurmCluster=c1\n"
                      << "SlurmSacctmgr=" << dir.file("nowhere/sacctmgr") << "\n"
                      << default_pool_lines();
  r = run_command(std::string(COMPOSERD_PATH) + " --check -f " + conf + " 2>&1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("line 5: SlurmSacctmgr=" + dir.file("nowhere/sacctmgr") +
                       " is not an executable file; give the path of Slurm's sacctmgr"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace composer::testing

namespace composer::testing {
namespace {

// Zones in the scheduler: once n2's zone is dry, a pending composed job is kept off n2 by an
// update of its ExcNodeList and admin comment (zone_steering.h), within a round.
TEST_F(SlurmSyncTest, APendingJobIsKeptOffANodeWhoseZonesAreDry) {
  auto c = daemon_.client();
  // n2 reaches z2 only; its eight H100 go to a job there. n1 still reaches z1's A100.
  auto composed = c.compose(
      50, "n2", api::ComposeBody{.owner = {.uid = 1000, .user = "alice"}, .request = {.gpus = 8}});
  ASSERT_TRUE(composed.ok()) << composed.error();
  std::ofstream(slurm_ + "/jobs")
      << "JobId=51 JobName=w JobState=PENDING Reason=Resources ReqNodeList=(null) "
         "ExcNodeList=(null) AdminComment=composer: gpus=1 nodes=1 StdIn=/dev/null\n"
         "JobId=52 JobName=x JobState=PENDING Reason=Resources ReqNodeList=(null) "
         "ExcNodeList=n1 AdminComment=composer: gpus=1 nodes=1 StdIn=/dev/null\n";
  const std::string steer =
      "update JobId=51 ExcNodeList=n2 AdminComment=composer: gpus=1 nodes=1 avoid=n2\n";
  bool steered = false;
  for (int i = 0; i < 100 && !steered; ++i) {
    steered = calls().find(steer) != std::string::npos;
    if (!steered) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(steered) << calls() << daemon_.log();
  // Job 52 excludes n1 itself: its choice stands.
  EXPECT_EQ(calls().find("JobId=52"), std::string::npos) << calls();
  EXPECT_TRUE(logged("a pending job's excluded nodes follow the zones")) << daemon_.log();
}

}  // namespace
}  // namespace composer::testing
