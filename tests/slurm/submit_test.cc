#include "composer/slurm/submit.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/units.h"

namespace composer::slurm {
namespace {

api::PoolSnapshot pool() {
  api::PoolSnapshot s;
  s.generated_ms = 1;
  s.gpu.total = 8;
  s.gpu.models = {{"A100-80G", 6}, {"H100", 2}};
  s.gpu.max_node_slots = 4;
  s.mem.total = 4;
  s.mem.total_bytes = 512 * kGiB;
  s.mem.largest_bytes = 128 * kGiB;
  s.mem.max_node_slots = 2;
  s.nvme.total = 4;
  s.nvme.max_node_slots = 2;
  api::WorkloadClass training;
  training.name = "training";
  training.cap_licenses = {{"gpu", "training_gpu_cap"}};
  training.max = {{"gpu", 6}};
  api::WorkloadClass inference;
  inference.name = "inference";
  s.workload_classes = {training, inference};
  s.blocker_reservations = {"day_block_inference"};
  return s;
}

SubmittedJob job(std::vector<std::string> options) {
  SubmittedJob j;
  for (std::string& o : options) j.spank_env.push_back("_SLURM_SPANK_OPTION_composer_" + o);
  return j;
}

TEST(Submit, TranslatesIntoLicensesGresAndComment) {
  SubmittedJob j = job({"compose_gpus=2", "compose_mem=64G", "compose_nvme=1"});
  api::PoolSnapshot s = pool();
  Expected<SubmitChanges> c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_TRUE(c->composes);
  EXPECT_EQ(c->nodes, 1u);
  // 64G of a pool of 128G blocks: the whole block it takes, and its attach slot.
  EXPECT_EQ(c->licenses, "fabric_gpu:2,fabric_mem:128,fabric_nvme:1");
  EXPECT_EQ(c->tres_per_node, "gres/cgpu:2,gres/cmem:1,gres/cnvme:1");
  EXPECT_EQ(c->admin_comment, "composer: gpus=2 mem=64G nvme=1 nodes=1");
}

TEST(Submit, KeepsAJobOffNodesWhoseZonesAreDry) {
  api::PoolSnapshot s = pool();
  s.zones["z1"].gpus = 0;
  s.zones["z2"].gpus = 4;
  s.node_zones = {{"cn1", {"z1"}}, {"cn2", {"z2"}}, {"cn3", {"z1"}}};
  SubmittedJob j = job({"compose_gpus=2"});
  Expected<SubmitChanges> c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->exc_nodes, "cn1,cn3");
  EXPECT_EQ(c->admin_comment, "composer: gpus=2 nodes=1 avoid=cn1,cn3");
  // A job that names its nodes, or excludes some itself, keeps its choice.
  j.req_nodes = "cn1";
  c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->exc_nodes, "");
  j.req_nodes.clear();
  j.exc_nodes = "cn2";
  c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->exc_nodes, "");
  // More than z2 has free: no node can serve it now, so none is excluded (licenses hold it).
  j = job({"compose_gpus=4", "compose_nvme=1"});
  s.zones["z2"].nvme = 0;
  c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->exc_nodes, "");
}

