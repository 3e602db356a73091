// Two composerd with the same configuration on one real PostgreSQL and one fake Redfish
// service: one is active, the other a standby that answers 503 naming it. When the active one
// is killed the standby takes over, records the takeover in the ledger and composes; one that
// was frozen long enough to lose its leadership writes nothing and changes nothing on the
// fabric once it runs again, and exits. The fake service records the leadership epoch each
// change came with (X-Composer-Epoch).
//
// COMPOSER_TEST_PORT_BASE, when set, gives the ports: the Nth test's composerd BASE+3N and
// BASE+3N+1, its fake service BASE+3N+2; otherwise the kernel picks them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <json/reader.h>
#include <json/value.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "composer/api/snapshot.h"
#include "composer/test_support/pg_server.h"
#include "composer/testing/fake_redfish.h"
#include "composerd_process.h"
#include "raw_request.h"

namespace composer::testing {
namespace {

using ::testing::HasSubstr;

api::ComposeBody body(uint32_t gpus) {
  return api::ComposeBody{
      .owner = {.uid = 1000, .user = "alice", .account = "physics", .workload = "training"},
      .request = Request{.gpus = gpus}};
}

int port_base() {
  const char* base = std::getenv("COMPOSER_TEST_PORT_BASE");
  return base != nullptr && *base != '\0' ? std::atoi(base) : 0;
}
// The ports of the Nth test (an earlier test's may still be in TIME_WAIT), 0 for none given.
int first_port() {
  static int tests = 0;
  return port_base() == 0 ? 0 : port_base() + 3 * tests++;
}

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class ComposerdLeadership : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    bool installed = true;
    test_support::PgServer* pg = test_support::PgServer::shared(why, installed);
    if (!installed) GTEST_SKIP() << why;
    ASSERT_NE(pg, nullptr) << why;
    url_file_ = secrets_.file("state.url");
    {
      std::ofstream out(url_file_);
      out << pg->fresh_database() << "\n";
    }
    ASSERT_EQ(::chmod(url_file_.c_str(), 0600), 0);
    FakeRedfishOptions o;
    o.gpus_per_zone = 4;
    o.memory_per_zone = 0;
    o.drives_per_zone = 0;
    o.hosts = 2;
    o.task_ms = 20;
    first_port_ = first_port();
    o.port = port(2);
    auto fake = FakeRedfish::start(o);
    ASSERT_TRUE(fake.ok()) << fake.error();
    fake_ = std::move(*fake);
    conf_ = "StateBackend=postgresql\nStateUrlFile=" + url_file_ +
            "\nLeaderLease=2\nReconcileInterval=1\nFabric=redfish\nFabricUrl=" + fake_->base_url() +
            "\nFabricCredentials=" + write_credentials(secrets_, o.username, o.password) +
            "\nFabricPollInterval=20ms\nFabricTimeout=5s\n";
  }

  int port(int offset) const { return first_port_ == 0 ? 0 : first_port_ + offset; }

  // Each with its own state directory, all of one munge domain, as on a site's hosts.
  std::unique_ptr<ComposerdProcess> start(int offset, bool standby) {
    if (!munge_) {
      auto started = test_support::MungeDaemon::start();
      if (!started) throw std::runtime_error("munged: " + started.error().message);
      munge_ = std::move(started).value();
    }
    return std::make_unique<ComposerdProcess>(conf_, "", port(offset), standby, munge_);
  }

  static api::HealthInfo health(const ComposerdProcess& d) {
    auto h = d.client(2000).health();
    EXPECT_TRUE(h.ok()) << h.error();
    return h.ok() ? *h : api::HealthInfo{};
  }

  int first_port_ = 0;
  test_support::TempDir secrets_{"composer-secret"};
  std::string url_file_;
  std::unique_ptr<FakeRedfish> fake_;
  std::string conf_;
  std::shared_ptr<test_support::MungeDaemon> munge_;
};

