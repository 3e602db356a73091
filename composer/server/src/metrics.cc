#include "metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <vector>

#include "composer/core/forwarding_fabric.h"
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
  out += Metrics::number(value);
  out += '\n';
}

// The process_* families every Prometheus client library exports, from /proc/self (Linux).
// A file that cannot be read leaves its samples out rather than writing a wrong value.
void render_process(std::string& out) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  std::ifstream stat_file("/proc/self/stat");
  std::string stat;
  std::getline(stat_file, stat);  // one line
  // Fields after the command name in parentheses (which may hold spaces): state is field 3.
  std::vector<std::string> f;
  if (const size_t paren = stat.rfind(')'); paren != std::string::npos) {
    std::istringstream in(stat.substr(paren + 1));
    for (std::string t; in >> t;) f.push_back(t);
  }
  auto field = [&](size_t n) { return std::strtod(f[n - 3].c_str(), nullptr); };
  double boot_time = -1;
  std::ifstream proc_stat("/proc/stat");
  for (std::string line; std::getline(proc_stat, line);) {
    if (line.rfind("btime ", 0) == 0) boot_time = std::strtod(line.c_str() + 6, nullptr);
  }
  const bool have_stat = f.size() >= 22;

  family(out, "process_cpu_seconds_total", "counter", "User and system CPU time spent in seconds.");
  if (have_stat) sample(out, "process_cpu_seconds_total", "", (field(14) + field(15)) / ticks);
  family(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  if (have_stat) sample(out, "process_resident_memory_bytes", "", field(24) * page);
  family(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  if (have_stat) sample(out, "process_virtual_memory_bytes", "", field(23));
  family(out, "process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.");
  if (have_stat && boot_time >= 0) {
    sample(out, "process_start_time_seconds", "", boot_time + field(22) / ticks);
  }
  family(out, "process_open_fds", "gauge", "Number of open file descriptors.");
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++fds;
  }
  if (!ec) sample(out, "process_open_fds", "", fds);
  family(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
  if (rlimit r{}; getrlimit(RLIMIT_NOFILE, &r) == 0) {
    sample(out, "process_max_fds", "",
           r.rlim_cur == RLIM_INFINITY ? INFINITY : static_cast<double>(r.rlim_cur));
  }
}

}  // namespace

std::string Metrics::number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == 0) return "0";
  // The fewest significant digits that read back as `v`, then Go's choice between the
  // exponent form and the plain one (exponent below -4 or from 6 up: exponent form).
  char buf[64];
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  const int exponent = std::atoi(std::strchr(buf, 'e') + 1);
  if (exponent < -4 || exponent >= 6) return buf;
  std::snprintf(buf, sizeof buf, "%.*f", std::max(digits - 1 - exponent, 0), v);
  return buf;
}

std::vector<double> Histogram::bounds_up_to(double max_seconds) {
  static constexpr double kUsual[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,  1,    2.5, 5,
                                      10,    30,   60,    120,  300, 600,  1200, 1800, 3600};
  std::vector<double> out;
  for (double b : kUsual) {
    if (b < max_seconds) out.push_back(b);
  }
  if (max_seconds > 0) out.push_back(max_seconds);
  return out;
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}

void Histogram::observe(double seconds) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (seconds <= bounds_[i]) ++counts_[i];
  }
  ++count_;
  sum_ += seconds;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard lock(mu_);
  const std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i < bounds_.size(); ++i) {
    sample(out, name + "_bucket", labels + sep + "le=\"" + Metrics::number(bounds_[i]) + "\"",
           static_cast<double>(counts_[i]));
  }
  sample(out, name + "_bucket", labels + sep + "le=\"+Inf\"", static_cast<double>(count_));
  sample(out, name + "_sum", labels, sum_);
  sample(out, name + "_count", labels, static_cast<double>(count_));
}

FabricMeter::FabricMeter(std::string name, std::string driver, double timeout_seconds)
    : name_(std::move(name)), driver_(std::move(driver)) {
  for (size_t i = 0; i < kOperations.size(); ++i) {
    durations_.push_back(std::make_unique<Histogram>(Histogram::bounds_up_to(timeout_seconds)));
  }
}

