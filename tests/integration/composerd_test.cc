// composerd started for real on loopback with the sim fabric and a private munged, driven
// through the client library, raw HTTP and composerctl.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "composer/api/codec.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composerd_process.h"
#include "raw_request.h"

namespace composer::testing {
namespace {

api::ComposeBody body(Request r, uint32_t uid = 1000, std::string workload = "training") {
  return api::ComposeBody{
      .owner = {.uid = uid, .user = "alice", .account = "physics", .workload = std::move(workload)},
      .request = std::move(r)};
}

class ComposerdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { daemon_ = new ComposerdProcess(); }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void TearDown() override {
    // Every test leaves the pool as it found it.
    auto c = daemon_->client();
    auto live = c.compositions(client::CompositionQuery{.live = true});
    ASSERT_TRUE(live.ok()) << live.error();
    for (const auto& comp : *live) ASSERT_TRUE(c.release(comp.owner.job_id, comp.node).ok());
  }

  static std::map<std::string, uint32_t> free_by_type() {
    std::map<std::string, uint32_t> out;
    auto pool = daemon_->client().pool();
    EXPECT_TRUE(pool.ok());
    for (const auto& row : *pool) out[std::string(to_string(row.type))] += row.free;
    return out;
  }

  RawAnswer raw(const std::string& method, const std::string& path, const std::string& b = "",
                bool cred = true) {
    const auto url = daemon_->url();
    const int port = std::stoi(url.substr(url.rfind(':') + 1));
    return raw_request("127.0.0.1", port, daemon_->munge_socket(), method, path, b, cred);
  }

  static ComposerdProcess* daemon_;
};
ComposerdProcess* ComposerdTest::daemon_ = nullptr;

TEST_F(ComposerdTest, HealthAnswersWithoutCredential) {
  auto h = daemon_->client().health();
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h->status, "ok");
  EXPECT_EQ(h->fabric, "sim");
}

TEST_F(ComposerdTest, ComposeShowReleaseThroughTheClient) {
  auto c = daemon_->client();
  auto composed = c.compose(101, "n1", body(Request{.gpus = 2, .mem_bytes = 64 * kGiB}));
  ASSERT_TRUE(composed.ok()) << composed.error();
  EXPECT_EQ(composed->state, CompositionState::kReady);
  ASSERT_EQ(composed->devices.size(), 3u);
  for (const auto& d : composed->devices) {
    if (d.type == DeviceType::kGpu) {
      EXPECT_EQ(d.zone, "z1") << "n1's nearest zone";
      // What the node's prolog finds it by, from the fabric's inventory through the store.
      EXPECT_EQ(d.identity.pci_vendor, "0x10de") << d.id;
      EXPECT_EQ(d.identity.uuid.rfind("GPU-", 0), 0u) << d.id;
    }
    EXPECT_EQ(d.identity.serial.rfind("SIM", 0), 0u) << d.id;
  }
  EXPECT_EQ(free_by_type()["gpu"], 14u);

  auto again = c.compose(101, "n1", body(Request{.gpus = 2, .mem_bytes = 64 * kGiB}));
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(again->id, composed->id);
  EXPECT_EQ(free_by_type()["gpu"], 14u);

  auto shown = c.show(101, "n1");
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->id, composed->id);
  auto attached = c.devices(client::DeviceQuery{.node = "n1"});
  ASSERT_TRUE(attached.ok());
  EXPECT_EQ(attached->size(), 3u);

  auto released = c.release(101, "n1");
  ASSERT_TRUE(released.ok()) << released.error();
  ASSERT_TRUE(released->has_value());
  EXPECT_EQ((*released)->state, CompositionState::kReleased);
  auto twice = c.release(101, "n1");
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ((*twice)->id, composed->id);
  EXPECT_EQ(free_by_type()["gpu"], 16u);

  auto events = c.events(client::EventQuery{.job = 101});
  ASSERT_TRUE(events.ok());
  std::vector<std::string> kinds;
  for (const auto& e : *events) kinds.push_back(e.kind);
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"requested", "composing", "ready", "releasing", "released"}));
  EXPECT_EQ(events->at(2).devices.size(), 3u);
  EXPECT_EQ(events->at(2).owner.user, "alice");
  EXPECT_EQ(events->at(2).owner.workload, "training");
}

