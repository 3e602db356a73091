// composerd's Prometheus metrics (text exposition format 0.0.4) on GET /metrics, without
// authentication, like /v1/health. Counters and histograms live here and are fed by the HTTP
// layer and by the fabric meters (every fabric driver call, timed per fabric); gauges are read
// from the live pool, the service, the reconciler and /proc/self when scraped. Every family is
// written as one block (HELP, TYPE, then its samples) and numbers as Prometheus prints them:
// "0.005", "30", "1e+06", "+Inf". docs/METRICS.md lists the families.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/core/fabric.h"
#include "composer/core/live_pool.h"
#include "composer/core/reconciler.h"
#include "composer/core/service.h"
#include "composer/db/store.h"
#include "composer/setup/fabric_setup.h"

namespace composer::server {

// A Prometheus histogram of seconds with fixed bucket bounds.
class Histogram {
 public:
  // The usual bounds (5 ms .. 30 s, then 1, 2, 5, 10, 20, 30 and 60 minutes) below
  // `max_seconds`, then `max_seconds` itself: the last finite bucket is the timeout the
  // observed calls run under, so a call that ran into it stands apart from one that nearly did.
  static std::vector<double> bounds_up_to(double max_seconds);

  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  // "# TYPE" line not included: the caller writes the family header once.
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Every call composerd makes to one fabric manager: its latency by operation, its failures,
// and whether the last inventory or health read answered (composer_fabric_up).
class FabricMeter {
 public:
  static constexpr std::array<std::string_view, 6> kOperations = {
      "inventory", "attach", "detach", "operation_status", "health", "apply_batch"};

  FabricMeter(std::string name, std::string driver, double timeout_seconds);
  const std::string& name() const { return name_; }
  const std::string& driver() const { return driver_; }
  // `operation`: one of kOperations.
  void observe(std::string_view operation, double seconds, bool ok);
  void render_up(std::string& out) const;
  void render_durations(std::string& out) const;
  void render_errors(std::string& out) const;

 private:
  size_t index(std::string_view operation) const;
  std::string name_;
  std::string driver_;
  std::atomic<int> up_{0};  // 0 until the first inventory read answers
  std::vector<std::unique_ptr<Histogram>> durations_;
  std::array<std::atomic<uint64_t>, kOperations.size()> errors_{};
};

// The meters of every fabric composerd runs, in the order they were added; metered_drivers()
// adds one per driver make_fabric() builds and wraps the driver in metered().
class FabricMeters {
 public:
  // `timeout_seconds`: the longest one call of this driver may take (the last finite bucket
  // of its latency histograms).
  FabricMeter& add(std::string name, std::string driver, double timeout_seconds);
  void render(std::string& out) const;

 private:
  std::vector<std::unique_ptr<FabricMeter>> meters_;  // fixed once composerd has started
};

// `fabric` with every call timed into `meter` (which must outlive it); the driver's answers
// are passed on unchanged.
std::unique_ptr<Fabric> metered(std::unique_ptr<Fabric> fabric, FabricMeter& meter);

// make_fabric()'s wrap for composerd: every driver gets its meter in `meters` (named by its
// FabricName, else by the driver) and every call of it is timed there (composer_fabric_*
// metrics). `meters` must outlive the fabric.
setup::WrapDriver metered_drivers(FabricMeters& meters);

// The composer_leader, composer_leader_epoch and composer_leader_since_seconds families: whether
// this composerd is the active one, the leadership epoch and since when the active one is.
std::string leadership_metrics(bool active, int64_t epoch, int64_t since_ms);

struct MetricsOptions {
  std::string version;
  std::string fabric;  // Fabric= (the driver) for composer_build_info
  int64_t compose_timeout_ms = 60000;
  int64_t release_timeout_ms = 60000;
  const FabricMeters* fabrics = nullptr;  // null: no per-fabric families
};

class Metrics {
 public:
  // `reconciler` may be null (its counters are then left out).
  Metrics(const LivePool& pool, const CompositionService& service, const Reconciler* reconciler,
          MetricsOptions options, const Clock& clock);

  // One answered API request; `path` is reduced to its route ("/v1/compositions/{job}/{node}")
  // so job ids and node names do not become label values.
  void count_request(std::string_view method, std::string_view path, int status);
  // A compose or release call as the API answered it, with its outcome's error code ("" when
  // it succeeded).
  void observe_compose(double seconds, std::string_view error_code);
  void observe_release(double seconds, std::string_view error_code);

  // Where the policy window in force for each workload class comes from: (class, window)
  // pairs, empty without a policy. Unset: the composer_policy_window family has no samples.
  using PolicyWindows = std::function<std::vector<std::pair<std::string, std::string>>()>;
  void set_policy_windows(PolicyWindows source) { policy_windows_ = std::move(source); }

  // What composerd's Slurm sync (SlurmSync=yes) reports: drift it repaired since it started
  // and whether its last round left Slurm in step (-1 before the first). Unset: the
  // composer_slurm_* families are left out.
  struct SlurmSyncFigures {
    uint64_t recreated = 0;
    uint64_t updated = 0;
    int in_step = -1;
  };
  void set_slurm_sync(std::function<SlurmSyncFigures()> source) { slurm_sync_ = std::move(source); }

  // The failure reactions since composerd started (failure_reactor.h). Unset: the
  // composer_failure_reactions_total family has no samples.
  struct ReactionFigures {
    uint64_t requeued = 0;
    uint64_t degraded = 0;
    uint64_t ignored = 0;
  };
  void set_failure_reactions(std::function<ReactionFigures()> source) {
    failure_reactions_ = std::move(source);
  }

  // The store's writer since composerd started (db::Store::write_stats). Unset: the
  // composer_store_* families are left out.
  void set_store_writes(std::function<db::WriteStats()> source) {
    store_writes_ = std::move(source);
  }

  // The leadership's lines (leadership_metrics) with StateBackend=postgresql. Unset: the
  // composer_leader* families are left out.
  void set_leadership(std::function<std::string()> source) { leadership_ = std::move(source); }

  std::string render() const;

  // "/v1/compositions/4711/node1" -> "/v1/compositions/{job}/{node}"; unknown paths -> "other".
  static std::string route_of(std::string_view path);

  // A sample value or bucket bound as Prometheus writes it (Go's shortest 'g' form):
  // 0.005 -> "0.005", 30 -> "30", 1e6 -> "1e+06", infinity -> "+Inf".
  static std::string number(double v);

 private:
  const LivePool& pool_;
  const CompositionService& service_;  // its fabric errors
  const Reconciler* reconciler_;
  MetricsOptions options_;
  const Clock& clock_;
  int64_t started_ms_;
  PolicyWindows policy_windows_;
  std::function<db::WriteStats()> store_writes_;
  std::function<SlurmSyncFigures()> slurm_sync_;
  std::function<ReactionFigures()> failure_reactions_;
  std::function<std::string()> leadership_;

  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;  // route, method, code
  std::map<std::pair<std::string, std::string>, uint64_t> outcomes_;        // (operation, result)
  Histogram compose_;
  Histogram release_;
};

}  // namespace composer::server