size_t FabricMeter::index(std::string_view operation) const {
  for (size_t i = 0; i < kOperations.size(); ++i) {
    if (kOperations[i] == operation) return i;
  }
  return 0;
}

void FabricMeter::observe(std::string_view operation, double seconds, bool ok) {
  const size_t i = index(operation);
  durations_[i]->observe(seconds);
  if (!ok) errors_[i].fetch_add(1, std::memory_order_relaxed);
  if (operation == "inventory" || operation == "health") up_.store(ok ? 1 : 0);
}

void FabricMeter::render_up(std::string& out) const {
  sample(out, "composer_fabric_up",
         "fabric=\"" + label_value(name_) + "\",driver=\"" + label_value(driver_) + "\"",
         up_.load());
}

void FabricMeter::render_durations(std::string& out) const {
  for (size_t i = 0; i < kOperations.size(); ++i) {
    durations_[i]->render(
        out, "composer_fabric_request_duration_seconds",
        "fabric=\"" + label_value(name_) + "\",operation=\"" + std::string(kOperations[i]) + "\"");
  }
}

void FabricMeter::render_errors(std::string& out) const {
  for (size_t i = 0; i < kOperations.size(); ++i) {
    sample(
        out, "composer_fabric_request_errors_total",
        "fabric=\"" + label_value(name_) + "\",operation=\"" + std::string(kOperations[i]) + "\"",
        static_cast<double>(errors_[i].load(std::memory_order_relaxed)));
  }
}

FabricMeter& FabricMeters::add(std::string name, std::string driver, double timeout_seconds) {
  meters_.push_back(
      std::make_unique<FabricMeter>(std::move(name), std::move(driver), timeout_seconds));
  return *meters_.back();
}

void FabricMeters::render(std::string& out) const {
  family(out, "composer_fabric_up", "gauge",
         "1 when the fabric manager answered composerd's last inventory or health read, 0 when "
         "it failed (or before its first answer).");
  for (const auto& m : meters_) m->render_up(out);
  family(out, "composer_fabric_request_duration_seconds", "histogram",
         "Calls to the fabric manager by fabric and driver operation, from call to answer.");
  for (const auto& m : meters_) m->render_durations(out);
  family(out, "composer_fabric_request_errors_total", "counter",
         "Calls to the fabric manager that failed, by fabric and driver operation.");
  for (const auto& m : meters_) m->render_errors(out);
}

namespace {

// Runs one driver call and records how long it took and whether it failed (an error, or an
// operation the fabric reports failed).
template <typename F>
auto timed(FabricMeter& meter, std::string_view operation, F&& call) {
  const auto start = std::chrono::steady_clock::now();
  auto result = call();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  bool ok = result.ok();
  if constexpr (std::is_same_v<decltype(result), Expected<Operation>>) {
    ok = ok && result->state != OperationState::kFailed;
  } else if constexpr (std::is_same_v<decltype(result), Expected<BatchStarted>>) {
    ok = ok && result->refused.empty() && result->operation.state != OperationState::kFailed;
  }
  meter.observe(operation, took.count(), ok);
  return result;
}

// Times every call of the driver it wraps.
class MeteredFabric final : public ForwardingFabric {
 public:
  MeteredFabric(std::unique_ptr<Fabric> inner, FabricMeter& meter)
      : ForwardingFabric(std::move(inner)), meter_(meter) {}
  Expected<FabricInventory> inventory() override {
    return timed(meter_, "inventory", [&] { return inner_.inventory(); });
  }
  Expected<Operation> attach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    return timed(meter_, "attach", [&] { return inner_.attach(host, ids); });
  }
  Expected<Operation> detach(const std::string& host,
                             const std::vector<std::string>& ids) override {
    return timed(meter_, "detach", [&] { return inner_.detach(host, ids); });
  }
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override {
    return timed(meter_, "apply_batch", [&] { return inner_.apply_batch(changes); });
  }
  Expected<Operation> operation_status(const std::string& id) override {
    return timed(meter_, "operation_status", [&] { return inner_.operation_status(id); });
  }
  Expected<std::vector<std::pair<std::string, Health>>> health() override {
    return timed(meter_, "health", [&] { return inner_.health(); });
  }

