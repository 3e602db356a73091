#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <munge.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "composer/test_support/eventually.h"
#include "composer/test_support/fake_host.h"
#include "composer/test_support/munge_daemon.h"
#include "composer/test_support/ports.h"
#include "composer/test_support/temp_dir.h"

namespace composer::test_support {
namespace {

TEST(TempDir, IsFreshAndRemovedWithItsContents) {
  std::filesystem::path kept;
  {
    TempDir a("support-test");
    TempDir b("support-test");
    EXPECT_NE(a.path(), b.path());
    ASSERT_TRUE(std::filesystem::is_directory(a.path()));
    std::filesystem::create_directories(a.path() / "x" / "y");
    std::ofstream(a.file("x/y/z.txt")) << "data";
    kept = a.path();
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(FreePort, CanBeBoundOnLoopback) {
  const int port = free_port();
  ASSERT_GT(port, 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << errno;
  ::close(fd);
}

TEST(FreePort, StaysThisProcesssWhileItRuns) {
  // The lock another test process's free_port() would ask for is taken (any other open of the
  // file is refused it), so no other test process is handed the port.
  const int port = free_port();
  const std::string path = "/tmp/composer-test-ports/" + std::to_string(port);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path << ": " << errno;
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(errno, EWOULDBLOCK);
  ::close(fd);
}

TEST(MungeDaemon, IssuesCredentialsOnItsOwnSocketAndStopsWithItsObject) {
  pid_t pid = -1;
  std::string socket;
  {
    auto d = MungeDaemon::start();
    ASSERT_TRUE(d.ok()) << d.error();
    pid = (*d)->pid();
    socket = (*d)->socket_path();
    munge_ctx_t ctx = munge_ctx_create();
    munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str());
    char* cred = nullptr;
    ASSERT_EQ(munge_encode(&cred, ctx, "hello", 5), EMUNGE_SUCCESS) << munge_ctx_strerror(ctx);
    void* payload = nullptr;
    int len = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    EXPECT_EQ(munge_decode(cred, ctx, &payload, &len, &uid, &gid), EMUNGE_SUCCESS);
    EXPECT_EQ(std::string(static_cast<char*>(payload), len), "hello");
    EXPECT_EQ(uid, ::getuid());
    // A second decode of the same credential is a replay.
    void* again = nullptr;
    EXPECT_EQ(munge_decode(cred, ctx, &again, &len, &uid, &gid), EMUNGE_CRED_REPLAYED);
    std::free(again);
    std::free(payload);
    std::free(cred);
    munge_ctx_destroy(ctx);
  }
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(std::filesystem::exists(socket));
}

TEST(MungeDaemon, MissingBinaryIsReportedNotHung) {
  ::setenv("COMPOSER_MUNGED", "/nonexistent/munged", 1);
  auto d = MungeDaemon::start();
  ::unsetenv("COMPOSER_MUNGED");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("exited before its socket answered"), std::string::npos)
      << d.error().message;
}

}  // namespace
}  // namespace composer::test_support

namespace composer::test_support {
namespace {

std::string first_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(FakeHost, FunctionsAppearAtARescanAndGoAtRemoveAsTheKernelDoes) {
  TempDir tmp;
  FakeHost host(tmp.path());
  namespace fs = std::filesystem;
  const fs::path devices = fs::path(host.sysfs_root()) / "bus/pci/devices";
  host.add_present({.address = "0000:01:00.0", .gpu_uuid = "GPU-local"});
  host.attach({.address = "0000:41:00.0", .gpu_uuid = "GPU-attached"});
  host.attach({.address = "0000:81:00.0",
               .vendor = "0x144d",
               .device = "0xa824",
               .class_code = "0x010802",
               .serial = "S64XNA0R123456"});
  EXPECT_TRUE(fs::is_symlink(devices / "0000:01:00.0"));
  EXPECT_EQ(fs::read_symlink(devices / "0000:01:00.0"), "../../../devices/pci0000:00/0000:01:00.0");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(fs::exists(devices / "0000:41:00.0"));  // not before a rescan
  std::ofstream(devices.parent_path() / "rescan") << "1\n";
  ASSERT_TRUE(eventually([&] { return fs::exists(devices / "0000:81:00.0/nvme"); }));
  EXPECT_EQ(first_line(devices / "0000:41:00.0/vendor"), "0x10de");
  EXPECT_EQ(first_line(devices / "0000:41:00.0/class"), "0x030200");
  EXPECT_EQ(host.rescans(), 1);
  const std::string info =
      std::ifstream(host.proc_root() + "/driver/nvidia/gpus/0000:41:00.0/information").good()
          ? "present"
          : "missing";
  EXPECT_EQ(info, "present");
  EXPECT_TRUE(fs::exists(host.dev_root() + "/nvidia1"));  // minor 0 is the local GPU's
  const std::string ctrl = host.nvme_controller("0000:81:00.0");
  EXPECT_EQ(ctrl, "nvme0");
  // Padded to the identify data's 20 bytes, as the kernel shows it.
  EXPECT_EQ(first_line(devices / "0000:81:00.0/nvme/nvme0/serial"), "S64XNA0R123456      ");
  EXPECT_TRUE(fs::exists(devices / "0000:81:00.0/nvme/nvme0/nvme0n1"));
  EXPECT_TRUE(fs::exists(host.dev_root() + "/nvme0n1"));
  // The namespace's generic character device beside it.
  EXPECT_EQ(first_line(devices / "0000:81:00.0/nvme/nvme0/ng0n1/dev"), "240:0");
  EXPECT_TRUE(fs::exists(host.dev_root() + "/ng0n1"));
  // Hot-unplug: the function, its driver's entries and its device nodes go.
  std::ofstream(devices / "0000:41:00.0/remove") << "1\n";
  ASSERT_TRUE(eventually([&] { return !fs::exists(devices / "0000:41:00.0"); }));
  EXPECT_FALSE(fs::exists(host.proc_root() + "/driver/nvidia/gpus/0000:41:00.0"));
  EXPECT_FALSE(fs::exists(host.dev_root() + "/nvidia1"));
  EXPECT_TRUE(fs::exists(host.dev_root() + "/nvidia0"));
  EXPECT_EQ(host.removed(), std::vector<std::string>{"0000:41:00.0"});
}

// The nvme driver scans a controller's namespaces once the controller is up: with a namespace
// delay the controller and its serial show first, the namespace that much later.
TEST(FakeHost, ADrivesNamespaceFollowsItsControllerAfterTheNamespaceDelay) {
  TempDir tmp("fake-host-ns");
  FakeHost host(tmp.path() / "host");
  namespace fs = std::filesystem;
  host.set_namespace_delay(std::chrono::seconds(2));
  FakePciFunction drive;
  drive.address = "0000:82:00.0";
  drive.vendor = "0x1b36";
  drive.device = "0x0010";
  drive.class_code = "0x010802";
  drive.serial = "FRN100000000";
  host.attach(drive);
  const fs::path devices = fs::path(host.sysfs_root()) / "bus/pci/devices";
  std::ofstream(devices.parent_path() / "rescan") << "1\n";
  ASSERT_TRUE(eventually([&] { return fs::exists(devices / "0000:82:00.0/nvme/nvme0/serial"); }));
  EXPECT_FALSE(fs::exists(devices / "0000:82:00.0/nvme/nvme0/nvme0n1"));
  EXPECT_FALSE(fs::exists(host.dev_root() + "/nvme0n1"));
  ASSERT_TRUE(eventually([&] { return fs::exists(host.dev_root() + "/nvme0n1"); }));
  EXPECT_TRUE(fs::exists(devices / "0000:82:00.0/nvme/nvme0/nvme0n1/dev"));
  EXPECT_TRUE(fs::exists(host.dev_root() + "/ng0n1"));
}

// The kernel's rescan is done when its write returns: a remove written after it takes away
// what it showed, however long the fake's own rescan takes (its source asks the fabric). A
// function shown again at the same address is another sysfs node, with another inode number.
TEST(FakeHost, ARescanDoesNotBringBackWhatALaterRemoveTookAway) {
  TempDir tmp;
  FakeHost host(tmp.path());
  namespace fs = std::filesystem;
  const fs::path devices = fs::path(host.sysfs_root()) / "bus/pci/devices";
  auto inode = [&](const std::string& address) {
    struct stat st {};
    return ::stat((devices / address).c_str(), &st) == 0 ? st.st_ino : ino_t{0};
  };
  std::atomic<bool> asking{false};
  host.set_rescan_source([&asking] {
    asking = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return std::vector<FakePciFunction>{{.address = "0000:41:00.0"}};
  });
  std::ofstream(devices.parent_path() / "rescan") << "1\n";
  ASSERT_TRUE(eventually([&] { return fs::exists(devices / "0000:41:00.0/remove"); }));
  const ino_t first = inode("0000:41:00.0");
  ASSERT_NE(first, ino_t{0});
  // While the fake is busy with one rescan, another is written and then the function is
  // removed: both wait for the fake, and the remove came last.
  asking = false;
  std::ofstream(devices.parent_path() / "rescan") << "1\n";
  ASSERT_TRUE(eventually([&] { return asking.load(); }));
  std::ofstream(devices.parent_path() / "rescan") << "1\n";
  std::ofstream(devices / "0000:41:00.0/remove") << "1\n";
  ASSERT_TRUE(eventually([&] { return !host.removed().empty(); }));
  ASSERT_TRUE(eventually([&] { return host.rescans() == 3; }));
  // The last rescan's answer comes after the remove, and still names the function.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(fs::exists(devices / "0000:41:00.0"));
  // A rescan after the remove shows it again (the fabric still attaches it), as another node.
  std::ofstream(devices.parent_path() / "rescan") << "1\n";
  ASSERT_TRUE(eventually([&] { return fs::exists(devices / "0000:41:00.0/remove"); }));
  EXPECT_NE(inode("0000:41:00.0"), first);
}

}  // namespace
}  // namespace composer::test_support