TEST_F(ComposerdTest, AJobsNodesAreComposedAndReleasedWithOneCallEach) {
  auto c = daemon_->client();
  api::ComposeBody job = body(Request{.gpus = 2});
  job.nodes = {"n1", "n2"};
  auto composed = c.compose_job(111, job);
  ASSERT_TRUE(composed.ok()) << composed.error();
  ASSERT_EQ(composed->size(), 2u);
  EXPECT_EQ((*composed)[0].node, "n1");
  EXPECT_EQ((*composed)[1].node, "n2");
  EXPECT_EQ(free_by_type()["gpu"], 12u);
  auto shown = c.show(111, "n2");
  ASSERT_TRUE(shown.ok()) << shown.error();
  EXPECT_EQ(shown->id, (*composed)[1].id);

  // One node the pool cannot serve: the job gets nothing, on any node.
  api::ComposeBody big = body(Request{.gpus = 9});
  big.nodes = {"n1", "n2"};
  auto refused = c.compose_job(112, big);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInsufficient) << refused.error();
  EXPECT_EQ(free_by_type()["gpu"], 12u);

  auto released = c.release_job(111);
  ASSERT_TRUE(released.ok()) << released.error();
  EXPECT_EQ(released->size(), 2u);
  EXPECT_EQ(free_by_type()["gpu"], 16u);
  auto twice = c.release_job(111);
  ASSERT_TRUE(twice.ok()) << twice.error();
  EXPECT_TRUE(twice->empty());

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"uid":1,"user":"a","request":{"gpus":1}})", "nodes: name the job's nodes"},
      {R"({"uid":1,"user":"a","request":{"gpus":1},"nodes":[]})", "nodes: name the job's nodes"},
      {R"({"uid":1,"user":"a","request":{"gpus":1},"nodes":["n1","n1"]})", "named twice"},
      {R"({"uid":1,"user":"a","request":{"gpus":1},"nodes":["n1","a b"]})", "nodes: node name"},
      {R"({"uid":1,"user":"a","request":{"gpus":1},"nodes":"n1"})", "nodes"},
  };
  for (const auto& [text, needle] : bad) {
    auto a = raw("PUT", "/v1/compositions/113", text);
    EXPECT_EQ(a.status, 400) << text << " -> " << a.body;
    EXPECT_NE(a.body.find(needle), std::string::npos) << a.body;
  }
  auto per_node = raw("PUT", "/v1/compositions/113/n1",
                      R"({"uid":1,"user":"a","request":{"gpus":1},"nodes":["n1"]})");
  EXPECT_EQ(per_node.status, 400) << per_node.body;
  EXPECT_NE(per_node.body.find("PUT /v1/compositions/113"), std::string::npos) << per_node.body;
  EXPECT_EQ(raw("PUT", "/v1/compositions/x", R"({"uid":1,"user":"a","request":{"gpus":1}})").status,
            400);
  EXPECT_EQ(free_by_type()["gpu"], 16u);
}

TEST_F(ComposerdTest, BadInputIsRefusedWith4xxAndChangesNothing) {
  const auto before = free_by_type();
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"/v1/compositions/5/n1", "{not json", 400, ""},
      {"/v1/compositions/5/n1", R"({"uid":1,"user":"a","request":{"gpus":1},"color":"red"})", 400,
       "color"},
      {"/v1/compositions/5/n1", R"({"uid":1,"user":"a","request":{"gpus":-1}})", 400, "gpus"},
      {"/v1/compositions/5/n1", R"({"uid":1,"user":"a","request":{"gpus":"two"}})", 400, "gpus"},
      {"/v1/compositions/5/n1",
       R"({"uid":1,"user":"a","request":{"mem_bytes":99999999999999999999}})", 400, "mem_bytes"},
      {"/v1/compositions/5/n1", R"({"uid":1,"user":"a","request":{}})", 400, "nothing"},
      {"/v1/compositions/5/n1", R"({"uid":1,"user":"a","workload":"mining","request":{"gpus":1}})",
       400, "mining"},
      {"/v1/compositions/5/nosuchnode", R"({"uid":1,"user":"a","request":{"gpus":1}})", 404,
       "nosuchnode"},
      {"/v1/compositions/5/n2", R"({"uid":1,"user":"a","request":{"gpus":9}})", 409, ""},
      {"/v1/compositions/0/n1", R"({"uid":1,"user":"a","request":{"gpus":1}})", 400, "job id"},
  };
  for (const auto& k : cases) {
    auto a = raw("PUT", k.path, k.body);
    EXPECT_EQ(a.status, k.status) << k.body << " -> " << a.body;
    EXPECT_NE(a.body.find("\"error\""), std::string::npos) << a.body;
    if (!k.needle.empty()) {
      EXPECT_NE(a.body.find(k.needle), std::string::npos) << a.body;
    }
  }
  EXPECT_EQ(raw("GET", "/v1/compositions?colour=red").status, 400);
  EXPECT_EQ(raw("GET", "/v1/devices?type=fpga").status, 400);
  EXPECT_EQ(raw("GET", "/v1/nothing-here").status, 404);
  EXPECT_EQ(free_by_type(), before);
  auto live = daemon_->client().compositions(client::CompositionQuery{.job = 5});
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->empty());
}