TEST(Submit, MultipliesLicensesByNodesAndChargesWholeBlocks) {
  SubmittedJob j = job({"compose_gpus=A100-80G:2", "compose_mem=1536M"});
  j.min_nodes = 3;
  api::PoolSnapshot s = pool();
  Expected<SubmitChanges> c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:6,fabric_mem:384");
  EXPECT_EQ(c->tres_per_node, "gres/cgpu:2,gres/cmem:1");
  EXPECT_EQ(c->admin_comment, "composer: gpus=A100-80G:2 mem=1536M nodes=3");
  // Just over a block takes two, and two attach slots.
  c = review_submission(job({"compose_mem=129G"}), &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_mem:256");
  EXPECT_EQ(c->tres_per_node, "gres/cmem:2");
}

// The pool: 64G blocks, 4 memory attach slots per node. Six jobs of 1G each hold a
// block each, so Slurm's fabric_mem (256) starts four of them and the cmem GRES (4 a node)
// puts no fifth on a full node; counted in GiB (6 of 256) Slurm started all six.
TEST(Submit, SmallRequestsHoldAWholeBlock) {
  api::PoolSnapshot s = pool();
  s.mem.total = 4;
  s.mem.total_bytes = 4 * 64 * kGiB;
  s.mem.largest_bytes = 64 * kGiB;
  s.mem.max_node_slots = 4;
  Expected<SubmitChanges> c = review_submission(job({"compose_mem=1G"}), &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_mem:64");
  EXPECT_EQ(c->tres_per_node, "gres/cmem:1");
  // Five nodes of one block each: more blocks than the pool has, although 5G would fit.
  SubmittedJob j = job({"compose_mem=1G"});
  j.min_nodes = 5;
  Refusal why{};
  c = review_submission(j, &s, "", false, &why);
  ASSERT_FALSE(c);
  EXPECT_EQ(why, Refusal::kPool);
  EXPECT_EQ(c.error().message,
            "composer: --compose-mem=1G on 5 nodes takes 5 whole memory blocks of 64G (320G) but "
            "the pool holds 256G");
  // Without a snapshot the block size is unknown: the request in GiB, and one slot.
  c = review_submission(job({"compose_mem=1536M"}), nullptr, "no snapshot", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_mem:2");
  EXPECT_EQ(c->tres_per_node, "gres/cmem:1");
}

TEST(Submit, KeepsWhatTheUserAskedForAndAddsClassCaps) {
  SubmittedJob j = job({"compose_gpus=1", "workload=training"});
  j.licenses = "matlab:1";
  j.tres_per_node = "gres/gpu:1";
  j.admin_comment = "vip";
  api::PoolSnapshot s = pool();
  Expected<SubmitChanges> c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "matlab:1,fabric_gpu:1,training_gpu_cap:1");
  EXPECT_EQ(c->tres_per_node, "gres/gpu:1,gres/cgpu:1");
  EXPECT_EQ(c->admin_comment, "vip; composer: gpus=1 workload=training nodes=1");
}

TEST(Submit, JobsWithoutOptionsAreLeftAlone) {
  SubmittedJob j;
  j.licenses = "matlab:1";
  api::PoolSnapshot s = pool();
  Expected<SubmitChanges> c = review_submission(j, &s, "", true);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->composes);
}

Error refused(SubmittedJob j, const api::PoolSnapshot* s = nullptr) {
  api::PoolSnapshot p = pool();
  Expected<SubmitChanges> c = review_submission(j, s != nullptr ? s : &p, "", false);
  EXPECT_FALSE(c);
  return c ? Error{} : c.error();
}

// The node count is priced as Slurm's clients send it (observed from sbatch on Slurm 22.05),
// and the job is pinned to it.
TEST(Submit, PricesTheNodeCountTheJobWillGet) {
  const api::PoolSnapshot s = pool();
  auto priced = [&s](SubmittedJob j) -> uint32_t {
    Expected<SubmitChanges> c = review_submission(j, &s, "", false);
    EXPECT_TRUE(c) << c.error();
    return c ? c->nodes : 0;
  };
  SubmittedJob j = job({"compose_gpus=1"});
  EXPECT_EQ(priced(j), 1u);  // nothing given: one node
  j.min_nodes = 3;           // -N 3
  j.max_nodes = 3;
  EXPECT_EQ(priced(j), 3u);
  j = job({"compose_gpus=1"});
  j.num_tasks = 64;  // -n 64 --ntasks-per-node=8
  j.ntasks_per_node = 8;
  EXPECT_EQ(priced(j), 8u);
  j.num_tasks = 60;  // rounded up
  EXPECT_EQ(priced(j), 8u);
  j.min_nodes = 2;  // -w a,b -n 60 --ntasks-per-node=8: still 8
  EXPECT_EQ(priced(j), 8u);
  j = job({"compose_gpus=1"});
  j.num_tasks = 2;  // --ntasks-per-node=2 alone
  j.ntasks_per_node = 2;
  EXPECT_EQ(priced(j), 1u);
  j = job({"compose_gpus=1"});
  j.min_nodes = 2;  // -w a,b: a minimum only
  EXPECT_EQ(priced(j), 2u);
  j.num_tasks = 2;  // -w a,b -n 2
  EXPECT_EQ(priced(j), 2u);
  j = job({"compose_gpus=1"});
  j.num_tasks = 1;  // -n 1
  EXPECT_EQ(priced(j), 1u);
  j = job({"compose_gpus=1"});
  j.min_nodes = 3;  // -N 3 -n 64: Slurm places the tasks on the 3 nodes
  j.max_nodes = 3;
  j.num_tasks = 64;
  EXPECT_EQ(priced(j), 3u);
}

TEST(Submit, RefusesANodeCountThatIsNotFixed) {
  SubmittedJob j = job({"compose_gpus=1"});
  j.min_nodes = 1;
  j.max_nodes = 4;
  EXPECT_EQ(refused(j).message,
            "composer: -N 1-4: a composed job needs a fixed node count, since what every node "
            "attaches is priced per job; use -N 4 (or -N 1)");
  j = job({"compose_gpus=1"});
  j.num_tasks = 4;
  EXPECT_EQ(refused(j).message,
            "composer: -n 4 without -N may run on 1 to 4 nodes, and what every node attaches is "
            "priced per job: give the node count with -N (e.g. -N 1 -n 4) or --ntasks-per-node");
  j.min_nodes = 2;  // -w a,b -n 4
  EXPECT_EQ(refused(j).message,
            "composer: -n 4 without -N may run on 2 to 4 nodes, and what every node attaches is "
            "priced per job: give the node count with -N (e.g. -N 2 -n 4) or --ntasks-per-node");
  j = job({"compose_gpus=1"});
  j.het_job_offset = 1;
  EXPECT_EQ(refused(j).message,
            "composer: --compose-* in a heterogeneous job (component 1): composed jobs must be "
            "homogeneous; submit each component as its own job (with --dependency if one must "
            "wait for another)");
  // A job that composes nothing keeps whatever shape it has.
  j = job({"workload=training"});
  j.num_tasks = 4;
  j.het_job_offset = 0;
  const api::PoolSnapshot s = pool();
  EXPECT_TRUE(review_submission(j, &s, "", false));
}

TEST(Submit, RefusesMoreThanThePoolHolds) {
  SubmittedJob j = job({"compose_gpus=3"});
  j.min_nodes = 3;
  Error e = refused(j);
  EXPECT_EQ(e.code, ErrorCode::kInsufficient);
  EXPECT_EQ(e.message, "composer: --compose-gpus=3 on 3 nodes needs 9 GPUs but the pool holds 8");
  e = refused(job({"compose_gpus=H100:3"}));
  EXPECT_EQ(e.message, "composer: --compose-gpus=H100:3 needs 3 H100 GPUs but the pool holds 2");
  e = refused(job({"compose_mem=1T"}));
  EXPECT_EQ(e.message, "composer: --compose-mem=1T needs 1T but the pool holds 512G");
  j = job({"compose_nvme=2"});
  j.min_nodes = 3;
  EXPECT_EQ(refused(j).message,
            "composer: --compose-nvme=2 on 3 nodes needs 6 NVMe drives but the pool holds 4");
}

TEST(Submit, RefusesMoreThanAHostCanAttach) {
  EXPECT_EQ(refused(job({"compose_gpus=6"})).message,
            "composer: --compose-gpus=6: no host can attach more than 4 GPUs");
  EXPECT_EQ(refused(job({"compose_mem=384G"})).message,
            "composer: --compose-mem=384G: needs at least 3 memory blocks of at most 128G but "
            "no host can attach more than 2");
}

// A class's memory cap counts what Slurm is charged, whole blocks: a 1G job of a class capped
// at 64G holds all of it.
TEST(Submit, ClassCapsCountWholeBlocks) {
  api::PoolSnapshot s = pool();
  s.workload_classes[0].cap_licenses["mem"] = "training_mem_cap";
  s.workload_classes[0].max["mem"] = 192;
  Expected<SubmitChanges> c =
      review_submission(job({"compose_mem=1G", "workload=training"}), &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_mem:128,training_mem_cap:128");
  SubmittedJob j = job({"compose_mem=1G", "workload=training"});
  j.min_nodes = 2;
  EXPECT_EQ(refused(j, &s).message,
            "composer: workload class training may never hold more than 192 GiB of memory, the "
            "job asks for 256");
}

TEST(Submit, RefusesUnknownModelAndClass) {
  EXPECT_EQ(refused(job({"compose_gpus=V100:1"})).message,
            "composer: --compose-gpus=V100:1: the pool has no GPU of model 'V100' (models: "
            "A100-80G, H100)");
  EXPECT_EQ(refused(job({"compose_gpus=1", "workload=gaming"})).message,
            "composer: --workload=gaming: no such workload class (known: training, inference)");
  EXPECT_EQ(refused(job({"workload=gaming"})).message,
            "composer: --workload=gaming: no such workload class");
}

TEST(Submit, RefusesMoreThanTheClassCouldEverHold) {
  SubmittedJob j = job({"compose_gpus=4", "workload=training"});
  j.min_nodes = 2;
  EXPECT_EQ(refused(j).message,
            "composer: workload class training may never hold more than 6 GPUs, the job asks "
            "for 8");
}

TEST(Submit, RefusesHandMadePoolLicensesAndGres) {
  SubmittedJob j = job({"compose_gpus=1"});
  j.licenses = "fabric_gpu:4";
  Error e = refused(j);
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message.find("license 'fabric_gpu' is managed by the composer plugin"),
            std::string::npos);
  j = SubmittedJob{};
  j.licenses = "training_gpu_cap:1";
  EXPECT_NE(refused(j).message.find("'training_gpu_cap'"), std::string::npos);
  j = SubmittedJob{};
  j.tres_per_node = "gres:cgpu:2";
  EXPECT_NE(refused(j).message.find("GRES 'cgpu' is managed"), std::string::npos);
  // A model's license too, whether Slurm has it or not.
  j = SubmittedJob{};
  j.licenses = "fabric_gpu_h100:1";
  EXPECT_NE(refused(j).message.find("license 'fabric_gpu_h100' is managed"), std::string::npos);
}

// A job asking for a model holds the model's license beside fabric_gpu, where Slurm has it
// (the snapshot lists the model licenses composerd keeps in step); a job for any model, or a
// model whose license Slurm lacks, holds fabric_gpu alone.
TEST(Submit, AModelsJobHoldsTheModelsLicenseWhereSlurmHasIt) {
  api::PoolSnapshot s = pool();
  s.model_licenses = {"fabric_gpu_a100-80g"};
  SubmittedJob j = job({"compose_gpus=A100-80G:2", "workload=training"});
  j.min_nodes = 2;
  Expected<SubmitChanges> c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:4,fabric_gpu_a100-80g:4,training_gpu_cap:4");
  c = review_submission(job({"compose_gpus=H100:1"}), &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:1");
  c = review_submission(job({"compose_gpus=2"}), &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:2");
  // Remote licenses: Slurm names the pool's and the models' NAME@SERVER; the caps stay local.
  s.license_server = "composer";
  c = review_submission(job({"compose_gpus=A100-80G:1", "compose_nvme=1", "workload=training"}), &s,
                        "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses,
            "fabric_gpu@composer:1,fabric_gpu_a100-80g@composer:1,training_gpu_cap:1,"
            "fabric_nvme@composer:1");
  SubmittedJob by_hand = job({"compose_gpus=1"});
  by_hand.licenses = "fabric_gpu@composer:2";
  c = review_submission(by_hand, &s, "", false);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("license 'fabric_gpu@composer' is managed"), std::string::npos);
  s.license_server.clear();
  // Without a snapshot nothing is known of the models' licenses.
  c = review_submission(job({"compose_gpus=A100-80G:2"}), nullptr, "no snapshot", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:2");
}

// Slurm before 23.11 writes GRES as gres:NAME, later releases as gres/NAME; the glue says
// which, and what the plugin adds uses the running release's spelling.
TEST(Submit, WritesGresInTheRunningSlurmsSpelling) {
  SubmittedJob j = job({"compose_gpus=2", "compose_mem=1G", "compose_nvme=1"});
  j.gres_prefix = "gres:";
  j.tres_per_node = "gres:gpu:1";
  api::PoolSnapshot s = pool();
  Expected<SubmitChanges> c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->tres_per_node, "gres:gpu:1,gres:cgpu:2,gres:cmem:1,gres:cnvme:1");
}

// A slot GRES given by hand would let a job take attach slots without a composition (or hide
// one from the pool licenses): refused in every spelling and every tres_per_* field Slurm may
// hand over, whether or not the job also composes.
TEST(Submit, RefusesHandMadeSlotGresInEverySpelling) {
  api::PoolSnapshot s = pool();
  const std::vector<std::string> spellings = {"gres:cgpu:1",
                                              "gres/cgpu:1",
                                              "cgpu:1",
                                              "cgpu",
                                              "gres/cgpu",
                                              "gres:cgpu",
                                              "gres/cgpu:A100:1",
                                              "gres/cgpu=1",
                                              "gres/cnvme:2",
                                              "gres:cnvme:1",
                                              "cnvme",
                                              "gres/cmem:1",
                                              "gres:cmem:2",
                                              "cmem",
                                              "gres/gpu:1,gres/cgpu:1",
                                              "cpu:2;gres/cnvme:1"};
  for (const std::string& spelling : spellings) {
    for (int field = 0; field < 4; ++field) {
      for (bool composes : {false, true}) {
        SubmittedJob j = composes ? job({"compose_gpus=1"}) : SubmittedJob{};
        std::string* target[] = {&j.tres_per_node, &j.tres_per_job, &j.tres_per_socket,
                                 &j.tres_per_task};
        *target[field] = spelling;
        Expected<SubmitChanges> c = review_submission(j, &s, "", false);
        ASSERT_FALSE(c) << spelling << " in field " << field << " was accepted";
        EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
        const std::string name = spelling.find("cnvme") != std::string::npos  ? "cnvme"
                                 : spelling.find("cmem") != std::string::npos ? "cmem"
                                                                              : "cgpu";
        EXPECT_EQ(c.error().message, "composer: GRES '" + name +
                                         "' is managed by the composer plugin: ask with "
                                         "--compose-gpus, --compose-mem or --compose-nvme instead "
                                         "of --gres or --tres-per-*")
            << spelling;
      }
    }
  }
  // Other GRES and TRES whose names merely start like ours pass.
  for (const char* other : {"gres/cgpux:1", "gres:cgpu2:1", "gres/cmems:1", "cpu:4",
                            "license/cgpu:1", "gres/gpu:cgpu:1"}) {
    SubmittedJob j = job({"compose_gpus=1"});
    j.tres_per_task = other;
    Expected<SubmitChanges> c = review_submission(j, &s, "", false);
    EXPECT_TRUE(c) << other << ": " << c.error();
  }
}

TEST(Submit, RefusesBlockerReservationsRangesAndAlternatives) {
  SubmittedJob j = job({"compose_gpus=1"});
  j.reservation = "day_block_inference";
  EXPECT_NE(refused(j).message.find("reservation 'day_block_inference'"), std::string::npos);
  j = job({"compose_gpus=1"});
  j.min_nodes = 2;
  j.max_nodes = 4;
  EXPECT_NE(refused(j).message.find("fixed node count"), std::string::npos);
  j = job({"compose_gpus=1"});
  j.licenses = "a:1|b:1";
  EXPECT_NE(refused(j).message.find("alternative licenses"), std::string::npos);
}

TEST(Submit, SyntaxIsCheckedAgain) {
  Error e = refused(job({"compose_mem=lots"}));
  EXPECT_EQ(e.code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.message.rfind("composer: --compose-mem=lots: ", 0), 0u) << e.message;
}

TEST(Submit, WithoutSnapshotAcceptOrRefuseAsConfigured) {
  SubmittedJob j = job({"compose_gpus=64"});
  Expected<SubmitChanges> c = review_submission(j, nullptr, "no pool snapshot at /x", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:64");
  c = review_submission(j, nullptr, "no pool snapshot at /x", true);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(c.error().message.find("no pool snapshot at /x"), std::string::npos);
  EXPECT_NE(c.error().message.find("JobSubmitSnapshotMissing=refuse"), std::string::npos);
}

// A snapshot with a policy in force: classification rules, a DefaultClass, and an inference
// class whose GPU cap drops to 1 (2 for at most 12 hours at a stretch, 4 for at most 2 hours).
api::PoolSnapshot policy_pool(std::string default_class = "training") {
  api::PoolSnapshot s = pool();
  s.policy_id = 3;
  s.default_class = std::move(default_class);
  api::WorkloadClass& training = s.workload_classes[0];
  training.partitions = {"train"};
  training.accounts = {"ml"};
  api::WorkloadClass& inference = s.workload_classes[1];
  inference.partitions = {"infer", "gpu-small"};
  inference.qos = {"interactive"};
  inference.accounts = {"serving"};
  inference.cap_licenses = {{"gpu", "inference_gpu_cap"}, {"mem", "inference_mem_cap"}};
  inference.max = {{"gpu", 4}, {"mem", 256}};
  inference.min = {{"gpu", 1}, {"mem", 64}};
  inference.stretches = {{"gpu", {{2, 12 * 3600}, {4, 2 * 3600}}}, {"mem", {{256, 3600}}}};
  return s;
}

struct Placed {
  std::string partition, qos, account;
};

Expected<SubmitChanges> review(std::vector<std::string> options, Placed where,
                               const api::PoolSnapshot& s) {
  SubmittedJob j = job(std::move(options));
  j.partition = where.partition;
  j.qos = where.qos;
  j.account = where.account;
  return review_submission(j, &s, "", false);
}

TEST(Submit, ClassifiesJobsWithoutWorkloadAsComposerdDoes) {
  const api::PoolSnapshot s = policy_pool();
  Expected<SubmitChanges> c = review({"compose_gpus=1"}, {.partition = "infer"}, s);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->workload, "inference");
  EXPECT_EQ(c->workload_reason, "partition infer");
  EXPECT_EQ(c->licenses, "fabric_gpu:1,inference_gpu_cap:1");
  EXPECT_EQ(c->admin_comment, "composer: gpus=1 workload=inference nodes=1");
  // The prolog reads the class back as if the user had given --workload.
  ASSERT_EQ(c->spank_env_add.size(), 1u);
  std::vector<std::string> env = job({"compose_gpus=1"}).spank_env;
  env.push_back(c->spank_env_add[0]);
  Expected<JobOptions> back = options_from_spank_env(env);
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->workload, "inference");

  // Precedence: the first listed partition any class claims, then QOS, then account, then
  // DefaultClass.
  const std::pair<Placed, std::pair<const char*, const char*>> cases[] = {
      {{.partition = "debug,gpu-small,train"}, {"inference", "partition gpu-small"}},
      {{.partition = "train", .qos = "interactive"}, {"training", "partition train"}},
      {{.partition = "debug", .qos = "interactive", .account = "ml"},
       {"inference", "QOS interactive"}},
      {{.qos = "normal", .account = "serving"}, {"inference", "account serving"}},
      {{.partition = "debug", .account = "physics"}, {"training", "DefaultClass"}},
      {{}, {"training", "DefaultClass"}},
  };
  for (const auto& [where, want] : cases) {
    c = review({"compose_gpus=1"}, where, s);
    ASSERT_TRUE(c) << c.error();
    EXPECT_EQ(c->workload, want.first)
        << where.partition << "/" << where.qos << "/" << where.account;
    EXPECT_EQ(c->workload_reason, want.second);
  }
  // DefaultClass training has its own cap license.
  c = review({"compose_gpus=2"}, {.partition = "debug"}, s);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:2,training_gpu_cap:2");

  // --workload wins over every rule and needs no extra SPANK entry.
  c = review({"compose_gpus=1", "workload=training"}, {.partition = "infer"}, s);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->workload, "training");
  EXPECT_EQ(c->licenses, "fabric_gpu:1,training_gpu_cap:1");
  EXPECT_TRUE(c->spank_env_add.empty());
}

