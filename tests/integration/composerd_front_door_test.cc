// composerd's front door under connection abuse, against the real daemon: idle connections by
// the thousand, slow-loris clients, oversized and endless headers, a chunked body past the
// limit, a gzip body, pipelined requests. During each a normal authenticated request is
// answered within a few seconds, composerd's resident memory stays under kMaxRssBytes, and
// it serves as before once the abusers go.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "composer/api/codec.h"
#include "composer/test_support/raw_socket.h"
#include "composerd_process.h"
#include "raw_request.h"

namespace composer::testing {
namespace {

// Far above composerd's ~20 MiB at rest, far below what the abuse cost cpp-httplib (300 MiB
// for 200 MB of header lines, 548 MiB for a 256 MiB chunked body).
constexpr long kMaxRssBytes = 200L << 20;
constexpr auto kPrompt = std::chrono::seconds(5);  // "within a few seconds", on a busy machine

using Clock = std::chrono::steady_clock;
using test_support::Answer;
using test_support::answers_in;
using test_support::connect_to;
using test_support::send_all;

long rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long kb = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kb;
      return kb * 1024;
    }
    in.ignore(4096, '\n');
  }
  return -1;
}

size_t open_fds(pid_t pid) {
  size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// Everything the peer sends until it closes or `wait` passes.
std::string read_until_close(int fd, std::chrono::milliseconds wait) {
  std::string out;
  const auto end = Clock::now() + wait;
  char buf[65536];
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Writes `chunk` again and again (at most `most` bytes) until composerd answers; returns the
// answer (empty when none came) and how much was written.
struct Flood {
  std::string answer;
  size_t sent = 0;
};
Flood flood(int fd, const std::string& start, const std::string& chunk, size_t most) {
  Flood f;
  if (!send_all(fd, start)) return f;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  char buf[65536];
  const auto end = Clock::now() + std::chrono::seconds(60);
  while (f.sent < most && Clock::now() < end) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if ((p.revents & POLLIN) != 0) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) f.answer.append(buf, static_cast<size_t>(n));
      if (n <= 0 || f.answer.find("\r\n\r\n") != std::string::npos) break;
    }
    if ((p.revents & (POLLERR | POLLHUP)) != 0) break;
    if ((p.revents & POLLOUT) != 0) {
      const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n < 0 && errno != EAGAIN) break;
      if (n > 0) f.sent += static_cast<size_t>(n);
    }
  }
  // The rest of the answer, if any.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  f.answer += read_until_close(fd, std::chrono::milliseconds(2000));
  return f;
}

class FrontDoorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The test holds thousands of sockets itself.
    rlimit nofile{};
    ::getrlimit(RLIMIT_NOFILE, &nofile);
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 8192);
    ::setrlimit(RLIMIT_NOFILE, &nofile);
    daemon_ = new ComposerdProcess("ApiRequestTimeout=3\n");
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  static int port() { return daemon_->port(); }

  // A normal authenticated request is answered, and promptly.
  static void served_promptly(const std::string& during) {
    const auto began = Clock::now();
    auto pool = daemon_->client(10000).pool();
    const auto took = Clock::now() - began;
    ASSERT_TRUE(pool.ok()) << during << ": " << pool.error();
    EXPECT_FALSE(pool->empty()) << during;
    EXPECT_LT(took, kPrompt) << during << ": GET /v1/pool took "
                             << std::chrono::duration<double>(took).count() << " s";
    const long rss = rss_bytes(daemon_->pid());
    EXPECT_GT(rss, 0);
    EXPECT_LT(rss, kMaxRssBytes) << during << ": composerd's resident memory";
  }

  static Json::Value error_of(const Answer& a) {
    auto json = api::parse_json(a.body);
    EXPECT_TRUE(json.ok()) << a.body;
    return json.ok() ? (*json)["error"] : Json::Value();
  }

  static uint32_t free_gpus() {
    auto pool = daemon_->client().pool();
    EXPECT_TRUE(pool.ok());
    uint32_t n = 0;
    for (const auto& row : *pool) {
      if (row.type == DeviceType::kGpu) n += row.free;
    }
    return n;
  }

  static ComposerdProcess* daemon_;
};
ComposerdProcess* FrontDoorTest::daemon_ = nullptr;

