#include "composer/http/http.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "composer/test_support/ports.h"
#include "composer/test_support/test_server.h"

namespace composer::http {
namespace {

using composer::testing::TestServer;
using Clock = std::chrono::steady_clock;

long elapsed_ms(Clock::time_point start) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

HttpOptions fast(int retries = 3) {
  HttpOptions o;
  o.connect_timeout_ms = 500;
  o.timeout_ms = 2000;
  o.retries = retries;
  o.backoff_ms = 20;
  o.max_backoff_ms = 200;
  return o;
}

const char kUnavailableBody[] = R"({"error":{"code":"unavailable","message":"busy"}})";

// Answers `failures` times with `status`, then 200; counts the requests per method.
struct FlakyServer {
  explicit FlakyServer(int failures, int status = 503) : failures_left(failures) {
    auto handler = [this, status](const httplib::Request& req, httplib::Response& res) {
      ++hits;
      last_method = req.method;
      if (failures_left.fetch_sub(1) > 0) {
        res.status = status;
        res.set_content(kUnavailableBody, "application/json");
        return;
      }
      res.status = 200;
      res.set_content(R"({"ok":true})", "application/json");
    };
    t.server.Get("/x", handler);
    t.server.Put("/x", handler);
    t.server.Delete("/x", handler);
    t.server.Post("/x", handler);
  }
  TestServer t;
  std::atomic<int> failures_left;
  std::atomic<int> hits{0};
  std::string last_method;
};

TEST(HttpClient, RetriesIdempotentMethodsOn503ThenSucceeds) {
  for (const char* method : {"GET", "PUT", "DELETE"}) {
    FlakyServer s(2);
    HttpClient http(fast());
    auto r = http.send({method, s.t.url() + "/x", "{}", nullptr});
    ASSERT_TRUE(r.ok()) << method << ": " << r.error();
    EXPECT_EQ(r->status, 200) << method;
    EXPECT_EQ(r->attempts, 3) << method;
    EXPECT_EQ(s.hits.load(), 3) << method;
    EXPECT_EQ(s.last_method, method);
    EXPECT_EQ(r->body, R"({"ok":true})");
    EXPECT_EQ(r->header("Content-Type"), "application/json");
  }
}

TEST(HttpClient, RetriesOn502And504Too) {
  for (int status : {502, 504}) {
    FlakyServer s(1, status);
    HttpClient http(fast());
    auto r = http.send({"GET", s.t.url() + "/x", "", nullptr});
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(s.hits.load(), 2) << status;
  }
}

TEST(HttpClient, NeverRetriesPost) {
  FlakyServer s(5);
  HttpClient http(fast());
  auto r = http.send({"POST", s.t.url() + "/x", "{}", nullptr});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->attempts, 1);
  EXPECT_EQ(s.hits.load(), 1);
  EXPECT_EQ(r->body, kUnavailableBody);
}

TEST(HttpClient, DoesNotRetryOtherErrorStatuses) {
  FlakyServer s(5, 500);
  HttpClient http(fast());
  auto r = http.send({"GET", s.t.url() + "/x", "", nullptr});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(s.hits.load(), 1);
}

TEST(HttpClient, GivesUpAfterTheConfiguredRetriesWithTheLastAnswer) {
  FlakyServer s(100);
  HttpClient http(fast(2));
  auto r = http.send({"GET", s.t.url() + "/x", "", nullptr});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->attempts, 3);
  EXPECT_EQ(s.hits.load(), 3);
}

TEST(HttpClient, WaitsBetweenRetries) {
  FlakyServer s(3);
  HttpOptions o = fast();
  o.backoff_ms = 100;
  o.max_backoff_ms = 1000;
  HttpClient http(o);
  const auto start = Clock::now();
  auto r = http.send({"GET", s.t.url() + "/x", "", nullptr});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, 200);
  // Pauses of at least 50, 100 and 200 ms (the lower halves of 100, 200, 400).
  EXPECT_GE(elapsed_ms(start), 350);
}

TEST(HttpClient, BackoffDoublesIsCappedAndJittered) {
  HttpOptions o;
  o.backoff_ms = 100;
  o.max_backoff_ms = 1000;
  HttpClient http(o);
  std::set<long> seen;
  for (int i = 0; i < 200; ++i) {
    const long first = static_cast<long>(http.backoff(1).count());
    EXPECT_GE(first, 50);
    EXPECT_LE(first, 100);
    seen.insert(first);
    const long third = static_cast<long>(http.backoff(3).count());
    EXPECT_GE(third, 200);
    EXPECT_LE(third, 400);
    const long capped = static_cast<long>(http.backoff(30).count());
    EXPECT_GE(capped, 500);
    EXPECT_LE(capped, 1000);
  }
  EXPECT_GT(seen.size(), 10u) << "no jitter";
}