TEST(Submit, ClassRulesApplyTheClassCaps) {
  SubmittedJob j = job({"compose_gpus=3"});
  j.partition = "infer";
  j.min_nodes = 2;
  api::PoolSnapshot s = policy_pool();
  EXPECT_EQ(refused(j, &s).message,
            "composer: workload class inference may never hold more than 4 GPUs, the job asks "
            "for 6");
}

TEST(Submit, RefusesWhatAPlacementRuleCanNeverMeet) {
  api::PoolSnapshot s = policy_pool();
  api::WorkloadClass& training = s.workload_classes[0];
  training.placement = "spread";
  training.placement_level = "enclosure";
  training.placement_count = 2;
  s.gpu.domains = {{"enclosure", 2}};
  s.mem.domains = {{"enclosure", 2}};
  s.mem.max_node_slots = 4;
  // One GPU cannot sit in two enclosures.
  Expected<SubmitChanges> c = review({"compose_gpus=1"}, {.account = "ml"}, s);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.error().message,
            "composer: placement rule 'spread enclosure 2' of class training spreads a job's GPU "
            "over 2 enclosure domains, so a job asking for 1 GPU can never be placed");
  EXPECT_TRUE(review({"compose_gpus=2"}, {.account = "ml"}, s));
  // The pool's drives sit in one enclosure only.
  s.nvme.domains = {{"enclosure", 1}};
  c = review({"compose_gpus=2", "compose_nvme=2"}, {.account = "ml"}, s);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "composer: the pool holds NVMe in only 1 enclosure domain, fewer than the 2 that "
            "placement rule 'spread enclosure 2' of class training needs");
  // Memory takes a block from each enclosure: the nodes' attach slots must allow it.
  s.mem.max_node_slots = 1;
  c = review({"compose_mem=64G"}, {.account = "ml"}, s);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "composer: no node has more than 1 memory attach slot, but placement rule 'spread "
            "enclosure 2' of class training takes a block from each of 2 enclosure domains");
  // Another class, or a rule of another type, is not concerned.
  EXPECT_TRUE(review({"compose_gpus=1"}, {.partition = "infer"}, s));
  training.placement_type = "mem";
  EXPECT_TRUE(review({"compose_gpus=1"}, {.account = "ml"}, s));
  // avoid-shared needs the level to exist for the type asked.
  training.placement = "avoid-shared";
  training.placement_count = 0;
  training.placement_type.clear();
  s.gpu.domains.clear();
  c = review({"compose_gpus=1"}, {.account = "ml"}, s);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message,
            "composer: the pool holds no GPU in any enclosure domain, which placement rule "
            "'avoid-shared enclosure' of class training needs");
}

