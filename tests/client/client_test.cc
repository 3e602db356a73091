#include "composer/client/client.h"

#include <gtest/gtest.h>
#include <munge.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "composer/api/codec.h"
#include "composer/common/units.h"
#include "composer/test_support/munge_daemon.h"
#include "composer/test_support/ports.h"
#include "composer/test_support/test_server.h"

namespace composer::client {
namespace {

using composer::testing::TestServer;
using test_support::MungeDaemon;

Device gpu(const std::string& id) {
  Device d;
  d.id = id;
  d.model = "A100-80G";
  d.zone = "z1";
  d.address = "0000:41:00.0";
  d.composition_id = 12;
  d.node = "node1";
  return d;
}

Composition ready(uint32_t job, const std::string& node) {
  Composition c;
  c.id = 12;
  c.owner.job_id = job;
  c.node = node;
  c.owner.uid = 1000;
  c.owner.user = "alice";
  c.request.gpus = 1;
  c.state = CompositionState::kReady;
  c.created_ms = 1714550400000;
  c.updated_ms = 1714550400000;
  c.attempts = 1;
  c.devices = {gpu("gpu-a-00")};
  return c;
}

// What the fake composerd learned from one request's credential.
struct Seen {
  std::string method;
  std::string path;
  std::string query;
  bool had_credential = false;
  munge_err_t decode = EMUNGE_SUCCESS;
  std::string payload;
  uid_t uid = 0;
  std::string credential;
};

// A fake composerd: decodes every credential with the test's munged, the way composerd does,
// and records what arrived (before the body is read). Answers come from per-route handlers set by
// each test.
class FakeComposerd {
 public:
  explicit FakeComposerd(std::string socket) : socket_(std::move(socket)) {
    t_.server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
      record(req);
      return httplib::Server::HandlerResponse::Unhandled;
    });
  }
  httplib::Server& server() { return t_.server; }
  std::string url() const { return t_.url(); }
  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  void record(const httplib::Request& req) {
    Seen s;
    s.method = req.method;
    s.path = req.path;
    for (const auto& [k, v] : req.params) s.query += (s.query.empty() ? "" : "&") + k + "=" + v;
    const std::string auth = req.get_header_value("Authorization");
    if (auth.rfind("Munge ", 0) == 0) {
      s.had_credential = true;
      s.credential = auth.substr(6);
      munge_ctx_t ctx = munge_ctx_create();
      munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket_.c_str());
      void* payload = nullptr;
      int len = 0;
      gid_t gid = 0;
      s.decode = munge_decode(s.credential.c_str(), ctx, &payload, &len, &s.uid, &gid);
      if (payload != nullptr) s.payload.assign(static_cast<char*>(payload), len);
      std::free(payload);
      munge_ctx_destroy(ctx);
    }
    std::lock_guard<std::mutex> lock(mu_);
    seen_.push_back(std::move(s));
  }

  std::string socket_;
  TestServer t_;
  std::mutex mu_;
  std::vector<Seen> seen_;
};

void answer(httplib::Response& res, const Json::Value& body, int status = 200) {
  res.status = status;
  res.set_content(api::to_text(body), "application/json");
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = MungeDaemon::start();
    ASSERT_TRUE(d.ok()) << d.error();
    munge_ = std::move(*d).release();
  }
  static void TearDownTestSuite() {
    delete munge_;
    munge_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(munge_, nullptr);
    fake_ = std::make_unique<FakeComposerd>(munge_->socket_path());
  }

  ClientOptions options() const {
    ClientOptions o;
    o.servers = fake_->url();
    o.munge_socket = munge_->socket_path();
    o.connect_timeout_ms = 500;
    o.timeout_ms = 3000;
    o.backoff_ms = 10;
    return o;
  }

  static MungeDaemon* munge_;
  std::unique_ptr<FakeComposerd> fake_;
};

MungeDaemon* ClientTest::munge_ = nullptr;

TEST_F(ClientTest, CredentialDecodesToOurUidWithMethodAndPathAsPayload) {
  fake_->server().Get("/v1/pool", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::pool_to_json({PoolRow{}}));
  });
  Client c(options());
  auto pool = c.pool();
  ASSERT_TRUE(pool.ok()) << pool.error();
  EXPECT_EQ(pool->size(), 1u);
  auto seen = fake_->seen();
  ASSERT_EQ(seen.size(), 1u);
  ASSERT_TRUE(seen[0].had_credential);
  EXPECT_EQ(seen[0].decode, EMUNGE_SUCCESS) << munge_strerror(seen[0].decode);
  EXPECT_EQ(seen[0].uid, ::getuid());
  EXPECT_EQ(seen[0].payload, "GET /v1/pool");
}

