// `policy explain --job`: scontrol's job and license lines as composerctl reads them, the
// sentences for a job held by a drained pool, by a policy cap, and for jobs nothing holds, and
// the command line against a stand-in scontrol on PATH (an unknown job, a running job, flags
// that exclude each other).
#include "composer/cli/explain_job_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "composer/cli/composerctl.h"
#include "composer/common/units.h"
#include "composer/test_support/temp_dir.h"

namespace composer::cli {
namespace {

using ::testing::HasSubstr;

// As Slurm 22.05 prints a pending composed job with `scontrol -o show job 42`.
std::string job_line(const std::string& state, const std::string& reason,
                     const std::string& licenses) {
  return "JobId=42 JobName=train UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A "
         "Priority=4294901758 Nice=0 Account=ml QOS=normal JobState=" +
         state + " Reason=" + reason +
         " Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
         "RunTime=00:00:00 TimeLimit=02:00:00 TimeMin=N/A SubmitTime=2024-03-04T21:00:00 "
         "StartTime=Unknown EndTime=Unknown Deadline=N/A Partition=gpu "
         "AllocNode:Sid=login1:4242 ReqNodeList=(null) NodeList= NumNodes=2-2 NumCPUs=2 "
         "NumTasks=2 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=2,node=2,billing=2 "
         "Socks/Node=* OverSubscribe=OK Contiguous=0 Licenses=" +
         licenses +
         " Network=(null) Command=/home/alice/my job.sh WorkDir=/home/alice "
         "AdminComment=vip; composer: gpus=A100:2 workload=training nodes=2 "
         "StdErr=/home/alice/slurm-42.out StdIn=/dev/null StdOut=/home/alice/slurm-42.out "
         "Power= TresPerNode=gres:cgpu:2\n";
}

SlurmJob job(const std::string& state, const std::string& reason, const std::string& licenses) {
  auto j = parse_scontrol_job(job_line(state, reason, licenses));
  EXPECT_TRUE(j) << j.error().message;
  return j ? *j : SlurmJob{};
}

std::vector<LicenseUse> licenses(const std::string& text) {
  auto l = parse_license_use(text);
  EXPECT_TRUE(l) << l.error().message;
  return l ? *l : std::vector<LicenseUse>{};
}

TEST(ExplainJobTest, ReadsTheJobLine) {
  auto j = parse_scontrol_job("warning: something on stderr\n" +
                              job_line("PENDING", "Licenses", "fabric_gpu:4,training_gpu_cap:4"));
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->id, 42u);
  EXPECT_EQ(j->state, "PENDING");
  EXPECT_EQ(j->reason, "Licenses");
  EXPECT_EQ(j->licenses, (std::vector<LicenseCount>{{"fabric_gpu", 4}, {"training_gpu_cap", 4}}));
  EXPECT_EQ(j->time_limit_s, 7200);
  EXPECT_EQ(j->partition, "gpu");
  EXPECT_EQ(j->account, "ml");
  EXPECT_EQ(j->qos, "normal");
  EXPECT_EQ(j->nodes, 2u);
  ASSERT_TRUE(j->composer);
  EXPECT_EQ(j->composer->request, (Request{.gpus = 2, .gpu_model = "A100"}));
  EXPECT_EQ(j->composer->workload, "training");
  EXPECT_EQ(j->composer->nodes, 2u);
  EXPECT_TRUE(pending_on_licenses(*j));

  // The question composerd's policy explain gets: the class job_submit gave, the amounts of
  // the pool licenses, the time limit.
  const client::PolicyQuery q = policy_query(*j);
  EXPECT_EQ(q.workload, "training");
  EXPECT_EQ(q.partition, "gpu");
  EXPECT_EQ(q.gpus, 4u);
  EXPECT_EQ(q.mem_bytes, 0u);
  EXPECT_EQ(q.time_limit_s, 7200);