// The class's MemPolicy line (the snapshot carries it): a request over its cap is refused at
// submission with composerd's sentence; within it, or without a request, the job goes on as
// it is (composerd gives the default).
TEST(Submit, AMemoryPolicyOverTheClasssCapIsRefused) {
  api::PoolSnapshot s = policy_pool();
  api::WorkloadClass& training = s.workload_classes[0];
  training.mem_policy_default = "preferred";
  training.mem_policy_allow = {"preferred", "weighted"};
  training.mem_policy_line = 9;
  Refusal r = Refusal::kNoSnapshot;
  SubmittedJob j = job({"compose_mem=64G", "compose_mem_policy=bind"});
  j.account = "ml";
  Expected<SubmitChanges> c = review_submission(j, &s, "", false, &r);
  ASSERT_FALSE(c);
  EXPECT_EQ(r, Refusal::kPolicy);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.error().message,
            "composer: --compose-mem-policy=bind: workload class training allows only preferred "
            "or weighted (MemPolicy line 9 of the policy); ask for one of those, or leave the "
            "option out for the class's default (preferred)");
  EXPECT_TRUE(review({"compose_mem=64G", "compose_mem_policy=weighted:2:1"}, {.account = "ml"}, s));
  Expected<SubmitChanges> none = review({"compose_mem=64G"}, {.account = "ml"}, s);
  ASSERT_TRUE(none) << none.error();
  EXPECT_FALSE(none->options.mem_policy);  // not set here: composerd gives the default
  // Another class has no line: any policy.
  EXPECT_TRUE(review({"compose_mem=64G", "compose_mem_policy=bind"}, {.partition = "infer"}, s));
  // The snapshot carries the line as composerd wrote it.
  Expected<api::PoolSnapshot> back = api::snapshot_from_json(api::to_json(s));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->workload_classes[0].mem_policy_allow, training.mem_policy_allow);
  EXPECT_EQ(back->workload_classes[0].mem_policy_line, 9);
  EXPECT_EQ(back->workload_classes[0].mem_policy_default, "preferred");
}