TEST_F(ClientTest, EveryRequestAndEveryRetryGetsAFreshCredential) {
  int calls = 0;
  std::string sent_body;
  fake_->server().Put("/v1/compositions/4711/node1",
                      [&](const httplib::Request& req, httplib::Response& res) {
                        sent_body = req.body;
                        if (++calls == 1) {
                          answer(res, api::to_json(Error{ErrorCode::kUnavailable, "busy"}), 503);
                          return;
                        }
                        answer(res, api::to_json(ready(4711, "node1")));
                      });
  Client c(options());
  api::ComposeBody body{
      .owner = {.uid = 1000, .user = "alice", .account = "physics", .workload = "training"},
      .request = Request{1, "", 0, 0}};
  auto first = c.compose(4711, "node1", body);
  ASSERT_TRUE(first.ok()) << first.error();
  auto second = c.compose(4711, "node1", body);
  ASSERT_TRUE(second.ok()) << second.error();
  auto seen = fake_->seen();
  ASSERT_EQ(seen.size(), 3u);
  for (const Seen& s : seen) {
    EXPECT_EQ(s.decode, EMUNGE_SUCCESS) << munge_strerror(s.decode);  // munged refuses replays
    EXPECT_EQ(s.payload, "PUT /v1/compositions/4711/node1");
  }
  EXPECT_NE(seen[0].credential, seen[1].credential);
  EXPECT_NE(seen[1].credential, seen[2].credential);
  auto sent = api::from_text<api::ComposeBody>(sent_body);
  ASSERT_TRUE(sent.ok()) << sent.error();
  EXPECT_EQ(*sent, body);
}

TEST_F(ClientTest, HealthCarriesNoCredential) {
  fake_->server().Get("/v1/health", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::to_json(api::HealthInfo{"ok", "sim", "0.1.0", 12}));
  });
  Client c(options());
  auto h = c.health();
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h->fabric, "sim");
  auto seen = fake_->seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].had_credential);
}

TEST_F(ClientTest, UnreachableMungedFailsBeforeAnythingIsSent) {
  ClientOptions o = options();
  o.munge_socket = "/nonexistent/munge.socket";
  Client c(o);
  auto r = c.pool();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("/nonexistent/munge.socket"), std::string::npos)
      << r.error().message;
  EXPECT_TRUE(fake_->seen().empty());
}

TEST_F(ClientTest, ServerErrorBodyBecomesTheErrorWithTheServersCode) {
  fake_->server().Put("/v1/compositions/7/node2", [](const httplib::Request&,
                                                     httplib::Response& res) {
    answer(res, api::to_json(Error{ErrorCode::kInsufficient, "gpus: 4 asked, 2 free in z1"}), 409);
  });
  Client c(options());
  auto r = c.compose(
      7, "node2",
      api::ComposeBody{.owner = {.uid = 1000, .user = "alice"}, .request = Request{4, "", 0, 0}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInsufficient);
  EXPECT_EQ(r.error().message, "gpus: 4 asked, 2 free in z1");
}

TEST_F(ClientTest, AnswerWithoutAnErrorBodyMapsTheStatus) {
  fake_->server().Get("/v1/devices", [](const httplib::Request&, httplib::Response& res) {
    res.status = 403;
    res.set_content("<html>forbidden</html>", "text/html");
  });
  Client c(options());
  auto r = c.devices();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(r.error().message,
            "composerd answered HTTP 403 to GET /v1/devices: <html>forbidden</html>");
}

TEST_F(ClientTest, AnswerThatBreaksTheApiIsAnInternalError) {
  fake_->server().Get("/v1/pool", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"pool":[{"type":"gpu"}]})", "application/json");
  });
  Client c(options());
  auto r = c.pool();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInternal);
  EXPECT_EQ(r.error().message,
            "composerd's answer to GET /v1/pool does not follow the API: pool[0].model: required "
            "field is missing");
}

