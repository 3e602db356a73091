#include "composer/cli/simulate_command.h"

#include <json/value.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <utility>

#include "composer/cli/composerctl.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/config/conf_file.h"
#include "composer/policies/parser.h"
#include "composer/policies/zoneinfo.h"
#include "composer/simulate/simulate.h"

namespace composer::cli {
namespace {

namespace sim = composer::simulate;

struct Scenario {
  std::string cluster;
  std::string policy;
  // simulate sweep: the files' text with the point's values put in, and the point's name.
  std::optional<std::string> cluster_text;
  std::optional<std::string> policy_text;
  std::string label;
};

// `text` with every ${NAME} of `values` replaced by its value.
std::string substitute(std::string text,
                       const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [name, value] : values) {
    const std::string key = "${" + name + "}";
    for (size_t at = text.find(key); at != std::string::npos;
         at = text.find(key, at + value.size())) {
      text.replace(at, key.size(), value);
    }
  }
  return text;
}

// The sweep's frontier: the points no other point beats on every one of installed GPUs,
// installed memory, mean wait and stranded GPU-hours (and on one of them strictly).
std::vector<bool> frontier(const std::vector<sim::Result>& rs) {
  const auto key = [](const sim::Result& r) {
    return std::array<double, 4>{static_cast<double>(r.gpus), static_cast<double>(r.mem_bytes),
                                 r.wait.mean_s, r.stranded_gpu_hours()};
  };
  std::vector<bool> on(rs.size(), true);
  for (size_t a = 0; a < rs.size(); ++a) {
    for (size_t b = 0; b < rs.size() && on[a]; ++b) {
      const auto ka = key(rs[a]);
      const auto kb = key(rs[b]);
      bool no_worse = true;
      bool better = false;
      for (size_t i = 0; i < 4; ++i) {
        no_worse = no_worse && kb[i] <= ka[i];
        better = better || kb[i] < ka[i];
      }
      if (no_worse && better) on[a] = false;
    }
  }
  return on;
}

// Messages quote the files they refuse: every line shown with printable(), never a raw byte
// (SimulateCli.BadInputIsRefusedWithASentence).
std::string shown(const std::string& message) {
  std::vector<std::string> lines = split(message, '\n');
  for (std::string& line : lines) line = printable(line);
  return join(lines, "\n");
}

int usage_error(std::ostream& err, const std::string& message) {
  err << "composerctl: error: " << shown(message)
      << "\nRun 'composerctl simulate --help' for usage.\n";
  return kExitUsage;
}

int failed(std::ostream& err, const std::string& message) {
  err << "composerctl: error: " << shown(message) << '\n';
  return kExitFailed;
}

std::string fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, v);
  return buffer;
}

std::string percent(double share) { return fixed(share * 100, 1) + "%"; }

// Seconds: "1-02:03:04" in the aligned table, whole seconds when parsable.
std::string duration(double seconds, Format format) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  return format == Format::kTable ? format_elapsed(s) : std::to_string(s);
}

std::string ratio(double value, double base) {
  if (base == 0) return value == 0 ? "1.00" : "-";
  return fixed(value / base, 2);
}

// The figures compared across scenarios, in column order.
struct Figure {
  const char* header;
  double (*get)(const sim::Result&);
};
const Figure kRatioFigures[] = {
    {"GPU_UTIL_RATIO", [](const sim::Result& r) { return r.gpu_utilisation(); }},
    {"MEM_UTIL_RATIO", [](const sim::Result& r) { return r.mem_utilisation(); }},
    {"STRANDED_GPU_H_RATIO", [](const sim::Result& r) { return r.stranded_gpu_hours(); }},
    {"STRANDED_MEM_GIBH_RATIO", [](const sim::Result& r) { return r.stranded_mem_gib_hours(); }},
    {"IDLE_WAITING_GPU_H_RATIO", [](const sim::Result& r) { return r.idle_waiting_gpu_hours(); }},
    {"IDLE_WAITING_MEM_GIBH_RATIO",
     [](const sim::Result& r) { return r.idle_waiting_mem_gib_hours(); }},
    {"MEM_ROUNDING_GIBH_RATIO", [](const sim::Result& r) { return r.rounding_mem_gib_hours(); }},
    {"WAIT_MEAN_RATIO", [](const sim::Result& r) { return r.wait.mean_s; }},
    {"WAIT_GPU_MEAN_RATIO", [](const sim::Result& r) { return r.wait_gpu_weighted_s; }},
    {"WAIT_P95_RATIO", [](const sim::Result& r) { return static_cast<double>(r.wait.p95_s); }},
    {"MAKESPAN_RATIO", [](const sim::Result& r) { return static_cast<double>(r.makespan_s); }},
};

