// Who may call what, for every route docs/API.md lists: each row of its "Endpoints" table is
// sent to the real composerd without a credential, as an unprivileged user (a munge
// credential made by `nobody`) and as root, and the answer must match the table's "who":
//   anyone ...       no credential needed: never 401
//   any ...          any authenticated user: 401 without a credential, never 401/403 with one
//   admin, owner     401 without; 403 or 404 for a user who does not own the job, 200 for one
//                    who does; never 401/403 for root
//   admin            401 without; 403 for a user and for a ComposeUsers member; never 401/403
//                    for root
//   composers        401 without; 403 for a user; never 401/403 for a ComposeUsers member
//                    (daemon here) or for root
// Every route that needs a credential also refuses (401) root's credential sent a second time
// (replayed) and a fresh one made for another request (rebound).
// A route the table adds with another "who" fails here until the matrix knows the word, so
// the documentation and the server cannot drift apart.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "composer/common/strings.h"
#include "composerd_process.h"
#include "documented_routes.h"
#include "raw_request.h"

namespace composer::testing {
namespace {

using Row = DocumentedRoute;

// The path with its placeholders filled and its query template dropped.
std::string concrete(std::string path) {
  path = path.substr(0, path.find('?'));
  const std::vector<std::pair<std::string, std::string>> values = {
      {"{job}", "777"}, {"{node}", "n1"}, {"{id}", "gpu-a-0"}, {"{domain}", "z1"}};
  for (const auto& [from, to] : values) {
    for (auto at = path.find(from); at != std::string::npos; at = path.find(from)) {
      path.replace(at, from.size(), to);
    }
  }
  return path;
}

// A body each route can parse (or refuse for its content, which is not what is tested).
std::string body_for(const Row& r) {
  if (r.path.starts_with("/v1/compositions/")) {
    return R"({"uid":1000,"user":"alice","account":"physics","workload":"training",)"
           R"("request":{"gpus":1,"gpu_model":"","mem_bytes":0,"nvme":0}})";
  }
  if (r.path.ends_with("/drain")) return R"({"reason":"access matrix"})";
  return r.method == "GET" || r.method == "DELETE" ? "" : "{}";
}

// A munge credential `user` makes for this request (what composerctl run by them would send).
std::string credential_of(const std::string& user, const std::string& socket,
                          const std::string& method, const std::string& path) {
  auto r = run_command("runuser -u " + user + " -- munge -S " + socket + " -s '" + method + " " +
                       path + "'");
  EXPECT_EQ(r.code, 0) << r.out;
  return "Munge " + std::string(trim(r.out));
}

TEST(ComposerdAccess, EveryDocumentedRouteAnswersAsItsWhoColumnSays) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to make a credential as another user";
  const std::vector<Row> routes = documented_routes();
  ASSERT_GE(routes.size(), 15u) << "docs/API.md's Endpoints table was not found";
  ComposerdProcess d("ComposeUsers=daemon\n");
  // Job 777 is alice's (uid 1000), job 778 nobody's (uid 65534), for the owner rule.
  auto c = d.client();
  for (const auto& [job, uid, user] :
       {std::tuple{777u, 1000u, "alice"}, {778u, 65534u, "nobody"}}) {
    ASSERT_TRUE(
        c.compose(
             job, "n1",
             api::ComposeBody{
                 .owner = {.uid = uid, .user = user, .account = "physics", .workload = "training"},
                 .request = Request{.gpus = 1}})
            .ok());
  }
  const std::string host = "127.0.0.1";
  const int port = std::stoi(d.url().substr(d.url().rfind(':') + 1));