TEST_F(ClientTest, QueriesSendOnlyTheFiltersThatAreSet) {
  fake_->server().Get("/v1/compositions", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::compositions_to_json({ready(4711, "node1")}));
  });
  fake_->server().Get("/v1/devices", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::devices_to_json({gpu("gpu-a-00")}));
  });
  fake_->server().Get("/v1/events", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::events_to_json({}));
  });
  Client c(options());
  CompositionQuery cq;
  cq.job = 4711;
  cq.user = "alice";
  cq.state = CompositionState::kReady;
  cq.node = "node 1&2";
  cq.live = true;
  cq.limit = 5;
  auto comps = c.compositions(cq);
  ASSERT_TRUE(comps.ok()) << comps.error();
  EXPECT_EQ(comps->at(0).owner.job_id, 4711u);
  ASSERT_TRUE(c.compositions().ok());
  DeviceQuery dq;
  dq.type = DeviceType::kMem;
  dq.state = DeviceState::kDrained;
  ASSERT_TRUE(c.devices(dq).ok());
  EventQuery eq;
  eq.job = 9;
  eq.since_ms = 1000;
  eq.until_ms = 2000;
  eq.limit = 3;
  ASSERT_TRUE(c.events(eq).ok());
  auto seen = fake_->seen();
  ASSERT_EQ(seen.size(), 4u);
  // httplib decodes the query and sorts it by name.
  EXPECT_EQ(seen[0].query, "job=4711&limit=5&live=1&node=node 1&2&state=ready&user=alice");
  EXPECT_EQ(seen[0].payload, "GET /v1/compositions");
  EXPECT_EQ(seen[1].query, "");
  EXPECT_EQ(seen[2].query, "state=drained&type=mem");
  EXPECT_EQ(seen[3].query, "job=9&limit=3&since_ms=1000&until_ms=2000");
}

TEST_F(ClientTest, PathSegmentsAreEncodedAndThePayloadNamesThemPlain) {
  fake_->server().Post(R"(/v1/devices/([^/]+)/drain)",
                       [](const httplib::Request& req, httplib::Response& res) {
                         Device d = gpu(req.matches[1]);
                         d.drained = true;
                         auto body = api::from_text<api::DrainBody>(req.body);
                         d.drain_reason = body ? body->reason : "?";
                         answer(res, api::to_json(d));
                       });
  Client c(options());
  auto d = c.drain("gpu a:0", "fan failure");
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(d->drain_reason, "fan failure");
  EXPECT_TRUE(d->drained);
  auto seen = fake_->seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].path, "/v1/devices/gpu a:0/drain");
  EXPECT_EQ(seen[0].payload, "POST /v1/devices/gpu a:0/drain");
}

TEST_F(ClientTest, ResumeShowAndReleaseUseTheirEndpoints) {
  fake_->server().Post(
      "/v1/devices/gpu-a-00/resume", [](const httplib::Request& req, httplib::Response& res) {
        if (req.body != "{}")
          return answer(res, api::to_json(Error{ErrorCode::kInvalidArgument, "body"}), 400);
        answer(res, api::to_json(gpu("gpu-a-00")));
      });
  fake_->server().Get("/v1/compositions/4711/node1",
                      [](const httplib::Request&, httplib::Response& res) {
                        answer(res, api::to_json(ready(4711, "node1")));
                      });
  fake_->server().Delete("/v1/compositions/4711/node1",
                         [](const httplib::Request&, httplib::Response& res) {
                           Composition c = ready(4711, "node1");
                           c.state = CompositionState::kReleased;
                           c.devices.clear();
                           answer(res, api::release_to_json(c));
                         });
  fake_->server().Delete("/v1/compositions/4712/node1",
                         [](const httplib::Request&, httplib::Response& res) {
                           answer(res, api::release_to_json(std::nullopt));
                         });
  fake_->server().Get("/v1/compositions/1/nowhere", [](const httplib::Request&,
                                                       httplib::Response& res) {
    answer(res, api::to_json(Error{ErrorCode::kNotFound, "job 1 has no composition on nowhere"}),
           404);
  });
  Client c(options());
  auto resumed = c.resume("gpu-a-00");
  ASSERT_TRUE(resumed.ok()) << resumed.error();
  auto shown = c.show(4711, "node1");
  ASSERT_TRUE(shown.ok()) << shown.error();
  EXPECT_EQ(shown->state, CompositionState::kReady);
  auto released = c.release(4711, "node1");
  ASSERT_TRUE(released.ok()) << released.error();
  ASSERT_TRUE(released->has_value());
  EXPECT_EQ((*released)->state, CompositionState::kReleased);
  auto nothing = c.release(4712, "node1");
  ASSERT_TRUE(nothing.ok()) << nothing.error();
  EXPECT_FALSE(nothing->has_value());
  auto missing = c.show(1, "nowhere");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  auto seen = fake_->seen();
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[2].payload, "DELETE /v1/compositions/4711/node1");
}