Table scenario_table(const std::vector<sim::Result>& results, Format format, bool ratios,
                     const std::vector<bool>* on_frontier = nullptr) {
  std::vector<Column> cols = {{"SCENARIO"},
                              {"POLICY"},
                              {"GPUS", true},
                              {"MEM", true},
                              {"JOBS", true},
                              {"RAN", true},
                              {"NEVER", true},
                              {"GPU_UTIL", true},
                              {"MEM_UTIL", true},
                              {"STRANDED_GPU_H", true},
                              {"STRANDED_MEM_GIBH", true},
                              {"IDLE_WAITING_GPU_H", true},
                              {"IDLE_WAITING_MEM_GIBH", true},
                              {"MEM_ROUNDING_GIBH", true},
                              {"MEM_ROUNDING", true},
                              {"WAIT_MEAN", true},
                              {"WAIT_GPU_MEAN", true},
                              {"WAIT_P50", true},
                              {"WAIT_P95", true},
                              {"WAIT_MAX", true},
                              {"MAKESPAN", true},
                              {"BACKFILLED", true}};
  if (ratios) {
    for (const Figure& f : kRatioFigures) cols.push_back({f.header, true});
  }
  if (on_frontier != nullptr) cols.push_back({"FRONTIER"});
  Table t(std::move(cols));
  size_t index = 0;
  for (const sim::Result& r : results) {
    std::vector<std::string> row = {r.cluster,
                                    r.policy.empty() ? "-" : r.policy,
                                    std::to_string(r.gpus),
                                    format_size(r.mem_bytes),
                                    std::to_string(r.jobs),
                                    std::to_string(r.started),
                                    std::to_string(r.never_runnable),
                                    percent(r.gpu_utilisation()),
                                    percent(r.mem_utilisation()),
                                    fixed(r.stranded_gpu_hours(), 1),
                                    fixed(r.stranded_mem_gib_hours(), 1),
                                    fixed(r.idle_waiting_gpu_hours(), 1),
                                    fixed(r.idle_waiting_mem_gib_hours(), 1),
                                    fixed(r.rounding_mem_gib_hours(), 1),
                                    percent(r.rounding_share()),
                                    duration(r.wait.mean_s, format),
                                    duration(r.wait_gpu_weighted_s, format),
                                    duration(static_cast<double>(r.wait.p50_s), format),
                                    duration(static_cast<double>(r.wait.p95_s), format),
                                    duration(static_cast<double>(r.wait.max_s), format),
                                    duration(static_cast<double>(r.makespan_s), format),
                                    std::to_string(r.backfilled)};
    if (ratios) {
      for (const Figure& f : kRatioFigures) row.push_back(ratio(f.get(r), f.get(results.front())));
    }
    if (on_frontier != nullptr) row.push_back((*on_frontier)[index] ? "yes" : "no");
    ++index;
    t.add_row(std::move(row));
  }
  return t;
}

// The waits per class (or, with `sizes`, per job size), one row each, then "all".
Table class_table(const std::vector<sim::Result>& results, Format format, bool sizes) {
  Table t({{"SCENARIO"},
           {sizes ? "SIZE" : "CLASS"},
           {"JOBS", true},
           {"WAIT_MEAN", true},
           {"WAIT_P50", true},
           {"WAIT_P95", true},
           {"WAIT_MAX", true}});
  for (const sim::Result& r : results) {
    std::vector<sim::WaitStats> rows = sizes ? r.by_size : r.by_class;
    rows.push_back(r.wait);
    for (const sim::WaitStats& w : rows) {
      t.add_row({r.cluster, w.name, std::to_string(w.jobs), duration(w.mean_s, format),
                 duration(static_cast<double>(w.p50_s), format),
                 duration(static_cast<double>(w.p95_s), format),
                 duration(static_cast<double>(w.max_s), format)});
    }
  }
  return t;
}

Json::Value wait_json(const sim::WaitStats& w) {
  Json::Value v;
  v["name"] = w.name;
  v["jobs"] = Json::UInt64(w.jobs);
  v["mean_s"] = w.mean_s;
  v["p50_s"] = Json::Int64(w.p50_s);
  v["p95_s"] = Json::Int64(w.p95_s);
  v["max_s"] = Json::Int64(w.max_s);
  return v;
}

