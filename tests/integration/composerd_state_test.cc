// What composerd does with the files it keeps: the modes it gives what it creates, the
// directories it leaves as they are, the state it refuses, and what survives a restart.
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "composer/test_support/pg_server.h"
#include "composerd_process.h"
#include "raw_request.h"

namespace composer::testing {
namespace {

using ::testing::HasSubstr;

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

gid_t group_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_gid;
}

TEST(ComposerdState, CreatesItsStateDirAndDatabasePrivate) {
  ComposerdProcess composerd;
  EXPECT_EQ(mode_of(composerd.state_dir()), 0700u);
  EXPECT_EQ(mode_of(composerd.state_dir() + "/composer.db"), 0600u);
}

TEST(ComposerdState, StateGroupMayReadStateDirAndDatabase) {
  struct group* nogroup = ::getgrnam("nogroup");
  if (nogroup == nullptr) GTEST_SKIP() << "no group nogroup on this machine";
  const gid_t gid = nogroup->gr_gid;
  ComposerdProcess composerd("StateGroup=nogroup\n");
  EXPECT_EQ(mode_of(composerd.state_dir()), 0750u);
  EXPECT_EQ(group_of(composerd.state_dir()), gid);
  EXPECT_EQ(mode_of(composerd.state_dir() + "/composer.db"), 0640u);
  EXPECT_EQ(group_of(composerd.state_dir() + "/composer.db"), gid);
}

TEST(ComposerdState, LeavesTheModeOfAStateDirItDidNotCreate) {
  ComposerdProcess composerd;
  EXPECT_EQ(composerd.stop(), 0);
  ASSERT_EQ(::chmod(composerd.state_dir().c_str(), 0711), 0);
  composerd.start();
  EXPECT_EQ(mode_of(composerd.state_dir()), 0711u);
  EXPECT_EQ(composerd.stop(), 0);
  EXPECT_EQ(mode_of(composerd.state_dir()), 0711u);
}

TEST(ComposerdState, RefusesAStateDirEveryUserMayWrite) {
  ComposerdProcess composerd;
  EXPECT_EQ(composerd.stop(), 0);
  for (mode_t mode : {01777, 0777, 0703}) {
    ASSERT_EQ(::chmod(composerd.state_dir().c_str(), mode), 0);
    try {
      composerd.start();
      ADD_FAILURE() << "composerd started on a StateDir of mode " << std::oct << mode;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(),
                  HasSubstr("StateDir " + composerd.state_dir() + " may be written by every user"));
    }
    EXPECT_EQ(mode_of(composerd.state_dir()), mode) << "the mode is left as it was";
  }
}

// composerd --check refuses what a start refuses, with the same sentence naming file and line,
// and neither creates anything.
TEST(ComposerdState, CheckRefusesWhatAStartRefuses) {
  test_support::TempDir dir("composer-check");
  const std::string state = dir.file("state");
  const std::string conf = dir.file("composer.conf");
  const std::string head =
      "ListenAddress=127.0.0.1\nListenPort=" + std::to_string(test_support::free_port()) +
      "\nStateDir=" + state + "\nDurable=no\n";
  struct Case {
    std::string lines;
    std::string sentence;
  };
  const std::vector<Case> cases = {
      {"SnapshotFile=" + state + "/composer.db\n",
       conf + " line 5: SnapshotFile " + state + "/composer.db is the same file as Database"},
      {"AdminUsers=root,no-such-user-here\n",
       conf + " line 5: AdminUsers: no such user 'no-such-user-here'"},
      {"LogFile=" + dir.file("missing/composerd.log") + "\n",
       conf + " line 5: LogFile=" + dir.file("missing/composerd.log") + ": the directory"},
      {"MungeSocket=" + dir.file("munge.socket") + "\n",
       conf + " line 5: MungeSocket=" + dir.file("munge.socket") + ": No such file"},
      {"ListenAddress=not-an-address!\n", "ListenAddress"},  // given twice: line 5
      {"Database=composer.db\n", conf + " line 5: Database=composer.db: expected an absolute"},
      {"NodeName=n3 FabricHost=sim-host-2 Zones=z2\n",
       conf + " line 7: NodeName=n2: fabric host 'sim-host-2' is already the fabric host of n3 "
              "(line 5)"},
  };
  for (const auto& k : cases) {
    // The pool after the case's line, so that the line numbers stay put.
    std::ofstream(conf) << head << k.lines << default_pool_lines();
    for (const std::string flags : {" --check", ""}) {
      auto r = run_command(std::string(COMPOSERD_PATH) + " -f " + conf + flags);
      EXPECT_EQ(r.code, 1) << flags << ": " << r.out;
      EXPECT_THAT(r.out, HasSubstr(k.sentence)) << flags;
      EXPECT_FALSE(std::filesystem::exists(state)) << flags << " created StateDir: " << r.out;
    }
  }
  // The listen address on its own line.
  std::ofstream(conf) << "ListenAddress=not-an-address!\nStateDir=" << state << "\n"
                      << default_pool_lines();
  auto r = run_command(std::string(COMPOSERD_PATH) + " -f " + conf + " --check");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr(conf + " line 1: ListenAddress=not-an-address!: expected an IPv4"));
}

