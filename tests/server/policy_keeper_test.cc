// The time-of-day policy inside composerd, on a real composition service (SQLite file, sim
// fabric): what apply stores and when it stores nothing, the classes composer.conf allows, the
// cap checked at compose time by the window in force, and the version a restart loads.
#include "policy_keeper.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "service_fixture.h"

namespace composer::server {
namespace {

using ::testing::HasSubstr;

// Weekdays 08:00-20:00 UTC training may hold 6 GPUs, otherwise 2.
constexpr char kPolicy[] =
    "TimeZone=UTC\n"
    "Window=day Days=Mon-Fri Start=08:00 End=20:00\n"
    "Class=training\n"
    "Limit=training Window=day Gpus=6\n"
    "Limit=training Window=Default Gpus=2\n";

// The fixture's clock (2023-11-14T22:13:20Z, a Tuesday) is in the night; ten hours on is
// Wednesday 08:13, in the day window.
constexpr int64_t kToTheDay = 10LL * 3600 * 1000;

class PolicyKeeperTest : public testing::ServiceTest {
 protected:
  std::unique_ptr<PolicyKeeper> keeper(std::vector<std::string> workloads = {}) {
    auto k = std::make_unique<PolicyKeeper>(*store_, *pool_, clock_, std::move(workloads));
    EXPECT_TRUE(k->load().ok());
    return k;
  }

  static api::PolicyBody body(const std::string& text, bool dry_run = false) {
    return api::PolicyBody{.file = "day.policy", .text = text, .dry_run = dry_run};
  }

  Expected<Composition> compose(uint32_t job_id, uint32_t gpus) {
    return service_->compose(job(job_id, "n1", Request{.gpus = gpus}));
  }

  const Caller admin_{.uid = 0, .gid = 0, .admin = true, .composer = true};
};

TEST_F(PolicyKeeperTest, ApplyStoresANewTextOnceAndADryRunStoresNothing) {
  auto k = keeper();
  auto dry = k->apply(body(kPolicy, true), admin_);
  ASSERT_TRUE(dry.ok()) << dry.error();
  EXPECT_FALSE(dry->changed);
  EXPECT_EQ(dry->policy.id, 0);
  auto none = k->current();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  auto first = k->apply(body(kPolicy), admin_);
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_TRUE(first->changed);
  EXPECT_EQ(first->policy.id, 1);
  EXPECT_EQ(first->policy.file, "day.policy");
  EXPECT_EQ(first->policy.sha256, sha256_hex(kPolicy));

  // The same text again: the version in force, nothing stored.
  auto again = k->apply(body(kPolicy), admin_);
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(again->policy.id, 1);
  auto history = k->history(10);
  ASSERT_TRUE(history.ok());
  EXPECT_EQ(history->size(), 1u);
}

TEST_F(PolicyKeeperTest, ApplyRefusesAClassComposerConfDoesNotAllowAndStoresNothing) {
  auto k = keeper({"inference"});
  auto refused = k->apply(body(kPolicy), admin_);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("training"));
  auto current = k->current();
  ASSERT_TRUE(current.ok());
  EXPECT_FALSE(current->has_value());
  auto empty = k->apply(body(""), admin_);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().message, "text: the policy file is empty");
}

TEST_F(PolicyKeeperTest, AComposeOverTheCapOfTheWindowInForceIsRefused) {
  auto k = keeper();
  pool_->set_admission_check(k->admission_check());
  ASSERT_TRUE(k->apply(body(kPolicy), admin_).ok());

  ASSERT_TRUE(compose(1, 2).ok());
  auto over = compose(2, 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kInsufficient);
  EXPECT_THAT(over.error().message,
              HasSubstr("workload class training may hold at most 2 GPUs in window Default"));
  EXPECT_EQ(free_of(DeviceType::kGpu), 6u);

  clock_.advance_ms(kToTheDay);
  auto by_day = compose(2, 4);
  ASSERT_TRUE(by_day.ok()) << by_day.error();
  EXPECT_FALSE(compose(3, 1).ok());
}

// A class's MemPolicy line at compose time: the default for a job that asks for none, the job's
// own within the cap, a refusal over it; the composition and its first event carry the policy.
TEST_F(PolicyKeeperTest, AComposeGetsItsClasssMemoryPolicyAndIsRefusedOverItsCap) {
  auto k = keeper();
  pool_->set_admission_check(k->admission_check());
  ASSERT_TRUE(k->apply(body(std::string(kPolicy) +
                            "MemPolicy=training Default=interleave Allow=preferred,interleave\n"),
                       admin_)
                  .ok());
  const Request mem{.mem_bytes = 8 * kGiB};
  auto by_default = service_->compose(job(1, "n1", mem));
  ASSERT_TRUE(by_default.ok()) << by_default.error();
  EXPECT_EQ(by_default->mem_policy, "interleave");
  auto stored = store_->composition(by_default->id);
  ASSERT_TRUE(stored.ok()) << stored.error();
  EXPECT_EQ(stored->mem_policy, "interleave");
  auto events = store_->events({.job_id = 1});
  ASSERT_TRUE(events.ok() && !events->empty());
  EXPECT_EQ(events->front().detail, "mem_policy=interleave");

  ComposeInput own = job(2, "n1", mem);
  own.mem_policy = "preferred";
  auto asked = service_->compose(own);
  ASSERT_TRUE(asked.ok()) << asked.error();
  EXPECT_EQ(asked->mem_policy, "preferred");

  ComposeInput over = job(3, "n1", mem);
  over.mem_policy = "bind";
  auto refused = service_->compose(over);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(refused.error().message,
              HasSubstr("policy: --compose-mem-policy=bind: workload class training allows only "
                        "preferred or interleave (MemPolicy line 6 of the policy)"));
  // A composition without memory has no memory policy.
  auto gpus = compose(4, 1);
  ASSERT_TRUE(gpus.ok()) << gpus.error();
  EXPECT_EQ(gpus->mem_policy, "");
}

// Without a policy the job's own memory policy stands, preferred where it gave none.
TEST_F(PolicyKeeperTest, WithoutAPolicyTheJobsMemoryPolicyStands) {
  ComposeInput own = job(1, "n1", Request{.mem_bytes = 8 * kGiB});
  own.mem_policy = "weighted:3:1";
  auto asked = service_->compose(own);
  ASSERT_TRUE(asked.ok()) << asked.error();
  EXPECT_EQ(asked->mem_policy, "weighted:3:1");
  auto plain = service_->compose(job(2, "n1", Request{.mem_bytes = 8 * kGiB}));
  ASSERT_TRUE(plain.ok()) << plain.error();
  EXPECT_EQ(plain->mem_policy, "preferred");
}

TEST_F(PolicyKeeperTest, ARestartLoadsTheStoredVersionAndEnforcesIt) {
  ASSERT_TRUE(keeper()->apply(body(kPolicy), admin_).ok());
  auto k = keeper();  // a new keeper on the same store, as at a restart
  auto current = k->current();
  ASSERT_TRUE(current.ok());
  ASSERT_TRUE(current->has_value());
  EXPECT_EQ((*current)->id, 1);
  auto windows = k->windows_in_force();
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].first, "training");
  EXPECT_EQ(windows[0].second, "Default");
  pool_->set_admission_check(k->admission_check());
  EXPECT_FALSE(compose(1, 3).ok());
}

}  // namespace
}  // namespace composer::server