  size_t requests = 0;
  for (const Row& r : routes) {
    SCOPED_TRACE(r.method + " " + r.path + " (" + r.who + ")");
    const std::string path = concrete(r.path);
    const std::string body = body_for(r);
    const bool public_route = r.who.starts_with("anyone");
    const bool any_user = !public_route && r.who.starts_with("any");
    const bool admin_only = r.who == "admin" || r.who == "admin, owner";
    const bool composers = r.who == "composers";
    ASSERT_TRUE(public_route || any_user || admin_only || composers)
        << "the access matrix does not know the who '" << r.who << "'";

    auto anonymous = raw_request_authorized(host, port, r.method, path, body, "");
    ASSERT_NE(anonymous.status, 0) << "no answer";
    if (public_route) {
      EXPECT_NE(anonymous.status, 401) << anonymous.body;
    } else {
      EXPECT_EQ(anonymous.status, 401) << anonymous.body;
    }

    auto user = raw_request_authorized(host, port, r.method, path, body,
                                       credential_of("nobody", d.munge_socket(), r.method, path));
    if (r.who == "admin, owner") {
      // Another user's job is refused, or not shown at all (as Slurm's PrivateData hides it).
      EXPECT_TRUE(user.status == 403 || user.status == 404) << user.status << " " << user.body;
      // The user's own job is answered.
      std::string own = path;
      own.replace(own.find("/777/"), 5, "/778/");
      auto mine = raw_request_authorized(host, port, r.method, own, body,
                                         credential_of("nobody", d.munge_socket(), r.method, own));
      EXPECT_EQ(mine.status, 200) << mine.body;
    } else if (admin_only || composers) {
      EXPECT_EQ(user.status, 403) << user.body;
    } else {
      EXPECT_NE(user.status, 401) << user.body;
      EXPECT_NE(user.status, 403) << user.body;
    }

    auto member = raw_request_authorized(host, port, r.method, path, body,
                                         credential_of("daemon", d.munge_socket(), r.method, path));
    if (composers) {
      EXPECT_NE(member.status, 401) << member.body;
      EXPECT_NE(member.status, 403) << member.body;
      EXPECT_LT(member.status, 500) << member.body;
    } else if (r.who == "admin") {
      EXPECT_EQ(member.status, 403) << member.body;
    }

    const std::string root_credential = credential_of("root", d.munge_socket(), r.method, path);
    auto root = raw_request_authorized(host, port, r.method, path, body, root_credential);
    EXPECT_NE(root.status, 401) << root.body;
    EXPECT_NE(root.status, 403) << root.body;
    EXPECT_LT(root.status, 500) << root.body;
    requests += r.who == "admin, owner" ? 5 : 4;
    if (public_route) continue;

    // The same credential again (munged's replay cache refuses it), and root's fresh
    // credential made for another request (rebound): both refused before anything runs.
    auto replayed = raw_request_authorized(host, port, r.method, path, body, root_credential);
    EXPECT_EQ(replayed.status, 401) << "a replayed credential was taken: " << replayed.body;
    const std::string elsewhere = r.path == "/v1/pool" ? "/v1/hosts" : "/v1/pool";
    auto rebound =
        raw_request_authorized(host, port, r.method, path, body,
                               credential_of("root", d.munge_socket(), "GET", elsewhere));
    EXPECT_EQ(rebound.status, 401)
        << "a credential made for GET " << elsewhere << " was taken: " << rebound.body;
    requests += 2;
  }
  // The matrix's size, for docs/RELIABILITY.md.
  std::cout << "role matrix: " << routes.size() << " documented routes, " << requests
            << " requests (no credential, a user, the job's owner, a ComposeUsers member, "
               "root, a replayed and a rebound credential)\n";
}

// ListenSocket: the kernel tells composerd who calls. Root composes with no munge credential
// (the client is pointed at no munge socket at all); nobody reads but may not compose; a file
// that is not a socket at the path keeps composerd from starting, with the path in the sentence.
TEST(ComposerdAccess, TheUnixSocketKnowsItsCallerFromTheKernel) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to call as another user";
  test_support::TempDir dir("composer-sock");
  std::filesystem::permissions(dir.path(), std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  const std::string sock = dir.file("composerd.sock");
  ComposerdProcess d("ListenSocket=" + sock + "\n");

  client::ClientOptions o;
  o.servers = "unix:" + sock;
  o.retries = 0;
  o.munge_socket = dir.file("no-munged-here");
  client::Client local(o);
  auto composed = local.compose(
      901, "n1",
      api::ComposeBody{.owner = {.uid = 0, .user = "root", .account = "", .workload = ""},
                       .request = Request{.gpus = 1}});
  ASSERT_TRUE(composed.ok()) << composed.error();
  auto released = local.release_job(901);
  ASSERT_TRUE(released.ok()) << released.error();
  EXPECT_EQ(released->size(), 1u);
  // Over TCP the same client settings fail: there the credential is needed.
  o.servers = d.url();
  EXPECT_FALSE(client::Client(o).pool().ok());

  auto as_nobody = [&](const std::string& method, const std::string& path) {
    return run_command("runuser -u nobody -- curl -sS --unix-socket " + sock + " -X " + method +
                       " -H 'Content-Type: application/json' -d '" +
                       R"({"uid":65534,"user":"nobody","request":{"gpus":1}})" +
                       "' -w ' %{http_code}' http://localhost" + path);
  };
  auto put = as_nobody("PUT", "/v1/compositions/902/n1");
  EXPECT_NE(put.out.find("only root, AdminUsers and ComposeUsers may compose"), std::string::npos)
      << put.out;
  EXPECT_TRUE(put.out.ends_with(" 403")) << put.out;
  auto pool = run_command("runuser -u nobody -- curl -sS --unix-socket " + sock +
                          " -w ' %{http_code}' http://localhost/v1/pool");
  EXPECT_TRUE(pool.out.ends_with(" 200")) << pool.out;
  // composerctl on the host, as nobody, with no munge socket to reach.
  auto ctl = run_command("runuser -u nobody -- " + std::string(COMPOSERCTL_PATH) +
                         " --server unix:" + sock + " --munge-socket " +
                         dir.file("no-munged-here") + " pool 2>&1");
  EXPECT_EQ(ctl.code, 0) << ctl.out;
  EXPECT_NE(ctl.out.find("A100"), std::string::npos) << ctl.out;
  d.stop();
  EXPECT_FALSE(std::filesystem::exists(sock)) << "composerd left its socket behind";

  test_support::TempDir other("composer-sock-file");
  const std::string conf = other.file("composer.conf");
  const std::string not_socket = other.file("plain-file");
  std::ofstream(not_socket) << "keep me\n";
  std::ofstream(conf) << "ListenPort=" << test_support::free_port()
                      << "\nStateDir=" << other.file("s")
                      << "\nDurable=no\nSlurmJobCheck=no\nListenSocket=" << not_socket << "\n"
                      << default_pool_lines();
  auto r = run_command(std::string(COMPOSERD_PATH) + " -f " + conf + " 2>&1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot listen on " + not_socket + ": the path exists and is not a socket"),
            std::string::npos)
      << r.out;
  std::ifstream kept(not_socket);
  std::string line;
  std::getline(kept, line);
  EXPECT_EQ(line, "keep me");
}

}  // namespace
}  // namespace composer::testing