// 2,000 idle connections (more than ApiMaxConnectionsPerPeer from one address): composerd sheds
// the oldest idle ones, keeps at most ApiMaxConnections open and answers a normal request.
TEST_F(FrontDoorTest, TwoThousandIdleConnectionsBlockNothing) {
  const size_t fds_before = open_fds(daemon_->pid());
  std::vector<int> idle;
  for (int i = 0; i < 2000; ++i) {
    const int fd = connect_to(port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    idle.push_back(fd);
  }
  served_promptly("2,000 idle connections open");
  // The oldest were shed: composerd holds no more than it allows one peer (1024 by default).
  size_t closed_by_composerd = 0;
  for (int round = 0; round < 50 && closed_by_composerd < 2000u - 1024u; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    closed_by_composerd = 0;
    for (int fd : idle) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 0) == 1) ++closed_by_composerd;  // EOF: shed
    }
  }
  EXPECT_GE(closed_by_composerd, 2000u - 1024u);
  EXPECT_LE(open_fds(daemon_->pid()), fds_before + 1024 + 8);
  // The newest were kept, not shed: the last one still answers.
  ASSERT_TRUE(send_all(idle.back(), "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"));
  pollfd last{idle.back(), POLLIN, 0};
  ASSERT_EQ(::poll(&last, 1, 5000), 1);
  char head[16] = {};
  ASSERT_GT(::recv(idle.back(), head, sizeof head - 1, 0), 8);
  EXPECT_EQ(std::string(head).substr(0, 12), "HTTP/1.1 200");
  for (int fd : idle) ::close(fd);
  served_promptly("after the idle connections went");
  // Every slot is free again.
  for (int i = 0; i < 100 && open_fds(daemon_->pid()) > fds_before + 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_LE(open_fds(daemon_->pid()), fds_before + 4);
}

// 64 clients each sending one header byte at a time: others are served meanwhile, and
// composerd closes each when ApiRequestTimeout (3 s here) passes without a whole request.
TEST_F(FrontDoorTest, SlowLorisClientsAreServedAroundAndCutOff) {
  std::vector<int> slow;
  for (int i = 0; i < 64; ++i) {
    const int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "GET /v1/pool HTTP/1.1\r\nX-Slow: "));
    slow.push_back(fd);
  }
  const auto began = Clock::now();
  std::vector<bool> cut(slow.size(), false);
  size_t cut_count = 0;
  bool checked = false;
  while (cut_count < slow.size() && Clock::now() - began < std::chrono::seconds(15)) {
    for (size_t i = 0; i < slow.size(); ++i) {
      if (!cut[i] && !send_all(slow[i], "a")) {
        cut[i] = true;
        ++cut_count;
      }
      pollfd p{slow[i], POLLIN, 0};
      if (!cut[i] && ::poll(&p, 1, 0) == 1) {
        cut[i] = true;
        ++cut_count;
      }
    }
    if (!checked && Clock::now() - began > std::chrono::seconds(1)) {
      served_promptly("64 slow-loris clients");
      checked = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const auto took = Clock::now() - began;
  EXPECT_TRUE(checked);
  EXPECT_EQ(cut_count, slow.size()) << "slow clients composerd did not cut off";
  EXPECT_GE(took, std::chrono::milliseconds(2500)) << "cut off before ApiRequestTimeout";
  for (int fd : slow) ::close(fd);
  served_promptly("after the slow clients went");
}

// A header block past ApiMaxHeaderBytes, too many header fields, and header lines without end:
// each refused with 431 and a sentence, after reading no more than the limit.
TEST_F(FrontDoorTest, OversizedAndEndlessHeadersAreRefused) {
  {
    const int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    std::string req = "GET /v1/health HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 200; ++i)
      req += "X-Pad-" + std::to_string(i) + ": " + std::string(300, 'a') + "\r\n";
    req += "\r\n";
    ASSERT_TRUE(send_all(fd, req));
    const auto got = answers_in(read_until_close(fd, std::chrono::milliseconds(5000)));
    ::close(fd);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, 431);
    EXPECT_EQ(error_of(got[0])["code"].asString(), "invalid_argument");
    EXPECT_NE(
        error_of(got[0])["message"].asString().find("request header block larger than 32768 bytes"),
        std::string::npos)
        << got[0].body;
  }
  {
    const int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    std::string req = "GET /v1/health HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 150; ++i) req += "X-" + std::to_string(i) + ": 1\r\n";
    ASSERT_TRUE(send_all(fd, req + "\r\n"));
    const auto got = answers_in(read_until_close(fd, std::chrono::milliseconds(5000)));
    ::close(fd);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, 431);
    EXPECT_NE(error_of(got[0])["message"].asString().find("151 header fields, more than 100"),
              std::string::npos)
        << got[0].body;
  }
  // Endless: header lines for as long as composerd reads them (at most 200 MB here).
  std::thread normal([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    served_promptly("endless header lines");
  });
  const int fd = connect_to(port());
  ASSERT_GE(fd, 0);
  const Flood f = flood(fd, "GET /v1/health HTTP/1.1\r\n",
                        "X-Endless: " + std::string(1000, 'b') + "\r\n", size_t{200} << 20);
  ::close(fd);
  normal.join();
  const auto got = answers_in(f.answer);
  ASSERT_EQ(got.size(), 1u) << f.answer.substr(0, 200);
  EXPECT_EQ(got[0].status, 431);
  EXPECT_LT(f.sent, size_t{64} << 20) << "composerd kept reading header lines";
  EXPECT_LT(rss_bytes(daemon_->pid()), kMaxRssBytes);
  served_promptly("after the header floods");
}

