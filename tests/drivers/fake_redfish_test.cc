// The fake Redfish service itself: what tests and shell scripts rely on.
#include "composer/testing/fake_redfish.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "composer/http/http.h"
#include "composer/test_support/temp_dir.h"

namespace composer::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Sends raw bytes to 127.0.0.1:port and reads until the server closes the connection; sets
// *closed when it did so within five seconds.
std::string exchange(int port, const std::string& request, bool* closed) {
  *closed = false;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n == 0) *closed = true;
      if (n <= 0) break;
      answer.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return answer;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string head_of(const std::string& answer) { return answer.substr(0, answer.find("\r\n\r\n")); }

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
  http::HttpClient http;
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
  http::HttpClient http(http::HttpOptions{.retries = 0});
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

TEST(FakeRedfish, SloppyModeAnswersLikeAnHttp10ServerThatClosesEveryConnection) {
  FakeRedfishOptions o;
  o.sloppy = true;
  o.hosts = 1;
  auto s = FakeRedfish::start(o);
  ASSERT_TRUE(s.ok()) << s;
  FakeRedfish& fake = **s;
  // Two requests on one connection, the client asking for keep-alive: one answer, then close.
  const std::string get =
      "GET /redfish/v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n";
  bool closed = false;
  const std::string answer = exchange(fake.port(), get + get, &closed);
  EXPECT_TRUE(closed) << "the connection stayed open after the answer";
  EXPECT_THAT(answer, StartsWith("HTTP/1.0 200 "));
  const std::string head = lower(head_of(answer));
  EXPECT_THAT(head, Not(HasSubstr("content-length")));  // the body ends at the close
  EXPECT_THAT(head, Not(HasSubstr("keep-alive")));
  EXPECT_THAT(head, Not(HasSubstr("http/1.1")));
  const std::string body = answer.substr(answer.find("\r\n\r\n") + 4);
  EXPECT_THAT(body, StartsWith("{"));
  EXPECT_THAT(body, HasSubstr("\"CompositionService\""));
  EXPECT_EQ(answer.find("HTTP/1.0", 1), std::string::npos) << "a second answer came back";

  // An error answer keeps its length; still HTTP/1.0 and closed.
  const std::string refused =
      exchange(fake.port(), "GET /redfish/v1/Systems HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(refused, StartsWith("HTTP/1.0 401 "));
  EXPECT_THAT(lower(head_of(refused)), HasSubstr("content-length:"));
  EXPECT_THAT(refused, HasSubstr("NoValidSession"));

  // A request with a body goes through whole.
  const std::string login = R"({"UserName":"admin","Password":"composer-test-pw"})";
  const std::string created =
      exchange(fake.port(),
               "POST /redfish/v1/SessionService/Sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Content-Type: application/json\r\nContent-Length: " +
                   std::to_string(login.size()) + "\r\n\r\n" + login,
               &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(created, StartsWith("HTTP/1.0 201 "));
  EXPECT_THAT(lower(head_of(created)), HasSubstr("x-auth-token:"));
  EXPECT_EQ(fake.open_sessions(), 1u);

  // A strict service is an HTTP/1.1 server.
  auto strict = FakeRedfish::start(FakeRedfishOptions{.hosts = 1});
  ASSERT_TRUE(strict.ok()) << strict;
  EXPECT_THAT(
      exchange((*strict)->port(),
               "GET /redfish/v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", &closed),
      StartsWith("HTTP/1.1 200 "));
}

TEST(FakeRedfish, HostBlocksComposeOneSystemPerComputeBlockAndRefuseASecond) {
  FakeRedfishOptions o;
  o.host_blocks = true;
  o.hosts = 2;
  auto s = FakeRedfish::start(o);
  ASSERT_TRUE(s.ok()) << s;
  FakeRedfish& fake = **s;
  http::HttpClient http(http::HttpOptions{.retries = 0});
  auto post = [&](const std::string& links) {
    return http.send({.method = "POST",
                      .url = fake.base_url() + "/redfish/v1/Systems",
                      .body = R"({"Name":"n","Links":{"ResourceBlocks":[)" + links + "]}}",
                      .headers = [] {
                        return Expected<std::vector<std::string>>(std::vector<std::string>{
                            "Authorization: Basic YWRtaW46Y29tcG9zZXItdGVzdC1wdw=="});
                      }});
  };
  const std::string rb = "/redfish/v1/CompositionService/ResourceBlocks/";
  auto link = [&rb](const std::string& id) { return R"({"@odata.id":")" + rb + id + "\"}"; };
  auto r = post(link("node01") + "," + link("gpu-z1-00"));
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->header("Location"), "/redfish/v1/Systems/composed-1");
  EXPECT_EQ(fake.system_blocks("composed-1"), (std::vector<std::string>{"node01", "gpu-z1-00"}));
  // The same compute block again: in use.
  r = post(link("node01"));
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 409);
  EXPECT_THAT(r->body, HasSubstr("ResourceInUse"));
  EXPECT_THAT(r->body, HasSubstr("node01 is already composed into composed-1"));
  // Another zone (node02 is in zone 2), and no compute block at all: 400.
  r = post(link("node02") + "," + link("gpu-z1-01"));
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("@Message.ExtendedInfo"));
  EXPECT_THAT(r->body, HasSubstr("gpu-z1-01 is in no resource zone of node02"));
  r = post(link("gpu-z2-00"));
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("needs one compute block"));
  EXPECT_TRUE(fake.systems_with_block("node02").empty());
  EXPECT_TRUE(fake.systems_with_block("gpu-z2-00").empty());
}

