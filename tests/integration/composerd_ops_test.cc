// The real composerd as an admin runs it: /metrics read by an independent parser (Debian's
// python3-prometheus-client, through check_scrape.py), the Grafana dashboard's and the alert
// rules' queries checked against a real scrape, and SIGHUP (log reopened after a rotation,
// LogLevel re-read, a broken composer.conf refused without stopping) next to SIGTERM's clean
// stop, and what composerd tells systemd (sd_notify: ready, reloading, stopping).
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "composer/api/codec.h"
#include "composerd_process.h"
#include "fake_slurm.h"
#include "metrics_text.h"

namespace composer::testing {
namespace {

std::string scrape(const ComposerdProcess& d) {
  const auto url = d.url();
  httplib::Client cli("127.0.0.1", std::stoi(url.substr(url.rfind(':') + 1)));
  auto r = cli.Get("/metrics");
  EXPECT_TRUE(r);
  return r ? r->body : "";
}

// Everything the families can show: a composition made and released, a policy in force.
void exercise(ComposerdProcess& d) {
  auto c = d.client();
  auto composed = c.compose(
      801, "n1",
      api::ComposeBody{
          .owner = {.uid = 1000, .user = "alice", .account = "physics", .workload = "training"},
          .request = Request{.gpus = 1}});
  ASSERT_TRUE(composed.ok()) << composed.error();
  ASSERT_TRUE(c.release(801, "n1").ok());
  auto applied = c.put_policy({.file = "ops.policy",
                               .text = "TimeZone=UTC\nWindow=always Start=00:00 End=24:00\n"
                                       "Class=training\nDefaultClass=training\n"
                                       "Limit=training Window=always Gpus=8\n"});
  ASSERT_TRUE(applied.ok()) << applied.error();
}

CommandResult check_scrape(const std::string& args) {
  return run_command(std::string(CHECK_SCRAPE) + " " + args);
}

std::string write_scrape(const ComposerdProcess& d, const std::string& text) {
  std::string path = d.state_dir() + "/../scrape.txt";
  std::ofstream(path) << text;
  return path;
}

TEST(ComposerdOpsTest, EveryMetricsFamilyHasItsHeaderAndSamplesForAnIndependentParser) {
  ComposerdProcess d("ComposeTimeout=60\nReleaseTimeout=45\n");
  exercise(d);
  const std::string text = scrape(d);
  const auto r = check_scrape("families " + write_scrape(d, text));
  if (r.code == 77) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.code, 0) << r.out << "\n" << text;
  // The parser strips _total from counter family names.
  for (const char* family :
       {"composer_devices gauge 16", "composer_pool_bytes gauge 4", "composer_fabric_up gauge 1",
        "composer_fabric_request_duration_seconds histogram", "process_cpu_seconds counter 1",
        "process_resident_memory_bytes gauge 1", "process_virtual_memory_bytes gauge 1",
        "process_start_time_seconds gauge 1", "process_open_fds gauge 1", "process_max_fds gauge 1",
        "composer_policy_window gauge 1"}) {
    EXPECT_NE(r.out.find(family), std::string::npos) << family << " in\n" << r.out;
  }
  // Bucket bounds as Prometheus writes them, up to the configured timeouts.
  EXPECT_EQ(metric(text, R"(composer_compose_duration_seconds_bucket{le="0.005"})") >= 0, true)
      << text;
  EXPECT_EQ(metric(text, R"(composer_compose_duration_seconds_bucket{le="60"})"), 1) << text;
  EXPECT_EQ(metric(text, R"(composer_compose_duration_seconds_bucket{le="120"})"), -1) << text;
  EXPECT_EQ(metric(text, R"(composer_release_duration_seconds_bucket{le="45"})"), 1) << text;
  EXPECT_EQ(text.find("0.0050000"), std::string::npos);
  EXPECT_EQ(metric(text, R"(composer_fabric_up{fabric="sim",driver="sim"})"), 1) << text;
  EXPECT_GE(
      metric(text,
             R"(composer_fabric_request_duration_seconds_count{fabric="sim",operation="attach"})"),
      1)
      << text;
  EXPECT_EQ(
      metric(text, R"(composer_fabric_request_errors_total{fabric="sim",operation="attach"})"), 0);
  const double now = static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  const double started = metric(text, "process_start_time_seconds");
  EXPECT_GT(started, now - 300);
  EXPECT_LE(started, now + 2);
  EXPECT_GT(metric(text, "process_open_fds"), 3);
  EXPECT_GT(metric(text, "process_resident_memory_bytes"), 1 << 20);
}

TEST(ComposerdOpsTest, EachFabricOfAMultiFabricConfigHasItsOwnSeries) {
  ComposerdProcess d("FabricName=pod-a Driver=sim\nFabricName=pod-b Driver=sim\n",
                     "NodeName=n1 Fabric=pod-a Zones=z1 GpuSlots=4\n"
                     "NodeName=n2 Fabric=pod-b Zones=z1 GpuSlots=4\n"
                     "DeviceGroup=ga Fabric=pod-a Type=gpu Model=A100 Zone=z1 Count=2\n"
                     "DeviceGroup=gb Fabric=pod-b Type=gpu Model=H100 Zone=z1 Count=2\n");
  const std::string text = scrape(d);
  EXPECT_EQ(metric(text, R"(composer_fabric_up{fabric="pod-a",driver="sim"})"), 1) << text;
  EXPECT_EQ(metric(text, R"(composer_fabric_up{fabric="pod-b",driver="sim"})"), 1) << text;
  EXPECT_GE(metric(text, R"(composer_fabric_request_duration_seconds_count{fabric="pod-b",)"
                         R"(operation="inventory"})"),
            1)
      << text;
}

TEST(ComposerdOpsTest, DashboardAndAlertRuleQueriesFindTheirMetricsAndLabels) {
  // With SlurmSync=yes (against the stand-in scontrol): the composer_slurm_* families too.
  test_support::TempDir files("composer-ops-sync");
  // The cap licenses of day_night_policy.h's classes, which exercise() applies.
  std::ofstream(fake_slurm_dir(files) + "/licenses", std::ios::app)
      << "LicenseName=training_gpu_cap Total=16 Used=0 Free=16 Reserved=0 Remote=no\n"
         "LicenseName=inference_gpu_cap Total=16 Used=0 Free=16 Reserved=0 Remote=no\n";
  // Devices in failure domains: the composer_domain_* families too.
  std::string pool = default_pool_lines();
  for (const std::string group : {"gpu-a", "gpu-b"}) {
    const std::string line = "DeviceGroup=" + group + " ";
    const size_t at = pool.find('\n', pool.find(line));
    pool.insert(at, " Domains=enclosure:enc-" + group.substr(4));
  }
  ComposerdProcess d(fake_slurm_conf() + "DomainLevels=enclosure\n", pool);
  exercise(d);
  const std::string path = write_scrape(d, scrape(d));
  const auto r =
      check_scrape("queries " + path +
                   " " COMPOSER_SOURCE_DIR "/contrib/grafana-dashboard.json " COMPOSER_SOURCE_DIR
                   "/contrib/prometheus/composer-alerts.yml");
  if (r.code == 77) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("queries checked"), std::string::npos) << r.out;
  // The checker fails on a query whose metric or label is not there.
  const std::string bogus = d.state_dir() + "/../bogus.json";
  const std::string query = "sum by (colour) (composer_devices)";
  std::ofstream(bogus) << "{\"panels\":[{\"targets\":[{\"expr\":\"" << query
                       << "\"},{\"expr\":\"composer_no_such_metric\"}]}]}";
  const auto bad = check_scrape("queries " + path + " " + bogus);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("no metric of the query has label colour"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("metric composer_no_such_metric is not in the scrape"), std::string::npos)
      << bad.out;
}