// A chunked body without end: refused with 413 once past ApiMaxBodyBytes (1 MiB), as a body
// with Content-Length is; nothing is composed.
TEST_F(FrontDoorTest, AChunkedBodyPastTheLimitIsRefused) {
  const uint32_t before = free_gpus();
  std::thread normal([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    served_promptly("a chunked body without end");
  });
  const int fd = connect_to(port());
  ASSERT_GE(fd, 0);
  const std::string cred = munge_credential(daemon_->munge_socket(), "PUT /v1/compositions/5/n1");
  std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
  const Flood f = flood(fd,
                        "PUT /v1/compositions/5/n1 HTTP/1.1\r\nHost: x\r\nAuthorization: Munge " +
                            cred + "\r\nTransfer-Encoding: chunked\r\n\r\n",
                        chunk, size_t{256} << 20);
  ::close(fd);
  normal.join();
  const auto got = answers_in(f.answer);
  ASSERT_EQ(got.size(), 1u) << f.answer.substr(0, 200);
  EXPECT_EQ(got[0].status, 413);
  EXPECT_NE(error_of(got[0])["message"].asString().find("request body larger than 1048576 bytes"),
            std::string::npos)
      << got[0].body;
  EXPECT_LT(f.sent, size_t{64} << 20) << "composerd kept reading the body";
  EXPECT_LT(rss_bytes(daemon_->pid()), kMaxRssBytes);
  EXPECT_EQ(free_gpus(), before);
  served_promptly("after the chunked body");
}

