// What composerd checks of a parsed composer.conf against the machine before it changes
// anything (check_config: composerd --check and every start), each refusal naming the file
// and the line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "composer/server/daemon.h"
#include "composer/setup/composer_conf.h"
#include "composer/test_support/temp_dir.h"

namespace composer::server {
namespace {

using ::testing::HasSubstr;

constexpr const char* kPool =
    "NodeName=n1 Zones=z1\n"
    "DeviceGroup=gpu-a Type=gpu Model=A100 Zone=z1 Count=2\n";

class CheckConfig : public ::testing::Test {
 protected:
  // The settings, the pool and StateDir=<a fresh directory> unless `head` gives one.
  Status check(const std::string& head) {
    const std::string text =
        (head.find("StateDir=") == std::string::npos ? "StateDir=" + state_ + "\n" : "") + head +
        kPool;
    auto c = setup::parse_config(text, conf_);
    if (!c) return c.error();
    return check_config(*c);
  }
  void expect_refused(const std::string& head, const std::string& needle) {
    Status s = check(head);
    ASSERT_FALSE(s.ok()) << head;
    EXPECT_THAT(s.error().message, HasSubstr(needle)) << head;
  }

  test_support::TempDir dir_{"composer-check"};
  std::string conf_ = dir_.file("composer.conf");
  std::string state_ = dir_.file("state");
};

TEST_F(CheckConfig, AGoodFileAndAStateDirStillToCreate) {
  Status s = check("AdminUsers=root,0\nLogFile=" + dir_.file("composerd.log") + "\n");
  EXPECT_TRUE(s.ok()) << s.error();
  EXPECT_FALSE(std::filesystem::exists(state_)) << "a check creates nothing";
  EXPECT_FALSE(std::filesystem::exists(dir_.file("composerd.log")));
}

TEST_F(CheckConfig, TheStatesConnectionStringFileFollowsTheRuleOfSecrets) {
  const std::string url = dir_.file("state.url");
  {
    std::ofstream out(url);
    out << "# the writable primary\nhost=db1,db2 password=s3cret target_session_attrs=read-write\n";
  }
  const std::string head = "StateBackend=postgresql\nStateUrlFile=" + url + "\n";
  ASSERT_EQ(::chmod(url.c_str(), 0640), 0);
  expect_refused(head, conf_ + " line 3: StateUrlFile " + url +
                           " has mode 640, so group or others may read it; run chmod 600");
  ASSERT_EQ(::chmod(url.c_str(), 0600), 0);
  Status s = check(head);
  EXPECT_TRUE(s.ok()) << s.error();
  {
    std::ofstream out(url, std::ios::app);
    out << "host=db3 password=other\n";
  }
  s = check(head);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("line 3 is a second setting"));
  // The refusal never shows the file's content.
  EXPECT_THAT(s.error().message, ::testing::Not(HasSubstr("s3cret")));
  EXPECT_THAT(s.error().message, ::testing::Not(HasSubstr("other")));
  expect_refused("StateBackend=postgresql\nStateUrlFile=" + dir_.file("none.url") + "\n",
                 "StateUrlFile " + dir_.file("none.url") + " cannot be read");
}

TEST_F(CheckConfig, UnknownUsersAndGroups) {
  expect_refused("ListenPort=7000\nAdminUsers=root,no-such-user-here\n",
                 conf_ + " line 3: AdminUsers: no such user 'no-such-user-here'");
  expect_refused("StateGroup=no-such-group-here\n",
                 conf_ + " line 2: StateGroup=no-such-group-here: no such group");
}

TEST_F(CheckConfig, TwoOfComposerdsFilesAreNeverOne) {
  const std::string db = dir_.file("c.db");
  expect_refused("Database=" + db + "\nSnapshotFile=" + db + "\n",
                 conf_ + " line 3: SnapshotFile " + db + " is the same file as Database " + db);
  expect_refused("LogFile=" + state_ + "/composer.db\n", conf_ + " line 2: LogFile " + state_ +
                                                             "/composer.db is the same file as "
                                                             "Database");
  expect_refused("SnapshotFile=" + conf_ + "\n",
                 "line 2: SnapshotFile " + conf_ + " is the same file as composer.conf");
  // The same file by another name.
  expect_refused(
      "Database=" + dir_.file("x.db") + "\nSnapshotFile=" + dir_.file("./x.db-wal") + "\n",
      "line 3: SnapshotFile " + dir_.file("./x.db-wal") +
          " is the same file as "
          "Database");
  // The simulated fabric's state file is the database's.
  expect_refused("Database=" + db + "\nLogFile=" + db + ".sim\n",
                 "line 3: LogFile " + db + ".sim is the same file as Database");
}

TEST_F(CheckConfig, AStateDirEveryUserMayWrite) {
  ASSERT_EQ(::mkdir(state_.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(state_.c_str(), 01777), 0);
  expect_refused(
      "", conf_ + " line 1: StateDir " + state_ + " may be written by every user (mode 1777)");
  struct stat st {};
  ASSERT_EQ(::stat(state_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u) << "a check changes no mode";
  ASSERT_EQ(::chmod(state_.c_str(), 0755), 0);
  EXPECT_TRUE(check("").ok());
  const std::string file = dir_.file("plain");
  std::ofstream(file) << "x";
  expect_refused("StateDir=" + file + "\n", "line 1: StateDir " + file + " is not a directory");
}

TEST_F(CheckConfig, MungeSocketAndLogFileDirectory) {
  expect_refused(
      "MungeSocket=" + dir_.file("absent.socket") + "\n",
      conf_ + " line 2: MungeSocket=" + dir_.file("absent.socket") + ": No such file or directory");
  std::ofstream(dir_.file("plain")) << "x";
  expect_refused("MungeSocket=" + dir_.file("plain") + "\n", "is not a socket");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string sock = dir_.file("m.socket");
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::copy(sock.begin(), sock.end(), addr.sun_path);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  Status s = check("MungeSocket=" + sock + "\n");
  EXPECT_TRUE(s.ok()) << s.error();
  ::close(fd);
  expect_refused("LogFile=" + dir_.file("no-dir/composerd.log") + "\n",
                 conf_ + " line 2: LogFile=" + dir_.file("no-dir/composerd.log") +
                     ": the directory " + dir_.file("no-dir") + " does not exist");
}

}  // namespace
}  // namespace composer::server