  auto unlimited = parse_scontrol_job(
      "JobId=7 JobState=PENDING Reason=Licenses "
      "TimeLimit=UNLIMITED Licenses=fabric_mem:128 NumNodes=1\n");
  ASSERT_TRUE(unlimited) << unlimited.error().message;
  EXPECT_FALSE(unlimited->time_limit_s);
  EXPECT_FALSE(unlimited->composer);
  EXPECT_EQ(policy_query(*unlimited).mem_bytes, 128 * kGiB);

  auto none = parse_scontrol_job("No jobs in the system\n");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message, "scontrol printed no job, only 'No jobs in the system'");
  auto broken = parse_scontrol_job("JobId=7 JobState=PENDING Licenses=fabric_gpu:four\n");
  ASSERT_FALSE(broken);
  EXPECT_THAT(broken.error().message, HasSubstr("Licenses=fabric_gpu:four"));
}

TEST(ExplainJobTest, APoolLicenseShortBecauseTwoOfEightGpusAreDrained) {
  const SlurmJob j = job("PENDING", "Licenses", "fabric_gpu:4");
  ComposerdView composerd;
  composerd.pool = {{.type = DeviceType::kGpu,
                     .model = "A100",
                     .zone = "z1",
                     .total = 8,
                     .free = 2,
                     .attached = 4,
                     .drained = 2},
                    {.type = DeviceType::kNvme, .model = "P5620", .zone = "z2", .total = 4}};
  const JobExplanation e = explain_job(
      j, licenses("LicenseName=fabric_gpu Total=8 Used=4 Free=2 Reserved=2 Remote=no\n"),
      composerd);
  EXPECT_EQ(e.summary, "Job 42 is pending on licenses: fabric_gpu (4 asked, 2 free) holds it.");
  ASSERT_EQ(e.licenses.size(), 1u);
  const LicenseVerdict& v = e.licenses[0];
  EXPECT_TRUE(v.holds);
  EXPECT_EQ(v.asked, 4u);
  EXPECT_EQ(v.why,
            "The pool's 8 GPUs: 2 drained, 4 attached to other jobs and 2 free. Of Slurm's 8, 2 "
            "are reserved (composerd's hold_fabric_gpu keeps back what the pool cannot serve) "
            "and 4 are used by running jobs, which leaves 2 for the 4 asked");
  EXPECT_EQ(job_explain_text(e, true),
            "Job 42 is pending on licenses: fabric_gpu (4 asked, 2 free) holds it.\n"
            "\n"
            "LICENSE     ASKED  TOTAL  USED  RESERVED  FREE  HOLDS\n"
            "fabric_gpu      4      8     4         2     2  yes\n"
            "\n"
            "fabric_gpu: " +
                v.why + ".\n");
  std::ostringstream parsable;
  ASSERT_TRUE(print_table(parsable, job_explain_table(e), {.format = Format::kParsable}));
  EXPECT_EQ(parsable.str(),
            "LICENSE|ASKED|TOTAL|USED|RESERVED|FREE|HOLDS|WHY\n"
            "fabric_gpu|4|8|4|2|2|yes|" +
                v.why + "\n");
  const Json::Value json = job_explain_to_json(e);
  EXPECT_EQ(json["job"].asUInt(), 42u);
  EXPECT_EQ(json["workload"].asString(), "training");
  EXPECT_EQ(json["request"].asString(), "gpus=A100:2");
  EXPECT_EQ(json["licenses"][0]["reserved"].asUInt64(), 2u);
  EXPECT_TRUE(json["licenses"][0]["holds"].asBool());
  EXPECT_TRUE(json["policy"].isNull());
}