Json::Value result_json(const sim::Result& r) {
  Json::Value v;
  v["cluster"] = r.cluster;
  v["policy"] = r.policy;
  v["trace"] = r.trace;
  v["gpus"] = Json::UInt64(r.gpus);
  v["mem_bytes"] = Json::UInt64(r.mem_bytes);
  v["hosts"] = r.hosts;
  v["fixed_servers"] = r.fixed_servers;
  v["jobs"] = Json::UInt64(r.jobs);
  v["started"] = Json::UInt64(r.started);
  v["never_runnable"] = Json::UInt64(r.never_runnable);
  v["never"] = Json::Value(Json::arrayValue);
  for (const sim::NeverRunnable& n : r.never) {
    Json::Value x;
    x["reason"] = n.reason;
    x["jobs"] = Json::UInt64(n.jobs);
    x["first_line"] = n.first_line;
    x["first_id"] = n.first_id;
    v["never"].append(x);
  }
  v["backfilled"] = Json::UInt64(r.backfilled);
  v["first_submit_s"] = Json::Int64(r.first_submit_s);
  v["last_end_s"] = Json::Int64(r.last_end_s);
  v["makespan_s"] = Json::Int64(r.makespan_s);
  v["gpu_utilisation"] = r.gpu_utilisation();
  v["mem_utilisation"] = r.mem_utilisation();
  v["gpu_hours"] = r.gpu_hours();
  v["mem_gib_hours"] = static_cast<double>(r.mem_mib_s) / 1024.0 / 3600.0;
  v["stranded_gpu_hours"] = r.stranded_gpu_hours();
  v["stranded_mem_gib_hours"] = r.stranded_mem_gib_hours();
  v["idle_waiting_gpu_hours"] = r.idle_waiting_gpu_hours();
  v["idle_waiting_mem_gib_hours"] = r.idle_waiting_mem_gib_hours();
  v["mem_rounding_gib_hours"] = r.rounding_mem_gib_hours();
  v["mem_rounding_share"] = r.rounding_share();
  v["wait"] = wait_json(r.wait);
  v["wait_gpu_weighted_mean_s"] = r.wait_gpu_weighted_s;
  v["by_class"] = Json::Value(Json::arrayValue);
  for (const sim::WaitStats& w : r.by_class) v["by_class"].append(wait_json(w));
  v["by_size"] = Json::Value(Json::arrayValue);
  for (const sim::WaitStats& w : r.by_size) v["by_size"].append(wait_json(w));
  const sim::TraceCounts& c = r.counts;
  Json::Value t;
  t["rows"] = Json::UInt64(c.rows);
  t["jobs"] = Json::UInt64(c.jobs);
  t["fractional_gpus"] = Json::UInt64(c.fractional_gpus);
  t["no_gpus"] = Json::UInt64(c.no_gpus);
  t["no_memory"] = Json::UInt64(c.no_memory);
  t["no_time_limit"] = Json::UInt64(c.no_time_limit);
  t["censored"] = Json::UInt64(c.censored);
  t["no_duration"] = Json::UInt64(c.no_duration);
  t["steps"] = Json::UInt64(c.steps);
  v["trace_rules"] = t;
  return v;
}

// What the trace rules did, one line each, for the aligned output.
std::string trace_notes(const sim::TraceCounts& c, const std::string& name) {
  std::string out = "trace " + name + ": " + std::to_string(c.rows) + " rows, " +
                    std::to_string(c.jobs) + " jobs replayed\n";
  const std::pair<uint64_t, const char*> notes[] = {
      {c.fractional_gpus, "with fractional GPUs, rounded up to whole GPUs"},
      {c.no_gpus, "without a GPU count, replayed with 0 GPUs"},
      {c.no_memory, "without memory, replayed with 0 bytes"},
      {c.no_time_limit, "without a time limit, given their duration as the limit"},
      {c.censored, "censored (still running at the export), replayed for what they ran"},
      {c.no_duration, "that never started or have no duration, not replayed"},
      {c.steps, "job steps (sacct's 123.batch, 123.0), not jobs"},
  };
  for (const auto& [n, what] : notes) {
    if (n > 0) out += "  " + std::to_string(n) + " rows " + what + "\n";
  }
  return out;
}

