#include "composer/slurm/ctld_core.h"

#include <algorithm>
#include <chrono>
#include <optional>

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
  EXPECT_EQ(job->owner.job_id, 41u);
  EXPECT_EQ(job->nodes, (std::vector<std::string>{"cn1", "cn2", "cn3"}));
  EXPECT_EQ(job->owner.uid, 1000u);
  EXPECT_EQ(job->owner.user, "alice");
  EXPECT_EQ(job->owner.account, "");
  EXPECT_EQ(job->options.request.gpus, 2u);
  EXPECT_EQ(job->options.workload, "training");
  EXPECT_EQ(job->owner.workload, "training");
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

TEST(ControllerProlog, PassesTheJobsMemoryPolicyToComposerd) {
  FakeComposer api;
  api.devices = {device("mem-00", DeviceType::kMem, "")};
  std::vector<std::string> env = prolog_env();
  env[6] = "SPANK__SLURM_SPANK_OPTION_composer_compose_mem=8G";
  env.push_back("SPANK__SLURM_SPANK_OPTION_composer_compose_mem_policy=interleave");
  Expected<ControllerJob> job = controller_job(env);
  ASSERT_TRUE(job) << job.error();
  ASSERT_TRUE(controller_prolog(*job, api, 0, 0, [](const std::string&) {}));
  ASSERT_EQ(api.composed_jobs.size(), 1u);
  ASSERT_TRUE(api.composed_jobs[0].first.mem_policy);
  EXPECT_EQ(to_string(*api.composed_jobs[0].first.mem_policy), "interleave");
}

TEST(ControllerProlog, ComposesEveryNodeOfTheJobWithOneCall) {
  FakeComposer api;
  api.devices = {device("gpu-00", DeviceType::kGpu, "")};
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job);
  std::vector<std::string> log;
  ASSERT_TRUE(
      controller_prolog(*job, api, 0, 0, [&log](const std::string& l) { log.push_back(l); }));
  EXPECT_TRUE(api.composed.empty());
  ASSERT_EQ(api.composed_jobs.size(), 1u);
  const auto& [call, nodes] = api.composed_jobs[0];
  EXPECT_EQ(nodes, (std::vector<std::string>{"cn1", "cn2", "cn3"}));
  EXPECT_EQ(call.owner.job_id, 41u);
  EXPECT_EQ(call.owner.uid, 1000u);
  EXPECT_EQ(call.owner.workload, "training");
  EXPECT_EQ(call.request.gpus, 2u);
  EXPECT_FALSE(call.mem_policy);  // none given: composerd gives the class's default
  EXPECT_TRUE(api.released.empty());
  EXPECT_EQ(log,
            (std::vector<std::string>{
                "composer: prolog_slurmctld: job 41: 3 node(s) ready (cn1 12, cn2 12, cn3 12)"}));
}

TEST(ControllerProlog, AFailureIsToldWithComposerdsSentence) {
  FakeComposer api;
  api.compose_error =
      Error{ErrorCode::kUnavailable, "job 41 on node cn2: composerd at http://ctl:6830: refused"};
  api.compose_failures = -1;
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job);
  Status s = controller_prolog(*job, api, 0, 0, [](const std::string&) {});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(s.error().message,
            "job 41: compose compose-gpus=2 workload=training failed (unavailable): "
            "job 41 on node cn2: composerd at http://ctl:6830: refused");
  EXPECT_TRUE(api.released.empty());
  EXPECT_TRUE(api.released_jobs.empty());
}

TEST(ControllerProlog, AShortfallIsAskedAgainWhileAReleaseIsUnderWay) {
  FakeComposer api;
  api.compose_error =
      Error{ErrorCode::kInsufficient, "job 41 on node cn1: gpu: asked 2, none free in zone z1"};
  api.compose_failures = 2;
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job);
  std::vector<std::string> log;
  ASSERT_TRUE(
      controller_prolog(*job, api, 5, 0, [&log](const std::string& l) { log.push_back(l); }));
  EXPECT_EQ(api.composed_jobs.size(), 3u);  // two shortfalls, then the whole job
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0],
            "composer: prolog_slurmctld: job 41: job 41 on node cn1: gpu: asked 2, none free in "
            "zone z1; asking again for up to 5 s");
}