// Input that is not plain JSON or not text is refused with 400 and a sentence that shows it
// escaped; nothing is stored and every answer stays UTF-8.
TEST_F(ComposerdTest, RefusesInputThatIsNotPlainJsonOrText) {
  const auto before = free_by_type();
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  struct Case {
    std::string method, path, body, needle;
  };
  const std::vector<Case> cases = {
      {"PUT", "/v1/compositions/6/n1", R"({"uid":1,"user":"a","request":)" + deep + "}",
       "nested deeper than 64 levels"},
      {"PUT", "/v1/compositions/6/n1", R"({"uid":1,"user":"a","request":{"gpus":01}})",
       "'01' is not a JSON number"},
      {"PUT", "/v1/compositions/6/n1", R"({"uid":00,"user":"a","request":{"gpus":1}})",
       "'00' is not a JSON number"},
      {"PUT", "/v1/compositions/6/n1", R"({"uid":1,"user":"a\u0000b","request":{"gpus":1}})",
       R"(user: expected text (UTF-8 without control characters), got \"a\\x00b\")"},
      {"PUT", "/v1/compositions/6/n1",
       "{\"uid\":1,\"user\":\"a\",\"account\":\"\xff\xfe\",\"request\":{\"gpus\":1}}",
       "the text is not valid UTF-8"},
      {"PUT", "/v1/compositions/6/n1",
       R"({"uid":1,"user":"a","account":"x\r\nuser=root","request":{"gpus":1}})",
       R"(got \"x\\r\\nuser=root\")"},
      {"POST", "/v1/devices/gpu-a-0/drain", R"({"reason":"bad\u001b[2J"})",
       "reason: expected text"},
      {"GET", "/v1/devices?type=%ff%00", "", R"(type: '\\xff\\x00' is not text)"},
      {"GET", "/v1/devices?zone=z1%0d", "", R"(zone: 'z1\\r' is not text)"},
      {"GET", "/v1/devices?zone=z1&zone=z2", "", "query parameter 'zone' is given twice"},
      {"PUT", "/v1/compositions/6/n1", "\xEF\xBB\xBF{\"uid\":1,\"user\":\"a\"}",
       "a byte order mark"},
      {"PUT", "/v1/compositions/6/n1", std::string("{\"uid\":1,\"user\":\"a\"}\0", 21),
       "a raw control character outside a string"},
      {"PUT", "/v1/compositions/6/n1", R"({"uid":1,"user":"a","request":{"gpu_model":"a\rb"}})",
       R"(request.gpu_model: expected text)"},
  };
  for (const auto& k : cases) {
    auto a = raw(k.method, k.path, k.body);
    EXPECT_EQ(a.status, 400) << k.body.substr(0, 80) << " -> " << a.body;
    EXPECT_TRUE(valid_utf8(a.body)) << printable(a.body);
    auto json = api::parse_json(a.body);
    ASSERT_TRUE(json.ok()) << printable(a.body);
    EXPECT_EQ((*json)["error"]["code"].asString(), "invalid_argument");
    EXPECT_NE(a.body.find(k.needle), std::string::npos) << a.body;
  }
  EXPECT_EQ(free_by_type(), before);
  auto live = daemon_->client().compositions(client::CompositionQuery{.job = 6});
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->empty());
  auto gpu = daemon_->client().devices();
  ASSERT_TRUE(gpu.ok());
  for (const Device& d : *gpu) EXPECT_FALSE(d.drained) << d.id;
  // The log shows what it echoes escaped: no raw control character in any line.
  const std::string log = daemon_->log();
  for (char c : log) {
    if (c != '\n') {
      EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20) << "a raw control byte";
    }
  }
}

// What the HTTP layer refuses before any route runs keeps its status and says what it was,
// with the code of docs/API.md's table; nothing changes.
TEST_F(ComposerdTest, HttpLayerRefusalsSayWhatTheyAre) {
  const auto before = free_by_type();
  const auto url = daemon_->url();
  httplib::Client cli("127.0.0.1", std::stoi(url.substr(url.rfind(':') + 1)));
  struct Case {
    httplib::Request request;
    int status;
    std::string message;
  };
  auto request = [](std::string method, std::string path, httplib::Headers headers = {}) {
    httplib::Request r;
    r.method = std::move(method);
    r.path = std::move(path);
    r.headers = std::move(headers);
    return r;
  };
  // A body larger than composerd reads: skipped, not parsed.
  httplib::Request big = request("PUT", "/v1/compositions/5/n1");
  big.body = std::string(2000000, ' ');
  const std::vector<Case> cases = {
      {big, 413, "request body larger than 1048576 bytes"},
      {request("GET", "/v1/pool?" + std::string(9000, 'a')), 414,
       "request line longer than 8192 bytes"},
      {request("GET", "/v1/health", {{"Range", "bytes=z-q"}}), 416, "unreadable Range header"},
      {request("BREW", "/v1/pool"), 400, "malformed HTTP request"},
      {request("GET", "/v1/nothing-here"), 404, "no such endpoint: GET /v1/nothing-here"},
  };
  for (const auto& k : cases) {
    auto a = cli.send(k.request);
    ASSERT_TRUE(a) << k.request.method << " " << k.request.path.substr(0, 40) << ": "
                   << httplib::to_string(a.error());
    EXPECT_EQ(a->status, k.status) << k.request.path.substr(0, 40) << " -> " << a->body;
    auto json = api::parse_json(a->body);
    ASSERT_TRUE(json.ok()) << a->body;
    const std::string code = k.status == 404 ? "not_found" : "invalid_argument";
    EXPECT_EQ((*json)["error"]["code"].asString(), code) << a->body;
    EXPECT_NE((*json)["error"]["message"].asString().find(k.message), std::string::npos) << a->body;
    if (k.status != 404) {
      EXPECT_EQ(a->body.find("no such endpoint"), std::string::npos) << a->body;
    }
  }
  EXPECT_EQ(free_by_type(), before);
}

// Every route family (compositions and events, reports, policy) reads its query through one
// pipeline: a bad number, a bad time and an unknown parameter are said the same way.
TEST_F(ComposerdTest, EveryRouteFamilySaysABadParameterTheSameWay) {
  const std::string time =
      ": expected a time in milliseconds since the epoch (a whole number from 0 to "
      "4503599627370496)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/events?limit=ten", "limit=ten: expected a whole number from 1 to 10000"},
      {"/v1/compositions?limit=0", "limit=0: expected a whole number from 1 to 10000"},
      {"/v1/devices?limit=10001", "limit=10001: expected a whole number from 1 to 10000"},
      {"/v1/events?cursor=12",
       "cursor: '12' is not a cursor of this list (TIME-ID); pass "
       "next_cursor from the previous page as it is"},
      {"/v1/compositions?cursor=x",
       "cursor: 'x' is not a cursor of this list (a composition "
       "id); pass next_cursor from the previous page as it is"},
      {"/v1/policy/history?limit=ten", "limit=ten: expected a whole number from 0 to 4294967295"},
      {"/v1/compositions?job=0", "job=0: expected a whole number from 1 to 4294967294"},
      {"/v1/events?job=x", "job=x: expected a whole number from 1 to 4294967294"},
      {"/v1/reports?start_ms=1&end_ms=2&top=-1", "top=-1: expected a whole number from 0 to 1000"},
      {"/v1/policy/explain?gpus=2.5&time_limit_s=60",
       "gpus=2.5: expected a whole number from 0 to 1048576"},
      {"/v1/events?since_ms=yesterday", "since_ms=yesterday" + time},
      {"/v1/reports?start_ms=yesterday&end_ms=2", "start_ms=yesterday" + time},
      {"/v1/policy/explain?time_limit_s=60&start_ms=now", "start_ms=now" + time},
      {"/v1/pool?x=1", "unknown query parameter 'x' (this endpoint takes none)"},
      {"/v1/policy?x=1", "unknown query parameter 'x' (this endpoint takes none)"},
      {"/v1/reports?x=1", "unknown query parameter 'x' (allowed: start_ms, end_ms, top)"},
  };
  for (const auto& [path, message] : cases) {
    auto a = raw("GET", path);
    EXPECT_EQ(a.status, 400) << path << " -> " << a.body;
    EXPECT_NE(a.body.find("\"message\":\"" + message + "\""), std::string::npos)
        << path << " -> " << a.body;
  }
}

