// Two composerd (active and standby, the same configuration) on a highly available PostgreSQL
// (tests/ha/cluster.sh: three PostgreSQL under Patroni with synchronous_mode_strict, three
// etcd) and one fake Redfish service, while many clients compose and release through the
// server list of both, and one of three faults strikes:
//   primary           the PostgreSQL primary's host dies: its Patroni and PostgreSQL are
//                     killed with SIGKILL at once;
//   composerd-kill    the active composerd is killed with SIGKILL;
//   composerd-freeze  the active composerd is frozen (SIGSTOP) until the standby has taken
//                     over and composed, then resumed (SIGCONT): it must exit with status 75
//                     or answer as a standby, and a compose sent to it while it was frozen
//                     must not be written.
// After each round: every compose a client was told succeeded is in the ledger, no device is
// in two live compositions, every fabric change came with a leadership epoch and none from an
// epoch after a later one took over (the fake service records X-Composer-Epoch), and once
// every client's jobs are released nothing is live or attached. Prints the time from the
// fault until a compose succeeds: on the standby alone for the composerd faults (the goal:
// 10 s), through the clients' server list for all (for the primary the goal is Patroni's
// ttl + 5 s; docs/BENCHMARKS.md).
//
// Run by tests/ha/run.sh, which starts the cluster and sets HA_CONNINFO, HA_CLUSTER (the
// script) and HA_TTL. composerd and the fake service listen on ports the kernel picks: a fixed
// port may be a client connection's own for a while (the clients' thousands of connections
// each round take ports from the same range). COMPOSER_HA_FAULTS: the faults to run, names
// separated by commas, or "all" (default "primary"; contrib/test.sh --full: all);
// COMPOSER_HA_ROUNDS (default 1; --full: 20) rounds of each, COMPOSER_HA_CLIENTS (default 12)
// clients.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../integration/composerd_process.h"
#include "composer/api/codec.h"
#include "composer/testing/fake_redfish.h"

namespace composer::testing {
namespace {

using Clock = std::chrono::steady_clock;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::max(1, std::atoi(v));
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

int64_t now_ns() { return Clock::now().time_since_epoch().count(); }

// The output of tests/ha/cluster.sh with `args`, trimmed.
std::string cluster(const std::string& args) {
  const CommandResult r = run_command(env("HA_CLUSTER") + " " + args);
  if (r.code != 0) throw std::runtime_error("cluster.sh " + args + ": " + r.out);
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// One statement's rows on the current primary's database of `conninfo`, each row's columns
// joined by '|' (none for a command).
std::vector<std::string> query(const std::string& conninfo, const std::string& sql) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  std::vector<std::string> rows;
  if (PQstatus(c) != CONNECTION_OK) {
    std::string e = PQerrorMessage(c);
    PQfinish(c);
    throw std::runtime_error("connecting to the primary: " + e);
  }
  PGresult* r = PQexec(c, sql.c_str());
  if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK) {
    std::string e = PQerrorMessage(c);
    PQclear(r);
    PQfinish(c);
    throw std::runtime_error(sql + ": " + e);
  }
  for (int i = 0; i < PQntuples(r); ++i) {
    std::string row;
    for (int j = 0; j < PQnfields(r); ++j) row += (j ? "|" : "") + std::string(PQgetvalue(r, i, j));
    rows.push_back(row);
  }
  PQclear(r);
  PQfinish(c);
  return rows;
}

api::ComposeBody gpus(int n) {
  return api::ComposeBody{.owner = {.uid = 1000, .user = "alice", .account = "physics"},
                          .request = Request{.gpus = static_cast<uint32_t>(n)}};
}

// What the clients were told.
struct Told {
  std::mutex mu;
  std::map<int64_t, std::string> composed;  // composition id -> "job|node"
  std::set<std::pair<uint32_t, std::string>> tried;
  long composes = 0, compose_errors = 0, releases = 0, release_errors = 0;
  std::map<std::string, long> errors;  // first words of each error, counted
};

// An error's first words with its numbers left out (job ids, ports), to count alike ones.
std::string error_kind(const std::string& message) {
  std::string out;
  for (char c : message.substr(0, 80)) {
    if (c < '0' || c > '9') {
      out += c;
    } else if (out.empty() || out.back() != '#') {
      out += '#';
    }
  }
  return out;
}

// The wall-clock time `ago_ns` before now, HH:MM:SS.mmm UTC: to find the fault in the logs.
std::string utc_now_minus(int64_t ago_ns) {
  const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count() -
                     ago_ns / 1000000;
  const time_t s = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  gmtime_r(&s, &tm);
  char out[32];
  std::snprintf(out, sizeof out, "%02d:%02d:%02d.%03d UTC", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return out;
}

enum class Fault { kPrimary, kComposerdKill, kComposerdFreeze };

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kPrimary:
      return "primary";
    case Fault::kComposerdKill:
      return "composerd-kill";
    case Fault::kComposerdFreeze:
      return "composerd-freeze";
  }
  return "";
}