// tests/kvm's fabric: each drive's attach and detach runs the hot-plug command before the
// answer, with the drive's serial; a command that fails leaves the drive where it was.
TEST(FakeRedfish, HotPlugCommandRunsForEachDriveAndAFailureChangesNothing) {
  test_support::TempDir dir("composer-redfish-hotplug");
  const std::string calls = (dir.path() / "calls").string();
  const std::string refuse = (dir.path() / "refuse").string();
  FakeRedfishOptions o;
  o.drive_vendor_id = "0x1b36";
  o.drive_device_id = "0x0010";
  o.hot_plug = "sh -c 'echo \"$*\" >>" + calls + "; test ! -e " + refuse +
               " || { echo no free slot; exit 1; }' hook";
  auto s = FakeRedfish::start(o);
  ASSERT_TRUE(s.ok()) << s;
  FakeRedfish& fake = **s;
  http::HttpClient http(http::HttpOptions{.retries = 0});
  const std::string rb = "/redfish/v1/CompositionService/ResourceBlocks/";
  auto act = [&](const std::string& action, const std::string& block) {
    return http.send(
        {.method = "POST",
         .url = fake.base_url() + "/redfish/v1/Systems/node01/Actions/ComputerSystem." + action,
         .body = R"({"ResourceBlock":{"@odata.id":")" + rb + block + "\"}}",
         .headers = [] {
           return Expected<std::vector<std::string>>(
               std::vector<std::string>{"Authorization: Basic YWRtaW46Y29tcG9zZXItdGVzdC1wdw=="});
         }});
  };
  auto read_calls = [&] {
    std::ifstream in(calls);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  auto r = act("AddResourceBlock", "nvme-z1-00");
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(read_calls(), "attach node01 nvme-z1-00 FRN100000000\n");
  // A GPU has no stand-in to plug: nothing runs for it.
  r = act("AddResourceBlock", "gpu-z1-00");
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(read_calls(), "attach node01 nvme-z1-00 FRN100000000\n");
  // The drive reports the ids the command's device has.
  auto drive = http.send({.method = "GET",
                          .url = fake.base_url() + rb + "nvme-z1-00/PCIeDevices/0/PCIeFunctions/0",
                          .headers = [] {
                            return Expected<std::vector<std::string>>(std::vector<std::string>{
                                "Authorization: Basic YWRtaW46Y29tcG9zZXItdGVzdC1wdw=="});
                          }});
  ASSERT_TRUE(drive.ok()) << drive;
  EXPECT_THAT(drive->body, HasSubstr("0x1b36"));
  EXPECT_THAT(drive->body, HasSubstr("0x0010"));
  std::ofstream(refuse) << "";
  r = act("RemoveResourceBlock", "nvme-z1-00");
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 500);
  EXPECT_THAT(r->body, HasSubstr("the detach of nvme-z1-00 failed: no free slot"));
  EXPECT_EQ(fake.system_blocks("node01").size(), 3u);  // its compute block, the GPU, the drive
  r = act("AddResourceBlock", "nvme-z1-01");
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 500);
  EXPECT_TRUE(fake.systems_with_block("nvme-z1-01").empty());
  EXPECT_EQ(read_calls(),
            "attach node01 nvme-z1-00 FRN100000000\ndetach node01 nvme-z1-00 FRN100000000\n"
            "attach node01 nvme-z1-01 FRN100000001\n");

  // The fabric takes the drive away by itself (/control/unplug): the detach runs as for a
  // removal asked for, and the system no longer lists the drive.
  auto unplug = [&](const std::string& block) {
    return http.send({.method = "POST",
                      .url = fake.base_url() + "/control/unplug",
                      .body = R"({"block":")" + block + R"("})",
                      .headers = {}});
  };
  std::filesystem::remove(refuse);
  r = unplug("nvme-z1-00");
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 204) << r->body;
  EXPECT_TRUE(fake.systems_with_block("nvme-z1-00").empty());
  EXPECT_THAT(read_calls(), ::testing::EndsWith("detach node01 nvme-z1-00 FRN100000000\n"));
  r = unplug("nvme-z1-00");
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(r->status, 404);
  EXPECT_THAT(r->body, HasSubstr("'nvme-z1-00' is composed into no system"));
}

}  // namespace
}  // namespace composer::testing
