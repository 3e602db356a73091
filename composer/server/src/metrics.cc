#include "metrics.h"

#include <cstdio>
#include <tuple>
#include <vector>

#include "composer/model/model.h"

namespace composer::server {
namespace {

// Label values are quoted; backslash, quote and newline are escaped (exposition format).
std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, std::string_view name, const std::string& labels, double value) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += ' ';
  out += number(value);
  out += '\n';
}

}  // namespace

void Histogram::observe(double seconds) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) ++counts_[i];
  }
  ++count_;
  sum_ += seconds;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard lock(mu_);
  const std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i < kBuckets.size(); ++i) {
    sample(out, name + "_bucket", labels + sep + "le=\"" + number(kBuckets[i]) + "\"",
           static_cast<double>(counts_[i]));
  }
  sample(out, name + "_bucket", labels + sep + "le=\"+Inf\"", static_cast<double>(count_));
  sample(out, name + "_sum", labels, sum_);
  sample(out, name + "_count", labels, static_cast<double>(count_));
}

Metrics::Metrics(CompositionService& service, const Reconciler* reconciler, std::string version,
                 std::string fabric, const Clock& clock)
    : service_(service),
      reconciler_(reconciler),
      version_(std::move(version)),
      fabric_(std::move(fabric)),
      clock_(clock),
      started_ms_(clock.now_ms()) {}

std::string Metrics::route_of(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    if (path.front() == '/') {
      path.remove_prefix(1);
      continue;
    }
    const size_t slash = path.find('/');
    parts.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash);
  }
  if (parts.size() == 1 && parts[0] == "metrics") return "/metrics";
  if (parts.empty() || parts[0] != "v1" || parts.size() < 2) return "other";
  const std::string_view top = parts[1];
  if (top == "compositions") {
    if (parts.size() == 2) return "/v1/compositions";
    if (parts.size() == 4) return "/v1/compositions/{job}/{node}";
  } else if (top == "devices") {
    if (parts.size() == 2) return "/v1/devices";
    if (parts.size() == 4 && (parts[3] == "drain" || parts[3] == "resume")) {
      return "/v1/devices/{id}/" + std::string(parts[3]);
    }
  } else if (top == "policy") {
    if (parts.size() == 2) return "/v1/policy";
    if (parts.size() == 3 && (parts[2] == "history" || parts[2] == "explain")) {
      return "/v1/policy/" + std::string(parts[2]);
    }
  } else if ((top == "pool" || top == "events" || top == "health" || top == "reports" ||
              top == "hosts") &&
             parts.size() == 2) {
    return "/v1/" + std::string(top);
  }
  return "other";
}

void Metrics::count_request(std::string_view method, std::string_view path, int status) {
  std::lock_guard lock(mu_);
  ++requests_[{route_of(path), std::string(method), status}];
}

void Metrics::observe_compose(double seconds, std::string_view error_code) {
  compose_.observe(seconds);
  std::lock_guard lock(mu_);
  ++outcomes_[{"compose", error_code.empty() ? "ok" : std::string(error_code)}];
}

void Metrics::observe_release(double seconds, std::string_view error_code) {
  release_.observe(seconds);
  std::lock_guard lock(mu_);
  ++outcomes_[{"release", error_code.empty() ? "ok" : std::string(error_code)}];
}