 private:
  FabricMeter& meter_;
};

}  // namespace

std::unique_ptr<Fabric> metered(std::unique_ptr<Fabric> fabric, FabricMeter& meter) {
  return std::make_unique<MeteredFabric>(std::move(fabric), meter);
}

std::string leadership_metrics(bool active, int64_t epoch, int64_t since_ms) {
  std::string out;
  family(out, "composer_leader", "gauge",
         "1 while this composerd is the active one of those sharing its PostgreSQL store, 0 "
         "while it is a standby.");
  sample(out, "composer_leader", "", active ? 1 : 0);
  family(out, "composer_leader_epoch", "gauge",
         "The leadership epoch: one more at each takeover; 0 before any composerd was active.");
  sample(out, "composer_leader_epoch", "", static_cast<double>(epoch));
  family(out, "composer_leader_since_seconds", "gauge",
         "Since when (Unix time) the active composerd is active.");
  sample(out, "composer_leader_since_seconds", "", static_cast<double>(since_ms) / 1000);
  return out;
}

setup::WrapDriver metered_drivers(FabricMeters& meters) {
  return [&meters](std::unique_ptr<Fabric> driver, const std::string& name,
                   const setup::FabricConfig& f) {
    const std::string kind(driver->driver());
    // One call's bound: a request, or a redfish task waited for within the call.
    const double bound = static_cast<double>(std::max(f.request_timeout_ms, f.task_wait_ms)) / 1000;
    FabricMeter& meter = meters.add(name.empty() ? kind : name, kind, bound);
    return metered(std::move(driver), meter);
  };
}