// A model's license says what holds that model's GPUs; a remote license (NAME@SERVER) is read
// as the pool license it is, and the amounts asked reach the policy query.
TEST(ExplainJobTest, AModelsRemoteLicenseShortBecauseOtherJobsHoldTheModel) {
  const SlurmJob j = job("PENDING", "Licenses", "fabric_gpu@composer:2,fabric_gpu_h100@composer:2");
  ComposerdView composerd;
  composerd.pool = {
      {.type = DeviceType::kGpu, .model = "A100", .zone = "z1", .total = 4, .free = 4},
      {.type = DeviceType::kGpu,
       .model = "H100",
       .zone = "z1",
       .total = 4,
       .attached = 3,
       .failed = 1}};
  const JobExplanation e =
      explain_job(j,
                  licenses("LicenseName=fabric_gpu@composer Total=7 Used=3 Free=4 Reserved=0 "
                           "Remote=yes\n"
                           "LicenseName=fabric_gpu_h100@composer Total=3 Used=3 Free=0 "
                           "Reserved=0 Remote=yes\n"),
                  composerd);
  EXPECT_EQ(e.summary,
            "Job 42 is pending on licenses: fabric_gpu_h100@composer (2 asked, 0 free) holds it.");
  ASSERT_EQ(e.licenses.size(), 2u);
  EXPECT_FALSE(e.licenses[0].holds);
  EXPECT_THAT(e.licenses[0].why, HasSubstr("The pool's 8 GPUs: 1 failed"));
  EXPECT_TRUE(e.licenses[1].holds);
  EXPECT_EQ(e.licenses[1].why,
            "The pool's 4 GPUs of model H100: 1 failed, 3 attached to other jobs and 0 free. Of "
            "Slurm's 3, 3 are used by running jobs, which leaves 0 for the 2 asked");
  EXPECT_EQ(policy_query(j).gpus, 2u);
}

TEST(ExplainJobTest, ACapLicenseShortInAPolicyWindow) {
  const SlurmJob j = job("PENDING", "Licenses", "fabric_gpu:4,training_gpu_cap:4");
  ComposerdView composerd;
  composerd.pool = {{.type = DeviceType::kGpu, .model = "A100", .total = 16, .free = 16}};
  api::PolicyExplanation p;
  p.workload = "training";
  p.admitted = false;
  p.earliest_ms = 1709625600000;
  p.hold = api::PolicyHold{.window = "Default", .type = "gpu", .cap = 2, .requested = 4};
  p.explanation =
      "A training job asking for 4 GPUs for 2h cannot start at Mon 2024-03-04 21:00 UTC: from "
      "Mon 2024-03-04 20:00 UTC to Tue 2024-03-05 08:00 UTC window 'Default' caps training "
      "jobs at 2 GPUs. The earliest start is Tue 2024-03-05 08:00 UTC.";
  composerd.policy = p;
  const JobExplanation e =
      explain_job(j,
                  licenses("LicenseName=fabric_gpu Total=16 Used=0 Free=16 Reserved=0 Remote=no\n"
                           "LicenseName=training_gpu_cap Total=12 Used=0 Free=2 Reserved=10 "
                           "Remote=no\n"),
                  composerd);
  EXPECT_EQ(e.summary,
            "Job 42 is pending on licenses: training_gpu_cap (4 asked, 2 free) holds it.");
  ASSERT_EQ(e.licenses.size(), 2u);
  EXPECT_FALSE(e.licenses[0].holds);
  EXPECT_EQ(e.licenses[0].why,
            "The pool's 16 GPUs: none drained, failed or foreign, 0 attached to other jobs and 16 "
            "free; 16 free in Slurm covers the 4 asked");
  EXPECT_TRUE(e.licenses[1].holds);
  EXPECT_EQ(e.licenses[1].why,
            "The policy caps all training jobs together through training_gpu_cap: of Slurm's 12, "
            "10 are reserved by composerd for the policy (hold_training_gpu_cap above the "
            "class's highest cap, blocker reservations in windows with a lower cap) and 0 are "
            "used by running training jobs, which leaves 2 for the 4 asked. A training job asking "
            "for 4 GPUs for 2h cannot start at Mon "
            "2024-03-04 21:00 UTC: from Mon 2024-03-04 20:00 UTC to Tue 2024-03-05 08:00 UTC "
            "window 'Default' caps training jobs at 2 GPUs. The earliest start is Tue 2024-03-05 "
            "08:00 UTC");
  ASSERT_TRUE(e.policy);
  EXPECT_EQ(job_explain_to_json(e)["policy"]["hold"]["window"].asString(), "Default");

  // Without a policy in force composerd says so, and the why carries it.
  composerd.policy = Expected<api::PolicyExplanation>(
      Error{ErrorCode::kNotFound, "no policy is in force: apply one first"});
  const JobExplanation none = explain_job(
      j, licenses("LicenseName=training_gpu_cap Total=12 Used=0 Free=2 Reserved=10 Remote=no\n"),
      composerd);
  EXPECT_THAT(none.licenses[1].why, HasSubstr("composerd's policy: no policy is in force"));
  // fabric_gpu is not in Slurm's list: it cannot be granted.
  EXPECT_TRUE(none.licenses[0].holds);
  EXPECT_EQ(none.licenses[0].why,
            "Slurm has no license fabric_gpu (scontrol show licenses lists none)");
}