std::string Metrics::render() const {
  std::string out;
  family(out, "composer_build_info", "gauge", "composerd's version and fabric driver.");
  sample(out, "composer_build_info",
         "version=\"" + label_value(version_) + "\",fabric=\"" + label_value(fabric_) + "\"", 1);
  family(out, "composer_uptime_seconds", "gauge", "Seconds since composerd started.");
  sample(out, "composer_uptime_seconds", "",
         static_cast<double>(clock_.now_ms() - started_ms_) / 1000.0);

  // Devices by type, model, zone and state: every state is written, zeros included, so a
  // graph shows 0 rather than a gap.
  family(out, "composer_devices", "gauge", "Pooled devices by type, model, zone and state.");
  family(out, "composer_pool_bytes", "gauge",
         "Capacity of pooled memory and NVMe by type, model and zone: total and free.");
  std::string bytes;
  for (const PoolRow& r : service_.pool_summary()) {
    const std::string base = "type=\"" + std::string(to_string(r.type)) + "\",model=\"" +
                             label_value(r.model) + "\",zone=\"" + label_value(r.zone) + "\"";
    const std::pair<const char*, uint32_t> states[] = {
        {"free", r.free}, {"attached", r.attached}, {"drained", r.drained}, {"failed", r.failed}};
    for (const auto& [state, count] : states) {
      sample(out, "composer_devices", base + ",state=\"" + state + "\"", count);
    }
    if (r.type != DeviceType::kGpu) {
      sample(bytes, "composer_pool_bytes", base + ",kind=\"total\"",
             static_cast<double>(r.total_bytes));
      sample(bytes, "composer_pool_bytes", base + ",kind=\"free\"",
             static_cast<double>(r.free_bytes));
    }
  }
  out += bytes;

  family(out, "composer_compositions", "gauge", "Live compositions by state.");
  std::map<std::string, int> live;
  for (CompositionState s : {CompositionState::kRequested, CompositionState::kComposing,
                             CompositionState::kReady, CompositionState::kReleasing}) {
    live[std::string(to_string(s))] = 0;
  }
  for (const auto& e : service_.live()) ++live[std::string(to_string(e.state))];
  for (const auto& [state, n] : live) {
    sample(out, "composer_compositions", "state=\"" + state + "\"", n);
  }

  family(out, "composer_compose_duration_seconds", "histogram",
         "Compose calls through the API, from request to answer.");
  compose_.render(out, "composer_compose_duration_seconds", "");
  family(out, "composer_release_duration_seconds", "histogram",
         "Release calls through the API, from request to answer.");
  release_.render(out, "composer_release_duration_seconds", "");

  family(out, "composer_operations_total", "counter",
         "Compose and release calls by outcome (ok or the API error code).");
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, n] : outcomes_) {
      sample(out, "composer_operations_total",
             "operation=\"" + key.first + "\",result=\"" + label_value(key.second) + "\"",
             static_cast<double>(n));
    }
  }

  family(out, "composer_fabric_errors_total", "counter",
         "Fabric attach and detach operations that failed or timed out.");
  const auto fabric = service_.fabric_errors();
  sample(out, "composer_fabric_errors_total", "operation=\"attach\"",
         static_cast<double>(fabric.attach));
  sample(out, "composer_fabric_errors_total", "operation=\"detach\"",
         static_cast<double>(fabric.detach));

  if (reconciler_ != nullptr) {
    family(out, "composer_reconciler_actions_total", "counter",
           "What the reconciler did since composerd started, by action.");
    const ReconcileReport t = reconciler_->totals();
    const std::pair<const char*, int> actions[] = {{"stuck_settled", t.stuck_settled},
                                                   {"orphan_detached", t.orphans_detached},
                                                   {"lost_marked_failed", t.lost_marked_failed},
                                                   {"health_changed", t.health_changes},
                                                   {"ended_job_released", t.ended_jobs_released}};
    for (const auto& [action, n] : actions) {
      sample(out, "composer_reconciler_actions_total", "action=\"" + std::string(action) + "\"", n);
    }
    family(out, "composer_reconciler_errors_total", "counter",
           "Reconciler steps that failed since composerd started.");
    sample(out, "composer_reconciler_errors_total", "", t.errors);
  }

  family(out, "composer_policy_window", "gauge",
         "The policy window in force for each workload class (always 1; the window is the "
         "label, Default when none of the class's windows is open). No samples without a "
         "policy.");
  if (policy_windows_) {
    for (const auto& [cls, window] : policy_windows_()) {
      sample(out, "composer_policy_window",
             "class=\"" + label_value(cls) + "\",window=\"" + label_value(window) + "\"", 1);
    }
  }

  family(out, "composer_api_requests_total", "counter",
         "Answered API requests by route, method and HTTP status.");
  std::lock_guard lock(mu_);
  for (const auto& [key, n] : requests_) {
    const auto& [route, method, code] = key;
    sample(out, "composer_api_requests_total",
           "route=\"" + label_value(route) + "\",method=\"" + label_value(method) + "\",code=\"" +
               std::to_string(code) + "\"",
           static_cast<double>(n));
  }
  return out;
}

}  // namespace composer::server