TEST_F(ComposerdTest, RequestsWithoutAValidCredentialAreRefused) {
  auto none = raw("GET", "/v1/pool", "", false);
  EXPECT_EQ(none.status, 401);
  EXPECT_NE(none.body.find("unauthenticated"), std::string::npos);

  // A credential made for another endpoint is not accepted here.
  const auto url = daemon_->url();
  httplib::Client cli("127.0.0.1", std::stoi(url.substr(url.rfind(':') + 1)));
  httplib::Headers h{
      {"Authorization", "Munge " + munge_credential(daemon_->munge_socket(), "GET /v1/devices")}};
  auto r = cli.Get("/v1/pool", h);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  // Replaying a credential is refused by munged.
  const std::string cred = munge_credential(daemon_->munge_socket(), "GET /v1/pool");
  httplib::Headers once{{"Authorization", "Munge " + cred}};
  EXPECT_EQ(cli.Get("/v1/pool", once)->status, 200);
  EXPECT_EQ(cli.Get("/v1/pool", once)->status, 401);
  EXPECT_EQ(raw("GET", "/v1/pool", "", false).status, 401);
}

TEST_F(ComposerdTest, UsersReadOnlyTheirOwnJobsAndCannotChangeThePool) {
  auto c = daemon_->client();
  ASSERT_TRUE(c.compose(201, "n1", body(Request{.gpus = 1}, 65534)).ok());  // nobody's job
  ASSERT_TRUE(c.compose(202, "n1", body(Request{.gpus = 1}, 0)).ok());      // root's job

  auto mine = ctl(*daemon_, "compositions list -P", "nobody");
  ASSERT_EQ(mine.code, 0) << mine.out;
  EXPECT_NE(mine.out.find("|201|"), std::string::npos) << mine.out;
  EXPECT_EQ(mine.out.find("|202|"), std::string::npos) << mine.out;

  EXPECT_EQ(ctl(*daemon_, "compositions show 201 n1", "nobody").code, 0);
  auto other = ctl(*daemon_, "compositions show 202 n1", "nobody");
  EXPECT_NE(other.code, 0);
  EXPECT_NE(other.out.find("no composition"), std::string::npos) << other.out;

  auto drain = ctl(*daemon_, "devices drain gpu-a-0 --reason test", "nobody");
  EXPECT_NE(drain.code, 0);
  EXPECT_NE(drain.out.find("may not"), std::string::npos) << drain.out;
  for (const char* cmd : {"devices adopt gpu-a-0", "devices release-foreign gpu-a-0"}) {
    auto refused = ctl(*daemon_, cmd, "nobody");
    EXPECT_NE(refused.code, 0) << cmd;
    EXPECT_NE(refused.out.find("may not"), std::string::npos) << cmd << ": " << refused.out;
  }
  auto release = ctl(*daemon_, "compositions release 201 n1", "nobody");
  EXPECT_NE(release.code, 0);
  EXPECT_TRUE(c.show(201, "n1").ok());
  EXPECT_EQ(c.show(201, "n1")->state, CompositionState::kReady);
  EXPECT_EQ(ctl(*daemon_, "pool", "nobody").code, 0);  // the pool is public
}

TEST_F(ComposerdTest, ComposerctlDrainsAndResumesAndPrintsThreeFormats) {
  auto drained = ctl(*daemon_, "devices drain gpu-b-7 --reason 'fan failure'");
  ASSERT_EQ(drained.code, 0) << drained.out;
  auto list = ctl(*daemon_, "devices list --state drained -P");
  ASSERT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find("\ngpu-b-7|"), std::string::npos) << list.out;
  EXPECT_EQ(free_by_type()["gpu"], 15u);
  auto json = ctl(*daemon_, "pool --json");
  ASSERT_EQ(json.code, 0);
  EXPECT_NE(json.out.find("\"drained\""), std::string::npos) << json.out;
  auto table = ctl(*daemon_, "pool");
  ASSERT_EQ(table.code, 0);
  EXPECT_NE(table.out.find("H100"), std::string::npos) << table.out;
  ASSERT_EQ(ctl(*daemon_, "devices resume gpu-b-7").code, 0);
  EXPECT_EQ(free_by_type()["gpu"], 16u);
  // A refusal names what was typed, not the daemon's parts.
  auto unknown = ctl(*daemon_, "devices drain nosuch --reason test");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.out.find("composerctl: error: no device 'nosuch'\n"), std::string::npos)
      << unknown.out;
  EXPECT_EQ(unknown.out.find("store:"), std::string::npos) << unknown.out;
  // Adopt is for foreign devices only; release-foreign for what composerd attached.
  auto adopt = ctl(*daemon_, "devices adopt gpu-b-7");
  EXPECT_EQ(adopt.code, 1);
  EXPECT_NE(adopt.out.find("gpu-b-7 is free, not foreign"), std::string::npos) << adopt.out;
  auto handed = ctl(*daemon_, "devices release-foreign gpu-b-7");
  EXPECT_EQ(handed.code, 1);
  EXPECT_NE(handed.out.find("not attached by composerd"), std::string::npos) << handed.out;
}

