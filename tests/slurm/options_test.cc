#include "composer/slurm/options.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "composer/common/units.h"

namespace composer::slurm {
namespace {

Status apply(std::string_view name, std::string_view value, JobOptions* o) {
  return apply_option(name, value, o);
}

TEST(Options, ParsesGpusWithAndWithoutModel) {
  JobOptions o;
  ASSERT_TRUE(apply("compose-gpus", "2", &o));
  EXPECT_EQ(o.request.gpus, 2u);
  EXPECT_EQ(o.request.gpu_model, "");
  ASSERT_TRUE(apply("compose-gpus", "A100-80G:4", &o));
  EXPECT_EQ(o.request.gpus, 4u);
  EXPECT_EQ(o.request.gpu_model, "A100-80G");
  EXPECT_TRUE(o.composes());
}

TEST(Options, ParsesMemoryNvmeAndWorkload) {
  JobOptions o;
  ASSERT_TRUE(apply("compose-mem", "64G", &o));
  ASSERT_TRUE(apply("compose-nvme", "1", &o));
  ASSERT_TRUE(apply("workload", "training", &o));
  EXPECT_EQ(o.request.mem_bytes, 64 * kGiB);
  EXPECT_EQ(o.request.nvme, 1u);
  EXPECT_EQ(o.workload, "training");
  EXPECT_EQ(describe(o), "compose-mem=64G compose-nvme=1 workload=training");
}

TEST(Options, ParsesEachMemoryPolicy) {
  JobOptions o;
  EXPECT_FALSE(o.mem_policy);  // not given: the class's default, else today's placement
  ASSERT_TRUE(apply("compose-mem-policy", "bind", &o));
  EXPECT_EQ(o.mem_policy->kind, MemPolicy::Kind::kBind);
  ASSERT_TRUE(apply("compose-mem-policy", "interleave", &o));
  EXPECT_EQ(o.mem_policy->kind, MemPolicy::Kind::kInterleave);
  ASSERT_TRUE(apply("compose-mem-policy", "preferred", &o));
  EXPECT_EQ(o.mem_policy, MemPolicy{});
  // A ratio is kept in its smallest form: the node is given the smallest weights that make it.
  ASSERT_TRUE(apply("compose-mem-policy", "weighted:6:2", &o));
  EXPECT_EQ(o.mem_policy->kind, MemPolicy::Kind::kWeighted);
  EXPECT_EQ(o.mem_policy->dram_weight, 3u);
  EXPECT_EQ(o.mem_policy->cxl_weight, 1u);
  EXPECT_EQ(to_string(*o.mem_policy), "weighted:3:1");
  ASSERT_TRUE(apply("compose-mem", "64G", &o));
  EXPECT_EQ(describe(o), "compose-mem=64G compose-mem-policy=weighted:3:1");
  for (const char* text : {"bind", "preferred", "interleave", "weighted:255:1"}) {
    Expected<MemPolicy> p = parse_mem_policy(text);
    ASSERT_TRUE(p) << text;
    EXPECT_EQ(to_string(*p), text);
  }
}

TEST(Options, BadMemoryPoliciesNameFlagValueAndWhatIsAllowed) {
  for (const char* bad :
       {"", "Bind", "local", "weighted", "weighted:3", "weighted:0:1", "weighted:1:0",
        "weighted:256:1", "weighted:3:1:1", "weighted:-1:2", "weighted:a:b", "interleave "}) {
    JobOptions o;
    Status s = apply("compose-mem-policy", bad, &o);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(s.error().message.rfind("--compose-mem-policy=" + std::string(bad) + ": ", 0), 0u)
        << s.error().message;
    EXPECT_NE(s.error().message.find("bind, preferred, interleave or weighted:D:C"),
              std::string::npos);
    EXPECT_NE(s.error().message.find("1 to 255"), std::string::npos);
    EXPECT_EQ(o, JobOptions{}) << bad;  // a bad value changes nothing
  }
}

TEST(Options, AMemoryPolicyNeedsComposedMemory) {
  JobOptions o;
  ASSERT_TRUE(apply("compose-gpus", "1", &o));
  ASSERT_TRUE(apply("compose-mem-policy", "bind", &o));
  Status s = check_options(o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "--compose-mem-policy=bind: a memory policy places the job's composed CXL memory; "
            "give --compose-mem=SIZE with it");
  ASSERT_TRUE(apply("compose-mem", "0", &o));  // no memory is no memory to place
  EXPECT_FALSE(check_options(o));
  ASSERT_TRUE(apply("compose-mem", "8G", &o));
  EXPECT_TRUE(check_options(o));
  // The default said out loud needs nothing.
  JobOptions plain;
  ASSERT_TRUE(apply("compose-mem-policy", "preferred", &plain));
  EXPECT_TRUE(check_options(plain));
  // job_submit reads the job's options from its SPANK environment: refused there too.
  Expected<JobOptions> from_env =
      options_from_spank_env({spank_env_name("compose-gpus") + "=1",
                              spank_env_name("compose-mem-policy") + "=interleave"});
  ASSERT_FALSE(from_env);
  EXPECT_NE(from_env.error().message.find("--compose-mem-policy=interleave: "), std::string::npos);
}

TEST(Options, WorkloadAloneComposesNothing) {
  JobOptions o;
  ASSERT_TRUE(apply("workload", "inference", &o));
  EXPECT_FALSE(o.composes());
}

TEST(Options, BadGpuValuesNameFlagValueAndRule) {
  for (const char* bad : {"two", "-1", "65", "A100:", ":2", "A 100:2", "2.5", "", "A100:0"}) {
    JobOptions o;
    Status s = apply("compose-gpus", bad, &o);
    ASSERT_FALSE(s) << bad;
    EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(s.error().message.rfind("--compose-gpus=" + std::string(bad) + ": ", 0), 0u)
        << s.error().message;
  }
  JobOptions o;
  Status s = apply("compose-gpus", "two", &o);
  EXPECT_NE(s.error().message.find("[MODEL:]N"), std::string::npos);
  EXPECT_NE(s.error().message.find("0 to 64"), std::string::npos);
}

TEST(Options, BadMemoryExplainsTheSizeRule) {
  JobOptions o;
  Status s = apply("compose-mem", "64X", &o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message.rfind("--compose-mem=64X: ", 0), 0u);
  EXPECT_NE(s.error().message.find("K, M, G or T"), std::string::npos);
  EXPECT_FALSE(apply("compose-mem", "-4G", &o));
  EXPECT_FALSE(apply("compose-mem", "2048T", &o));
}

// "64GB" is read as Slurm 22.05's --mem reads it (64G, binary), and the user is told so; a
// size too large says the allowed form.
TEST(Options, AByteSuffixIsReadAsSlurmReadsItAndSaidSo) {
  JobOptions o;
  ASSERT_TRUE(apply("compose-mem", "64GB", &o));
  EXPECT_EQ(o.request.mem_bytes, 64 * kGiB);
  EXPECT_EQ(read_as("compose-mem", "64GB"),
            "--compose-mem=64GB read as 64G: sizes are binary, as Slurm's --mem reads them (1G "
            "is 1024M)");
  EXPECT_EQ(read_as("compose-mem", "64G"), "");
  EXPECT_EQ(read_as("compose-mem", "64X"), "");
  EXPECT_EQ(read_as("compose-gpus", "2"), "");
  Status s = apply("compose-mem", "2048T", &o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "--compose-mem=2048T: size '2048T' is larger than the 1024T any pool can hold: "
            "expected a whole number of at most 1024T with an optional K, M, G or T suffix "
            "(binary, as Slurm's --mem reads them: 64G and 64GB are both 64 GiB; a bare number "
            "is megabytes), for example 64G");
}

// As Slurm's --gres=gpu:0: zero of a resource asks for none of it, alike for all three.
TEST(Options, ZeroAsksForNothingOfEveryResource) {
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"compose-gpus", "0"},
                                                        {"compose-mem", "0"},
                                                        {"compose-mem", "0G"},
                                                        {"compose-nvme", "0"}}) {
    JobOptions o;
    ASSERT_TRUE(apply(name, value, &o)) << name << "=" << value;
    EXPECT_FALSE(o.composes()) << name << "=" << value;
  }
  JobOptions o;
  ASSERT_TRUE(apply("compose-gpus", "2", &o));
  ASSERT_TRUE(apply("compose-mem", "0", &o));
  EXPECT_TRUE(o.composes());
  EXPECT_EQ(o.request.gpus, 2u);
  EXPECT_EQ(o.request.mem_bytes, 0u);
}