// A composerd restart of a few seconds: composer-slurmctld asks again (every second, within
// outage_wait) instead of failing the job, which Slurm would requeue; it says that it waits and
// when composerd is back.
TEST(ControllerProlog, AComposerdRestartIsRiddenOut) {
  FakeComposer api;
  api.compose_error = Error{ErrorCode::kUnavailable,
                            "cannot connect to unix:/run/composer/composerd.sock: No such file or "
                            "directory (after 4 attempts)"};
  api.compose_failures = 2;
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job);
  std::vector<std::string> log;
  ASSERT_TRUE(
      controller_prolog(*job, api, 0, 10, [&log](const std::string& l) { log.push_back(l); }));
  EXPECT_EQ(api.composed_jobs.size(), 3u);  // two while composerd is down, then the whole job
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0],
            "composer: prolog_slurmctld: job 41: cannot connect to "
            "unix:/run/composer/composerd.sock: No such file or directory (after 4 attempts); "
            "asking again for up to 10 s");
  EXPECT_EQ(log[1].rfind("composer: prolog_slurmctld: job 41: composerd answered again after ", 0),
            0u)
      << log[1];
}

// The bound holds: a composerd that stays away fails the job once outage_wait has passed, and
// outage_wait=0 fails it at once.
TEST(ControllerProlog, AnOutageLongerThanTheBoundFailsTheJob) {
  FakeComposer api;
  api.compose_error = Error{ErrorCode::kUnavailable, "cannot connect to http://ctl:6830: refused"};
  api.compose_failures = -1;
  Expected<ControllerJob> job = controller_job(prolog_env());
  ASSERT_TRUE(job);
  const auto began = std::chrono::steady_clock::now();
  Status s = controller_prolog(*job, api, 0, 2, [](const std::string&) {});
  const auto took = std::chrono::steady_clock::now() - began;
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kUnavailable);
  EXPECT_GE(api.composed_jobs.size(), 2u);
  EXPECT_LE(took, std::chrono::seconds(3));
  api.composed_jobs.clear();
  EXPECT_FALSE(controller_prolog(*job, api, 30, 0, [](const std::string&) {}));
  EXPECT_EQ(api.composed_jobs.size(), 1u);
}

Expected<ControllerJob> epilog_job() {
  std::vector<std::string> env = prolog_env();
  env[0] = "SLURM_SCRIPT_CONTEXT=epilog_slurmctld";
  return controller_job(env);
}

// Slurm as EpilogSlurmctld sees it: `completing` answers in turn (the last one from then on).
struct FakeSlurm {
  std::vector<std::vector<std::string>> completing{{}};
  std::vector<std::string> drained;
  std::optional<Error> error;
  size_t asked = 0;
  SlurmProbe probe() {
    return SlurmProbe{
        .completing = [this]() -> Expected<std::vector<std::string>> {
          if (error) return *error;
          return completing[std::min(asked++, completing.size() - 1)];
        },
        .drained = [this](const std::vector<std::string>&) -> Expected<std::vector<std::string>> {
          return drained;
        }};
  }
};

// Each node's epilog releases its own node and ends after EpilogSlurmctld (Slurm then starts
// its next scheduling pass at once): EpilogSlurmctld asks Slurm once and releases only the
// nodes no longer completing, those that ran no epilog (a node that failed under the job).
TEST(ControllerEpilog, ReleasesOnlyTheNodesThatRunNoEpilogAndWaitsForNone) {
  FakeComposer api;
  Expected<ControllerJob> job = epilog_job();
  ASSERT_TRUE(job);
  FakeSlurm slurm;
  slurm.completing = {{"cn1", "cn2", "cn3"}, {}};
  std::vector<std::string> log;
  ASSERT_TRUE(controller_epilog(*job, api, slurm.probe(),
                                [&log](const std::string& l) { log.push_back(l); }));
  EXPECT_EQ(slurm.asked, 1u);
  EXPECT_TRUE(api.released.empty());
  EXPECT_TRUE(api.released_jobs.empty());
  EXPECT_TRUE(log.empty());

  slurm.asked = 0;
  slurm.completing = {{"cn1", "cn3"}, {"cn3"}, {}};
  ASSERT_TRUE(controller_epilog(*job, api, slurm.probe(),
                                [&log](const std::string& l) { log.push_back(l); }));
  EXPECT_EQ(slurm.asked, 1u);
  EXPECT_EQ(api.released, (std::vector<std::pair<uint32_t, std::string>>{{41, "cn2"}}));
  EXPECT_TRUE(api.released_jobs.empty());
  EXPECT_EQ(log,
            (std::vector<std::string>{
                "composer: epilog_slurmctld: job 41: cn2 released (its node epilog did not)"}));
}

