// composerd's Prometheus metrics (text exposition format 0.0.4) on GET /metrics, without
// authentication, like /v1/health. Counters and histograms live here and are fed by the HTTP
// layer; gauges are read from the service and the reconciler when scraped.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/core/reconciler.h"
#include "composer/core/service.h"

namespace composer::server {

// A Prometheus histogram of seconds with fixed buckets.
class Histogram {
 public:
  static constexpr std::array<double, 12> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                      0.5,   1,    2.5,   5,    10,  30};
  void observe(double seconds);
  // "# TYPE" line not included: the caller writes the family header once.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  mutable std::mutex mu_;
  std::array<uint64_t, kBuckets.size()> counts_{};
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  // `reconciler` may be null (its counters are then left out).
  Metrics(CompositionService& service, const Reconciler* reconciler, std::string version,
          std::string fabric, const Clock& clock);

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

  std::string render() const;

  // "/v1/compositions/4711/node1" -> "/v1/compositions/{job}/{node}"; unknown paths -> "other".
  static std::string route_of(std::string_view path);

 private:
  CompositionService& service_;
  const Reconciler* reconciler_;
  std::string version_;
  std::string fabric_;
  const Clock& clock_;
  int64_t started_ms_;
  PolicyWindows policy_windows_;

  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;  // route, method, code
  std::map<std::pair<std::string, std::string>, uint64_t> outcomes_;        // (operation, result)
  Histogram compose_;
  Histogram release_;
};

}  // namespace composer::server
