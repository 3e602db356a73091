#include "composer/slurm/submit.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(c->licenses, "fabric_gpu:2,fabric_mem:64,fabric_nvme:1");
  EXPECT_EQ(c->tres_per_node, "gres:cgpu:2,gres:cnvme:1");
  EXPECT_EQ(c->admin_comment, "composer: gpus=2 mem=64G nvme=1 nodes=1");
}

TEST(Submit, MultipliesLicensesByNodesAndRoundsMemoryUp) {
  SubmittedJob j = job({"compose_gpus=A100-80G:2", "compose_mem=1536M"});
  j.min_nodes = 3;
  api::PoolSnapshot s = pool();
  Expected<SubmitChanges> c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "fabric_gpu:6,fabric_mem:6");
  EXPECT_EQ(c->tres_per_node, "gres:cgpu:2");
  EXPECT_EQ(c->admin_comment, "composer: gpus=A100-80G:2 mem=1536M nodes=3");
}

TEST(Submit, KeepsWhatTheUserAskedForAndAddsClassCaps) {
  SubmittedJob j = job({"compose_gpus=1", "workload=training"});
  j.licenses = "matlab:1";
  j.tres_per_node = "gres:gpu:1";
  j.admin_comment = "vip";
  api::PoolSnapshot s = pool();
  Expected<SubmitChanges> c = review_submission(j, &s, "", false);
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->licenses, "matlab:1,fabric_gpu:1,training_gpu_cap:1");
  EXPECT_EQ(c->tres_per_node, "gres:gpu:1,gres:cgpu:1");
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

}  // namespace
}  // namespace composer::slurm