TEST(ControllerEpilog, ADrainedNodeKeepsItsComposition) {
  FakeComposer api;
  Expected<ControllerJob> job = epilog_job();
  ASSERT_TRUE(job);
  FakeSlurm slurm;
  slurm.drained = {"cn2"};
  std::vector<std::string> log;
  ASSERT_TRUE(controller_epilog(*job, api, slurm.probe(),
                                [&log](const std::string& l) { log.push_back(l); }));
  EXPECT_TRUE(api.released_jobs.empty());
  EXPECT_EQ(api.released,
            (std::vector<std::pair<uint32_t, std::string>>{{41, "cn1"}, {41, "cn3"}}));
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0],
            "composer: epilog_slurmctld: job 41: keeping the compositions of drained node(s) cn2 "
            "(an epilog that found its devices in use drains its node)");
}

TEST(ControllerEpilog, ReleasesNothingWhenSlurmCannotTell) {
  FakeComposer api;
  Expected<ControllerJob> job = epilog_job();
  ASSERT_TRUE(job);
  FakeSlurm slurm;
  slurm.error = Error{ErrorCode::kUnavailable, "squeue exited 1: slurmctld not responding"};
  std::vector<std::string> log;
  EXPECT_FALSE(controller_epilog(*job, api, slurm.probe(),
                                 [&log](const std::string& l) { log.push_back(l); }));
  EXPECT_EQ(log, (std::vector<std::string>{
                     "composer: epilog_slurmctld: job 41: squeue exited 1: slurmctld not "
                     "responding; composerd's reconciler releases the job once Slurm has ended "
                     "it"}));
  EXPECT_TRUE(api.released.empty());
  api.release_error = Error{ErrorCode::kUnavailable, "composerd at http://ctl:6830: refused"};
  slurm.error.reset();
  slurm.completing = {{}};
  log.clear();
  EXPECT_FALSE(controller_epilog(*job, api, slurm.probe(),
                                 [&log](const std::string& l) { log.push_back(l); }));
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0],
            "composer: epilog_slurmctld: job 41: composerd at http://ctl:6830: refused; "
            "composerd's reconciler releases the job once Slurm has ended it");
}

// squeue -j with an array's id lists every task of the array: only the job's own line counts.
TEST(ControllerEpilog, CompletingNodesAreTheJobsOwnLineOfSqueue) {
  Expected<std::vector<std::string>> nodes = completing_nodes("57|cn1\n9|cn[2-3]\n58|cn3\n9|\n", 9);
  ASSERT_TRUE(nodes) << nodes.error();
  EXPECT_EQ(*nodes, (std::vector<std::string>{"cn2", "cn3"}));
  nodes = completing_nodes("8|\n8_1|vm\n", 8);
  ASSERT_TRUE(nodes) << nodes.error();
  EXPECT_TRUE(nodes->empty());
  nodes = completing_nodes("", 8);
  ASSERT_TRUE(nodes) << nodes.error();
  EXPECT_TRUE(nodes->empty());
  EXPECT_FALSE(completing_nodes("8|cn[1-\n", 8));
}

TEST(ControllerProlog, AJobThatAsksForNothingIsLeftAlone) {
  FakeComposer api;
  Expected<ControllerJob> job =
      controller_job({"SLURM_JOB_ID=5", "SLURM_JOB_UID=0", "SLURM_JOB_NODELIST=cn1"});
  ASSERT_TRUE(job);
  EXPECT_TRUE(controller_prolog(*job, api, 0, 0, [](const std::string&) {}));
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