TEST_F(ClientTest, RefusesEmptyNamesAndBadUrlsWithoutSending) {
  Client c(options());
  auto r = c.show(1, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "node must not be empty");
  auto d = c.drain("gpu-a-00", "");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().message, "drain reason must not be empty");
  ClientOptions o = options();
  o.servers = "127.0.0.1:6830";
  Client bad(o);
  auto p = bad.pool();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(p.error().message,
            "server list '127.0.0.1:6830': '127.0.0.1:6830' is not a URL; expected composerd "
            "URLs separated by commas, each http://HOST:PORT, https://HOST:PORT or unix:/PATH, "
            "for example http://127.0.0.1:6830,http://ctl2:6830");
  EXPECT_TRUE(fake_->seen().empty());
}

TEST_F(ClientTest, ConnectionRefusedNamesTheUrl) {
  ClientOptions o = options();
  o.servers = "http://127.0.0.1:" + std::to_string(test_support::free_port());
  o.retries = 1;
  Client c(o);
  auto r = c.pool();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find(o.servers + "/v1/pool"), std::string::npos) << r.error().message;
}

TEST_F(ClientTest, OneClientServesManyThreads) {
  fake_->server().Get("/v1/pool", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::pool_to_json({PoolRow{}}));
  });
  Client c(options());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 15; ++i) ok += c.pool().ok() ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 90);
  for (const Seen& s : fake_->seen()) EXPECT_EQ(s.decode, EMUNGE_SUCCESS);
}

// Several servers: an active composerd and its standbys (client.h). Each fake records what
// reached it; a standby answers 503 with "active" as composerd's standby does.

// A standby's answer: the usual error body and the active composerd's URL.
void standby(httplib::Response& res, const std::string& active) {
  Json::Value body = api::to_json(Error{ErrorCode::kUnavailable, "this composerd is a standby"});
  body["active"] = active;
  answer(res, body, 503);
}

void pool_answer(httplib::Response& res) { answer(res, api::pool_to_json({PoolRow{}})); }

std::string dead_url() { return "http://127.0.0.1:" + std::to_string(test_support::free_port()); }

TEST_F(ClientTest, ServersFirstDownSecondActiveAndRemembered) {
  fake_->server().Get("/v1/pool",
                      [](const httplib::Request&, httplib::Response& res) { pool_answer(res); });
  FakeComposerd standing(munge_->socket_path());
  standing.server().Get("/v1/pool", [&](const httplib::Request&, httplib::Response& res) {
    standby(res, fake_->url());
  });
  ClientOptions o = options();
  const std::string dead = dead_url();
  o.servers = dead + "," + standing.url() + "," + fake_->url();
  Client c(o);
  EXPECT_EQ(c.active_server(), dead);
  auto first = c.pool();
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(c.active_server(), fake_->url());
  EXPECT_EQ(standing.seen().size(), 1u);
  // The next call goes straight to the server that answered as active.
  auto second = c.pool();
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_EQ(standing.seen().size(), 1u);
  ASSERT_EQ(fake_->seen().size(), 2u);
  for (const Seen& s : fake_->seen()) EXPECT_EQ(s.decode, EMUNGE_SUCCESS);
}

TEST_F(ClientTest, ServersStandbyNamesTheActiveOneWhichIsAskedNext) {
  fake_->server().Post("/v1/devices/gpu-a-00/drain",
                       [](const httplib::Request&, httplib::Response& res) {
                         answer(res, api::to_json(gpu("gpu-a-00")));
                       });
  FakeComposerd standing(munge_->socket_path());
  standing.server().Post(
      "/v1/devices/gpu-a-00/drain",
      [&](const httplib::Request&, httplib::Response& res) { standby(res, fake_->url() + "/"); });
  FakeComposerd skipped(munge_->socket_path());
  ClientOptions o = options();
  o.servers = standing.url() + "," + skipped.url() + "," + fake_->url();
  Client c(o);
  // POST is never sent twice to one server, but a standby's refusal moves it on.
  auto d = c.drain("gpu-a-00", "maintenance");
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_EQ(standing.seen().size(), 1u);
  EXPECT_TRUE(skipped.seen().empty());
  EXPECT_EQ(fake_->seen().size(), 1u);
  EXPECT_EQ(c.active_server(), fake_->url());
}