Metrics::Metrics(const LivePool& pool, const CompositionService& service,
                 const Reconciler* reconciler, MetricsOptions options, const Clock& clock)
    : pool_(pool),
      service_(service),
      reconciler_(reconciler),
      options_(std::move(options)),
      clock_(clock),
      started_ms_(clock.now_ms()),
      compose_(Histogram::bounds_up_to(static_cast<double>(options_.compose_timeout_ms) / 1000)),
      release_(Histogram::bounds_up_to(static_cast<double>(options_.release_timeout_ms) / 1000)) {}

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
    if (parts.size() == 3) return "/v1/compositions/{job}";
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
         "version=\"" + label_value(options_.version) + "\",fabric=\"" +
             label_value(options_.fabric) + "\"",
         1);
  family(out, "composer_uptime_seconds", "gauge", "Seconds since composerd started.");
  sample(out, "composer_uptime_seconds", "",
         static_cast<double>(clock_.now_ms() - started_ms_) / 1000.0);

  // Devices by type, model, zone and state: every state is written, zeros included, so a
  // graph shows 0 rather than a gap.
  family(out, "composer_devices", "gauge", "Pooled devices by type, model, zone and state.");
  std::string bytes;
  for (const PoolRow& r : pool_.pool_summary()) {
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
  family(out, "composer_pool_bytes", "gauge",
         "Capacity of pooled memory and NVMe by type, model and zone: total and free.");
  out += bytes;

  family(out, "composer_compositions", "gauge", "Live compositions by state.");
  std::map<std::string, int> live;
  for (CompositionState s : {CompositionState::kRequested, CompositionState::kComposing,
                             CompositionState::kReady, CompositionState::kReleasing}) {
    live[std::string(to_string(s))] = 0;
  }
  for (const auto& e : pool_.live()) ++live[std::string(to_string(e.state))];
  for (const auto& [state, n] : live) {
    sample(out, "composer_compositions", "state=\"" + state + "\"", n);
  }
  family(out, "composer_compositions_held", "gauge",
         "Live compositions their node holds: a process still used the devices after the job.");
  {
    int held = 0;
    for (const auto& e : pool_.live()) held += e.hold.empty() ? 0 : 1;
    sample(out, "composer_compositions_held", "", held);
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

  if (options_.fabrics != nullptr) options_.fabrics->render(out);

  // Failure domains, only for a pool that has some (a family without samples reads as an empty
  // gauge to a parser): every domain is written, zeros included, so an alert on > 0 and a
  // graph of 0 both work.
  const std::map<FailureDomain, uint32_t> failed = pool_.failed_by_domain();
  if (!failed.empty()) {
    std::map<FailureDomain, std::set<uint32_t>> hit;
    for (const auto& impact : pool_.failure_impacts()) {
      for (const FailureDomain& d : impact.domains) hit[d].insert(impact.entry.job_id);
    }
    const auto domain_labels = [](const FailureDomain& d) {
      return "level=\"" + label_value(d.level) + "\",domain=\"" + label_value(d.name) + "\"";
    };
    family(out, "composer_domain_failed_devices", "gauge",
           "Devices of each failure domain that failed (reported critical or lost by the "
           "fabric).");
    std::string jobs;
    for (const auto& [domain, n] : failed) {
      sample(out, "composer_domain_failed_devices", domain_labels(domain), n);
      const auto it = hit.find(domain);
      sample(jobs, "composer_domain_affected_jobs", domain_labels(domain),
             it == hit.end() ? 0 : static_cast<double>(it->second.size()));
    }
    family(out, "composer_domain_affected_jobs", "gauge",
           "Running jobs holding a failed device of each failure domain.");
    out += jobs;
  }
  family(out, "composer_failure_reactions_total", "counter",
         "What composerd did to jobs whose devices failed, since it started: requeued, "
         "degraded (notified, or a requeue refused or past MaxRequeues) or ignored (OnFailure "
         "Action=none).");
  if (failure_reactions_) {
    const ReactionFigures r = failure_reactions_();
    sample(out, "composer_failure_reactions_total", "reaction=\"requeued\"",
           static_cast<double>(r.requeued));
    sample(out, "composer_failure_reactions_total", "reaction=\"degraded\"",
           static_cast<double>(r.degraded));
    sample(out, "composer_failure_reactions_total", "reaction=\"ignored\"",
           static_cast<double>(r.ignored));
  }

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

  // Only with SlurmSync=yes: a family without samples reads as an empty gauge to a parser.
  if (slurm_sync_) {
    const SlurmSyncFigures sync = slurm_sync_();
    family(out, "composer_slurm_drift_repairs_total", "counter",
           "Reservations composerd keeps in Slurm that it found deleted (recreated) or changed "
           "(updated) outside composerd and repaired, since it started.");
    sample(out, "composer_slurm_drift_repairs_total", "change=\"recreated\"",
           static_cast<double>(sync.recreated));
    sample(out, "composer_slurm_drift_repairs_total", "change=\"updated\"",
           static_cast<double>(sync.updated));
    family(out, "composer_slurm_in_step", "gauge",
           "1 when composerd's last Slurm sync round left Slurm's licenses and reservations as "
           "the pool and the policy say, 0 when it could not (the log says why); 0 before the "
           "first round.");
    sample(out, "composer_slurm_in_step", "", sync.in_step > 0 ? 1 : 0);
  }

  if (store_writes_) {
    const db::WriteStats w = store_writes_();
    family(out, "composer_store_write_calls_total", "counter",
           "Changes to the database (one each: a composition created, a state change, a drain, "
           "...), committed or refused.");
    sample(out, "composer_store_write_calls_total", "", static_cast<double>(w.calls));
    family(out, "composer_store_write_failures_total", "counter",
           "Changes to the database that were refused or failed (nothing of them was written).");
    sample(out, "composer_store_write_failures_total", "", static_cast<double>(w.failed_calls));
    family(out, "composer_store_transactions_total", "counter",
           "Write transactions committed: changes arriving together share one (one fsync each "
           "with Durable=yes).");
    sample(out, "composer_store_transactions_total", "", static_cast<double>(w.transactions));
    family(out, "composer_store_round_trips_total", "counter",
           "Times the store's writer waited for PostgreSQL's answer (a statement, or a flight of "
           "them); 0 on SQLite.");
    sample(out, "composer_store_round_trips_total", "", static_cast<double>(w.round_trips));
  }

  if (leadership_) out += leadership_();

  render_process(out);

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