TEST(Submit, UnclassifiedComposedJobsAreRefusedWithoutDefaultClass) {
  const api::PoolSnapshot s = policy_pool("");
  Expected<SubmitChanges> c = review({"compose_gpus=1"}, {.partition = "debug"}, s);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.error().message,
            "composer: the job names no workload class (--workload) and its partition, QOS and "
            "account match none, and the policy has no DefaultClass: use --workload with one of "
            "training, inference");
  // A job that composes nothing is not counted against any class.
  c = review({}, {.partition = "debug"}, s);
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->composes);
  // Matched by a rule it is accepted.
  c = review({"compose_gpus=1"}, {.account = "ml"}, s);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->workload, "training");
}

TEST(Submit, WithoutAPolicyJobsAreNotClassified) {
  // Classes from composer.conf's Workloads= (policy_id 0) carry no rules; even stale rules
  // are not applied.
  api::PoolSnapshot s = policy_pool();
  s.policy_id = 0;
  Expected<SubmitChanges> c = review({"compose_gpus=1"}, {.partition = "infer"}, s);
  ASSERT_TRUE(c) << c.error();
  EXPECT_TRUE(c->workload.empty());
  EXPECT_TRUE(c->spank_env_add.empty());
  EXPECT_EQ(c->licenses, "fabric_gpu:1");
  EXPECT_EQ(c->admin_comment, "composer: gpus=1 nodes=1");
}