std::string svg_path(const std::string& base, size_t index, size_t count) {
  if (count == 1) return base;
  const auto dot = base.rfind(".svg");
  const std::string stem =
      dot != std::string::npos && dot + 4 == base.size() ? base.substr(0, dot) : base;
  return stem + "." + std::to_string(index + 1) + ".svg";
}

}  // namespace

std::string progress_line(const std::string& cluster, uint64_t submitted, uint64_t total,
                          double elapsed_s) {
  std::string line =
      "simulate " + printable(cluster) + ": " + std::to_string(submitted) + " of " +
      std::to_string(total) + " jobs submitted (" +
      fixed(
          total == 0 ? 100.0 : 100.0 * static_cast<double>(submitted) / static_cast<double>(total),
          1) +
      "%)";
  if (elapsed_s <= 0 || submitted == 0) return line;
  const double rate = static_cast<double>(submitted) / elapsed_s;
  const auto eta =
      static_cast<int64_t>(std::llround(static_cast<double>(total - submitted) / rate));
  return line + ", " + std::to_string(static_cast<int64_t>(std::llround(rate))) + " jobs/s, ETA " +
         format_elapsed(eta);
}

SimulateArgs& add_simulate_command(CLI::App& app, SimulateArgs& args) {
  args.command = app.add_subcommand(
      "simulate",
      "Replay a job trace on a cluster file, offline: utilisation, stranded GPUs and memory, "
      "waits");
  CLI::App* c = args.command;
  c->add_option("--trace", args.trace,
                "the jobs: the normalised CSV or a sacct -P export (docs/CAPACITY.md)")
      ->type_name("FILE");
  c->add_option("--policy", args.policy,
                "a policy file (windows, classes, caps) the jobs run under")
      ->type_name("FILE");
  c->add_option("--start", args.start,
                "the wall clock of a CSV trace's second 0, YYYY-MM-DD[THH:MM[:SS]] "
                "(default: the first row's submitted=, else 1970-01-01)")
      ->type_name("TIME");
  c->add_option("--time-zone", args.time_zone,
                "the IANA zone of the trace's times that carry no offset, and of --start "
                "(default: UTC, whatever the machine's zone)")
      ->type_name("ZONE");
  c->add_flag("--csv", args.csv, "comma-separated values with a header line");
  c->add_flag("--quiet", args.quiet,
              "no progress line (else kept on standard error while it is a terminal)");
  c->add_flag("--strict", args.strict,
              "fail (exit 1) when a cluster can never run a job of the trace, after printing");
  c->add_flag("--classes", args.classes,
              "print the waits per workload class instead of the scenario figures");
  c->add_flag("--sizes", args.sizes,
              "print the waits per job size (GPUs asked) instead of the scenario figures");
  c->add_option("--svg", args.svg,
                "also write charts (use over time by class, weekday x hour heat map) to this "
                "SVG file (compare: one per scenario, OUT.1.svg, OUT.2.svg, ...)")
      ->type_name("OUT");
  args.command
      ->add_option("--cluster", args.cluster,
                   "the cluster: composer.conf's NodeName and DeviceGroup lines, "
                   "FixedNode lines")
      ->type_name("FILE");
  args.compare = args.command->add_subcommand(
      "compare", "Several cluster files on the same trace, side by side, with ratios to the first");
  // The options of `simulate` may also follow `compare`.
  args.compare->fallthrough();
  args.compare
      ->add_option("SCENARIO", args.scenarios,
                   "CLUSTER[:POLICY]: a cluster file, with its own policy file if given "
                   "(else --policy's)")
      ->required();
  args.sweep = args.command->add_subcommand(
      "sweep",
      "One cluster (and policy) file with ${NAME} in it, run once per value of NAME: "
      "waits and stranded capacity against the hardware, and which points are on the frontier");
  args.sweep->fallthrough();
  args.sweep
      ->add_option("--vary", args.vary,
                   "NAME=V1,V2,...: the values of ${NAME}, one point each; several --vary "
                   "take their values point by point (the same number of each)")
      ->type_name("NAME=VALUES")
      ->required();
  return args;
}