bool wait_for(const std::function<bool()>& done) {
  for (int i = 0; i < 200; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ComposerdOpsTest, SighupReopensTheRotatedLogAndKeepsServing) {
  ComposerdProcess d;
  const std::string rotated = d.log_path() + ".1";
  std::filesystem::rename(d.log_path(), rotated);
  ASSERT_EQ(kill(d.pid(), SIGHUP), 0);
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(d.log_path()); }))
      << "no new log file after SIGHUP; the rotated one has:\n"
      << read(rotated);
  EXPECT_TRUE(wait_for([&] {
    return d.log().find("SIGHUP: log file reopened") != std::string::npos;
  })) << d.log();
  EXPECT_TRUE(d.client(2000).health().ok());
  // A request after the reopen is logged in the new file, not the rotated one.
  const size_t rotated_size = read(rotated).size();
  EXPECT_TRUE(d.client().pool().ok());
  EXPECT_EQ(read(rotated).size(), rotated_size);
  EXPECT_NE(read(rotated).find("listening"), std::string::npos) << read(rotated);

  // SIGHUP a second time, then SIGTERM: still the clean stop.
  ASSERT_EQ(kill(d.pid(), SIGHUP), 0);
  EXPECT_TRUE(wait_for([&] {
    const std::string log = d.log();
    return log.find("SIGHUP") != log.rfind("SIGHUP");
  })) << d.log();
  const int status = d.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(d.log().find("composerd exited cleanly"), std::string::npos) << d.log();
}

