// The time-of-day policy in a real composerd: stored with its history, read by anyone,
// changed only by admins, enforced again at compose time, published in the pool snapshot, and
// applied by composerctl through scontrol (a stand-in that records the calls).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <ctime>
#include <fstream>
#include <regex>

#include "composer/api/codec.h"
#include "composer/api/snapshot.h"
#include "composer/common/units.h"
#include "composerd_process.h"
#include "day_night_policy.h"
#include "raw_request.h"

namespace composer::testing {
namespace {

// Always open, so caps do not depend on when the test runs: training 4 GPUs, inference 2
// GPUs and 128 GiB of memory.
constexpr char kAlways[] =
    "TimeZone=UTC\n"
    "Window=always Start=00:00 End=24:00\n"
    "Class=training\n"
    "Class=inference\n"
    "DefaultClass=inference\n"
    "Limit=training Window=always Gpus=4\n"
    "Limit=inference Window=always Gpus=2 Mem=128G\n";

constexpr int64_t kMonday2100 = 1796072400;  // 2026-11-30T21:00:00Z, a Monday
constexpr int64_t kTuesday0800 = 1796112000;
constexpr int64_t kMonday1000 = 1796032800;

api::ComposeBody body(uint32_t gpus, std::string workload, uint64_t mem = 0) {
  return api::ComposeBody{.owner = {.uid = 1000,
                                    .user = "alice",
                                    .account = "physics",
                                    .workload = std::move(workload)},
                          .request = Request{.gpus = gpus, .mem_bytes = mem}};
}

class PolicyTest : public ::testing::Test {
 protected:
  PolicyTest() : daemon_("Workloads=training,inference\n") {}

  client::Client client() const { return daemon_.client(); }

  api::PolicyApplied apply(const std::string& text, bool dry_run = false) {
    auto a = client().put_policy({.file = "test.policy", .text = text, .dry_run = dry_run});
    EXPECT_TRUE(a.ok()) << a.error();
    return a.ok() ? *a : api::PolicyApplied{};
  }

  RawAnswer raw(const std::string& method, const std::string& path, const std::string& b = "") {
    const auto url = daemon_.url();
    const int port = std::stoi(url.substr(url.rfind(':') + 1));
    return raw_request("127.0.0.1", port, daemon_.munge_socket(), method, path, b, true);
  }

  // A file anyone may read (composerctl may run as another user).
  std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = files_.file(name);
    std::ofstream(path) << text;
    chmod(files_.path().c_str(), 0755);
    chmod(path.c_str(), 0644);
    return path;
  }

  ComposerdProcess daemon_;
  test_support::TempDir files_{"composer-policy"};
};

TEST_F(PolicyTest, VersionsKeepWhoWhenAndAHashAndTheSameTextTwiceChangesNothing) {
  auto first = apply(kAlways);
  EXPECT_TRUE(first.changed);
  EXPECT_EQ(first.policy.id, 1);
  EXPECT_EQ(first.policy.user, "root");
  EXPECT_EQ(first.policy.uid, 0u);
  EXPECT_EQ(first.policy.file, "test.policy");
  EXPECT_GT(first.policy.applied_ms, 0);
  const auto sum = run_command("printf '%s' '" + std::string(kAlways) + "' | sha256sum");
  EXPECT_EQ(first.policy.sha256, sum.out.substr(0, 64));

  auto again = apply(kAlways);
  EXPECT_FALSE(again.changed);
  EXPECT_EQ(again.policy.id, 1);

  auto second = apply(kDayNight);
  EXPECT_TRUE(second.changed);
  EXPECT_EQ(second.policy.id, 2);

  auto history = client().policy_history();
  ASSERT_TRUE(history.ok()) << history.error();
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[0].id, 2);
  EXPECT_EQ((*history)[0].text, kDayNight);
  EXPECT_EQ((*history)[1].text, kAlways);
  auto newest = client().policy_history(1);
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->size(), 1u);
  auto shown = client().policy();
  ASSERT_TRUE(shown.ok()) << shown.error();
  EXPECT_EQ(shown->id, 2);
  EXPECT_EQ(shown->text, kDayNight);
}

