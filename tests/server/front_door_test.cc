// composerd's HTTP front door in process, on loopback and a Unix socket, with small limits:
// what reaches the routes (method, decoded path, query, headers, the local caller's uid),
// what each limit refuses before a route sees it, HEAD without a body, and pipelined
// requests answered in the order they came although the first answer comes last.
#include "front_door.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "composer/test_support/raw_socket.h"
#include "composer/test_support/temp_dir.h"

namespace composer::server {
namespace {

using test_support::answers_in;
using test_support::connect_to;
using test_support::send_all;
using ::testing::HasSubstr;

class FrontDoorTest : public ::testing::Test {
 protected:
  void start(FrontDoorLimits limits, FrontDoor::Answer answer) {
    door_ = std::make_unique<FrontDoor>(
        limits,
        [this, answer = std::move(answer)](HttpRequest& req, HttpReply reply) {
          {
            std::lock_guard lock(mu_);
            seen_.push_back(req);
          }
          answer(req, std::move(reply));
        },
        [](int status, const std::string& sentence) {
          return HttpResponse{.status = status, .body = "refused: " + sentence};
        },
        [this](const HttpRequest&, const HttpResponse& res) {
          std::lock_guard lock(mu_);
          answered_.push_back(res.status);
        });
    ASSERT_TRUE(door_->bind("127.0.0.1", 0).ok());
    ASSERT_TRUE(door_->bind_local(dir_.file("api.sock")).ok());
    thread_ = std::thread([this] { door_->run(); });
  }
  void start(FrontDoorLimits limits = {}) {
    start(limits, [](HttpRequest& req, HttpReply reply) {
      reply(HttpResponse{.status = 200, .body = req.path, .content_type = "text/plain"});
    });
  }
  void TearDown() override {
    if (door_) door_->stop();
    if (thread_.joinable()) thread_.join();
  }

  // Sends `request` on a new connection (or `fd`) and reads until `count` whole answers came
  // or five seconds passed; the text as read.
  static std::string exchange(int fd, const std::string& request, size_t count = 1) {
    timeval tv{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    EXPECT_TRUE(send_all(fd, request));
    std::string text;
    char buf[4096];
    while (answers_in(text).size() < count) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    return text;
  }
  std::string exchange(const std::string& request, size_t count = 1) {
    const int fd = connect_to(door_->port());
    EXPECT_GE(fd, 0);
    std::string text = exchange(fd, request, count);
    ::close(fd);
    return text;
  }

  size_t seen() {
    std::lock_guard lock(mu_);
    return seen_.size();
  }

  test_support::TempDir dir_{"front-door-test"};
  std::unique_ptr<FrontDoor> door_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<HttpRequest> seen_;
  std::vector<int> answered_;
};

TEST_F(FrontDoorTest, ARouteSeesTheDecodedPathQueryAndHeadersAndItsAnswerGoesBack) {
  start();
  const std::string text =
      exchange("GET /v1/a%20b?x=1%20 HTTP/1.1\r\nHost: h\r\nX-Test: yes\r\n\r\n");
  auto answers = answers_in(text);
  ASSERT_EQ(answers.size(), 1u) << text;
  EXPECT_EQ(answers[0].status, 200);
  EXPECT_EQ(answers[0].body, "/v1/a b");
  EXPECT_THAT(text, HasSubstr("Content-Type: text/plain"));
  std::lock_guard lock(mu_);
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(seen_[0].method, "GET");
  EXPECT_EQ(seen_[0].target, "/v1/a%20b?x=1%20");
  EXPECT_EQ(seen_[0].query, "x=1%20");
  EXPECT_EQ(seen_[0].header("x-test"), "yes");
  EXPECT_FALSE(seen_[0].local.has_value());
  EXPECT_EQ(answered_, std::vector<int>{200});
}

TEST_F(FrontDoorTest, HeadIsAnsweredWithTheLengthAndWithoutTheBody) {
  start();
  const int fd = connect_to(door_->port());
  ASSERT_GE(fd, 0);
  timeval tv{.tv_sec = 1, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ASSERT_TRUE(send_all(fd, "HEAD /abc HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"));
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_THAT(text, HasSubstr("Content-Length: 4\r\n"));
  EXPECT_EQ(text.substr(text.find("\r\n\r\n") + 4), "");
  std::lock_guard lock(mu_);
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(seen_[0].method, "HEAD");
}

TEST_F(FrontDoorTest, EachLimitRefusesWithItsStatusBeforeARouteSeesTheRequest) {
  start(FrontDoorLimits{.header_fields = 3, .body_bytes = 16});
  auto fields = answers_in(exchange("GET /a HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"));
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields[0].status, 431);
  EXPECT_EQ(fields[0].body,
            "refused: request has 4 header fields, more than 3, the most composerd reads "
            "(ApiMaxHeaders)");

  auto body = answers_in(
      exchange("PUT /a HTTP/1.1\r\nHost: h\r\nContent-Length: 17\r\n\r\n" + std::string(17, 'x')));
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0].status, 413);

  auto line =
      answers_in(exchange("GET /" + std::string(kMaxRequestLine, 'a') + " HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(line.size(), 1u);
  EXPECT_EQ(line[0].status, 414);

  auto method = answers_in(exchange("BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n"));
  ASSERT_EQ(method.size(), 1u);
  EXPECT_EQ(method[0].status, 400);

  EXPECT_EQ(seen(), 0u);
  // Within the limits: answered.
  auto fits = answers_in(
      exchange("PUT /a HTTP/1.1\r\nHost: h\r\nContent-Length: 16\r\n\r\n" + std::string(16, 'x')));
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].status, 200);
}

TEST_F(FrontDoorTest, PipelinedRequestsAreAnsweredInTheOrderTheyCame) {
  std::atomic<int> calls{0};
  std::vector<std::thread> late;
  std::mutex late_mu;
  start({}, [&](HttpRequest& req, HttpReply reply) {
    HttpResponse res{.status = 200, .body = req.path, .content_type = "text/plain"};
    if (calls++ == 0) {
      // The first answer comes from another thread, after the second request was handled.
      std::lock_guard lock(late_mu);
      late.emplace_back([reply = std::move(reply), res] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        reply(res);
      });
      return;
    }
    reply(res);
  });
  const std::string text =
      exchange("GET /first HTTP/1.1\r\nHost: h\r\n\r\nGET /second HTTP/1.1\r\nHost: h\r\n\r\n", 2);
  {
    std::lock_guard lock(late_mu);
    for (auto& t : late) t.join();
  }
  auto answers = answers_in(text);
  ASSERT_EQ(answers.size(), 2u) << text;
  EXPECT_EQ(answers[0].body, "/first");
  EXPECT_EQ(answers[1].body, "/second");
}

TEST_F(FrontDoorTest, ARequestOnTheUnixSocketCarriesTheCallersUid) {
  start();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = dir_.file("api.sock");
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto answers = answers_in(exchange(fd, "GET /me HTTP/1.1\r\nHost: h\r\n\r\n"));
  ::close(fd);
  ASSERT_EQ(answers.size(), 1u);
  std::lock_guard lock(mu_);
  ASSERT_EQ(seen_.size(), 1u);
  ASSERT_TRUE(seen_[0].local.has_value());
  EXPECT_EQ(seen_[0].local->uid, ::getuid());
  EXPECT_EQ(seen_[0].peer, "local uid " + std::to_string(::getuid()));
}

}  // namespace
}  // namespace composer::server