// A service manager's notification socket, as systemd gives a Type=notify service one
// (NOTIFY_SOCKET in its environment): one datagram per notification.
class NotifySocket {
 public:
  NotifySocket() {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      throw std::runtime_error("cannot bind " + path_);
    }
  }
  ~NotifySocket() { close(fd_); }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;
  const std::string& path() const { return path_; }
  // The next notification, or "" when none comes within 10 s.
  std::string next() const {
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 10000) != 1) return "";
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  test_support::TempDir dir_{"composer-notify"};
  std::string path_ = dir_.file("notify");
  int fd_ = -1;
};

TEST(ComposerdOpsTest, TellsTheServiceManagerWhenItIsReadyReloadingAndStopping) {
  NotifySocket manager;
  ASSERT_EQ(setenv("NOTIFY_SOCKET", manager.path().c_str(), 1), 0);
  ComposerdProcess d;
  unsetenv("NOTIFY_SOCKET");
  // Ready once it listens: by then the API answered the harness's health check.
  const std::string ready = manager.next();
  EXPECT_NE(ready.find("READY=1"), std::string::npos) << ready;
  EXPECT_NE(ready.find("STATUS=serving the API on 127.0.0.1:" + std::to_string(d.port())),
            std::string::npos)
      << ready;
  ASSERT_EQ(kill(d.pid(), SIGHUP), 0);
  const std::string reloading = manager.next();
  EXPECT_NE(reloading.find("RELOADING=1\nMONOTONIC_USEC="), std::string::npos) << reloading;
  const std::string again = manager.next();
  EXPECT_NE(again.find("READY=1"), std::string::npos) << again;
  EXPECT_TRUE(d.client(2000).health().ok());
  const int status = d.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string stopping = manager.next();
  EXPECT_NE(stopping.find("STOPPING=1"), std::string::npos) << stopping;
}

TEST(ComposerdOpsTest, SighupAppliesLogLevelAndRefusesABrokenConfigWithoutStopping) {
  ComposerdProcess d("LogLevel=warning\n");
  std::string conf = read(d.conf_path());
  { std::ofstream(d.conf_path()) << conf << "NoSuchKey=1\n"; }
  ASSERT_EQ(kill(d.pid(), SIGHUP), 0);
  EXPECT_TRUE(wait_for([&] {
    return d.log().find("SIGHUP: composer.conf not reloaded") != std::string::npos;
  })) << d.log();
  EXPECT_NE(d.log().find("NoSuchKey"), std::string::npos) << d.log();
  EXPECT_TRUE(d.client(2000).health().ok());

  // LogLevel=info now: composerd started at warning, so the first info line it writes is the
  // one that says the reload applied it.
  EXPECT_EQ(d.log().find("level=info"), std::string::npos) << d.log();
  const size_t warning = conf.find("LogLevel=warning");
  ASSERT_NE(warning, std::string::npos);
  conf.replace(warning, 16, "LogLevel=info");
  std::ofstream(d.conf_path()) << conf;
  ASSERT_EQ(kill(d.pid(), SIGHUP), 0);
  EXPECT_TRUE(wait_for([&] {
    return d.log().find("level=info msg=\"SIGHUP: log file reopened and LogLevel applied") !=
           std::string::npos;
  })) << d.log();
  EXPECT_TRUE(d.client(2000).health().ok());
}

TEST(ComposerdOpsTest, ComposerctlBackupCopiesTheDatabaseOfARunningComposerd) {
  ComposerdProcess d;
  exercise(d);
  const std::string copy = d.state_dir() + "/../backup.db";
  const std::string cmd = std::string(COMPOSERCTL_PATH) + " backup " + copy + " --database " +
                          d.state_dir() + "/composer.db";
  const auto r = run_command(cmd);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("copied to " + copy), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(copy));
  EXPECT_TRUE(d.client(2000).health().ok());
  const auto again = run_command(cmd);
  EXPECT_EQ(again.code, 1) << again.out;
  EXPECT_NE(again.out.find(copy + " exists; composerctl backup writes a new file only"),
            std::string::npos)
      << again.out;
}

}  // namespace
}  // namespace composer::testing