TEST_F(PolicyTest, ADryRunStoresNothing) {
  auto trial = apply(kAlways, true);
  EXPECT_FALSE(trial.changed);
  EXPECT_EQ(trial.policy.id, 0);
  auto shown = client().policy();
  ASSERT_FALSE(shown.ok());
  EXPECT_EQ(shown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(shown.error().message.find("no policy has been applied"), std::string::npos);
}

TEST_F(PolicyTest, BadPoliciesAreRefusedNamingTheLineAndTheRule) {
  auto above = client().put_policy(
      {.file = "big.policy",
       .text = std::string(kAlways) + "Limit=training Window=Default Gpus=99\n"});
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(above.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(above.error().message.find("big.policy line 8"), std::string::npos)
      << above.error().message;

  auto unknown_class = client().put_policy(
      {.file = "c.policy", .text = "Class=batch\nLimit=batch Window=Default Gpus=1\n"});
  ASSERT_FALSE(unknown_class.ok());
  EXPECT_NE(unknown_class.error().message.find("Workloads=training,inference"), std::string::npos)
      << unknown_class.error().message;

  auto raw_unknown = raw("PUT", "/v1/policy", R"({"text":"TimeZone=UTC\n","colour":"red"})");
  EXPECT_EQ(raw_unknown.status, 400);
  EXPECT_NE(raw_unknown.body.find("colour"), std::string::npos) << raw_unknown.body;
  EXPECT_FALSE(client().policy().ok());  // nothing was stored
}

TEST_F(PolicyTest, AnyoneReadsOnlyAdminsChange) {
  apply(kAlways);
  auto show = ctl(daemon_, "policy show", "nobody");
  EXPECT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("Limit=training Window=always Gpus=4"), std::string::npos) << show.out;
  auto history = ctl(daemon_, "policy history -P", "nobody");
  EXPECT_EQ(history.code, 0) << history.out;
  EXPECT_NE(history.out.find("1|"), std::string::npos) << history.out;

  const std::string file = write_file("n.policy", kDayNight);
  auto change = ctl(daemon_, "policy apply --dry-run " + file, "nobody",
                    "PATH=" + std::string(FAKE_SCONTROL_DIR) + ":/usr/sbin:/usr/bin:/bin");
  EXPECT_EQ(change.code, 1) << change.out;
  EXPECT_NE(change.out.find("only root and AdminUsers may change the policy"), std::string::npos)
      << change.out;
  auto shown = client().policy();
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->id, 1);
}

TEST_F(PolicyTest, ComposeIsRefusedAboveTheClassCapAndRecordsClassAndWindow) {
  apply(kAlways);
  auto c = client();
  auto first = c.compose(11, "n1", body(3, "training"));
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(first->owner.workload, "training");
  EXPECT_EQ(first->window, "always");

  auto over = c.compose(12, "n1", body(2, "training"));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kInsufficient);
  const std::string& why = over.error().message;
  EXPECT_NE(why.find("job 12 on node n1: workload class training may hold at most 4 GPUs in "
                     "window always"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("; it holds 3 GPUs and this composition asks for 2 GPUs"), std::string::npos)
      << why;

  // Exactly the cap is fine, and other classes count separately.
  ASSERT_TRUE(c.compose(13, "n2", body(1, "training")).ok());
  ASSERT_TRUE(c.compose(14, "n2", body(2, "inference")).ok());
  // Memory is capped in GiB: 2 x 64 GiB is inference's whole 128 GiB.
  auto mem = c.compose(15, "n1", body(0, "inference", 128 * kGiB));
  ASSERT_TRUE(mem.ok()) << mem.error();
  auto mem_over = c.compose(16, "n1", body(0, "inference", 64 * kGiB));
  ASSERT_FALSE(mem_over.ok());
  EXPECT_NE(mem_over.error().message.find("128 GiB of memory"), std::string::npos)
      << mem_over.error().message;

  // A job without --workload falls in DefaultClass (inference), which is full.
  auto unnamed = c.compose(17, "n1", body(1, ""));
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.error().message.find("workload class inference"), std::string::npos)
      << unnamed.error().message;

  // Releasing frees the class's share.
  ASSERT_TRUE(c.release(11, "n1").ok());
  auto after = c.compose(12, "n1", body(2, "training"));
  ASSERT_TRUE(after.ok()) << after.error();

  auto events = c.events({.job = 11});
  ASSERT_TRUE(events.ok()) << events.error();
  ASSERT_FALSE(events->empty());
  for (const auto& e : *events) {
    EXPECT_EQ(e.owner.workload, "training") << e.kind;
    EXPECT_EQ(e.window, "always") << e.kind;
  }
}