int run_simulate(const SimulateArgs& args, const OutputOptions& output, std::ostream& out,
                 std::ostream& err) {
  const Format format = output.format;
  const bool comparing = args.compare->parsed();
  const bool sweeping = args.sweep->parsed();
  if (args.trace.empty()) return usage_error(err, "--trace FILE is required");
  std::vector<Scenario> scenarios;
  if (sweeping) {
    if (args.cluster.empty()) return usage_error(err, "--cluster FILE is required");
    std::vector<std::pair<std::string, std::vector<std::string>>> vary;
    for (const std::string& v : args.vary) {
      const auto eq = v.find('=');
      const std::string name = v.substr(0, std::min(eq, v.size()));
      const bool named = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
      });
      std::vector<std::string> values =
          eq == std::string::npos ? std::vector<std::string>{} : split(v.substr(eq + 1), ',');
      if (!named || values.empty() ||
          std::any_of(values.begin(), values.end(),
                      [](const std::string& x) { return x.empty(); })) {
        return usage_error(
            err, "--vary '" + v + "': expected NAME=V1,V2,... (NAME of letters, digits and _)");
      }
      if (!vary.empty() && values.size() != vary.front().second.size()) {
        return usage_error(err, "--vary " + name + " has " + std::to_string(values.size()) +
                                    " values, --vary " + vary.front().first + " " +
                                    std::to_string(vary.front().second.size()) +
                                    ": each point takes one value of each");
      }
      vary.emplace_back(name, std::move(values));
    }
    auto cluster_text = config::read_file(args.cluster);
    if (!cluster_text) return failed(err, cluster_text.error().message);
    std::optional<std::string> policy_text;
    if (!args.policy.empty()) {
      auto text = config::read_file(args.policy);
      if (!text) return failed(err, text.error().message);
      policy_text = std::move(*text);
    }
    for (const auto& [name, values] : vary) {
      const std::string key = "${" + name + "}";
      if (cluster_text->find(key) == std::string::npos &&
          (!policy_text || policy_text->find(key) == std::string::npos)) {
        return usage_error(err, "--vary " + name + ": neither " + args.cluster +
                                    (policy_text ? " nor " + args.policy : "") + " uses " + key);
      }
    }
    for (size_t k = 0; k < vary.front().second.size(); ++k) {
      std::vector<std::pair<std::string, std::string>> point;
      std::string label;
      for (const auto& [name, values] : vary) {
        point.emplace_back(name, values[k]);
        label += (label.empty() ? "" : " ") + name + "=" + values[k];
      }
      Scenario sc{args.cluster, args.policy, substitute(*cluster_text, point), std::nullopt, label};
      if (policy_text) sc.policy_text = substitute(*policy_text, point);
      scenarios.push_back(std::move(sc));
    }
  } else if (comparing) {
    if (!args.cluster.empty()) {
      return usage_error(err,
                         "simulate compare takes its cluster files as arguments, not "
                         "--cluster");
    }
    for (const std::string& s : args.scenarios) {
      const auto colon = s.find(':');
      Scenario sc{s.substr(0, colon),
                  colon == std::string::npos ? args.policy : s.substr(colon + 1)};
      if (sc.cluster.empty() || (colon != std::string::npos && sc.policy.empty())) {
        return usage_error(err, "SCENARIO '" + s + "': expected CLUSTER or CLUSTER:POLICY");
      }
      scenarios.push_back(std::move(sc));
    }
  } else {
    if (args.cluster.empty()) return usage_error(err, "--cluster FILE is required");
    scenarios.push_back({args.cluster, args.policy});
  }
  if (args.classes && args.sizes)
    return usage_error(err, "--classes and --sizes exclude each other");
  if (args.csv && format != Format::kTable) {
    return usage_error(err, "--csv cannot be combined with -P or --json");
  }
  const bool ratios = comparing;
  const std::vector<bool> no_points;
  if (!output.fields.empty()) {
    Table shape = args.classes || args.sizes
                      ? class_table({}, format, args.sizes)
                      : scenario_table({}, format, ratios, sweeping ? &no_points : nullptr);
    if (Status fits = shape.select(output.fields); !fits) {
      return usage_error(err, fits.error().message);
    }
  }

  policies::TimeZone zone = policies::TimeZone::utc();
  if (!args.time_zone.empty()) {
    auto z = policies::load_time_zone(args.time_zone);
    if (!z) return usage_error(err, "--time-zone: " + z.error().message);
    zone = std::move(*z);
  }
  // --strict: the figures are printed, and the exit says that some jobs never ran.
  const auto done = [&](uint64_t never_ran) {
    if (!args.strict || never_ran == 0) return kExitOk;
    err << "composerctl: error: --strict: " << never_ran << (never_ran == 1 ? " job" : " jobs")
        << " of the trace can never run\n";
    return kExitFailed;
  };
  auto trace = sim::load_trace(args.trace, args.start, zone);
  if (!trace) return failed(err, trace.error().message);
  std::vector<sim::Result> results;
  uint64_t never = 0;
  for (const Scenario& sc : scenarios) {
    const std::string where = sc.label.empty() ? "" : " (" + sc.label + ")";
    auto cluster = sc.cluster_text ? sim::parse_cluster(*sc.cluster_text, sc.cluster + where)
                                   : sim::load_cluster(sc.cluster);
    if (!cluster) return failed(err, cluster.error().message);
    std::optional<policies::Policy> policy;
    if (!sc.policy.empty()) {
      auto text =
          sc.policy_text ? Expected<std::string>(*sc.policy_text) : config::read_file(sc.policy);
      if (!text) return failed(err, text.error().message);
      auto parsed = policies::parse_policy(
          *text, sc.policy + where, [](std::string_view z) { return policies::load_time_zone(z); });
      if (!parsed) return failed(err, "the policy has errors:\n" + parsed.error().message);
      policy = std::move(*parsed);
    }
    sim::Options options;
    // A long run says how far it is, on a terminal only: a script's stderr stays clean.
    const bool show = !args.quiet && isatty(STDERR_FILENO) == 1;
    const auto started = std::chrono::steady_clock::now();
    if (show) {
      options.progress = [&](uint64_t submitted, uint64_t total) {
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        err << '\r' << progress_line(sc.cluster, submitted, total, elapsed) << "\x1b[K"
            << std::flush;
      };
    }
    auto result = sim::run(*cluster, *trace, policy ? &*policy : nullptr, options);
    if (show) err << "\r\x1b[K" << std::flush;
    if (!result) return failed(err, result.error().message);
    result->policy = sc.policy;
    if (!sc.label.empty()) result->cluster = sc.label;
    for (const sim::NeverRunnable& n : result->never) {
      err << "composerctl: cluster " << shown(sc.cluster) << " can never run " << n.jobs
          << (n.jobs == 1 ? " job" : " jobs") << " of the trace (" << shown(args.trace) << " line "
          << n.first_line << (n.jobs == 1 ? "" : " and more") << "): " << shown(n.reason) << '\n';
      never += n.jobs;
    }
    results.push_back(std::move(*result));
  }
  if (!args.svg.empty()) {
    for (size_t i = 0; i < results.size(); ++i) {
      const std::string path = svg_path(args.svg, i, results.size());
      std::ofstream file(path, std::ios::trunc);
      file << sim::result_svg(results[i]);
      file.close();
      if (!file) return failed(err, "cannot write the chart to " + path);
    }
  }
  if (format == Format::kJson) {
    Json::Value v;
    v["trace"] = args.trace;
    v["scenarios"] = Json::Value(Json::arrayValue);
    const std::vector<bool> on = frontier(results);
    for (size_t k = 0; k < results.size(); ++k) {
      const sim::Result& r = results[k];
      Json::Value x = result_json(r);
      if (sweeping) x["frontier"] = static_cast<bool>(on[k]);
      if (ratios) {
        for (const Figure& f : kRatioFigures) {
          const double base = f.get(results.front());
          std::string key = lower(f.header);
          x["ratio_to_first"][key] = base != 0       ? Json::Value(f.get(r) / base)
                                     : f.get(r) == 0 ? Json::Value(1.0)
                                                     : Json::Value();
        }
      }
      v["scenarios"].append(x);
    }
    print_json(out, v);
    return done(never);
  }
  // Whole seconds in --csv, as with -P.
  const Format cells = args.csv ? Format::kParsable : format;
  const std::vector<bool> on_frontier = frontier(results);
  Table table = args.classes || args.sizes
                    ? class_table(results, cells, args.sizes)
                    : scenario_table(results, cells, ratios, sweeping ? &on_frontier : nullptr);
  if (args.csv) {
    if (!output.fields.empty()) (void)table.select(output.fields);  // checked above
    print_csv(out, table, output.header);
    return done(never);
  }
  if (Status printed = print_table(out, std::move(table), output); !printed) {
    return failed(err, printed.error().message);
  }
  if (format == Format::kTable && output.fields.empty()) {
    out << '\n' << trace_notes(trace->counts, trace->name);
  }
  return done(never);
}

}  // namespace composer::cli
