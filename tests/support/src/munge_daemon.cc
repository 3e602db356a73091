#include "composer/test_support/munge_daemon.h"

#include <fcntl.h>
#include <munge.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace composer::test_support {
namespace {

using std::chrono::milliseconds;
using Deadline = std::chrono::steady_clock::time_point;

std::string find_munged() {
  if (const char* env = std::getenv("COMPOSER_MUNGED"); env != nullptr && *env != '\0') return env;
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream ss(path);
    for (std::string dir; std::getline(ss, dir, ':');) {
      if (!dir.empty()) dirs.push_back(dir);
    }
  }
  dirs.insert(dirs.end(), {"/usr/sbin", "/sbin", "/usr/local/sbin"});
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/munged";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// munged refuses a key shorter than 32 bytes; 1024 random bytes is what mungekey makes.
Status write_key(const std::string& path) {
  std::ifstream random("/dev/urandom", std::ios::binary);
  std::string key(1024, '\0');
  if (!random.read(key.data(), static_cast<std::streamsize>(key.size()))) {
    return Error{ErrorCode::kInternal, "cannot read 1024 bytes from /dev/urandom"};
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Error{ErrorCode::kInternal, "cannot create " + path + ": " + std::strerror(errno)};
  }
  const bool ok = ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size());
  ::close(fd);
  if (!ok) return Error{ErrorCode::kInternal, "cannot write the munge key " + path};
  return Status::Ok();
}

bool socket_answers(const std::string& socket) {
  munge_ctx_t ctx = munge_ctx_create();
  if (ctx == nullptr) return false;
  char* cred = nullptr;
  bool ok = munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str()) == EMUNGE_SUCCESS &&
            munge_encode(&cred, ctx, nullptr, 0) == EMUNGE_SUCCESS;
  std::free(cred);
  munge_ctx_destroy(ctx);
  return ok;
}

// Waits until `pid` exits or the deadline passes; true if it exited (and was reaped).
bool wait_exit(pid_t pid, Deadline deadline) {
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
}

void stop(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  if (wait_exit(pid, std::chrono::steady_clock::now() + std::chrono::seconds(5))) return;
  ::kill(pid, SIGKILL);
  wait_exit(pid, std::chrono::steady_clock::now() + std::chrono::seconds(5));
}

}  // namespace

MungeDaemon::MungeDaemon() : dir_("composer-munge") {}

MungeDaemon::~MungeDaemon() { stop(pid_); }

std::string MungeDaemon::log() const {
  std::ifstream in(log_file_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Expected<std::unique_ptr<MungeDaemon>> MungeDaemon::start() {
  const std::string binary = find_munged();
  if (binary.empty()) {
    return Error{ErrorCode::kUnavailable,
                 "munged not found on PATH, /usr/sbin or /sbin (install the munge package or "
                 "set COMPOSER_MUNGED to its path)"};
  }
  std::unique_ptr<MungeDaemon> d(new MungeDaemon());
  // Clients need to traverse the directory to reach the socket.
  ::chmod(d->dir_.path().c_str(), 0755);
  const std::string key = d->dir_.file("munge.key");
  d->socket_ = d->dir_.file("munge.socket");
  d->log_file_ = d->dir_.file("munged.log");
  if (Status s = write_key(key); !s) return s.error();

  // Everything the child needs is prepared before fork: after it, only exec-safe calls.
  std::vector<std::string> args = {binary,
                                   "--foreground",
                                   "--force",  // tolerates running as root and a /tmp path
                                   "--num-threads=4",
                                   "--key-file=" + key,
                                   "--socket=" + d->socket_,
                                   "--pid-file=" + d->dir_.file("munged.pid"),
                                   "--log-file=" + d->log_file_,
                                   "--seed-file=" + d->dir_.file("munged.seed")};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(d->log_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return Error{ErrorCode::kInternal,
                 "cannot create " + d->log_file_ + ": " + std::strerror(errno)};
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return Error{ErrorCode::kInternal, std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    // The daemon must not outlive a test that crashes.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    const char msg[] = "exec of munged failed\n";
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::close(log_fd);
  d->pid_ = pid;

  const Deadline deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!socket_answers(d->socket_)) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      d->pid_ = -1;
      return Error{ErrorCode::kUnavailable,
                   binary + " exited before its socket answered; its log says: " + d->log()};
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error{ErrorCode::kTimeout, binary + " did not answer on " + d->socket_ +
                                            " within 10 s; its log says: " + d->log()};
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return d;
}

}  // namespace composer::test_support
