#include "composer/common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/strings.h"

extern char** environ;

namespace composer {
namespace {

// This process's environment with `changes` applied: "NAME=VALUE" replaces NAME, "NAME"
// removes it.
std::vector<std::string> environment(const std::vector<std::string>& changes) {
  auto name = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool changed = false;
    for (const std::string& c : changes) changed = changed || name(c) == name(entry);
    if (!changed) out.emplace_back(entry);
  }
  for (const std::string& c : changes) {
    if (c.find('=') != std::string::npos) out.push_back(c);
  }
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

Expected<RunResult> run_program(const RunOptions& options) {
  if (options.argv.empty()) return Error{ErrorCode::kInternal, "run_program: no program"};
  const std::string& program = options.argv.front();
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return Error{ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno)};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (options.with_stderr) {
    posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  // Nothing else of ours reaches the program: composerd's listening socket and its clients'
  // connections are not all opened close-on-exec (the HTTP library's are not), and a squeue
  // holding them would keep the port bound after composerd exits.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  std::vector<std::string> env = environment(options.env);
  std::vector<std::string> args = options.argv;
  std::vector<char*> envp = pointers(env);
  std::vector<char*> argv = pointers(args);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return Error{ErrorCode::kUnavailable, "cannot run " + program + ": " + std::strerror(rc)};
  }
  RunResult result;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  bool timed_out = false;
  for (;;) {
    int wait_ms = -1;
    if (options.timeout_ms > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(left);
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, wait_ms);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Error{ErrorCode::kTimeout,
                 program + " did not answer within " + std::to_string(options.timeout_ms) + " ms"};
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Expected<std::string> run_checked(const RunOptions& options) {
  Expected<RunResult> ran = run_program(options);
  if (!ran) return ran.error();
  if (ran->status == 0) return std::move(ran->output);
  std::vector<std::string> shown = options.argv;
  if (!shown.empty()) shown[0] = shown[0].substr(shown[0].rfind('/') + 1);
  const std::string said = join(split(ran->output, '\n', {.trim = true, .skip_empty = true}), " ");
  return Error{ErrorCode::kUnavailable, "'" + join(shown, " ") + "' failed (exit " +
                                            std::to_string(ran->status) + "): " + said};
}

}  // namespace composer