TEST_F(ComposerdLeadership, StandbyNamesTheActiveOneAndTakesOverWhenItIsKilled) {
  auto a = start(0, false);
  ASSERT_TRUE(a->becomes("active", 10)) << a->log();
  auto b = start(1, true);
  const api::HealthInfo standby = health(*b);
  EXPECT_EQ(standby.role, "standby");
  EXPECT_EQ(standby.epoch, 1);
  EXPECT_EQ(standby.active, a->url());
  EXPECT_EQ(health(*a).role, "active");

  // The standby refuses every other route with 503 and the active one's URL.
  auto refused = raw_request("127.0.0.1", b->port(), b->munge_socket(), "GET", "/v1/devices");
  EXPECT_EQ(refused.status, 503);
  Json::Value answer;
  std::istringstream in(refused.body);
  ASSERT_TRUE(Json::parseFromStream(Json::CharReaderBuilder(), in, &answer, nullptr))
      << refused.body;
  EXPECT_EQ(answer["active"].asString(), a->url());
  EXPECT_EQ(answer["error"]["code"].asString(), "unavailable");
  auto metrics = raw_request("127.0.0.1", b->port(), "", "GET", "/metrics", "", false);
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, HasSubstr("\ncomposer_leader 0\n"));
  EXPECT_THAT(metrics.body, HasSubstr("\ncomposer_leader_epoch 1\n"));
  auto active_metrics = raw_request("127.0.0.1", a->port(), "", "GET", "/metrics", "", false);
  EXPECT_THAT(active_metrics.body, HasSubstr("\ncomposer_leader 1\n"));

  auto composed = a->client().compose(11, "node01", body(1));
  ASSERT_TRUE(composed.ok()) << composed.error() << a->log();

  ::kill(a->pid(), SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_NE(a->wait_exit(5000), -1);
  bool composes = false;
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(30)) {
    if (b->client(2000).compose(12, "node02", body(1)).ok()) {
      composes = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::cout << "takeover: the standby composed " << took << " s after the active one was killed\n";
  ASSERT_TRUE(composes) << b->log();
  EXPECT_LT(took, 10.0);

  const api::HealthInfo now = health(*b);
  EXPECT_EQ(now.role, "active");
  EXPECT_EQ(now.epoch, 2);
  EXPECT_EQ(now.active, b->url());
  // What the old one composed is there, and the takeover is in the ledger.
  auto shown = b->client().show(11, "node01");
  ASSERT_TRUE(shown.ok()) << shown.error();
  EXPECT_EQ(shown->state, CompositionState::kReady);
  auto events = b->client().events();
  ASSERT_TRUE(events.ok()) << events.error();
  int takeovers = 0;
  for (const Event& e : *events) {
    if (e.kind != "takeover") continue;
    ++takeovers;
    if (e.detail.starts_with("epoch 1 -> 2")) {
      EXPECT_THAT(e.detail, HasSubstr(b->url()));
    }
  }
  EXPECT_EQ(takeovers, 2);  // epoch 0 -> 1, then 1 -> 2
  for (const FakeRedfish::Change& c : fake_->changes()) {
    EXPECT_NE(c.epoch, 0) << c.line << " came without the epoch";
  }
}

TEST_F(ComposerdLeadership, AFrozenActiveOneChangesNothingOnceItRunsAgain) {
  auto a = start(0, false);
  ASSERT_TRUE(a->becomes("active", 10)) << a->log();
  auto b = start(1, true);
  ASSERT_TRUE(a->client().compose(21, "node01", body(1)).ok()) << a->log();

  ::kill(a->pid(), SIGSTOP);
  // A compose sent to the frozen one waits in its socket until it runs again.
  std::thread late([&a] { (void)a->client(8000).compose(22, "node01", body(1)); });
  ASSERT_TRUE(b->becomes("active", 20)) << b->log();
  const api::HealthInfo taken = health(*b);
  EXPECT_EQ(taken.epoch, 2);
  const int64_t takeover_ms = taken.active_since_ms;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(a->pid(), SIGCONT);
  const int status = a->wait_exit(10000);
  late.join();
  ASSERT_NE(status, -1) << "the frozen composerd did not exit: " << a->log();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75) << status << a->log();
  EXPECT_THAT(a->log(), HasSubstr("leadership lost"));

  // The new active one composes; the old one changed nothing after the takeover, and what was
  // sent to it while frozen was never written.
  auto composed = b->client().compose(23, "node02", body(1));
  ASSERT_TRUE(composed.ok()) << composed.error() << b->log();
  auto late_one = b->client().show(22, "node01");
  EXPECT_FALSE(late_one.ok()) << "a composition of the frozen composerd was written";
  int old_epoch = 0;
  int new_epoch = 0;
  for (const FakeRedfish::Change& c : fake_->changes()) {
    if (c.epoch == 1) {
      ++old_epoch;
      EXPECT_LT(c.at_ms, takeover_ms) << c.line << " came from epoch 1 after the takeover";
    } else {
      EXPECT_EQ(c.epoch, 2) << c.line;
      ++new_epoch;
    }
  }
  EXPECT_GT(old_epoch, 0);
  EXPECT_GT(new_epoch, 0);
  std::cout << "frozen composerd: " << old_epoch << " fabric changes before the takeover, "
            << new_epoch << " by the new active one, none from the old one after it ("
            << wall_ms() - takeover_ms << " ms since)\n";
}

// job_submit on a standby's host (a backup slurmctld's) reads the snapshot the standby keeps:
// a copy of the active one's, renewed every ReconcileInterval.
TEST_F(ComposerdLeadership, TheStandbyKeepsACopyOfTheActiveOnesSnapshot) {
  auto a = start(0, false);
  ASSERT_TRUE(a->becomes("active", 10)) << a->log();
  auto b = start(1, true);
  const std::string copy = b->state_dir() + "/snapshot.json";
  const auto same_pool = [&] {
    auto theirs = api::read_snapshot(a->state_dir() + "/snapshot.json");
    auto ours = api::read_snapshot(copy);
    if (!theirs || !ours) return false;
    theirs->generated_ms = ours->generated_ms = 0;
    return *theirs == *ours;
  };
  const auto within = [](int seconds, const auto& what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (what()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  ASSERT_TRUE(within(10, same_pool)) << b->log();
  // The copy is renewed (its age is the active one's liveness to job_submit), not made once.
  auto before = api::read_snapshot(copy);
  ASSERT_TRUE(before.ok()) << before.error();
  EXPECT_GT(before->pool(DeviceType::kGpu).total, 0u);
  EXPECT_TRUE(within(10, [&] {
    auto now = api::read_snapshot(copy);
    return now.ok() && now->generated_ms >= before->generated_ms + 1000;
  })) << b->log();
  EXPECT_TRUE(within(10, same_pool)) << b->log();
}

}  // namespace
}  // namespace composer::testing
