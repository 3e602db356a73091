// Starts the real composerd binary on loopback with a sim fabric and a private munged, and
// stops it by PID. Used by the integration tests and the benchmark.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "composer/client/client.h"
#include "composer/test_support/munge_daemon.h"
#include "composer/test_support/ports.h"
#include "composer/test_support/temp_dir.h"

namespace composer::testing {

// Two nodes; n1 reaches z1 then z2, n2 reaches z2. 8+8 GPUs, 16 x 64G CXL blocks, 4 NVMe.
inline std::string default_pool_lines() {
  return "NodeName=n1 Zones=z1,z2 GpuSlots=8 MemSlots=16 NvmeSlots=4\n"
         "NodeName=n2 FabricHost=sim-host-2 Zones=z2 GpuSlots=8 MemSlots=16 NvmeSlots=4\n"
         "DeviceGroup=gpu-a Type=gpu Model=A100-80G Zone=z1 Count=8\n"
         "DeviceGroup=gpu-b Type=gpu Model=H100 Zone=z2 Count=8\n"
         "DeviceGroup=cxl-a Type=mem Model=CXL-DDR5 Zone=z1 Count=16 Size=64G\n"
         "DeviceGroup=nvme-b Type=nvme Model=P5620 Zone=z2 Count=4 Size=3T\n";
}

class ComposerdProcess {
 public:
  // `port`: 0 for one the kernel picks. `standby`: start() returns once it answers as a
  // standby (StateBackend=postgresql, another composerd active); otherwise only once it is
  // active. `munge`: the munged of the cluster it belongs to (several composerd share one
  // munge key); none: a private one.
  explicit ComposerdProcess(std::string extra_conf = "", std::string pool = default_pool_lines(),
                            int port = 0, bool standby = false,
                            std::shared_ptr<test_support::MungeDaemon> munge = nullptr)
      : munge_(std::move(munge)),
        extra_(std::move(extra_conf)),
        pool_(std::move(pool)),
        standby_(standby) {
    if (!munge_) {
      auto started = test_support::MungeDaemon::start();
      if (!started) throw std::runtime_error("munged: " + started.error().message);
      munge_ = std::move(started).value();
    }
    // Let unprivileged test users reach the private munge socket.
    for (auto p = std::filesystem::path(munge_->socket_path()).parent_path();
         p != p.root_path() && p.string().find("composer") != std::string::npos;
         p = p.parent_path()) {
      std::filesystem::permissions(
          p, std::filesystem::perms::others_exec | std::filesystem::perms::group_exec,
          std::filesystem::perm_options::add);
    }
    port_ = port != 0 ? port : test_support::free_port();
    write_config();
    start();
  }
  ~ComposerdProcess() { stop(); }

  void write_config() {
    std::ofstream out(conf_path());
    out << "ListenAddress=127.0.0.1\n"
        << "ListenPort=" << port_ << "\n"
        << "StateDir=" << dir_.file("state") << "\n"
        << "LogFile=" << log_path() << "\n"
        << "MungeSocket=" << munge_->socket_path() << "\n";
    // Defaults for tests, unless the caller sets them (a key may appear only once).
    if (extra_.find("LogLevel=") == std::string::npos) out << "LogLevel=debug\n";
    if (extra_.find("Durable=") == std::string::npos) out << "Durable=no\n";
    // No Slurm runs beside these daemons: squeue would only fail every round.
    if (extra_.find("SlurmJobCheck=") == std::string::npos) out << "SlurmJobCheck=no\n";
    out << extra_ << pool_;
  }

  void start() {
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      execl(COMPOSERD_PATH, "composerd", "-f", conf_path().c_str(), nullptr);
      _exit(127);
    }
    auto c = client(2000);
    for (int i = 0; i < 400; ++i) {
      // A composerd on PostgreSQL answers as a standby before it takes over.
      if (auto h = c.health(); h.ok() && (standby_ || h->role != "standby")) return;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("composerd exited at start: " + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    throw std::runtime_error("composerd did not answer /v1/health: " + log());
  }

  // Waits up to `timeout_ms` for it to exit by itself; returns the exit status, or -1 if it
  // still runs (or was not running).
  int wait_exit(int timeout_ms) {
    if (pid_ <= 0) return -1;
    int status = 0;
    for (int waited = 0; waited <= timeout_ms; waited += 25) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return -1;
  }

  // SIGTERM and wait; returns the exit status (or -1 if it was not running).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 400; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  client::Client client(long timeout_ms = 30000) const {
    client::ClientOptions o;
    o.servers = url();
    o.timeout_ms = timeout_ms;
    o.retries = 1;
    o.munge_socket = munge_->socket_path();
    return client::Client(o);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::string conf_path() const { return dir_.file("composer.conf"); }
  std::string log_path() const { return dir_.file("composerd.log"); }
  std::string state_dir() const { return dir_.file("state"); }
  const std::string& munge_socket() const { return munge_->socket_path(); }
  pid_t munged_pid() const { return munge_->pid(); }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream in(log_path());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  test_support::TempDir dir_{"composer-integration"};
  std::shared_ptr<test_support::MungeDaemon> munge_;
  std::string extra_;
  std::string pool_;
  int port_ = 0;
  bool standby_ = false;
  pid_t pid_ = -1;
};

// Runs a command line through /bin/sh, optionally as another user (runuser), and returns its
// exit code and standard output.
struct CommandResult {
  int code = -1;
  std::string out;
};
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

#ifdef COMPOSERCTL_PATH  // defined by the builds that know composerctl's path
// composerctl against `daemon`, optionally as another user (runuser) and with more environment
// (`env`: NAME=value words for env(1)).
inline CommandResult ctl(const ComposerdProcess& daemon, const std::string& args,
                         const std::string& as_user = "", const std::string& env = "") {
  std::string cmd = std::string(COMPOSERCTL_PATH) + " --server " + daemon.url() +
                    " --munge-socket " + daemon.munge_socket() + " " + args;
  if (!as_user.empty()) cmd = "runuser -u " + as_user + " -- " + cmd;
  return run_command(env.empty() ? cmd : "env " + env + " " + cmd);
}
#endif

// A fabric credentials file (username, password) in `dir`, with the mode composerd demands
// unless a test wants another.
inline std::string write_credentials(const test_support::TempDir& dir, const std::string& user,
                                     const std::string& password, mode_t mode = 0600) {
  const std::string path = dir.file("fabric.cred");
  {
    std::ofstream out(path);
    out << "# fabric manager account\nusername=" << user << "\npassword=" << password << "\n";
  }
  ::chmod(path.c_str(), mode);
  return path;
}

// What a composerd's sim fabric holds, by its own record (the journal beside the database:
// "DEVICE HOST" when attached there, "DEVICE" once detached; a device's last line holds): the
// device ids, each with its host.
inline std::map<std::string, std::string> sim_fabric_attachments(const ComposerdProcess& d) {
  std::map<std::string, std::string> out;
  std::ifstream in(d.state_dir() + "/composer.db.sim");
  std::string line;
  while (std::getline(in, line)) {
    if (const auto space = line.find(' '); space != std::string::npos) {
      out[line.substr(0, space)] = line.substr(space + 1);
    } else {
      out.erase(line);
    }
  }
  return out;
}

inline std::set<std::string> sim_fabric_holds(const ComposerdProcess& d) {
  std::set<std::string> out;
  for (const auto& [device, host] : sim_fabric_attachments(d)) out.insert(device);
  return out;
}

}  // namespace composer::testing
