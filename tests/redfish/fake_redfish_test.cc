// The fake Redfish service itself: what tests and shell scripts rely on.
#include "composer/testing/fake_redfish.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "composer/client/http.h"

namespace composer::testing {
namespace {

using ::testing::HasSubstr;

TEST(FakeRedfish, RefusesAMissingMockupFolderWithAPath) {
  FakeRedfishOptions o;
  o.mockups = "/nonexistent/redfish";
  auto s = FakeRedfish::start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("/nonexistent/redfish/public-composability"));
}

TEST(FakeRedfish, ServesDozensOfGpusInTwoZonesAndRequiresCredentials) {
  auto s = FakeRedfish::start();
  ASSERT_TRUE(s.ok()) << s;
  FakeRedfish& fake = **s;
  EXPECT_EQ(fake.generated("gpu").size(), 32u);
  client::HttpClient http;
  auto root = http.send(
      {.method = "GET", .url = fake.base_url() + "/redfish/v1", .body = "", .headers = {}});
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->status, 200);
  auto blocks = http.send({.method = "GET",
                           .url = fake.base_url() + "/redfish/v1/CompositionService/ResourceBlocks",
                           .body = "",
                           .headers = {}});
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(blocks->status, 401);
  EXPECT_THAT(blocks->body, HasSubstr("NoValidSession"));
}

TEST(FakeRedfish, ControlEndpointInjectsFaultsAndReportsState) {
  auto s = FakeRedfish::start();
  ASSERT_TRUE(s.ok()) << s;
  FakeRedfish& fake = **s;
  client::HttpClient http(client::HttpOptions{.retries = 0});
  auto r = http.send(
      {.method = "POST",
       .url = fake.base_url() + "/control/fault",
       .body =
           R"({"kind":"status","method":"GET","path":"/redfish/v1","status":500,"message":"boom"})",
       .headers = {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 204);
  auto root = http.send(
      {.method = "GET", .url = fake.base_url() + "/redfish/v1", .body = "", .headers = {}});
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->status, 500);
  EXPECT_THAT(root->body, HasSubstr("boom"));
  r = http.send({.method = "POST",
                 .url = fake.base_url() + "/control/fault",
                 .body = R"({"kind":"explode"})",
                 .headers = {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("not one of status, delay, reset, task_fails"));
  r = http.send({.method = "POST",
                 .url = fake.base_url() + "/control/health",
                 .body = R"({"block":"gpu-z1-00","health":"Sick"})",
                 .headers = {}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400);
  auto state = http.send(
      {.method = "GET", .url = fake.base_url() + "/control/state", .body = "", .headers = {}});
  ASSERT_TRUE(state.ok());
  EXPECT_THAT(state->body, HasSubstr("\"node01\":[\"compute-node01\"]"));
}

}  // namespace
}  // namespace composer::testing