api::ComposeBody body(Request r) {
  return api::ComposeBody{.owner = {.uid = 1000, .user = "alice", .account = "physics"},
                          .request = r};
}

// The simulated fabric is a fabric: what it attached stays attached when composerd restarts,
// and the reconciler finds nothing to repair, round after round.
TEST(ComposerdState, ARestartChangesNothingOnTheSimFabric) {
  ComposerdProcess composerd("ReconcileInterval=1\n");
  auto composed =
      composerd.client().compose(7, "n1", body(Request{.gpus = 2, .mem_bytes = 64ull << 30}));
  ASSERT_TRUE(composed.ok()) << composed.error();
  ASSERT_EQ(composed->state, CompositionState::kReady);
  EXPECT_TRUE(std::filesystem::exists(composerd.state_dir() + "/composer.db.sim"));
  EXPECT_EQ(composerd.stop(), 0);
  composerd.start();
  auto c = composerd.client();
  const int64_t restarted_ms = wall_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));  // three reconcile rounds
  for (int round = 0; round < 2; ++round) {
    auto shown = c.show(7, "n1");
    ASSERT_TRUE(shown.ok()) << shown.error();
    EXPECT_EQ(shown->state, CompositionState::kReady) << composerd.log();
    ASSERT_EQ(shown->devices.size(), 3u);
    auto devices = c.devices();
    ASSERT_TRUE(devices.ok()) << devices.error();
    size_t attached = 0;
    for (const Device& d : *devices) {
      EXPECT_NE(d.state(), DeviceState::kFailed) << d.id << "\n" << composerd.log();
      attached += d.state() == DeviceState::kAttached ? 1 : 0;
    }
    EXPECT_EQ(attached, 3u);
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  }
  auto events = c.events(client::EventQuery{.since_ms = restarted_ms});
  ASSERT_TRUE(events.ok()) << events.error();
  for (const Event& e : *events)
    ADD_FAILURE() << "after the restart: " << e.kind << " " << e.detail;
  ASSERT_TRUE(c.release(7, "n1").ok());
  EXPECT_EQ(composerd.stop(), 0);
  EXPECT_TRUE(sim_fabric_holds(composerd).empty()) << "the release detached everything";
}