// A node's hold (its epilog found the devices still in use after the job): composerd releases
// the composition for no one, the job's release included, says why, shows the hold in
// composerctl and the ledger, and releases it again once composerctl (or the node) clears it.
TEST_F(ComposerdTest, ANodesHoldKeepsACompositionFromEveryReleaseUntilCleared) {
  auto c = daemon_->client();
  api::ComposeBody job = body(Request{.gpus = 1});
  job.nodes = {"n1", "n2"};
  ASSERT_TRUE(c.compose_job(121, job).ok());
  const std::string why = "still in use after 10 s: pid 4242 holds gpu-a-0 (/dev/nvidia0)";
  auto held = c.hold(121, "n1", why);
  ASSERT_TRUE(held.ok()) << held.error();
  EXPECT_EQ(held->hold, why);

  auto refused = c.release(121, "n1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_NE(refused.error().message.find(why), std::string::npos) << refused.error();
  auto by_job = c.release_job(121);
  ASSERT_TRUE(by_job.ok()) << by_job.error();
  ASSERT_EQ(by_job->size(), 1u);
  EXPECT_EQ((*by_job)[0].node, "n2");
  EXPECT_EQ(free_by_type()["gpu"], 15u);
  // Only a ready composition can be held; an empty reason is refused with a sentence.
  EXPECT_EQ(c.hold(121, "n2", why).error().code, ErrorCode::kNotFound);
  auto empty = raw("POST", "/v1/compositions/121/n1/hold", R"({"reason":""})");
  EXPECT_EQ(empty.status, 400) << empty.body;
  EXPECT_NE(empty.body.find("reason: must say why"), std::string::npos) << empty.body;

  auto listed = ctl(*daemon_, "compositions --live --job 121 -P");
  ASSERT_EQ(listed.code, 0) << listed.out;
  EXPECT_NE(listed.out.find("|" + why + "\n"), std::string::npos) << listed.out;
  auto admin_release = ctl(*daemon_, "compositions release 121 n1");
  EXPECT_EQ(admin_release.code, 1);
  EXPECT_NE(admin_release.out.find("compositions unhold"), std::string::npos) << admin_release.out;

  auto cleared = ctl(*daemon_, "compositions unhold 121 n1 -P");
  ASSERT_EQ(cleared.code, 0) << cleared.out;
  auto released = c.release(121, "n1");
  ASSERT_TRUE(released.ok()) << released.error();
  ASSERT_TRUE(released->has_value());
  EXPECT_EQ((*released)->state, CompositionState::kReleased);
  EXPECT_EQ(free_by_type()["gpu"], 16u);
  auto events = c.events(client::EventQuery{.job = 121});
  ASSERT_TRUE(events.ok()) << events.error();
  std::vector<std::string> holds;
  for (const auto& e : *events) {
    if (e.kind == "hold" || e.kind == "unhold") holds.push_back(e.kind + ":" + e.detail);
  }
  EXPECT_EQ(holds, (std::vector<std::string>{"hold:" + why, "unhold:" + why}));
}

// A node's prolog drains what its host never showed: only a device of its own job's composition
// there, with its reason, and the device stays out of the pool after the release.
TEST_F(ComposerdTest, ANodeDrainsADeviceItsHostNeverShowedAndNothingElse) {
  auto c = daemon_->client();
  auto composed = c.compose(131, "n1", body(Request{.gpus = 1}));
  ASSERT_TRUE(composed.ok()) << composed.error();
  const std::string mine = composed->devices[0].id;
  auto others =
      c.devices(client::DeviceQuery{.type = DeviceType::kGpu, .state = DeviceState::kFree});
  ASSERT_TRUE(others.ok() && !others->empty());
  auto refused = c.drain_unseen(131, "n1", others->front().id, "never showed");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  const std::string why = "the host of node n1 never showed it after the attach for job 131";
  auto drained = c.drain_unseen(131, "n1", mine, why);
  ASSERT_TRUE(drained.ok()) << drained.error();
  EXPECT_TRUE(drained->drained);
  EXPECT_EQ(drained->drain_reason, why);
  ASSERT_TRUE(c.release(131, "n1").ok());
  EXPECT_EQ(free_by_type()["gpu"], 15u);
  ASSERT_EQ(ctl(*daemon_, "devices resume " + mine).code, 0);
  EXPECT_EQ(free_by_type()["gpu"], 16u);
}

TEST_F(ComposerdTest, SlurmConfigMatchesThePool) {
  auto r = ctl(*daemon_, "slurm-config");
  ASSERT_EQ(r.code, 0) << r.out;
  // 8 A100 + 8 H100, 16 x 64G blocks, 4 drives; both nodes have 8 GPU, 16 memory and 4 NVMe
  // slots.
  EXPECT_NE(r.out.find("Licenses=fabric_gpu:16,fabric_mem:1024,fabric_nvme:4,"
                       "fabric_gpu_a100-80g:8,fabric_gpu_h100:8\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("NodeName=n1,n2 Name=cgpu Count=8\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NodeName=n1,n2 Name=cnvme Count=4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NodeName=n1,n2 Name=cmem Count=16\n"), std::string::npos) << r.out;
  auto hosts = daemon_->client().hosts();
  ASSERT_TRUE(hosts.ok()) << hosts.error();
  ASSERT_EQ(hosts->size(), 2u);
  EXPECT_EQ(hosts->at(1).fabric_id, "sim-host-2");
  EXPECT_EQ(hosts->at(0).zones, (std::vector<std::string>{"z1", "z2"}));
}

TEST_F(ComposerdTest, ParallelComposesNeverDoubleAllocate) {
  constexpr int kThreads = 16;
  constexpr int kPerThread = 6;
  std::atomic<int> failures{0};
  std::mutex mu;
  std::vector<Composition> ready;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto c = daemon_->client();
      for (int i = 0; i < kPerThread; ++i) {
        const uint32_t job = 1000 + t * kPerThread + i;
        auto r = c.compose(job, (t % 2) ? "n1" : "n2", body(Request{.gpus = 1}));
        if (r.ok()) {
          std::lock_guard lock(mu);
          ready.push_back(*r);
        } else if (r.error().code != ErrorCode::kInsufficient) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::set<std::string> seen;
  for (const auto& c : ready) {
    ASSERT_EQ(c.devices.size(), 1u);
    EXPECT_TRUE(seen.insert(c.devices[0].id).second) << c.devices[0].id << " given twice";
  }
  // n2 reaches 8 GPUs, n1 reaches all 16: 16 compositions fit, and the pool adds up.
  EXPECT_EQ(ready.size(), 16u);
  EXPECT_EQ(free_by_type()["gpu"], 0u);
  auto attached = daemon_->client().devices(client::DeviceQuery{.state = DeviceState::kAttached});
  ASSERT_TRUE(attached.ok());
  EXPECT_EQ(attached->size(), 16u);
}

TEST(ComposerdLifecycle, SurvivesARestartAndStopsCleanlyOnSigterm) {
  ComposerdProcess d;
  auto c = d.client();
  auto composed = c.compose(301, "n2", body(Request{.gpus = 2, .nvme = 1}));
  ASSERT_TRUE(composed.ok()) << composed.error();
  const int status = d.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << d.log();
  EXPECT_NE(d.log().find("exited cleanly"), std::string::npos);
  d.start();
  auto after = c.show(301, "n2");
  ASSERT_TRUE(after.ok()) << after.error();
  EXPECT_EQ(after->id, composed->id);
  EXPECT_EQ(after->state, CompositionState::kReady);
  ASSERT_TRUE(c.release(301, "n2").ok());
}

TEST(ComposerdConfig, RefusesToStartOnABadLineAndNamesIt) {
  test_support::TempDir dir("composer-badconf");
  const std::string conf = dir.file("composer.conf");
  std::ofstream(conf) << "ListenPort=6830\nStateDir=" << dir.file("s") << "\nFrobnicate=yes\n"
                      << default_pool_lines();
  auto r = run_command(std::string(COMPOSERD_PATH) + " -f " + conf);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("line 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Frobnicate"), std::string::npos) << r.out;
}

// Clients that give up while the fabric works (a prolog's timeout, a killed composerctl) leave
// nothing on the fabric that no composition owns: each compose goes on to its end without them,
// ready (owned, and a retry answers it) or rolled back (a failing attach: nothing held).
TEST(ComposerdImpatientClients, GivingUpMidWaitLeavesNothingUnowned) {
  ComposerdProcess d("SimLatency=600\nSimFailAttaches=3\n",
                     "NodeName=n[1-8] Zones=z1 GpuSlots=8\n"
                     "DeviceGroup=gpu Type=gpu Model=A100-80G Zone=z1 Count=64\n");
  std::vector<std::thread> clients;
  std::atomic<int> gave_up{0};
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      auto impatient = d.client(100);  // gives up after 100 ms of a 600 ms attach
      const uint32_t job = 500 + static_cast<uint32_t>(i);
      const std::string node = "n" + std::to_string(1 + i % 8);
      if (i % 2 == 0) {
        if (!impatient.compose(job, node, body(Request{.gpus = 2})).ok()) ++gave_up;
      } else {
        api::ComposeBody b = body(Request{.gpus = 1});
        b.nodes = {node, "n" + std::to_string(1 + (i + 1) % 8)};
        if (!impatient.compose_job(job, b).ok()) ++gave_up;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(gave_up, 16) << "the clients were meant to give up before the fabric answered";

  // Settled: nothing left composing, and every job-wide compose (the odd jobs) whole or rolled
  // back. Until a failed node's job has released its other node, that node is still ready and
  // owns devices its release is taking off the fabric: a settled pool has each odd job on both
  // its nodes or on neither. Then the fabric holds exactly what the live compositions own.
  auto c = d.client();
  std::vector<Composition> live;
  const auto settled = [](const std::vector<Composition>& now) {
    std::map<uint32_t, int> nodes_of_job;
    for (const Composition& x : now) {
      if (x.state != CompositionState::kReady) return false;
      ++nodes_of_job[x.owner.job_id];
    }
    return std::all_of(nodes_of_job.begin(), nodes_of_job.end(),
                       [](const auto& job) { return job.first % 2 == 0 || job.second == 2; });
  };
  for (int i = 0; i < 100; ++i) {
    auto l = c.compositions(client::CompositionQuery{.live = true});
    ASSERT_TRUE(l.ok()) << l.error();
    live = *l;
    if (settled(live)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(settled(live)) << "a compose or a job-wide roll-back did not end in 10 s";
  std::set<std::string> owned;
  for (const Composition& x : live) {
    EXPECT_EQ(x.state, CompositionState::kReady) << "job " << x.owner.job_id << " on " << x.node;
    for (const Device& dev : x.devices) EXPECT_TRUE(owned.insert(dev.id).second) << dev.id;
  }
  EXPECT_EQ(sim_fabric_holds(d), owned);
  auto failed = c.compositions(client::CompositionQuery{.state = CompositionState::kFailed});
  ASSERT_TRUE(failed.ok());
  EXPECT_FALSE(failed->empty()) << "SimFailAttaches should have failed some attaches";
  EXPECT_FALSE(live.empty());

  // A retry of what was answered to no one answers it; the job's release takes it all back.
  for (const Composition& x : live) {
    if (x.owner.job_id % 2 != 0) continue;  // the per-node ones
    auto again = c.compose(x.owner.job_id, x.node, body(Request{.gpus = 2}));
    ASSERT_TRUE(again.ok()) << again.error();
    EXPECT_EQ(again->id, x.id);
  }
  std::vector<std::thread> releases;
  std::atomic<int> released{0};
  for (int i = 0; i < 16; ++i) {
    releases.emplace_back([&, i] {
      if (d.client().release_job(500 + static_cast<uint32_t>(i)).ok()) ++released;
    });
  }
  for (auto& t : releases) t.join();
  EXPECT_EQ(released, 16);
  EXPECT_TRUE(sim_fabric_holds(d).empty());
}

// GET /v1/devices answers one page at a time, in id order: 2,500 devices are three pages of
// 1,000 by default, each naming the next by its cursor and the last naming none; the filters
// hold on every page; the client reads every page, whatever its page size.
TEST(ComposerdPages, DevicesComeInPagesAndTheClientReadsThemAll) {
  ComposerdProcess d("",
                     "NodeName=n1 Zones=z1 GpuSlots=8\n"
                     "DeviceGroup=gpu Type=gpu Model=A100-80G Zone=z1 Count=2000\n"
                     "DeviceGroup=nv Type=nvme Model=P5620 Zone=z1 Count=500 Size=3T\n");
  const int port = d.port();
  std::vector<std::string> seen;
  std::string cursor;
  size_t pages = 0;
  for (;;) {
    const std::string path =
        "/v1/devices" + (cursor.empty() ? std::string() : "?cursor=" + percent_encode(cursor));
    auto a = raw_request("127.0.0.1", port, d.munge_socket(), "GET", path);
    ASSERT_EQ(a.status, 200) << a.body;
    auto json = api::parse_json(a.body);
    ASSERT_TRUE(json.ok());
    auto page = api::device_page_from_json(*json);
    ASSERT_TRUE(page.ok()) << page.error();
    ++pages;
    EXPECT_LE(page->items.size(), 1000u);
    for (const Device& dev : page->items) seen.push_back(dev.id);
    if (page->next_cursor.empty()) break;
    EXPECT_EQ(page->next_cursor, page->items.back().id);
    cursor = page->next_cursor;
    ASSERT_LT(pages, 10u) << "the pages do not end";
  }
  EXPECT_EQ(pages, 3u);
  EXPECT_EQ(seen.size(), 2500u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size());

  // Filters hold across pages; a page size of the caller's; a cursor past the end.
  auto nvme =
      raw_request("127.0.0.1", port, d.munge_socket(), "GET", "/v1/devices?type=nvme&limit=300");
  ASSERT_EQ(nvme.status, 200);
  auto first = api::device_page_from_json(*api::parse_json(nvme.body));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->items.size(), 300u);
  ASSERT_FALSE(first->next_cursor.empty());
  auto rest = raw_request("127.0.0.1", port, d.munge_socket(), "GET",
                          "/v1/devices?type=nvme&limit=300&cursor=" + first->next_cursor);
  auto second = api::device_page_from_json(*api::parse_json(rest.body));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->items.size(), 200u);
  EXPECT_TRUE(second->next_cursor.empty());
  for (const Device& dev : second->items) EXPECT_EQ(dev.type, DeviceType::kNvme);
  auto past = raw_request("127.0.0.1", port, d.munge_socket(), "GET", "/v1/devices?cursor=zzz");
  EXPECT_EQ(past.body, R"({"devices":[]})");

  // Page sizes the server does not give.
  for (const char* bad : {"0", "10001"}) {
    auto a = raw_request("127.0.0.1", port, d.munge_socket(), "GET",
                         "/v1/devices?limit=" + std::string(bad));
    EXPECT_EQ(a.status, 400) << a.body;
    EXPECT_NE(a.body.find("limit"), std::string::npos) << a.body;
  }

  auto c = d.client();
  for (size_t page : {size_t{0}, size_t{7}, size_t{10000}}) {
    auto all = c.devices(client::DeviceQuery{.page = page});
    ASSERT_TRUE(all.ok()) << all.error();
    EXPECT_EQ(all->size(), 2500u) << "page size " << page;
  }
  auto gpus = c.devices(client::DeviceQuery{.type = DeviceType::kGpu, .page = 333});
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(gpus->size(), 2000u);
}

// GET /v1/compositions (newest first) and GET /v1/events (oldest first) come in pages too, and
// a walk through the pages while compositions are made and released meanwhile sees every
// composition and every event that existed when it began exactly once, in the list's order,
// and every device once (in id order) while devices go from free to attached and back.
TEST(ComposerdPages, CompositionsAndEventsComeInPagesWhileTheyChange) {
  ComposerdProcess d("",
                     "NodeName=n[001-100] Zones=z1 GpuSlots=8\n"
                     "DeviceGroup=gpu Type=gpu Model=A100-80G Zone=z1 Count=200\n");
  auto c = d.client();
  const auto node = [](int i) {
    char name[8];
    std::snprintf(name, sizeof name, "n%03d", i);
    return std::string(name);
  };
  for (int j = 1; j <= 40; ++j) {
    ASSERT_TRUE(c.compose(static_cast<uint32_t>(j), node(j), body(Request{.gpus = 1})).ok());
    if (j % 2 == 0) {
      ASSERT_TRUE(c.release(static_cast<uint32_t>(j), node(j)).ok());
    }
  }
  auto before = c.compositions();
  ASSERT_TRUE(before.ok()) << before.error();
  ASSERT_EQ(before->size(), 40u);
  auto events_before = c.events();
  ASSERT_TRUE(events_before.ok()) << events_before.error();
  ASSERT_GE(events_before->size(), 140u);

  // Meanwhile: new compositions, and releases of old ones (their rows change state).
  std::atomic<bool> stop{false};
  std::atomic<int> made{0};
  std::thread churn([&] {
    auto other = d.client();
    for (int j = 41; j <= 90 && !stop; ++j) {
      (void)other.compose(static_cast<uint32_t>(j), node(j), body(Request{.gpus = 1}));
      ++made;
      if (j - 40 < 40 && (j - 40) % 2 == 1) {
        (void)other.release(static_cast<uint32_t>(j - 40), node(j - 40));
      }
    }
  });
  const auto walk = [&](const std::string& path, const std::string& key, size_t page) {
    std::vector<Json::Value> out;
    std::string cursor;
    for (size_t pages = 0;; ++pages) {
      EXPECT_LT(pages, 1000u) << "the pages of " << path << " do not end";
      if (pages >= 1000) return out;
      const std::string query = "?limit=" + std::to_string(page) +
                                (cursor.empty() ? "" : "&cursor=" + percent_encode(cursor));
      auto a = raw_request("127.0.0.1", d.port(), d.munge_socket(), "GET", path + query);
      EXPECT_EQ(a.status, 200) << a.body;
      auto json = api::parse_json(a.body);
      if (a.status != 200 || !json.ok()) return out;
      EXPECT_LE((*json)[key].size(), page);
      for (const Json::Value& item : (*json)[key]) out.push_back(item);
      if (!json->isMember("next_cursor")) return out;
      cursor = (*json)["next_cursor"].asString();
    }
  };
  while (made == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto compositions = walk("/v1/compositions", "compositions", 3);
  const auto events = walk("/v1/events", "events", 5);
  const auto devices = walk("/v1/devices", "devices", 7);  // states change as GPUs are taken
  const int made_while_walking = made;
  stop = true;
  churn.join();
  std::cout << "pages walked while " << made_while_walking
            << " of 50 new compositions were made (and old ones released)\n";

  std::vector<int64_t> ids;
  for (const auto& v : compositions) ids.push_back(v["id"].asInt64());
  EXPECT_TRUE(std::is_sorted(ids.rbegin(), ids.rend())) << "not newest first";
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), ids.size()) << "a composition twice";
  for (const Composition& old : *before) {
    EXPECT_EQ(std::count(ids.begin(), ids.end(), old.id), 1) << "composition " << old.id;
  }
  std::vector<std::pair<int64_t, int64_t>> order;
  for (const auto& v : events) order.emplace_back(v["ts_ms"].asInt64(), v["id"].asInt64());
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end())) << "not oldest first";
  std::set<int64_t> event_ids;
  for (const auto& [ts, id] : order) EXPECT_TRUE(event_ids.insert(id).second) << "event " << id;
  for (const Event& old : *events_before) EXPECT_EQ(event_ids.count(old.id), 1u) << old.id;
  std::vector<std::string> device_ids;
  for (const auto& v : devices) device_ids.push_back(v["id"].asString());
  EXPECT_TRUE(std::is_sorted(device_ids.begin(), device_ids.end()));
  EXPECT_EQ(std::set<std::string>(device_ids.begin(), device_ids.end()).size(), 200u)
      << "every device once, whatever its state meanwhile";
  EXPECT_EQ(device_ids.size(), 200u);

  // The client reads every page, whatever its page size, or stops at its limit.
  auto all = c.compositions();
  ASSERT_TRUE(all.ok()) << all.error();
  for (size_t page : {size_t{1}, size_t{9}, size_t{10000}}) {
    auto paged = c.compositions(client::CompositionQuery{.page = page});
    ASSERT_TRUE(paged.ok()) << paged.error();
    ASSERT_EQ(paged->size(), all->size()) << "page size " << page;
    for (size_t i = 0; i < all->size(); ++i) EXPECT_EQ((*paged)[i].id, (*all)[i].id);
  }
  auto newest = c.compositions(client::CompositionQuery{.limit = 5, .page = 2});
  ASSERT_TRUE(newest.ok());
  ASSERT_EQ(newest->size(), 5u);
  EXPECT_EQ(newest->front().id, all->front().id);
  auto ledger = c.events();
  auto ledger_in_pages = c.events(client::EventQuery{.page = 13});
  ASSERT_TRUE(ledger.ok() && ledger_in_pages.ok());
  ASSERT_EQ(ledger->size(), ledger_in_pages->size());
  for (size_t i = 0; i < ledger->size(); ++i) {
    EXPECT_EQ((*ledger)[i].id, (*ledger_in_pages)[i].id);
  }
}

}  // namespace
}  // namespace composer::testing