TEST(Options, BadNvmeAndWorkload) {
  JobOptions o;
  Status s = apply("compose-nvme", "x", &o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "--compose-nvme=x: expected a whole number of drives from 0 to 64");
  s = apply("workload", "bad class", &o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message.rfind("--workload=bad class: expected a class name", 0), 0u);
  EXPECT_FALSE(apply("workload", "", &o));
}

TEST(Options, UnknownOptionIsRefused) {
  JobOptions o;
  Status s = apply("compose-fpga", "1", &o);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("--compose-fpga is not an option"), std::string::npos);
}

TEST(Options, SpankEnvNamesReplaceDashes) {
  EXPECT_EQ(spank_env_name("compose-gpus"), "_SLURM_SPANK_OPTION_composer_compose_gpus");
  EXPECT_EQ(spank_env_name("workload"), "_SLURM_SPANK_OPTION_composer_workload");
}

TEST(Options, ReadsSpankEnvIgnoringOtherPlugins) {
  Expected<JobOptions> o = options_from_spank_env({
      "_SLURM_SPANK_OPTION_composer_compose_gpus=H100:2",
      "_SLURM_SPANK_OPTION_composer_compose_mem=1T",
      "_SLURM_SPANK_OPTION_pyxis_container_image=ubuntu",
      "_SLURM_SPANK_OPTION_composer_workload=training",
  });
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->request.gpus, 2u);
  EXPECT_EQ(o->request.gpu_model, "H100");
  EXPECT_EQ(o->request.mem_bytes, kTiB);
  EXPECT_EQ(o->request.nvme, 0u);
  EXPECT_EQ(o->workload, "training");
}

