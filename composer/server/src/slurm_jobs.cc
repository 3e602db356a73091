#include "composer/server/slurm_jobs.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <vector>

#include "composer/common/units.h"

extern char** environ;

namespace composer::server {

Expected<std::set<uint32_t>> parse_job_ids(const std::string& text) {
  std::set<uint32_t> ids;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto id = parse_count(line, 4294967294U);
    if (!id) return Error{ErrorCode::kInternal, "unexpected line from squeue: '" + line + "'"};
    ids.insert(*id);
  }
  return ids;
}

Expected<std::set<uint32_t>> slurm_active_jobs(const std::string& squeue,
                                               const std::string& slurm_conf, int timeout_ms) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return Error{ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno)};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "SLURM_CONF=", 11) != 0) env_store.emplace_back(*e);
  }
  if (!slurm_conf.empty()) env_store.push_back("SLURM_CONF=" + slurm_conf);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {squeue, "--noheader", "--format=%A", "--states=R,S,CG,CF"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, squeue.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    return Error{ErrorCode::kUnavailable, "cannot run " + squeue + ": " + std::strerror(rc)};
  }
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    return Error{ErrorCode::kTimeout,
                 squeue + " did not answer within " + std::to_string(timeout_ms) + " ms"};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Error{ErrorCode::kUnavailable, squeue + " failed (is slurmctld up?)"};
  }
  return parse_job_ids(text);
}

}  // namespace composer::server