TEST(ExplainJobTest, AJobNothingHoldsGetsOneSentence) {
  const JobExplanation running = explain_job(job("RUNNING", "None", "fabric_gpu:4"), {}, {});
  EXPECT_EQ(running.summary, "Job 42 is RUNNING, not pending: no license holds it.");
  EXPECT_TRUE(running.licenses.empty());
  EXPECT_EQ(job_explain_text(running, true), running.summary + "\n");
  EXPECT_EQ(explain_job(job("PENDING", "Priority", "fabric_gpu:4"), {}, {}).summary,
            "Job 42 is pending for Reason=Priority, not for licenses: composerd's pool and "
            "policy do not hold it.");
  const JobExplanation enough =
      explain_job(job("PENDING", "Licenses", "fabric_gpu:4"),
                  licenses("LicenseName=fabric_gpu Total=8 Used=0 Free=8 Reserved=0 Remote=no\n"),
                  {.pool = {{.type = DeviceType::kGpu, .total = 8, .free = 8}}});
  EXPECT_EQ(enough.summary,
            "Job 42 pends with Reason=Licenses, but every license it asks for has enough free "
            "now: Slurm starts it on a coming scheduling pass.");
}

TEST(ExplainJobTest, ARefusedComposeIsWhyARequeuedJobWaits) {
  Event ready{.ts_ms = 1'700'000'000'000, .kind = "ready", .owner = {.job_id = 42}, .node = "n1"};
  Event refused{.ts_ms = 1'700'000'100'000,
                .kind = "refused",
                .owner = {.job_id = 42},
                .node = "n1",
                .detail =
                    "insufficient GPUs on node n1: 2 asked, 2 free in 1 enclosure domain, "
                    "under placement rule 'spread enclosure 2' of class training"};
  Event older = refused;
  older.ts_ms = 1'699'999'000'000;
  older.detail = "an older refusal";
  // Only a refusal after the job's last ready composition counts, and the newest one.
  EXPECT_FALSE(last_refusal({}).has_value());
  EXPECT_FALSE(last_refusal({older, ready}).has_value());
  ASSERT_TRUE(last_refusal({older, ready, refused}).has_value());
  EXPECT_EQ(last_refusal({older, ready, refused})->detail, refused.detail);

  const JobExplanation e =
      explain_job(job("PENDING", "BeginTime", "fabric_gpu:4"), {}, {.refusal = refused});
  EXPECT_EQ(e.summary,
            "Job 42 is pending for Reason=BeginTime after its devices could not be composed.");
  EXPECT_EQ(e.refusal, "composerd refused to compose it on n1 at " + format_time(refused.ts_ms) +
                           ": " + refused.detail + ".");
  EXPECT_EQ(job_explain_text(e, true), e.summary + "\nComposerd refused to compose it on n1 at " +
                                           format_time(refused.ts_ms) + ": " + refused.detail +
                                           ".\n");
  EXPECT_THAT(job_explain_to_json(e)["refusal"].asString(),
              HasSubstr("under placement rule 'spread enclosure 2' of class training"));
  // A running job is past it.
  EXPECT_EQ(explain_job(job("RUNNING", "None", "fabric_gpu:4"), {}, {.refusal = refused}).refusal,
            "");
}