// A gzip body (64 MiB of zeros in about 64 KB) is refused unread with 415: composerd never
// decompresses a request.
TEST_F(FrontDoorTest, AGzipBodyIsRefusedNotInflated) {
  const uint32_t before = free_gpus();
  std::string body;
  {
    FILE* p = popen("head -c 67108864 /dev/zero | gzip -1 -c", "r");
    ASSERT_NE(p, nullptr);
    char buf[65536];
    size_t n = 0;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) body.append(buf, n);
    ASSERT_EQ(pclose(p), 0);
  }
  ASSERT_GT(body.size(), 1000u);
  ASSERT_LT(body.size(), size_t{1} << 20);  // within the body limit: refused for its encoding
  const int fd = connect_to(port());
  ASSERT_GE(fd, 0);
  const std::string cred = munge_credential(daemon_->munge_socket(), "PUT /v1/compositions/6/n1");
  ASSERT_TRUE(
      send_all(fd, "PUT /v1/compositions/6/n1 HTTP/1.1\r\nHost: x\r\nAuthorization: Munge " + cred +
                       "\r\nContent-Type: application/json\r\nContent-Encoding: "
                       "gzip\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\n\r\n" + body));
  const auto got = answers_in(read_until_close(fd, std::chrono::milliseconds(5000)));
  ::close(fd);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 415);
  EXPECT_EQ(error_of(got[0])["code"].asString(), "invalid_argument");
  EXPECT_NE(error_of(got[0])["message"].asString().find("Content-Encoding: gzip is not accepted"),
            std::string::npos)
      << got[0].body;
  EXPECT_LT(rss_bytes(daemon_->pid()), kMaxRssBytes);
  EXPECT_EQ(free_gpus(), before);
  served_promptly("after the gzip body");
}

// Requests sent back to back on one connection are each answered, in order, authenticated
// ones included, and a compose among them takes effect once.
TEST_F(FrontDoorTest, PipelinedRequestsAreAnsweredInOrder) {
  const uint32_t before = free_gpus();
  const std::string put = "PUT /v1/compositions/7/n1";
  const std::string body = R"({"uid":0,"user":"root","account":"","request":{"gpus":1}})";
  const std::string pipeline =
      "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /v1/nothing-here HTTP/1.1\r\nHost: x\r\n\r\n" +
      put + " HTTP/1.1\r\nHost: x\r\nAuthorization: Munge " +
      munge_credential(daemon_->munge_socket(), put) + "\r\nContent-Type: application/json\r\n" +
      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body +
      "GET /v1/pool HTTP/1.1\r\nHost: x\r\nAuthorization: Munge " +
      munge_credential(daemon_->munge_socket(), "GET /v1/pool") +
      "\r\n\r\n"
      "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const int fd = connect_to(port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, pipeline));
  const auto got = answers_in(read_until_close(fd, std::chrono::milliseconds(10000)));
  ::close(fd);
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].status, 200);
  EXPECT_NE(got[0].body.find("\"fabric\""), std::string::npos) << got[0].body;
  EXPECT_EQ(got[1].status, 404);
  EXPECT_EQ(error_of(got[1])["code"].asString(), "not_found");
  EXPECT_EQ(got[2].status, 200) << got[2].body;
  EXPECT_NE(got[2].body.find("\"job_id\":7"), std::string::npos) << got[2].body;
  EXPECT_EQ(got[3].status, 200) << got[3].body;
  EXPECT_NE(got[3].body.find("\"free\""), std::string::npos) << got[3].body;
  EXPECT_EQ(got[4].status, 200);
  EXPECT_EQ(free_gpus(), before - 1);
  ASSERT_TRUE(daemon_->client().release(7, "n1").ok());
  EXPECT_EQ(free_gpus(), before);
}

// HEAD is answered as GET without the body, and authenticated as HEAD: a credential made for
// "HEAD /v1/pool" is good for it, one made for "GET /v1/pool" is not.
TEST_F(FrontDoorTest, HeadIsAuthenticatedAsHead) {
  auto head = [](const std::string& payload) {
    const int fd = connect_to(port());
    EXPECT_GE(fd, 0);
    send_all(fd, "HEAD /v1/pool HTTP/1.1\r\nHost: x\r\nAuthorization: Munge " +
                     munge_credential(daemon_->munge_socket(), payload) +
                     "\r\nConnection: close\r\n\r\n");
    const std::string got = read_until_close(fd, std::chrono::milliseconds(5000));
    ::close(fd);
    return got;
  };
  const std::string ok = head("HEAD /v1/pool");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200 ", 0), 0u) << ok;
  const size_t end = ok.find("\r\n\r\n");
  ASSERT_NE(end, std::string::npos) << ok;
  EXPECT_EQ(ok.size(), end + 4) << "a HEAD answer carries no body: " << ok;
  const std::string other = head("GET /v1/pool");
  EXPECT_EQ(other.rfind("HTTP/1.1 401 ", 0), 0u) << other;
}