TEST(Options, SpankEnvIsValidatedAgain) {
  Expected<JobOptions> o =
      options_from_spank_env({"_SLURM_SPANK_OPTION_composer_compose_nvme=999"});
  ASSERT_FALSE(o);
  EXPECT_EQ(o.error().message.rfind("--compose-nvme=999: ", 0), 0u);
}

JobOptions options_of(std::vector<std::pair<std::string_view, std::string_view>> given) {
  JobOptions o;
  for (const auto& [name, value] : given) EXPECT_TRUE(apply_option(name, value, &o));
  return o;
}

// What srun sees inside a batch job that asked for --compose-gpus=2 --workload=training: the
// job's options exported with Slurm's SLURM_SPANK prefix (observed on Slurm 22.05).
const std::vector<std::string> kInsideJob = {
    "PATH=/usr/bin", "SLURM_JOB_ID=12", "SLURM_SPANK__SLURM_SPANK_OPTION_composer_compose_gpus=2",
    "SLURM_SPANK__SLURM_SPANK_OPTION_composer_workload=training"};

TEST(Options, AStepMayRepeatItsJobsOptionsOrGiveNone) {
  EXPECT_TRUE(check_step_options(JobOptions{}, kInsideJob));
  EXPECT_TRUE(
      check_step_options(options_of({{kOptGpus, "2"}, {kOptWorkload, "training"}}), kInsideJob));
  // In salloc's shell the job's options are exported without the SLURM_SPANK prefix.
  EXPECT_TRUE(
      check_step_options(options_of({{kOptGpus, "1"}}),
                         {"SLURM_JOB_ID=8", "_SLURM_SPANK_OPTION_composer_compose_gpus=1"}));
  // srun outside a job asks for a job of its own.
  EXPECT_TRUE(check_step_options(options_of({{kOptGpus, "4"}}), {"PATH=/usr/bin"}));
}

TEST(Options, AStepCannotChangeItsJobsComposition) {
  Status s =
      check_step_options(options_of({{kOptGpus, "1"}, {kOptWorkload, "training"}}), kInsideJob);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "composer: --compose-gpus=1 --workload=training on a step of job 12: a job step "
            "cannot change what its job's nodes attach (the job asked for --compose-gpus=2 "
            "--workload=training); give --compose-* and --workload to sbatch or salloc");
  s = check_step_options(options_of({{kOptMem, "64G"}}), {"SLURM_JOB_ID=7"});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "composer: --compose-mem=64G on a step of job 7: a job step cannot change what its "
            "job's nodes attach (the job asked for nothing); give --compose-* and --workload to "
            "sbatch or salloc");
}

}  // namespace
}  // namespace composer::slurm