// The command line, with a stand-in scontrol first on PATH; nothing here reaches composerd.
class ExplainJobCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("PATH");
    path_ = path != nullptr ? path : "";
    ::setenv("PATH", (dir_.path().string() + ":" + path_).c_str(), 1);
    // Nothing listens here: a call to composerd would fail the command.
    ::setenv("COMPOSER_SERVER", "http://127.0.0.1:1", 1);
  }
  void TearDown() override {
    ::setenv("PATH", path_.c_str(), 1);
    ::unsetenv("COMPOSER_SERVER");
  }

  // scontrol prints `text` and exits with `status`.
  void scontrol(const std::string& text, int status) {
    const std::string file = dir_.file("scontrol");
    std::ofstream(dir_.file("answer")) << text;
    std::ofstream(file) << "#!/bin/sh\ncat '" << dir_.file("answer") << "'\nexit " << status
                        << "\n";
    ::chmod(file.c_str(), 0755);
  }

  struct Outcome {
    int rc;
    std::string out, err;
  };
  Outcome ctl(std::vector<std::string> args) {
    args.insert(args.begin(), "composerctl");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    std::ostringstream out, err;
    const int rc = run(static_cast<int>(argv.size()), argv.data(), out, err);
    return {rc, out.str(), err.str()};
  }

  test_support::TempDir dir_{"composer-explain-job"};
  std::string path_;
};

TEST_F(ExplainJobCommandTest, AnUnknownJobIsNamed) {
  scontrol("slurm_load_jobs error: Invalid job id specified\n", 1);
  const Outcome o = ctl({"policy", "explain", "--job", "99"});
  EXPECT_EQ(o.rc, kExitFailed);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err,
            "composerctl: error: Slurm knows no job 99 (it never existed, or it ended longer ago "
            "than slurm.conf's MinJobAge); 'scontrol -o show job 99' failed (exit 1): "
            "slurm_load_jobs error: Invalid job id specified\n");
}

TEST_F(ExplainJobCommandTest, ARunningJobGetsOneSentenceInEveryFormat) {
  scontrol(job_line("RUNNING", "None", "fabric_gpu:4"), 0);
  const Outcome o = ctl({"policy", "explain", "--job", "42"});
  EXPECT_EQ(o.rc, kExitOk) << o.err;
  EXPECT_EQ(o.out, "Job 42 is RUNNING, not pending: no license holds it.\n");
  EXPECT_EQ(ctl({"policy", "explain", "--job", "42", "-P"}).out, o.out);
  const Outcome json = ctl({"policy", "explain", "--job", "42", "--json"});
  EXPECT_EQ(json.rc, kExitOk) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"state\" : \"RUNNING\""));
}

TEST_F(ExplainJobCommandTest, BadArgumentsAreRefusedWithASentence) {
  scontrol("", 0);
  Outcome o = ctl({"policy", "explain", "--job", "42", "--gpus", "2", "--time-limit", "60"});
  EXPECT_EQ(o.rc, kExitUsage);
  EXPECT_EQ(o.err,
            "composerctl: error: --job reads the job's request, class and time limit from "
            "Slurm; leave out --gpus, --time-limit, or leave out --job to explain a "
            "hypothetical job\nRun 'composerctl policy --help' for usage.\n");
  o = ctl({"policy", "explain", "--job", "forty-two"});
  EXPECT_EQ(o.rc, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("--job: 'forty-two' is not a Slurm job id (a whole number from 1 "
                               "to 4294967295)"));
  o = ctl({"policy", "explain", "--gpus", "2"});
  EXPECT_EQ(o.rc, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("policy explain: give --time-limit LIMIT"));
  o = ctl({"policy", "explain", "--job", "42", "-o", "license,colour"});
  EXPECT_EQ(o.rc, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("the fields are LICENSE,ASKED,TOTAL,USED,RESERVED,FREE,HOLDS,WHY"));
}

}  // namespace
}  // namespace composer::cli
