#include "composer/test_support/pg_server.h"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

namespace composer::test_support {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<PgServer> g_server;

// The directory holding initdb and postgres, or "" when PostgreSQL is not installed.
std::string find_bindir() {
  if (const char* dir = std::getenv("COMPOSER_PG_BINDIR"); dir != nullptr && *dir != '\0') {
    return fs::exists(fs::path(dir) / "postgres") ? dir : "";
  }
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    if (fs::exists(entry.path() / "bin" / "postgres") && fs::exists(entry.path() / "bin/initdb")) {
      found.push_back(entry.path() / "bin");
    }
  }
  if (found.empty()) return "";
  // The newest major version.
  std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
    return std::stoi(a.parent_path().filename().string()) <
           std::stoi(b.parent_path().filename().string());
  });
  return found.back().string();
}

// Forks and runs `argv` as `uid`/`gid` (when running as root), its output into `log`.
pid_t spawn(const std::vector<std::string>& argv, uid_t uid, gid_t gid, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0)) {
      _exit(126);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

PgServer* PgServer::shared(std::string& why, bool& installed) {
  installed = true;
  if (g_server) return g_server.get();
  const std::string bindir = find_bindir();
  if (bindir.empty()) {
    installed = false;
    why =
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres; set "
        "COMPOSER_PG_BINDIR to its bin directory)";
    return nullptr;
  }
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (uid == 0) {
    const passwd* nobody = getpwnam("nobody");
    if (nobody == nullptr) {
      why = "running as root and there is no user 'nobody' to run postgres as";
      return nullptr;
    }
    uid = nobody->pw_uid;
    gid = nobody->pw_gid;
  }
  std::unique_ptr<PgServer> server(new PgServer());
  server->dir_ = std::make_unique<TempDir>("composer-pg");
  const std::string root = server->dir_->path().string();
  if (chown(root.c_str(), uid, gid) != 0) {
    why = "cannot give " + root + " to the user postgres runs as";
    return nullptr;
  }
  const std::string data = root + "/data";
  const std::string log = root + "/log";
  server->socket_dir_ = root;
  // The port names the socket file; COMPOSER_PG_PORT picks it (tests run side by side).
  server->port_ = 34500 + static_cast<int>(getpid() % 100);
  if (const char* port = std::getenv("COMPOSER_PG_PORT"); port != nullptr && *port != '\0') {
    server->port_ = std::atoi(port);
  }
  const pid_t init = spawn({bindir + "/initdb", "-D", data, "-U", "composer", "-A", "trust",
                            "--no-locale", "-E", "UTF8", "--no-sync"},
                           uid, gid, log);
  int status = 0;
  waitpid(init, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why = "initdb failed (exit " + std::to_string(WEXITSTATUS(status)) + "); see " + log;
    server->dir_.release();  // keep the log for whoever reads the failure
    return nullptr;
  }
  server->pid_ =
      spawn({bindir + "/postgres", "-D", data, "-k", root, "-p", std::to_string(server->port_),
             "-c", "listen_addresses=", "-c", "fsync=off", "-c", "max_connections=200"},
            uid, gid, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (PQping(server->conninfo("postgres").c_str()) != PQPING_OK) {
    if (std::chrono::steady_clock::now() > deadline ||
        waitpid(server->pid_, &status, WNOHANG) == server->pid_) {
      why = "postgres did not start within 30 s; see " + log;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  g_server = std::move(server);
  return g_server.get();
}

PgServer::~PgServer() {
  if (pid_ > 0) {
    kill(pid_, SIGINT);  // fast shutdown
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

void PgServer::stop_shared() { g_server.reset(); }

std::string PgServer::conninfo(const std::string& name) const {
  return "host=" + socket_dir_ + " port=" + std::to_string(port_) + " user=composer dbname=" + name;
}

std::string PgServer::fresh_database() {
  const std::string name = "store" + std::to_string(++databases_);
  PGconn* c = PQconnectdb(conninfo("postgres").c_str());
  PGresult* r = PQexec(c, ("CREATE DATABASE " + name).c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  const std::string error = PQerrorMessage(c);
  PQclear(r);
  PQfinish(c);
  if (!ok) throw std::runtime_error("CREATE DATABASE " + name + ": " + error);
  return conninfo(name);
}

}  // namespace composer::test_support