// Memory caps count what Slurm's cap license is charged: the whole 64G blocks a composition
// takes. Two 1G compositions hold inference's 128 GiB; counted by what they asked (2 GiB),
// composerd would let a third through that Slurm's license had never started.
TEST_F(PolicyTest, MemoryCapsCountWholeBlocks) {
  apply(kAlways);
  auto c = client();
  ASSERT_TRUE(c.compose(21, "n1", body(0, "inference", kGiB)).ok());
  ASSERT_TRUE(c.compose(22, "n1", body(0, "inference", kGiB)).ok());
  auto over = c.compose(23, "n1", body(0, "inference", kGiB));
  ASSERT_FALSE(over.ok());
  const std::string& why = over.error().message;
  EXPECT_NE(why.find("may hold at most 128 GiB of memory in window always"), std::string::npos)
      << why;
  EXPECT_NE(why.find("; it holds 128 GiB of memory and this composition asks for 64 GiB of memory"),
            std::string::npos)
      << why;
}

// A refusal at compose time is in the ledger (kind "refused", with the reason), so
// `composerctl events --job` shows why nothing was composed.
TEST_F(PolicyTest, ARefusedComposeIsALedgerEventOfTheJob) {
  apply(kAlways);
  auto c = client();
  auto over = c.compose(28, "n1", body(5, "training"));
  ASSERT_FALSE(over.ok());
  auto none = c.compose(29, "n1", body(40, "inference"));  // more than the pool: the allocator
  ASSERT_FALSE(none.ok());
  auto events = c.events({.job = 28});
  ASSERT_TRUE(events.ok()) << events.error();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "refused");
  EXPECT_EQ((*events)[0].owner.user, "alice");
  EXPECT_EQ((*events)[0].owner.workload, "training");
  EXPECT_NE((*events)[0].detail.find("may hold at most 4 GPUs"), std::string::npos)
      << (*events)[0].detail;
  auto shown = ctl(daemon_, "events --job 29 -P");
  EXPECT_EQ(shown.code, 0) << shown.out;
  EXPECT_NE(shown.out.find("refused"), std::string::npos) << shown.out;
  // Nothing else changed: no composition, nothing attached.
  auto comps = c.compositions({});
  ASSERT_TRUE(comps.ok());
  EXPECT_TRUE(comps->empty());
}

TEST_F(PolicyTest, TheStoredPolicyIsEnforcedAfterARestart) {
  apply(kAlways);
  ASSERT_TRUE(client().compose(21, "n1", body(4, "training")).ok());
  daemon_.stop();
  daemon_.start();
  auto over = client().compose(22, "n1", body(1, "training"));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kInsufficient);
  auto shown = client().policy();
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->id, 1);
}

TEST_F(PolicyTest, TheSnapshotNamesCapLicensesHighestCapsAndBlockers) {
  const std::string path = daemon_.state_dir() + "/snapshot.json";
  auto before = api::read_snapshot(path);
  ASSERT_TRUE(before.ok()) << before.error();
  ASSERT_EQ(before->workload_classes.size(), 2u);
  EXPECT_TRUE(before->workload_classes[0].cap_licenses.empty());
  EXPECT_TRUE(before->blocker_reservations.empty());

  apply(kDayNight);
  auto snap = api::read_snapshot(path);
  ASSERT_TRUE(snap.ok()) << snap.error();
  const api::WorkloadClass* training = snap->workload_class("training");
  ASSERT_NE(training, nullptr);
  EXPECT_EQ(training->cap_licenses.at("gpu"), "training_gpu_cap");
  EXPECT_EQ(training->max.at("gpu"), 12u);
  EXPECT_EQ(training->max.count("mem"), 0u);  // memory is not capped
  const api::WorkloadClass* inference = snap->workload_class("inference");
  ASSERT_NE(inference, nullptr);
  EXPECT_EQ(inference->max.at("gpu"), 14u);
  auto has = [&](const std::string& name) {
    const auto& b = snap->blocker_reservations;
    return std::find(b.begin(), b.end(), name) != b.end();
  };
  EXPECT_TRUE(has("day_block_inference")) << api::to_text(api::to_json(*snap));
  bool training_blocker = false;
  for (const auto& b : snap->blocker_reservations) {
    training_blocker = training_blocker || b.find("_block_training") != std::string::npos;
  }
  EXPECT_TRUE(training_blocker) << api::to_text(api::to_json(*snap));
}