// StateBackend=postgresql: composerd keeps its state in the database its StateUrlFile names,
// finds it there after a restart, makes no SQLite file, and never logs the connection string.
TEST(ComposerdState, KeepsItsStateInPostgreSQLWhenToldTo) {
  std::string why;
  bool installed = true;
  test_support::PgServer* pg = test_support::PgServer::shared(why, installed);
  if (!installed) GTEST_SKIP() << why;
  ASSERT_NE(pg, nullptr) << why;
  test_support::TempDir secrets("composer-secret");
  const std::string url_file = secrets.file("state.url");
  {
    std::ofstream out(url_file);
    out << pg->fresh_database() << " password=s3cret-in-the-url\n";
  }
  ASSERT_EQ(::chmod(url_file.c_str(), 0600), 0);
  {
    ComposerdProcess composerd("StateBackend=postgresql\nStateUrlFile=" + url_file + "\n");
    auto composed =
        composerd.client().compose(7, "n1", body(Request{.gpus = 2, .mem_bytes = 64ull << 30}));
    ASSERT_TRUE(composed.ok()) << composed.error();
    ASSERT_EQ(composed->state, CompositionState::kReady);
    EXPECT_EQ(composerd.stop(), 0);
    composerd.start();
    auto shown = composerd.client().show(7, "n1");
    ASSERT_TRUE(shown.ok()) << shown.error();
    EXPECT_EQ(shown->state, CompositionState::kReady);
    EXPECT_EQ(shown->devices.size(), 3u);
    ASSERT_TRUE(composerd.client().release(7, "n1").ok());
    EXPECT_EQ(composerd.stop(), 0);
    EXPECT_FALSE(std::filesystem::exists(composerd.state_dir() + "/composer.db"));
    EXPECT_THAT(composerd.log(), HasSubstr("store: opened PostgreSQL"));
    EXPECT_THAT(composerd.log(), ::testing::Not(HasSubstr("s3cret")));
  }
  test_support::PgServer::stop_shared();
}

// SimFailAttaches= makes the first attach calls fail, as a fabric that refuses them would.
TEST(ComposerdState, SimFaultsComeFromComposerConf) {
  ComposerdProcess composerd("SimFailAttaches=1\n");
  // Raw, as the client would retry a 502.
  const int port = std::stoi(composerd.url().substr(composerd.url().rfind(':') + 1));
  auto first =
      raw_request("127.0.0.1", port, composerd.munge_socket(), "PUT", "/v1/compositions/8/n1",
                  R"({"uid":1000,"user":"alice","request":{"gpus":1}})");
  EXPECT_EQ(first.status, 502) << first.body;
  EXPECT_THAT(first.body, HasSubstr("fabric attach failed: injected attach failure"));
  auto c = composerd.client();
  auto second = c.compose(9, "n1", body(Request{.gpus = 1}));
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_EQ(second->state, CompositionState::kReady);
  ASSERT_TRUE(c.release(9, "n1").ok());
}

// Run as nobody (root writes a read-only file): composerd names the database it cannot write
// and leaves it as it was.
TEST(ComposerdState, RefusesAReadOnlyDatabaseNamingIt) {
  struct passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user nobody on this machine";
  if (run_command("runuser -u nobody -- true").code != 0) GTEST_SKIP() << "no runuser";
  test_support::TempDir dir("composer-readonly");
  auto munge = test_support::MungeDaemon::start();
  ASSERT_TRUE(munge.ok()) << munge.error();
  for (auto p = std::filesystem::path((*munge)->socket_path()).parent_path();
       p != p.root_path() && p.string().find("composer") != std::string::npos;
       p = p.parent_path()) {
    std::filesystem::permissions(p, std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
  }
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string state = dir.file("state");
  const std::string db = state + "/composer.db";
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  { std::ofstream(db) << ""; }
  ASSERT_EQ(::chmod(db.c_str(), 0400), 0);
  ASSERT_EQ(::chown(state.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  ASSERT_EQ(::chown(db.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  const std::string conf = dir.file("composer.conf");
  std::ofstream(conf) << "ListenAddress=127.0.0.1\nListenPort=" << test_support::free_port()
                      << "\nStateDir=" << state << "\nMungeSocket=" << (*munge)->socket_path()
                      << "\nDurable=no\n"
                      << default_pool_lines();
  auto r = run_command("runuser -u nobody -- " + std::string(COMPOSERD_PATH) + " -f " + conf);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("the database " + db + " is read-only for composerd"));
  EXPECT_EQ(std::filesystem::file_size(db), 0u);
  EXPECT_EQ(mode_of(db), 0400u);
}

}  // namespace
}  // namespace composer::testing