TEST_F(ClientTest, ServersAllDownNamesEveryUrlAndWhatItSaid) {
  FakeComposerd standing(munge_->socket_path());
  standing.server().Get("/v1/pool", [](const httplib::Request&, httplib::Response& res) {
    standby(res, "http://ctl9:6830");
  });
  ClientOptions o = options();
  o.retries = 1;
  const std::string a = dead_url();
  const std::string b = dead_url();
  o.servers = a + "," + b + "," + standing.url();
  Client c(o);
  auto r = c.pool();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  // curl words the refusal in its own way ("Couldn't connect to server"): the rest is ours.
  const std::string& m = r.error().message;
  EXPECT_EQ(m.rfind("no composerd answered GET /v1/pool as the active one: " + a +
                        ": cannot connect to " + a + "/v1/pool: ",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find("; " + b + ": cannot connect to " + b + "/v1/pool: "), std::string::npos) << m;
  EXPECT_TRUE(m.ends_with("; " + standing.url() +
                          ": a standby naming http://ctl9:6830 as active (not in the server "
                          "list) (2 rounds)"))
      << m;
  EXPECT_EQ(standing.seen().size(), 2u);  // once a round
}

TEST_F(ClientTest, ServersLoneStandbySaysWhoIsActive) {
  fake_->server().Get("/v1/pool", [](const httplib::Request&, httplib::Response& res) {
    standby(res, "http://ctl2:6830");
  });
  ClientOptions o = options();
  o.retries = 0;
  Client c(o);
  auto r = c.pool();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().message, "composerd at " + fake_->url() +
                                   " is a standby naming http://ctl2:6830 as active (not in the "
                                   "server list) (GET /v1/pool)");
}

TEST_F(ClientTest, ServersAnyOtherAnswerIsTheAnswer) {
  // A 503 without "active" (a composerd settling what it left unfinished) and a 404 are
  // answers: the next server is not asked.
  fake_->server().Get("/v1/pool", [](const httplib::Request&, httplib::Response& res) {
    answer(res, api::to_json(Error{ErrorCode::kUnavailable, "recovering, try again"}), 503);
  });
  fake_->server().Get("/v1/compositions/4711/node1",
                      [](const httplib::Request&, httplib::Response& res) {
                        answer(res, api::to_json(Error{ErrorCode::kNotFound, "no such"}), 404);
                      });
  FakeComposerd other(munge_->socket_path());
  other.server().Get("/v1/pool",
                     [](const httplib::Request&, httplib::Response& res) { pool_answer(res); });
  ClientOptions o = options();
  o.retries = 1;
  o.servers = fake_->url() + "," + other.url();
  Client c(o);
  auto r = c.pool();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().message, "recovering, try again");
  auto s = c.show(4711, "node1");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(other.seen().empty());
  EXPECT_EQ(c.active_server(), fake_->url());
}

TEST_F(ClientTest, ServersShareOneTimeBound) {
  // Two standbys naming each other, each slow to say so: the call ends when one server's
  // bound is spent, 6 x (50 + 300) ms plus the backoffs = 2.1 s, not after 12 answers of
  // 250 ms (3 s).
  FakeComposerd a(munge_->socket_path());
  FakeComposerd b(munge_->socket_path());
  // By value: a handler still answering when the test ends must not reach the other server,
  // which goes first.
  const std::string a_url = a.url();
  const std::string b_url = b.url();
  a.server().Get("/v1/pool", [b_url](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    standby(res, b_url);
  });
  b.server().Get("/v1/pool", [a_url](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    standby(res, a_url);
  });
  ClientOptions o = options();
  o.connect_timeout_ms = 50;
  o.timeout_ms = 300;
  o.retries = 5;
  o.backoff_ms = 1;
  o.servers = a.url() + "," + b.url();
  Client c(o);
  const auto start = std::chrono::steady_clock::now();
  auto r = c.pool();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error();
  EXPECT_EQ(r.error().message.rfind("no composerd answered GET /v1/pool as the active one: ", 0),
            0u)
      << r.error();
  EXPECT_LT(took, std::chrono::milliseconds(2600));
  EXPECT_LT(a.seen().size() + b.seen().size(), 12u);
}
TEST_F(ClientTest, ServersCutASlowServerAtTheCallsBound) {
  // One attempt may take 50 + 1000 ms. The standby takes 600 of them, so the active one it
  // names gets what is left (about 450 ms), not a whole timeout of its own.
  FakeComposerd slow(munge_->socket_path());
  slow.server().Get("/v1/pool", [](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    pool_answer(res);
  });
  // By value: the fixture's server outlives `slow`.
  fake_->server().Get("/v1/pool",
                      [slow_url = slow.url()](const httplib::Request&, httplib::Response& res) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(600));
                        standby(res, slow_url);
                      });
  ClientOptions o = options();
  o.connect_timeout_ms = 50;
  o.timeout_ms = 1000;
  o.retries = 0;
  o.servers = fake_->url() + "," + slow.url();
  Client c(o);
  const auto start = std::chrono::steady_clock::now();
  auto r = c.pool();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error();
  EXPECT_NE(
      r.error().message.find(slow.url() + ": no answer to GET " + slow.url() + "/v1/pool within "),
      std::string::npos)
      << r.error();
  EXPECT_LT(took, std::chrono::milliseconds(1400));
}

