#include "composer/policies/classify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "policy_fixture.h"

namespace composer::policies {
namespace {

using ::testing::HasSubstr;
using testing::kDayNight;
using testing::parse_ok;

std::string class_of(const Policy& p, JobAttributes job) {
  auto c = classify(p, job);
  EXPECT_TRUE(c.ok()) << c.error();
  return c.ok() ? c->class_name : "";
}

TEST(Classification, WorkloadFlagBeatsPartitionBeatsQosBeatsAccountBeatsDefault) {
  const Policy p = parse_ok(kDayNight);
  // Every field points at a class; the flag decides.
  EXPECT_EQ(class_of(p, {"inference", "train", "long", "ml-research"}), "inference");
  // Without the flag the partition decides, even against QOS and account.
  EXPECT_EQ(class_of(p, {"", "serve", "long", "ml-research"}), "inference");
  EXPECT_EQ(class_of(p, {"", "train", "interactive", ""}), "training");
  // Without a listed partition: QOS before account.
  EXPECT_EQ(class_of(p, {"", "debug", "interactive", "ml-research"}), "inference");
  EXPECT_EQ(class_of(p, {"", "debug", "normal", "ml-research"}), "training");
  // Nothing matches: DefaultClass.
  auto c = classify(p, {"", "debug", "normal", "physics"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->class_name, "inference");
  EXPECT_EQ(c->reason, "DefaultClass");
}

TEST(Classification, SeveralPartitionsUseTheFirstListedOne) {
  const Policy p = parse_ok(kDayNight);
  EXPECT_EQ(class_of(p, {"", "debug,serve,train", "", ""}), "inference");
  auto c = classify(p, {"", "debug,train", "", ""});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reason, "partition train");
}

TEST(Classification, UnknownWorkloadAndNoDefaultAreRefusedWithTheKnownClasses) {
  const Policy p = parse_ok(kDayNight);
  auto bad = classify(p, {"video", "", "", ""});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message,
            "--workload=video names no workload class: the policy defines training, inference");
  const Policy no_default = parse_ok("Class=a Partitions=p\nClass=b\n");
  auto none = classify(no_default, {"", "q", "", ""});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.error().message, HasSubstr("no DefaultClass: use --workload with one of a, b"));
}

}  // namespace
}  // namespace composer::policies