// Every method composerd does not serve on a path, known to HTTP or not, is answered with the
// JSON error body every other error has (a HEAD answer carries none, as HTTP wants).
TEST_F(FrontDoorTest, EveryMethodErrorCarriesTheJsonErrorBody) {
  for (const std::string line :
       {"OPTIONS * HTTP/1.1", "OPTIONS /v1/pool HTTP/1.1", "TRACE /v1/health HTTP/1.1",
        "CONNECT 127.0.0.1:443 HTTP/1.1", "PATCH /v1/pool HTTP/1.1", "DELETE /v1/health HTTP/1.1",
        "POST /v1/health HTTP/1.1", "FOO /v1/pool HTTP/1.1", "get /v1/pool HTTP/1.1",
        "M-SEARCH * HTTP/1.1"}) {
    const int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, line + "\r\nHost: x\r\nConnection: close\r\n\r\n"));
    const auto got = answers_in(read_until_close(fd, std::chrono::milliseconds(5000)));
    ::close(fd);
    ASSERT_EQ(got.size(), 1u) << line;
    EXPECT_GE(got[0].status, 400) << line;
    EXPECT_FALSE(error_of(got[0])["message"].asString().empty()) << line << ": " << got[0].body;
  }
}

// A body cut short by the client closing its side is answered (it may still read) with a
// sentence saying how much came, and logged.
TEST_F(FrontDoorTest, ABodyCutShortIsAnsweredAndLogged) {
  const std::string put = "PUT /v1/compositions/8/n1";
  const int fd = connect_to(port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, put + " HTTP/1.1\r\nHost: x\r\nAuthorization: Munge " +
                               munge_credential(daemon_->munge_socket(), put) +
                               "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                               "{\"uid\":0,"));
  ::shutdown(fd, SHUT_WR);
  const auto got = answers_in(read_until_close(fd, std::chrono::milliseconds(5000)));
  ::close(fd);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 400);
  EXPECT_EQ(error_of(got[0])["message"].asString(),
            "request body ended after 9 of 100 bytes: the client closed its side");
  const auto until = Clock::now() + kPrompt;
  while (daemon_->log().find("api request body cut short") == std::string::npos &&
         Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(daemon_->log().find("api request body cut short"), std::string::npos) << daemon_->log();
  EXPECT_FALSE(daemon_->client().show(8, "n1").ok());  // nothing was composed
}

// With every connection busy reading a request (none idle to shed), one more is answered 503
// with a sentence naming the cap, and served again once a place is free.
TEST(FrontDoorCap, ANewConnectionPastTheCapIsToldWhyWhenNoneIsIdle) {
  ComposerdProcess daemon("ApiMaxConnections=16\nApiMaxConnectionsPerPeer=16\n");
  const int port = daemon.port();
  // 16 half-sent requests; an idle connection the client library kept from the start-up check
  // is shed to make room for them.
  std::vector<int> partial;
  for (int i = 0; i < 16; ++i) {
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "GET /v1/health HTTP/1.1\r\nX-Partial: "));
    partial.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int extra = connect_to(port);
  ASSERT_GE(extra, 0);
  send_all(extra, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n");
  const auto got = answers_in(read_until_close(extra, std::chrono::milliseconds(5000)));
  ::close(extra);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, 503);
  auto json = api::parse_json(got[0].body);
  ASSERT_TRUE(json.ok()) << got[0].body;
  EXPECT_EQ((*json)["error"]["code"].asString(), "unavailable");
  EXPECT_NE((*json)["error"]["message"].asString().find(
                "too many connections: 16 open and none idle (ApiMaxConnections=16)"),
            std::string::npos)
      << got[0].body;
  // One goes: the next client is served.
  ::close(partial.back());
  partial.pop_back();
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    served = daemon.client(5000).health().ok();
  }
  EXPECT_TRUE(served);
  for (int fd : partial) ::close(fd);
  EXPECT_TRUE(daemon.client(5000).pool().ok());
}

}  // namespace
}  // namespace composer::testing