TEST(HttpClient, ConnectionRefusedIsUnavailableAndNamesTheUrl) {
  const std::string url = "http://127.0.0.1:" + std::to_string(test_support::free_port()) + "/x";
  HttpClient http(fast(0));
  auto r = http.send({"GET", url, "", nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find(url), std::string::npos) << r.error().message;
}

// composerd's ListenSocket down (a restart): the sentence names the socket tried and the
// system's reason, never the URL's stand-in host ("localhost port 80").
TEST(HttpClient, AUnixSocketErrorNamesIt) {
  HttpOptions o = fast(0);
  o.unix_socket = "/nonexistent/composerd.sock";
  HttpClient http(o);
  auto r = http.send({"PUT", "http://localhost/v1/compositions/7", "{}", nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(r.error().message,
            "cannot connect to unix:/nonexistent/composerd.sock: No such file or directory");
}

TEST(HttpClient, ConnectionRefusedIsRetriedForGetOnly) {
  const std::string url = "http://127.0.0.1:" + std::to_string(test_support::free_port()) + "/x";
  HttpClient http(fast(2));
  auto get = http.send({"GET", url, "", nullptr});
  ASSERT_FALSE(get.ok());
  EXPECT_NE(get.error().message.find("(after 3 attempts)"), std::string::npos)
      << get.error().message;
  auto post = http.send({"POST", url, "{}", nullptr});
  ASSERT_FALSE(post.ok());
  EXPECT_EQ(post.error().message.find("attempts"), std::string::npos) << post.error().message;
}

TEST(HttpClient, SlowAnswerIsATimeoutAndComesQuickly) {
  // What the handler uses outlives the server: the server is destroyed first, and stopping it
  // waits for the handler still waking up after the release.
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> hits{0};
  TestServer t;
  t.server.Get("/slow", [&](const httplib::Request&, httplib::Response& res) {
    ++hits;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
    res.set_content("{}", "application/json");
  });
  HttpOptions o = fast();
  o.timeout_ms = 300;
  HttpClient http(o);
  const auto start = Clock::now();
  auto r = http.send({"GET", t.url() + "/slow", "", nullptr});
  const long took = elapsed_ms(start);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout) << r.error();
  EXPECT_NE(r.error().message.find(t.url() + "/slow"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("300 ms"), std::string::npos) << r.error().message;
  EXPECT_LT(took, 1500);
  EXPECT_EQ(hits.load(), 1) << "a timed-out request was retried";
}

// A listener whose accept queue is full: new connections are never completed.
TEST(HttpClient, ConnectTimeoutIsUnavailable) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fillers.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  HttpOptions o = fast(0);
  o.connect_timeout_ms = 200;
  HttpClient http(o);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/x";
  const auto start = Clock::now();
  auto r = http.send({"GET", url, "", nullptr});
  const long took = elapsed_ms(start);
  for (int fd : fillers) ::close(fd);
  ::close(listener);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error();
  EXPECT_NE(r.error().message.find(url), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("cannot connect to " + url + ": no connection within 200 ms"),
            std::string::npos)
      << r.error().message;
  EXPECT_LT(took, 1500);
}

// On a connection kept from an earlier request a silent server is still a timeout, not a
// connection that could not be made: the request went out.
TEST(HttpClient, SilenceOnAReusedConnectionIsATimeout) {
  std::atomic<bool> slow{false};
  std::atomic<int> hits{0};
  TestServer t;  // after what its handler uses, so it goes first
  t.server.Get("/r", [&](const httplib::Request&, httplib::Response& res) {
    ++hits;
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(800));
    res.set_content("{}", "application/json");
  });
  HttpOptions o = fast(0);
  o.timeout_ms = 300;
  HttpClient http(o);
  ASSERT_TRUE(http.send({"GET", t.url() + "/r", "", nullptr}).ok());
  slow = true;
  auto r = http.send({"GET", t.url() + "/r", "", nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout) << r.error();
  EXPECT_EQ(r.error().message, "no answer to GET " + t.url() + "/r within 300 ms");
  EXPECT_EQ(hits.load(), 2);
}

// A request without a body says so (Content-Length: 0): some servers otherwise read the next
// request on the connection as its body. The next request on the kept connection is answered.
TEST(HttpClient, BodylessRequestsSayContentLengthZero) {
  TestServer t;
  std::vector<std::string> lengths;
  t.server.Delete("/d", [&](const httplib::Request& req, httplib::Response& res) {
    lengths.push_back(req.has_header("Content-Length") ? req.get_header_value("Content-Length")
                                                       : "none");
    res.set_content("{}", "application/json");
  });
  t.server.Get("/g", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"after":true})", "application/json");
  });
  HttpClient http(fast(0));
  auto d = http.send({"DELETE", t.url() + "/d", "", nullptr});
  ASSERT_TRUE(d.ok()) << d.error();
  auto g = http.send({"GET", t.url() + "/g", "", nullptr});
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->body, R"({"after":true})");
  EXPECT_EQ(lengths, (std::vector<std::string>{"0"}));
}

