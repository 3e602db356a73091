// composerd: the slurm-composer daemon. Runs in the foreground and tells systemd when it is
// ready (Type=notify; service_manager.h); stops cleanly on SIGTERM or SIGINT; on SIGHUP reopens
// its log file and re-reads LogLevel and LogFile (every other setting takes effect at the next
// start). With StateBackend=postgresql it is a standby until it holds the leadership
// (leader_watch.h).
#include <malloc.h>
#include <signal.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "composer/common/clock.h"
#include "composer/common/log.h"
#include "composer/server/daemon.h"
#include "composer/server/service_manager.h"
#include "composer/setup/composer_conf.h"
#include "composer/setup/fabric_setup.h"
#include "leader_watch.h"

namespace {

// SIGHUP: composer.conf read again; what can change while composerd runs is applied, the log
// file reopened (logrotate's postrotate), and the rest left as it was started. Returns the log
// file in use afterwards ("" for stderr).
std::string reload(const std::string& config_path, const std::string& log_file) {
  auto config = composer::setup::load_config(config_path);
  if (!config) {
    // The log file is reopened all the same, so a rotation never leaves composerd writing to a
    // file that was moved away.
    if (!log_file.empty()) composer::log::set_file(log_file);
    composer::log::error("SIGHUP: composer.conf not reloaded; the settings in force stay",
                         {{"config", config_path}, {"cause", config.error().message}});
    return log_file;
  }
  if (!composer::log::set_file(config->log_file)) {
    if (!log_file.empty()) composer::log::set_file(log_file);
    composer::log::error("SIGHUP: cannot open LogFile; logging stays where it was",
                         {{"log_file", config->log_file}});
    return log_file;
  }
  composer::log::set_level(config->log_level);
  composer::log::info(
      "SIGHUP: log file reopened and LogLevel applied; other settings take effect at the next "
      "start",
      {{"config", config_path},
       {"log_file", config->log_file.empty() ? "stderr" : config->log_file}});
  return config->log_file;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc hands a thread arena's free memory back to the kernel as soon as 128 KiB of it sit
  // at the top, and the store's writer frees about that much after every transaction: the
  // next one faults the same pages in again (50,000 page faults a second under load). Up to
  // 4 MiB per arena stays; see docs/BENCHMARKS.md for what it changes.
  mallopt(M_TRIM_THRESHOLD, 4 << 20);
  CLI::App app{"composerd: attaches pooled GPUs, CXL memory and NVMe to Slurm jobs"};
  std::string config_path = composer::config::path_from_environment();
  bool check_only = false;
  bool discover = false;
  bool version = false;
  app.add_option("-f,--config", config_path,
                 "configuration file (default: $COMPOSER_CONF or " +
                     std::string(composer::setup::kDefaultConfigPath) + ")");
  auto* check_flag = app.add_flag("--check", check_only, "validate the configuration and exit");
  app.add_flag("--discover", discover,
               "with --check: read every fabric's inventory (nothing is changed) and print what "
               "was found and what was skipped")
      ->needs(check_flag);
  app.add_flag("-V,--version", version, "print the version and exit");
  CLI11_PARSE(app, argc, argv);
  if (version) {
    std::cout << "composerd " << COMPOSER_VERSION << "\n";
    return 0;
  }

  auto config = composer::setup::load_config(config_path);
  if (!config) {
    std::cerr << "composerd: error: " << config.error().message << "\n";
    return 1;
  }
  // What a start checks before it changes anything, --check or not.
  const composer::Status checked = composer::server::check_config(*config);
  if (check_only) {
    if (!checked) {
      std::cerr << "composerd: error: " << checked.error().message << "\n";
      return 1;
    }
    if (discover) {
      // Read only: inventory() never changes the fabric; the ledger is not opened.
      auto fabric = composer::setup::make_fabric(*config);
      if (!fabric) {
        std::cerr << "composerd: error: " << fabric.error().message << "\n";
        return 1;
      }
      auto inventory = (*fabric)->inventory();
      if (!inventory) {
        std::cerr << "composerd: error: reading the fabric's inventory: "
                  << inventory.error().message << "\n";
        return 1;
      }
      std::cout << "composerd: " << config_path << " is valid; fabric " << (*fabric)->driver()
                << " answered:\n"
                << composer::setup::describe_inventory(*inventory);
      return 0;
    }
    if (!config->fabrics.empty()) {
      std::cout << "composerd: " << config_path << " is valid (" << config->fabrics.size()
                << " fabrics:";
      const char* sep = " ";
      for (const auto& f : config->fabrics) {
        std::cout << sep << f.name << "=" << f.driver;
        if (f.driver == "sim") {
          std::cout << ", " << f.sim.hosts.size() << " nodes, " << f.sim.groups.size()
                    << " device groups";
        } else {
          std::cout << " at " << f.config.url << ", "
                    << (f.config.host_map.empty()
                            ? std::string("every fabric host served")
                            : std::to_string(f.config.host_map.size()) + " nodes mapped");
        }
        sep = "; ";
      }
      std::cout << "; fabric managers are not contacted by --check)\n";
    } else if (config->fabric == "sim") {
      std::cout << "composerd: " << config_path << " is valid (Fabric=sim, "
                << config->sim.hosts.size() << " nodes, " << config->sim.groups.size()
                << " device groups)\n";
    } else {
      const auto& f = config->fabric_config;
      std::cout << "composerd: " << config_path << " is valid (Fabric=" << config->fabric << " at "
                << f.url << ", "
                << (f.host_map.empty() ? std::string("every fabric host served")
                                       : std::to_string(f.host_map.size()) + " nodes mapped")
                << "; the fabric manager is not contacted by --check)\n";
    }
    return 0;
  }
  composer::log::set_level(config->log_level);
  if (!config->log_file.empty() && !composer::log::set_file(config->log_file)) {
    std::cerr << "composerd: error: "
              << (checked ? "cannot open LogFile " + config->log_file : checked.error().message)
              << "\n";
    return 1;
  }
  if (!checked) {
    composer::log::error("composerd cannot start", {{"cause", checked.error().message}});
    std::cerr << "composerd: error: " << checked.error().message << "\n";
    return 1;
  }

  // Signals go to one thread only; every other thread is created with them blocked.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // StateBackend=postgresql: composerd is a standby until it holds the leadership.
  std::unique_ptr<composer::server::LeaderWatch> leader;
  if (config->state_backend == "postgresql") {
    auto opened = composer::server::LeaderWatch::open(*config);
    if (!opened) {
      composer::log::error("composerd cannot start", {{"cause", opened.error().message}});
      std::cerr << "composerd: error: " << opened.error().message << "\n";
      return 1;
    }
    leader = std::move(opened).value();
  }
  std::mutex running_mu;
  composer::server::Daemon* running = nullptr;
  std::atomic<bool> signalled{false};
  std::thread waiter([&] {
    int sig = 0;
    std::string log_file = config->log_file;
    while (sigwait(&signals, &sig) == 0 && sig == SIGHUP && !signalled.load()) {
      composer::server::service_manager::reloading();
      log_file = reload(config_path, log_file);
      composer::server::service_manager::ready("serving the API (reloaded)");
    }
    if (signalled.exchange(true)) return;  // woken by main to exit
    composer::log::info("signal received, shutting down", {{"signal", std::to_string(sig)}});
    if (leader) leader->stop();
    std::lock_guard lock(running_mu);
    if (running != nullptr) running->stop();
  });
  // Wakes the waiter from sigwait (SIGTERM is blocked in every thread): nothing is terminated.
  auto stop_waiter = [&] {
    if (!signalled.exchange(true)) {
      pthread_kill(waiter.native_handle(), SIGTERM);  // NOLINT(bugprone-bad-signal-to-kill-thread)
    }
    waiter.join();
  };
  if (leader) {
    auto won = [&]() -> composer::Expected<std::optional<composer::db::Takeover>> {
      if (composer::Status s = composer::server::prepare_state(*config); !s) return s.error();
      return leader->wait_until_active();
    }();
    if (!won || !*won) {
      stop_waiter();
      if (!won) {
        composer::log::error("composerd cannot serve", {{"cause", won.error().message}});
        std::cerr << "composerd: error: " << won.error().message << "\n";
        return 1;
      }
      composer::log::info("composerd exited cleanly (a standby)");
      return 0;
    }
  }

  auto daemon =
      composer::server::Daemon::create(*config, composer::SystemClock::instance(), leader.get());
  if (!daemon) {
    stop_waiter();
    composer::log::error("composerd cannot start", {{"cause", daemon.error().message}});
    std::cerr << "composerd: error: " << daemon.error().message << "\n";
    return 1;
  }
  {
    std::lock_guard lock(running_mu);
    running = daemon->get();
    if (signalled.load()) running->stop();
  }
  auto status = (*daemon)->run();
  {
    std::lock_guard lock(running_mu);
    running = nullptr;
  }
  stop_waiter();
  if (!status) {
    composer::log::error("composerd failed", {{"cause", status.error().message}});
    std::cerr << "composerd: error: " << status.error().message << "\n";
    return 1;
  }
  daemon->reset();  // the store commits what is queued and closes
  composer::log::info("composerd exited cleanly");
  return 0;
}