TEST(Submit, RefusesJobsLongerThanTheStretchTheirAmountIsAllowed) {
  const api::PoolSnapshot s = policy_pool();
  auto with_limit = [](std::vector<std::string> options, std::optional<int64_t> limit_s,
                       uint32_t nodes = 1) {
    SubmittedJob j = job(std::move(options));
    j.time_limit_s = limit_s;
    j.min_nodes = nodes;
    return j;
  };
  const int64_t h = 3600;
  // Above the lowest cap (1) for longer than 12 hours: never starts.
  Error e = refused(with_limit({"compose_gpus=2", "workload=inference"}, 13 * h), &s);
  EXPECT_EQ(e.code, ErrorCode::kInsufficient);
  EXPECT_EQ(e.message,
            "composer: workload class inference may hold 2 GPUs for at most 12h at a stretch "
            "(at other times its cap is as low as 1 GPU), but the job's time limit is 13h: it "
            "could never start; ask for at most 1 GPU or a time limit of at most 12h");
  // Totals over the nodes count; the class may come from the rules.
  SubmittedJob j = with_limit({"compose_gpus=1"}, 12 * h + 60, 2);
  j.partition = "infer";
  EXPECT_NE(refused(j, &s).message.find("may hold 2 GPUs for at most 12h at a stretch"),
            std::string::npos);
  // 3 GPUs need the 4-GPU level (2 hours); 3 hours would fit 2 GPUs.
  EXPECT_EQ(refused(with_limit({"compose_gpus=3", "workload=inference"}, 3 * h), &s).message,
            "composer: workload class inference may hold 3 GPUs for at most 2h at a stretch (at "
            "other times its cap is as low as 1 GPU), but the job's time limit is 3h: it could "
            "never start; ask for at most 2 GPUs or a time limit of at most 2h");
  // Memory in GiB.
  EXPECT_EQ(refused(with_limit({"compose_mem=128G", "workload=inference"}, 90 * 60), &s).message,
            "composer: workload class inference may hold 128 GiB of memory for at most 1h at a "
            "stretch (at other times its cap is as low as 64 GiB of memory), but the job's time "
            "limit is 1h 30m: it could never start; ask for at most 64 GiB of memory or a time "
            "limit of at most 1h");

  // Accepted: exactly the stretch, at or below the lowest cap for any time, an unknown time
  // limit (NO_VAL or INFINITE: the partition decides later), a class without stretches.
  for (const SubmittedJob& ok : {with_limit({"compose_gpus=2", "workload=inference"}, 12 * h),
                                 with_limit({"compose_gpus=4", "workload=inference"}, 2 * h),
                                 with_limit({"compose_gpus=1", "workload=inference"}, 1000 * h),
                                 with_limit({"compose_gpus=4", "workload=inference"}, {}),
                                 with_limit({"compose_gpus=4", "workload=training"}, 1000 * h)}) {
    Expected<SubmitChanges> c = review_submission(ok, &s, "", false);
    EXPECT_TRUE(c) << c.error();
  }
}