// Whether COMPOSER_HA_FAULTS asks for `f`; throws with a sentence for a name it does not know.
bool chosen(Fault f) {
  std::string list = env("COMPOSER_HA_FAULTS");
  if (list.empty()) list = "primary";
  bool found = false;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    if (name != "all" && name != "primary" && name != "composerd-kill" &&
        name != "composerd-freeze") {
      throw std::runtime_error("COMPOSER_HA_FAULTS=" + list + ": '" + name +
                               "' is not a fault; give primary, composerd-kill, "
                               "composerd-freeze, separated by commas, or all");
    }
    found = found || name == "all" || name == fault_name(f);
  }
  return found;
}

constexpr int kNodes = 8;

// The fake service's composed systems node01..node08 (HostName the same).
std::string node_name(int i) {
  char name[16];
  std::snprintf(name, sizeof name, "node%02d", i % kNodes + 1);
  return name;
}

class HaFailover : public ::testing::Test {
 protected:
  void SetUp() override {
    if (env("HA_CONNINFO").empty() || env("HA_CLUSTER").empty()) {
      GTEST_SKIP() << "no HA cluster: run tests/ha/run.sh";
    }
  }

  // A database of its own on the cluster, the fake service, composerd a_ (active) and b_
  // (standby) sharing one munged.
  void start_site(Fault fault) {
    std::string db = std::string("composer_") + fault_name(fault);
    std::replace(db.begin(), db.end(), '-', '_');
    query(env("HA_CONNINFO"), "DROP DATABASE IF EXISTS " + db);
    query(env("HA_CONNINFO"), "CREATE DATABASE " + db);
    conninfo_ = env("HA_CONNINFO");
    const auto at = conninfo_.find("dbname=composer ");
    ASSERT_NE(at, std::string::npos) << "HA_CONNINFO names no dbname=composer: " << conninfo_;
    conninfo_.replace(at, std::string("dbname=composer").size(), "dbname=" + db);
    const std::string url_file = secrets_.file("state.url");
    {
      std::ofstream out(url_file);
      out << conninfo_ << "\n";
    }
    ASSERT_EQ(::chmod(url_file.c_str(), 0600), 0);
    FakeRedfishOptions o;
    o.gpus_per_zone = kNodes * 2;  // 32 GPUs; at most 24 composed at once by 12 clients
    o.memory_per_zone = 0;
    o.drives_per_zone = 0;
    o.hosts = kNodes;
    o.task_ms = 20;  // changes in flight when a fault strikes
    auto fake = FakeRedfish::start(o);
    ASSERT_TRUE(fake.ok()) << fake.error();
    fake_ = std::move(*fake);
    const std::string conf =
        "StateBackend=postgresql\nStateUrlFile=" + url_file +
        "\nLogLevel=info\nReconcileInterval=2\nLeaderLease=" + std::to_string(kLease) +
        "\nFabric=redfish\nFabricUrl=" + fake_->base_url() +
        "\nFabricCredentials=" + write_credentials(secrets_, o.username, o.password) +
        "\nFabricPollInterval=20ms\nFabricTimeout=5s\n";
    a_ = std::make_unique<ComposerdProcess>(conf, "", 0, false);
    b_ = std::make_unique<ComposerdProcess>(conf, "", 0, true, a_->munge());
  }