// A composerd that does not answer (frozen) until `released` is set or 20 s have passed.
void frozen(const std::shared_ptr<std::atomic<bool>>& released) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!released->load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void health_answer(httplib::Response& res, const std::string& role, const std::string& active) {
  api::HealthInfo h;
  h.status = "ok";
  h.fabric = "ok";
  h.role = role;
  h.epoch = role == "active" ? 2 : 1;
  h.active = active;
  answer(res, api::to_json(h));
}

TEST_F(ClientTest, ServersLeaveAFrozenServerOnceAnotherTookOver) {
  // The composerd the call went to does not answer; after 3 s the other one is asked for its
  // health, says it is active now, and gets the call.
  auto released = std::make_shared<std::atomic<bool>>(false);
  fake_->server().Put("/v1/compositions/7/node1",
                      [released](const httplib::Request&, httplib::Response& res) {
                        frozen(released);
                        answer(res, api::to_json(ready(7, "node1")));
                      });
  FakeComposerd taker(munge_->socket_path());
  taker.server().Get("/v1/health", [](const httplib::Request&, httplib::Response& res) {
    health_answer(res, "active", "");
  });
  taker.server().Put("/v1/compositions/7/node1",
                     [](const httplib::Request&, httplib::Response& res) {
                       answer(res, api::to_json(ready(7, "node1")));
                     });
  ClientOptions o = options();
  o.timeout_ms = 15000;
  o.retries = 0;
  o.servers = fake_->url() + "," + taker.url();
  Client c(o);
  const auto start = std::chrono::steady_clock::now();
  auto r = c.compose(7, "node1", api::ComposeBody{});
  const auto took = std::chrono::steady_clock::now() - start;
  released->store(true);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->owner.job_id, 7u);
  EXPECT_GE(took, std::chrono::milliseconds(2900));
  EXPECT_LT(took, std::chrono::milliseconds(6000));
  EXPECT_EQ(c.active_server(), taker.url());
  size_t puts = 0;
  for (const Seen& s : taker.seen()) puts += s.method == "PUT" ? 1 : 0;
  EXPECT_EQ(puts, 1u);
}

TEST_F(ClientTest, ServersWaitForASlowActiveServerWhileTheOthersAreStandbys) {
  // A slow answer from the active composerd is waited for: the other one is asked, but it is
  // a standby naming the slow one.
  fake_->server().Put("/v1/compositions/7/node1",
                      [](const httplib::Request&, httplib::Response& res) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(4500));
                        answer(res, api::to_json(ready(7, "node1")));
                      });
  FakeComposerd standing(munge_->socket_path());
  const std::string slow_url = fake_->url();
  standing.server().Get("/v1/health", [slow_url](const httplib::Request&, httplib::Response& res) {
    health_answer(res, "standby", slow_url);
  });
  ClientOptions o = options();
  o.timeout_ms = 15000;
  o.retries = 0;
  o.servers = fake_->url() + "," + standing.url();
  Client c(o);
  auto r = c.compose(7, "node1", api::ComposeBody{});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(c.active_server(), fake_->url());
  const std::vector<Seen> asked = standing.seen();
  EXPECT_FALSE(asked.empty());
  for (const Seen& s : asked) EXPECT_EQ(s.path, "/v1/health");
}

}  // namespace
}  // namespace composer::client
