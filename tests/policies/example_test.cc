// contrib/policy.example must stay valid: admins copy it.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "composer/policies/compile_plan.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/validate.h"
#include "policy_fixture.h"

namespace composer::policies {
namespace {

TEST(ExamplePolicy, ParsesValidatesAndCompiles) {
  const std::string path = std::string(COMPOSER_SOURCE_DIR) + "/contrib/policy.example";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  const Policy p = testing::parse_ok(text.str(), "policy.example");
  const Validation v = validate(p, testing::kPool);
  EXPECT_TRUE(v.ok()) << v.to_string();
  EXPECT_TRUE(v.warnings.empty()) << v.to_string();
  // The classic case: training holds most GPUs on weekdays by day, inference the rest.
  const Evaluator eval(p, testing::kPool);
  const int64_t monday_noon = testing::local(p.time_zone, 2024, 3, 4, 12);
  const int64_t saturday_noon = testing::local(p.time_zone, 2024, 3, 9, 12);
  EXPECT_GT(eval.caps_in_force(monday_noon, "training")->caps.get(DeviceType::kGpu),
            eval.caps_in_force(monday_noon, "inference")->caps.get(DeviceType::kGpu));
  EXPECT_LT(eval.caps_in_force(saturday_noon, "training")->caps.get(DeviceType::kGpu),
            eval.caps_in_force(saturday_noon, "inference")->caps.get(DeviceType::kGpu));
  const Plan plan = compile_plan(p, testing::kPool, monday_noon);
  EXPECT_FALSE(plan.reservations.empty());
}

}  // namespace
}  // namespace composer::policies
