// The request pipeline every composerd route goes through (composer/server/src/route.h),
// driven over loopback HTTP; and the policy text's digest.
#include "route.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "composer/api/codec.h"
#include "policy_keeper.h"

namespace composer::server {
namespace {

class RouteTest : public ::testing::Test {
 protected:
  RouteTest() : auth_("/nonexistent/munge.socket", {}), routes_(router_, auth_) {
    // Echoes what the handler read, so that each case shows what the pipeline handed over.
    routes_.add("GET", "/typed", Access::anyone(), {"n", "t", "job", "c", "s", "req"},
                [](const Call& call) -> Expected<Json::Value> {
                  auto n = call.number("n", 10);
                  if (!n) return n.error();
                  auto t = call.time_ms("t");
                  if (!t) return t.error();
                  auto job = call.job("job");
                  if (!job) return job.error();
                  auto c = call.choice<int>(
                      "c",
                      [](std::string_view v) {
                        return v == "a"   ? std::optional<int>(1)
                               : v == "b" ? std::optional<int>(2)
                                          : std::nullopt;
                      },
                      "a, b");
                  if (!c) return c.error();
                  if (call.text("req")) {
                    auto r = call.required_time_ms("t");
                    if (!r) return r.error();
                  }
                  Json::Value out(Json::objectValue);
                  out["n"] = static_cast<Json::UInt64>(n->value_or(99));
                  out["t"] = static_cast<Json::Int64>(t->value_or(-1));
                  out["job"] = job->value_or(0);
                  out["c"] = c->value_or(0);
                  out["s"] = call.text("s").value_or("(none)");
                  return out;
                });
    routes_.add("POST", "/none", Access::anyone(), {}, [](const Call&) -> Expected<Json::Value> {
      return Json::Value(Json::objectValue);
    });
    routes_.add("GET", "/user", Access::user(), {},
                [](const Call&) -> Expected<Json::Value> { return Json::Value("reached"); });
    routes_.add(
        "GET", R"(/items/(\d+))", Access::anyone(), {},
        [](const Call& call) -> Expected<Json::Value> { return Json::Value(call.match(1)); });
    routes_.add_text("/text", Access::anyone(), {}, "text/plain",
                     [](const Call&) { return std::string("hello\n"); });
    routes_.add("GET", "/throws", Access::anyone(), {},
                [](const Call&) -> Expected<Json::Value> { throw std::runtime_error("boom"); });
    // The routes behind composerd's own front door, on any free loopback port.
    door_ = std::make_unique<FrontDoor>(
        FrontDoorLimits{},
        [this](HttpRequest& req, const HttpReply& reply) { router_.answer(req, reply); },
        &Router::refusal, [](const HttpRequest&, const HttpResponse&) {});
    if (auto s = door_->bind("127.0.0.1", 0); !s) throw std::runtime_error(s.error().message);
    thread_ = std::thread([this] { door_->run(); });
  }
  ~RouteTest() override {
    door_->stop();
    thread_.join();
  }

  httplib::Result get(const std::string& path) {
    httplib::Client cli("127.0.0.1", door_->port());
    return cli.Get(path);
  }

  // The error message of a refused GET, after checking its status.
  std::string refusal(const std::string& path, int status = 400) {
    auto r = get(path);
    if (!r) return "(no answer)";
    EXPECT_EQ(r->status, status) << path << " -> " << r->body;
    auto json = api::parse_json(r->body);
    if (!json) return "(not JSON) " + r->body;
    return (*json)["error"]["message"].asString();
  }

  Authenticator auth_;
  Router router_;
  RoutePipeline routes_;
  std::unique_ptr<FrontDoor> door_;
  std::thread thread_;
};

TEST_F(RouteTest, HandsTheHandlerTypedParameters) {
  auto r = get("/typed?n=7&t=1700000000000&job=4711&c=b&s=a%20b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  auto v = api::parse_json(r->body);
  ASSERT_TRUE(v.ok()) << r->body;
  EXPECT_EQ((*v)["n"].asUInt64(), 7u);
  EXPECT_EQ((*v)["t"].asInt64(), 1700000000000);
  EXPECT_EQ((*v)["job"].asUInt(), 4711u);
  EXPECT_EQ((*v)["c"].asInt(), 2);
  EXPECT_EQ((*v)["s"].asString(), "a b");

  auto none = get("/typed");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 200);
  auto d = api::parse_json(none->body);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)["n"].asUInt64(), 99u);
  EXPECT_EQ((*d)["t"].asInt64(), -1);
  EXPECT_EQ((*d)["s"].asString(), "(none)");
}

TEST_F(RouteTest, RefusesUnknownQueryParametersNamingTheAllowedOnes) {
  EXPECT_EQ(refusal("/typed?n=1&color=red"),
            "unknown query parameter 'color' (allowed: n, t, job, c, s, req)");
  EXPECT_EQ(refusal("/items/3?x=1"), "unknown query parameter 'x' (this endpoint takes none)");
}

TEST_F(RouteTest, OneWordingForEveryBadNumber) {
  EXPECT_EQ(refusal("/typed?n=abc"), "n=abc: expected a whole number from 0 to 10");
  EXPECT_EQ(refusal("/typed?n=11"), "n=11: expected a whole number from 0 to 10");
  EXPECT_EQ(refusal("/typed?n=-1"), "n=-1: expected a whole number from 0 to 10");
  EXPECT_EQ(refusal("/typed?n="), "n=: expected a whole number from 0 to 10");
  EXPECT_EQ(refusal("/typed?n=%2B1"), "n=+1: expected a whole number from 0 to 10");
  EXPECT_EQ(refusal("/typed?n=99999999999999999999999"),
            "n=99999999999999999999999: expected a whole number from 0 to 10");
  EXPECT_EQ(refusal("/typed?job=0"), "job=0: expected a whole number from 1 to 4294967294");
  EXPECT_EQ(refusal("/typed?job=4294967295"),
            "job=4294967295: expected a whole number from 1 to 4294967294");
  EXPECT_EQ(refusal("/typed?t=yesterday"),
            "t=yesterday: expected a time in milliseconds since the epoch (a whole number from 0 "
            "to 4503599627370496)");
  EXPECT_EQ(refusal("/typed?req=1"), "t: missing; give a time in milliseconds since the epoch");
  EXPECT_EQ(refusal("/typed?c=z"), "c: 'z' is not one of a, b");
}

TEST_F(RouteTest, OnlyTheQueryStringCounts) {
  httplib::Client cli("127.0.0.1", door_->port());
  auto r = cli.Post("/none", "color=red", "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(RouteTest, AUserRouteWantsACredential) {
  auto r = get("/user");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("\"unauthenticated\""), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("reached"), std::string::npos) << r->body;
}

TEST_F(RouteTest, PathCapturesTextAndJsonErrorsForTheRest) {
  auto item = get("/items/42");
  ASSERT_TRUE(item);
  EXPECT_EQ(item->body, "\"42\"");
  auto text = get("/text");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 200);
  EXPECT_EQ(text->body, "hello\n");
  EXPECT_EQ(text->get_header_value("Content-Type"), "text/plain");
  EXPECT_EQ(refusal("/nothing-here", 404), "no such endpoint: GET /nothing-here (see docs/API.md)");
  EXPECT_EQ(refusal("/throws", 500), "internal error: boom");
}

TEST(PolicyDigest, IsTheLowerCaseHexSha256OfTheText) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace composer::server
