#include "composer/slurm/ctld_core.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "composer/slurm/plugin_config.h"
#include "fakes.h"

namespace composer::slurm {
namespace {

using testing::device;
using testing::FakeComposer;

// PrologSlurmctld's environment as slurmctld 22.05 gave it for a composed job.
std::vector<std::string> prolog_env() {
  return {"SLURM_SCRIPT_CONTEXT=prolog_slurmctld",
          "SLURM_JOB_ID=41",
          "SLURM_JOB_NODELIST=cn[1-3]",
          "SLURM_JOB_UID=1000",
          "SLURM_JOB_USER=alice",
          "SLURM_JOB_ACCOUNT=(null)",
          "SPANK__SLURM_SPANK_OPTION_composer_compose_gpus=2",
          "SPANK__SLURM_SPANK_OPTION_composer_workload=training"};
}

TEST(ControllerJob, IsReadFromSlurmctldsEnvironment) {
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job) << job.error();
  EXPECT_EQ(job->job_id, 41u);
  EXPECT_EQ(job->nodes, (std::vector<std::string>{"cn1", "cn2", "cn3"}));
  EXPECT_EQ(job->uid, 1000u);
  EXPECT_EQ(job->user, "alice");
  EXPECT_EQ(job->account, "");
  EXPECT_EQ(job->options.request.gpus, 2u);
  EXPECT_EQ(job->options.workload, "training");
}

TEST(ControllerJob, NamesWhatIsMissingOrBad) {
  Expected<ControllerJob> job = controller_job({"SLURM_JOB_UID=0"});
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().message, "SLURM_JOB_ID is not set: not run as Slurm's PrologSlurmctld?");
  std::vector<std::string> env = prolog_env();
  env[2] = "SLURM_JOB_NODELIST=cn[3-1]";
  job = controller_job(env);
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().message.rfind("SLURM_JOB_NODELIST=cn[3-1]: ", 0), 0u) << job.error();
  env = prolog_env();
  env[6] = "SPANK__SLURM_SPANK_OPTION_composer_compose_gpus=lots";
  job = controller_job(env);
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().message.rfind("--compose-gpus=lots: ", 0), 0u) << job.error();
}

TEST(ControllerProlog, ComposesEveryNodeOfTheJob) {
  FakeComposer api;
  api.devices = {device("gpu-00", DeviceType::kGpu, "")};
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job);
  std::vector<std::string> log;
  ASSERT_TRUE(controller_prolog(*job, api, 0, [&log](const std::string& l) { log.push_back(l); }));
  ASSERT_EQ(api.composed.size(), 3u);
  EXPECT_EQ(api.composed[2].node, "cn3");
  EXPECT_EQ(api.composed[0].job_id, 41u);
  EXPECT_EQ(api.composed[0].uid, 1000u);
  EXPECT_EQ(api.composed[0].workload, "training");
  EXPECT_EQ(api.composed[0].request.gpus, 2u);
  EXPECT_TRUE(api.released.empty());
  EXPECT_EQ(log.size(), 3u);
}

TEST(ControllerProlog, AFailedNodeReleasesWhatWasComposedAndNamesTheNode) {
  FakeComposer api;
  api.compose_error = Error{ErrorCode::kUnavailable, "composerd at http://ctl:6830: refused"};
  api.compose_failures = -1;
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job);
  Status s = controller_prolog(*job, api, 0, [](const std::string&) {});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(s.error().message,
            "job 41 on node cn1: compose compose-gpus=2 workload=training failed (unavailable): "
            "composerd at http://ctl:6830: refused");
  EXPECT_TRUE(api.released.empty());
}

TEST(ControllerProlog, AShortfallIsAskedAgainWhileAReleaseIsUnderWay) {
  FakeComposer api;
  api.compose_error = Error{ErrorCode::kInsufficient, "gpu: asked 2, none free in zone z1"};
  api.compose_failures = 2;
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job);
  std::vector<std::string> log;
  ASSERT_TRUE(controller_prolog(*job, api, 5, [&log](const std::string& l) { log.push_back(l); }));
  EXPECT_EQ(api.composed.size(), 5u);  // cn1 three times, then cn2 and cn3
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0],
            "composer: prolog_slurmctld: job 41 on node cn1: gpu: asked 2, none free in zone z1; "
            "asking again for up to 5 s");
}

TEST(ControllerProlog, AJobThatAsksForNothingIsLeftAlone) {
  FakeComposer api;
  Expected<ControllerJob> job =
      controller_job({"SLURM_JOB_ID=5", "SLURM_JOB_UID=0", "SLURM_JOB_NODELIST=cn1"});
  ASSERT_TRUE(job);
  EXPECT_TRUE(controller_prolog(*job, api, 0, [](const std::string&) {}));
  EXPECT_TRUE(api.composed.empty());
}

TEST(PlugstackFile, TheProgramReadsThePluginsLine) {
  Expected<SpankConfig> c = parse_plugstack_file(
      "# comment\noptional /x/other.so a=b\nrequired\t/usr/lib/slurm/spank_composer.so "
      "server=http://ctl:6830  compose=controller\n",
      "/etc/slurm/plugstack.conf");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->server, "http://ctl:6830");
  EXPECT_EQ(c->compose_on, ComposeOn::kController);
  c = parse_plugstack_file("required /p/spank_composer.so compose=both\n", "/p.conf");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message.rfind(
                "/p.conf line 1: plugstack argument 'compose=both': expected node", 0),
            0u)
      << c.error();
  c = parse_plugstack_file("#required /p/spank_composer.so\n", "/p.conf");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "/p.conf: no spank_composer.so line");
}

}  // namespace
}  // namespace composer::slurm