  // A client of both, in the order a plugstack's server list gives them.
  client::Client both(long timeout_ms) const {
    client::ClientOptions o;
    o.servers = a_->url() + "," + b_->url();
    o.timeout_ms = timeout_ms;
    o.retries = 1;
    o.munge_socket = a_->munge_socket();
    return client::Client(o);
  }

  // The composerd that says it is active, waiting up to `seconds`; nullptr if none does.
  ComposerdProcess* active(int seconds) const {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    do {
      for (ComposerdProcess* d : {a_.get(), b_.get()}) {
        if (d->pid() <= 0) continue;
        if (auto h = d->client(1000).health(); h.ok() && h->role == "active") return d;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (Clock::now() < deadline);
    return nullptr;
  }

  // Every fabric change came with an epoch, and none with an epoch older than one that had
  // taken over when it arrived. An epoch began at its takeover: the leadership row's since_ms
  // while it is the current one, else its ledger event (written a little after).
  void check_epochs(int round) {
    for (const std::string& row : query(conninfo_, "SELECT epoch, since_ms FROM leadership")) {
      const auto bar = row.find('|');
      began_.emplace(std::stoll(row.substr(0, bar)), std::stoll(row.substr(bar + 1)));
    }
    for (const std::string& row :
         query(conninfo_, "SELECT ts_ms, detail FROM events WHERE kind = 'takeover'")) {
      long long from = 0, to = 0;
      if (std::sscanf(row.c_str() + row.find('|') + 1, "epoch %lld -> %lld", &from, &to) == 2) {
        began_.emplace(to, std::stoll(row.substr(0, row.find('|'))));
      }
    }
    const std::vector<FakeRedfish::Change> changes = fake_->changes();
    long late = 0;
    for (size_t i = changes_checked_; i < changes.size(); ++i) {
      const FakeRedfish::Change& c = changes[i];
      EXPECT_NE(c.epoch, 0) << "round " << round << ": " << c.line << " came without an epoch";
      for (auto it = began_.upper_bound(c.epoch); it != began_.end(); ++it) {
        if (c.at_ms >= it->second) {
          ++late;
          ADD_FAILURE() << "round " << round << ": " << c.line << " came from epoch " << c.epoch
                        << " at " << c.at_ms << " ms, after epoch " << it->first << " took over at "
                        << it->second << " ms";
        }
      }
    }
    std::printf(
        "  fabric: %zu changes this round, epochs now %s; %ld from an epoch after it "
        "was taken over\n",
        changes.size() - changes_checked_,
        began_.empty() ? "none" : std::to_string(began_.rbegin()->first).c_str(), late);
    changes_checked_ = changes.size();
  }

  // The generated GPUs some system holds.
  std::set<std::string> attached_gpus() const {
    const std::vector<std::string> gpus = fake_->generated("gpu");
    const std::set<std::string> ours(gpus.begin(), gpus.end());
    std::set<std::string> out;
    for (const auto& [system, blocks] : fake_->systems()) {
      for (const std::string& b : blocks) {
        if (ours.count(b) != 0) out.insert(system + ":" + b);
      }
    }
    return out;
  }

  void campaign(Fault fault);

  static constexpr int kLease = 5;  // LeaderLease, the documented example
  test_support::TempDir secrets_{"composer-ha-secret"};
  std::string conninfo_;
  std::unique_ptr<FakeRedfish> fake_;
  std::unique_ptr<ComposerdProcess> a_, b_;
  std::map<int64_t, int64_t> began_;  // epoch -> when it took over, ms since the Unix epoch
  size_t changes_checked_ = 0;
};

void HaFailover::campaign(Fault fault) {
  if (!chosen(fault)) {
    GTEST_SKIP() << "COMPOSER_HA_FAULTS does not name " << fault_name(fault);
  }
  const int rounds = env_int("COMPOSER_HA_ROUNDS", 1);
  const int clients = env_int("COMPOSER_HA_CLIENTS", 12);
  const int ttl = env_int("HA_TTL", 10);
  const bool composerd_fault = fault != Fault::kPrimary;
  start_site(fault);
  if (HasFatalFailure()) return;
  std::vector<double> takeovers;  // fault -> first compose, the goal's figure
  uint32_t next_job = 1;
  for (int round = 1; round <= rounds; ++round) {
    Told told;
    std::atomic<bool> stop{false};
    std::atomic<int64_t> faulted_at{0};    // steady ns of the fault; 0 before it
    std::atomic<int64_t> recovered_at{0};  // a client's first success of a compose sent after it
    std::atomic<int64_t> standby_at{0};    // the standby's first compose (composerd faults)
    std::vector<std::thread> threads;
    const uint32_t first_job = next_job;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        auto cli = both(30000);
        const std::string node = node_name(c);
        uint32_t job = first_job + static_cast<uint32_t>(c) * 100000;
        while (!stop.load()) {
          ++job;
          const int64_t sent = now_ns();
          auto r = cli.compose(job, node, gpus(1 + static_cast<int>(job % 2)));
          {
            std::lock_guard lock(told.mu);
            told.tried.insert({job, node});
            ++told.composes;
            if (r.ok()) {
              told.composed[r->id] = std::to_string(job) + "|" + node;
            } else {
              ++told.compose_errors;
              ++told.errors[error_kind(r.error().message)];
            }
          }
          if (r.ok()) {
            const int64_t k = faulted_at.load();
            int64_t none = 0;
            if (k != 0 && sent > k) recovered_at.compare_exchange_strong(none, now_ns());
          } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
          }
          // A refused release is asked again, as a node's epilog does: a composition left
          // behind would hold its GPUs for the rest of the round.
          for (;;) {
            auto released = cli.release(job, node);
            std::lock_guard lock(told.mu);
            ++told.releases;
            if (released.ok()) break;
            ++told.release_errors;
            if (stop.load()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
          }
        }
      });
    }
    // The clients stop and are joined however the round ends (a failed assertion returns).
    struct Joiner {
      std::atomic<bool>& stop;
      std::vector<std::thread>& threads;
      ~Joiner() {
        stop = true;
        for (auto& t : threads) {
          if (t.joinable()) t.join();
        }
      }
    } joiner{stop, threads};
    // Jobs of this round's own: the clients', the standby's probe, the frozen one's.
    next_job = first_job + static_cast<uint32_t>(clients + 2) * 100000;
    const uint32_t probe_job = first_job + static_cast<uint32_t>(clients) * 100000;
    const uint32_t late_job = probe_job + 100000;
    std::this_thread::sleep_for(std::chrono::seconds(3));
    ComposerdProcess* old = active(30);
    ASSERT_NE(old, nullptr) << "round " << round << ": no composerd is active";
    ComposerdProcess* standby = old == a_.get() ? b_.get() : a_.get();
    std::string what;
    std::string primary;
    std::atomic<bool> late_ok{false};
    if (fault == Fault::kPrimary) {
      // Patroni's REST API may be slow to answer on a loaded machine: ask again for a while.
      for (int i = 0; i < 40 && primary.empty(); ++i) {
        primary = cluster("primary");
        if (primary.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
      ASSERT_FALSE(primary.empty()) << "no primary before round " << round;
      cluster("kill " + primary);
      // Once the kill has returned: a compose sent while the script was still finding the
      // processes could succeed on the old primary.
      faulted_at = now_ns();
      what = "killed primary " + primary + " (Patroni ttl " + std::to_string(ttl) + " s)";
    } else {
      ASSERT_EQ(::kill(old->pid(), fault == Fault::kComposerdKill ? SIGKILL : SIGSTOP), 0);
      faulted_at = now_ns();
      what = std::string(fault == Fault::kComposerdKill ? "killed" : "froze") +
             " the active composerd " + old->url();
      if (fault == Fault::kComposerdKill) {
        ASSERT_NE(old->wait_exit(5000), -1);
      }
      // The standby alone, asked until it composes: when it accepts composes.
      threads.emplace_back([&, standby] {
        auto cli = standby->client(30000);
        const std::string node = node_name(0);
        while (!stop.load()) {
          {
            std::lock_guard lock(told.mu);
            told.tried.insert({probe_job, node});
          }
          auto r = cli.compose(probe_job, node, gpus(1));
          if (r.ok()) {
            standby_at = now_ns();
            std::lock_guard lock(told.mu);
            told.composed[r->id] = std::to_string(probe_job) + "|" + node;
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
      if (fault == Fault::kComposerdFreeze) {
        // A compose sent to the frozen one waits in its socket; it must never be written.
        threads.emplace_back([&, old] {
          const std::string node = node_name(1);
          {
            std::lock_guard lock(told.mu);
            told.tried.insert({late_job, node});
          }
          late_ok = old->client(120000).compose(late_job, node, gpus(1)).ok();
        });
      }
    }
    const int bound = composerd_fault ? kLease + 60 : ttl + 60;
    std::atomic<int64_t>& awaited = composerd_fault ? standby_at : recovered_at;
    const auto deadline = Clock::now() + std::chrono::seconds(bound);
    while (awaited.load() == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (fault == Fault::kComposerdFreeze) {
      // The new active one changes the fabric while the old one is still frozen, then the old
      // one runs again: it must exit (75) or turn standby, having changed nothing.
      std::this_thread::sleep_for(std::chrono::seconds(1));
      ::kill(old->pid(), SIGCONT);
      const auto resumed = Clock::now();
      const int status = old->wait_exit(15000);
      std::printf("  resumed, the old composerd %s after %.1f s\n",
                  status == -1                                     ? "still runs"
                  : WIFEXITED(status) && WEXITSTATUS(status) == 75 ? "exited with status 75"
                                                                   : "ended otherwise",
                  std::chrono::duration<double>(Clock::now() - resumed).count());
      if (status == -1) {
        EXPECT_TRUE(old->becomes("standby", 5))
            << "round " << round
            << ": the resumed composerd neither exited nor turned standby: " << old->log();
      } else {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75)
            << "round " << round << ": the resumed composerd ended with status " << status;
      }
    }
    if (composerd_fault) {
      // The clients follow the list to the new active one.
      const auto until = Clock::now() + std::chrono::seconds(30);
      while (recovered_at.load() == 0 && Clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));  // composes after the takeover
    stop = true;
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    ASSERT_NE(awaited.load(), 0) << "round " << round << ": no compose succeeded within " << bound
                                 << " s after it " << what;
    const double took = static_cast<double>(awaited.load() - faulted_at.load()) / 1e9;
    takeovers.push_back(took);
    const int64_t clients_at = recovered_at.load();
    std::printf("round %d: %s at %s; ", round, what.c_str(),
                utc_now_minus(now_ns() - faulted_at.load()).c_str());
    if (composerd_fault) std::printf("the standby composes after %.1f s, ", took);
    if (clients_at != 0) {
      std::printf("clients' composes succeed again after %.1f s; ",
                  static_cast<double>(clients_at - faulted_at.load()) / 1e9);
    } else {
      std::printf("no client's compose sent after it succeeded; ");
    }
    std::printf("%ld composes (%ld refused), %ld releases (%ld refused) by %d clients\n",
                told.composes, told.compose_errors, told.releases, told.release_errors, clients);
    for (const auto& [why, n] : told.errors) std::printf("  %ld x %s\n", n, why.c_str());
    std::fflush(stdout);

    // Every compose a client was told succeeded is in the ledger: its composition, with its
    // job and node, and the event that made it ready.
    std::map<int64_t, std::string> ledger;
    for (const std::string& row :
         query(conninfo_,
               "SELECT c.id, c.job_id || '|' || c.node FROM compositions c WHERE EXISTS "
               "(SELECT 1 FROM events e WHERE e.composition_id = c.id AND e.kind = 'ready')")) {
      const auto bar = row.find('|');
      ledger[std::stoll(row.substr(0, bar))] = row.substr(bar + 1);
    }
    for (const auto& [id, where] : told.composed) {
      auto it = ledger.find(id);
      EXPECT_TRUE(it != ledger.end() && it->second == where)
          << "round " << round << ": composition " << id << " (" << where
          << ") was answered ready but the ledger does not show it so";
    }
    // No device in two live compositions (the database refuses it too; this looks).
    EXPECT_TRUE(query(conninfo_,
                      "SELECT device_id FROM composition_devices WHERE live = 1 "
                      "GROUP BY device_id HAVING COUNT(*) > 1")
                    .empty());
    if (fault == Fault::kComposerdFreeze) {
      EXPECT_FALSE(late_ok.load()) << "round " << round << ": the frozen composerd composed";
      EXPECT_EQ(query(conninfo_, "SELECT COUNT(*) FROM compositions WHERE job_id = " +
                                     std::to_string(late_job)),
                std::vector<std::string>{"0"})
          << "round " << round << ": the frozen composerd wrote a composition after it resumed";
    }
    check_epochs(round);
    // Nothing stuck: every job tried is released (again: a release whose answer was lost is
    // sent once more), and then nothing is live and the fabric holds nothing.
    auto cli = both(60000);
    for (const auto& [job, node] : told.tried) {
      auto released = cli.release(job, node);
      EXPECT_TRUE(released.ok()) << "round " << round << ": releasing job " << job << " on " << node
                                 << ": " << released.error();
    }
    EXPECT_EQ(query(conninfo_,
                    "SELECT COUNT(*) FROM compositions WHERE state IN "
                    "('requested', 'composing', 'ready', 'releasing')"),
              std::vector<std::string>{"0"})
        << "round " << round << ": compositions left live";
    EXPECT_TRUE(attached_gpus().empty()) << "round " << round << ": the fabric still holds GPUs";
    check_epochs(round);  // the releases' changes
    if (fault == Fault::kPrimary) {
      // The dead host comes back as a standby before the next round.
      cluster("revive " + primary);
      cluster("wait");
    }
    // A composerd that exited (killed; resumed after its leadership was lost; or one that lost
    // the lock to the other during a primary switch) starts again as a standby.
    for (ComposerdProcess* d : {a_.get(), b_.get()}) {
      if (d->pid() > 0) {
        if (const int status = d->wait_exit(0); status != -1) {
          EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75)
              << "round " << round << ": composerd " << d->url() << " ended with status " << status
              << ": " << d->log();
        }
      }
      if (d->pid() <= 0) d->start(true);
    }
  }
  std::sort(takeovers.begin(), takeovers.end());
  const std::string goal = composerd_fault ? "10 s after the active composerd dies"
                                           : "ttl + 5 = " + std::to_string(ttl + 5) + " s";
  std::printf("%s: %zu rounds, %s after %.1f s (best), %.1f s (median), %.1f s (worst); goal: %s\n",
              fault_name(fault), takeovers.size(),
              composerd_fault ? "the standby composes" : "composes succeed again",
              takeovers.front(), takeovers[takeovers.size() / 2], takeovers.back(), goal.c_str());
  std::fflush(stdout);
  EXPECT_EQ(b_->stop(), 0);
  EXPECT_EQ(a_->stop(), 0);
}

TEST_F(HaFailover, ThePrimaryDiesWhileClientsComposeAndNothingIsLostOrDoubled) {
  campaign(Fault::kPrimary);
}

TEST_F(HaFailover, TheActiveComposerdIsKilledAndTheStandbyTakesOverLosingNothing) {
  campaign(Fault::kComposerdKill);
}

TEST_F(HaFailover, AFrozenActiveComposerdResumedChangesNothingAfterTheTakeover) {
  campaign(Fault::kComposerdFreeze);
}

}  // namespace
}  // namespace composer::testing