TEST_F(PolicyTest, TheSnapshotCarriesClassRulesAndTheStretchesEachCapHolds) {
  const std::string path = daemon_.state_dir() + "/snapshot.json";
  auto before = api::read_snapshot(path);
  ASSERT_TRUE(before.ok()) << before.error();
  EXPECT_EQ(before->policy_id, 0);  // no policy: job_submit classifies nothing

  apply(
      "TimeZone=UTC\n"
      "Window=day Days=Mon-Fri Start=08:00 End=20:00\n"
      "Class=training Partitions=train Accounts=ml\n"
      "Class=inference Partitions=infer,serve QOS=interactive\n"
      "DefaultClass=inference\n"
      "Limit=training Window=day Gpus=12\n"
      "Limit=training Window=Default Gpus=2\n"
      "Limit=inference Window=day Gpus=4\n"
      "Limit=inference Window=Default Gpus=14\n");
  auto snap = api::read_snapshot(path);
  ASSERT_TRUE(snap.ok()) << snap.error();
  EXPECT_EQ(snap->policy_id, 1);
  EXPECT_EQ(snap->default_class, "inference");
  const api::WorkloadClass* training = snap->workload_class("training");
  ASSERT_NE(training, nullptr);
  EXPECT_EQ(training->partitions, std::vector<std::string>{"train"});
  EXPECT_TRUE(training->qos.empty());
  EXPECT_EQ(training->accounts, std::vector<std::string>{"ml"});
  // Training: 12 GPUs only 08:00-20:00 on weekdays, 2 otherwise.
  EXPECT_EQ(training->min.at("gpu"), 2u);
  EXPECT_EQ(training->stretches.at("gpu"), (std::vector<api::CapStretch>{{12, 12 * 3600}}));
  const api::WorkloadClass* inference = snap->workload_class("inference");
  ASSERT_NE(inference, nullptr);
  EXPECT_EQ(inference->partitions, (std::vector<std::string>{"infer", "serve"}));
  EXPECT_EQ(inference->qos, std::vector<std::string>{"interactive"});
  // Inference: 14 GPUs at night and over the weekend, Fri 20:00 to Mon 08:00 the longest.
  EXPECT_EQ(inference->min.at("gpu"), 4u);
  EXPECT_EQ(inference->stretches.at("gpu"), (std::vector<api::CapStretch>{{14, 60 * 3600}}));
  EXPECT_EQ(inference->min.count("mem"), 0u);
}

TEST_F(PolicyTest, ExplainSaysWhetherWhenAndWhichLimitHolds) {
  auto none = client().explain_policy({.workload = "training", .gpus = 1, .time_limit_s = 60});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);

  apply(kDayNight);
  auto night = client().explain_policy(
      {.workload = "training", .gpus = 4, .time_limit_s = 3600, .start_ms = kMonday2100 * 1000});
  ASSERT_TRUE(night.ok()) << night.error();
  EXPECT_FALSE(night->admitted);
  ASSERT_TRUE(night->earliest_ms.has_value());
  EXPECT_EQ(*night->earliest_ms, kTuesday0800 * 1000);
  ASSERT_TRUE(night->hold.has_value());
  EXPECT_EQ(night->hold->window, "Default");
  EXPECT_EQ(night->hold->cap, 2u);
  EXPECT_EQ(night->hold->requested, 4u);
  EXPECT_FALSE(night->explanation.empty());

  auto day = client().explain_policy(
      {.workload = "training", .gpus = 4, .time_limit_s = 7200, .start_ms = kMonday1000 * 1000});
  ASSERT_TRUE(day.ok()) << day.error();
  EXPECT_TRUE(day->admitted) << day->explanation;
  EXPECT_EQ(day->windows, std::vector<std::string>{"day"});

  // Twelve hours from 10:00 runs into the night, where training may hold 2.
  auto long_run = client().explain_policy({.workload = "training",
                                           .gpus = 4,
                                           .time_limit_s = 12 * 3600,
                                           .start_ms = kMonday1000 * 1000});
  ASSERT_TRUE(long_run.ok());
  EXPECT_FALSE(long_run->admitted);

  // The same question through composerctl, in UTC so the times read as above.
  auto cli = ctl(daemon_,
                 "policy explain -P --workload training --gpus 4 --time-limit 1:00:00 --start "
                 "2026-11-30T21:00",
                 "", "TZ=UTC");
  EXPECT_EQ(cli.code, 0) << cli.out;
  EXPECT_NE(cli.out.find("training|no|2026-12-01T08:00:00|"), std::string::npos) << cli.out;
  auto bad = ctl(daemon_, "policy explain --workload training --time-limit soon");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--time-limit: 'soon' is not a time limit"), std::string::npos) << bad.out;
  auto unknown = raw("GET", "/v1/policy/explain?workload=training&gpus=1&time_limit_s=60&colour=1");
  EXPECT_EQ(unknown.status, 400);
  auto nobody_class = client().explain_policy({.workload = "batch", .time_limit_s = 60});
  ASSERT_FALSE(nobody_class.ok());
  EXPECT_EQ(nobody_class.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace composer::testing