// The memory policy is checked again where the job reaches slurmctld: sbatch's own check can
// be bypassed by anyone who talks to slurmctld directly.
TEST(Submit, AMemoryPolicyIsCheckedAgainAtSubmission) {
  const api::PoolSnapshot s = pool();
  Refusal r = Refusal::kNoSnapshot;
  Expected<SubmitChanges> c =
      review_submission(job({"compose_gpus=1", "compose_mem_policy=bind"}), &s, "", false, &r);
  ASSERT_FALSE(c);
  EXPECT_EQ(r, Refusal::kBadRequest);
  EXPECT_NE(c.error().message.find("--compose-mem-policy=bind: a memory policy places the job's "
                                   "composed CXL memory; give --compose-mem=SIZE with it"),
            std::string::npos)
      << c.error().message;
  c = review_submission(job({"compose_mem=1G", "compose_mem_policy=weighted:0:1"}), &s, "", false,
                        &r);
  ASSERT_FALSE(c);
  EXPECT_EQ(r, Refusal::kBadRequest);
  c = review_submission(job({"compose_mem=1G", "compose_mem_policy=interleave"}), &s, "", false,
                        &r);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->options.mem_policy->kind, MemPolicy::Kind::kInterleave);
}

// Each refusal says what kind it is, for the glue's Slurm error code (slurm-plugin/README.md,
// "Refusals"): a node range is not a GRES problem, an unknown class not a license problem.
TEST(Submit, EveryRefusalSaysItsKind) {
  auto kind = [](const SubmittedJob& j, const api::PoolSnapshot* s, bool refuse = false) {
    Refusal r = Refusal::kNoSnapshot;
    Expected<SubmitChanges> c = review_submission(j, s, "no snapshot", refuse, &r);
    EXPECT_FALSE(c) << "accepted";
    return r;
  };
  const api::PoolSnapshot s = pool();
  const api::PoolSnapshot policy = policy_pool("");
  SubmittedJob j = job({"compose_gpus=two"});
  EXPECT_EQ(kind(j, &s), Refusal::kBadRequest);
  j = job({"compose_gpus=1", "workload=bad class"});
  EXPECT_EQ(kind(j, &s), Refusal::kBadWorkload);
  j = job({"compose_gpus=two", "workload=bad class"});  // the first named: --compose-gpus
  EXPECT_EQ(kind(j, &s), Refusal::kBadRequest);
  EXPECT_EQ(kind(job({"compose_gpus=1", "workload=gaming"}), &s), Refusal::kBadWorkload);
  EXPECT_EQ(kind(job({"workload=gaming"}), &s), Refusal::kBadWorkload);
  j = job({"compose_gpus=1"});
  j.licenses = "fabric_gpu:4";
  EXPECT_EQ(kind(j, &s), Refusal::kLicenses);
  j = job({"compose_gpus=1"});
  j.licenses = "a:1|b:1";
  EXPECT_EQ(kind(j, &s), Refusal::kLicenses);
  j = job({"compose_gpus=1"});
  j.tres_per_node = "gres/cgpu:1";
  EXPECT_EQ(kind(j, &s), Refusal::kGres);
  j = job({"compose_gpus=1"});
  j.min_nodes = 2;
  j.max_nodes = 4;
  EXPECT_EQ(kind(j, &s), Refusal::kNodeCount);
  j = job({"compose_gpus=1"});
  j.num_tasks = 4;
  EXPECT_EQ(kind(j, &s), Refusal::kNodeCount);
  j = job({"compose_gpus=1"});
  j.het_job_offset = 0;
  EXPECT_EQ(kind(j, &s), Refusal::kHetJob);
  EXPECT_EQ(kind(job({"compose_gpus=6"}), &s), Refusal::kPool);
  EXPECT_EQ(kind(job({"compose_gpus=V100:1"}), &s), Refusal::kPool);
  EXPECT_EQ(kind(job({"compose_mem=1T"}), &s), Refusal::kPool);
  j = job({"compose_gpus=4", "workload=training"});
  j.min_nodes = 2;
  EXPECT_EQ(kind(j, &s), Refusal::kPolicy);
  j = job({"compose_gpus=1"});
  j.partition = "debug";  // no class rule matches, and no DefaultClass
  EXPECT_EQ(kind(j, &policy), Refusal::kPolicy);
  j = job({"compose_gpus=4", "workload=inference"});
  j.time_limit_s = 3 * 3600;
  const api::PoolSnapshot stretches = policy_pool();
  EXPECT_EQ(kind(j, &stretches), Refusal::kPolicy);
  j = job({"compose_gpus=1"});
  j.reservation = "day_block_inference";
  EXPECT_EQ(kind(j, &s), Refusal::kReservation);
  EXPECT_EQ(kind(job({"compose_gpus=1"}), nullptr, true), Refusal::kNoSnapshot);
}

// --compose-gpus=0 and --compose-mem=0 alike ask for nothing: the job is left alone.
TEST(Submit, ZeroOfEveryResourceComposesNothing) {
  const api::PoolSnapshot s = pool();
  for (const char* zero : {"compose_gpus=0", "compose_mem=0", "compose_mem=0G", "compose_nvme=0"}) {
    Expected<SubmitChanges> c = review_submission(job({zero}), &s, "", true);
    ASSERT_TRUE(c) << zero << ": " << c.error();
    EXPECT_FALSE(c->composes) << zero;
    EXPECT_EQ(c->licenses, "") << zero;
  }
  Expected<SubmitChanges> c =
      review_submission(job({"compose_gpus=1", "compose_mem=0"}), &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:1");
  EXPECT_EQ(c->admin_comment, "composer: gpus=1 nodes=1");
}

}  // namespace
}  // namespace composer::slurm