TEST(HttpClient, HeadersAreAskedForAgainBeforeEveryAttempt) {
  FlakyServer s(2);
  std::vector<std::string> seen;
  s.t.server.Get("/h", [&](const httplib::Request& req, httplib::Response& res) {
    seen.push_back(req.get_header_value("X-Attempt"));
    res.status = seen.size() < 3 ? 503 : 200;
  });
  HttpClient http(fast());
  int calls = 0;
  HttpRequest req{"GET", s.t.url() + "/h", "", [&]() -> Expected<std::vector<std::string>> {
                    return std::vector<std::string>{"X-Attempt: " + std::to_string(++calls)};
                  }};
  auto r = http.send(req);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(seen, (std::vector<std::string>{"1", "2", "3"}));
}

TEST(HttpClient, AFailingHeaderSourceSendsNothing) {
  FlakyServer s(0);
  HttpClient http(fast());
  HttpRequest req{"GET", s.t.url() + "/x", "", []() -> Expected<std::vector<std::string>> {
                    return Error{ErrorCode::kUnavailable, "no credential"};
                  }};
  auto r = http.send(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "no credential");
  EXPECT_EQ(s.hits.load(), 0);
}

TEST(HttpClient, RefusesUnknownMethodsAndBadUrls) {
  HttpClient http(fast(0));
  auto trace = http.send({"TRACE", "http://127.0.0.1:1/x", "", nullptr});
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(trace.error().message.rfind("HTTP method 'TRACE' is not one of GET, PUT, POST", 0), 0u)
      << trace.error().message;
  auto ftp = http.send({"GET", "ftp://127.0.0.1/x", "", nullptr});
  ASSERT_FALSE(ftp.ok());
  EXPECT_EQ(ftp.error().code, ErrorCode::kInvalidArgument) << ftp.error();
}

TEST(HttpClient, SendsBodiesAsJson) {
  TestServer t;
  std::string body, type;
  t.server.Put("/b", [&](const httplib::Request& req, httplib::Response& res) {
    body = req.body;
    type = req.get_header_value("Content-Type");
    res.set_content("{}", "application/json");
  });
  HttpClient http(fast());
  auto r = http.send({"PUT", t.url() + "/b", R"({"gpus":2})", nullptr});
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(body, R"({"gpus":2})");
  EXPECT_EQ(type, "application/json");
}

TEST(HttpClient, NoAttemptRunsPastTheDeadline) {
  // A server that answers 503 forever: retries stop at the deadline, not after 20 of them.
  std::atomic<int> hits{0};
  TestServer busy;
  busy.server.Get("/busy", [&](const httplib::Request&, httplib::Response& res) {
    ++hits;
    res.status = 503;
  });
  HttpOptions o = fast(20);
  o.backoff_ms = 100;
  HttpClient http(o);
  HttpRequest req{"GET", busy.url() + "/busy", "", nullptr};
  req.deadline = Clock::now() + std::chrono::milliseconds(400);
  auto r = http.send(req);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->status, 503);
  EXPECT_LT(hits.load(), 6);

  // A slow server: the attempt's timeout shrinks to the time left.
  TestServer slow;
  slow.server.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    res.set_content("{}", "application/json");
  });
  HttpRequest late{"GET", slow.url() + "/slow", "", nullptr};
  late.deadline = Clock::now() + std::chrono::milliseconds(300);
  const auto start = Clock::now();
  auto t = http.send(late);
  EXPECT_LT(elapsed_ms(start), 1000);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kTimeout) << t.error();
}

TEST(HttpClient, AnAttemptIsAbandonedWhenTheCallerSaysSo) {
  // The caller's hook is asked while the answer is awaited; its sentence ends the attempt at
  // once, without a retry, and is the error's reason.
  std::atomic<int> hits{0};
  TestServer slow;
  slow.server.Get("/slow", [&](const httplib::Request&, httplib::Response& res) {
    ++hits;
    std::this_thread::sleep_for(std::chrono::milliseconds(1800));
    res.set_content("{}", "application/json");
  });
  HttpClient http(fast(3));
  std::atomic<int> asked{0};
  HttpRequest req{"GET", slow.url() + "/slow", "", nullptr};
  req.abandon = [&]() -> std::optional<std::string> {
    if (++asked < 2) return std::nullopt;
    return "another server took over";
  };
  const auto start = Clock::now();
  auto r = http.send(req);
  EXPECT_LT(elapsed_ms(start), 1600);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable) << r.error();
  EXPECT_EQ(r.error().message, "gave up on GET " + slow.url() + "/slow: another server took over");
  EXPECT_EQ(asked.load(), 2);
  EXPECT_EQ(hits.load(), 1);

  // A hook that never says a word leaves the answer alone.
  HttpRequest patient{"GET", slow.url() + "/slow", "", nullptr};
  patient.abandon = []() -> std::optional<std::string> { return std::nullopt; };
  auto ok = http.send(patient);
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok->status, 200);
}

}  // namespace
}  // namespace composer::http
