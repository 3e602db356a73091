#include "report_command.h"

#include <cstdio>
#include <fstream>
#include <vector>

#include "composer/accounting/report.h"
#include "composer/accounting/report_chart.h"
#include "composer/accounting/report_json.h"
#include "composer/accounting/time_spec.h"
#include "composer/cli/composerctl.h"
#include "composer/common/clock.h"
#include "composer/common/units.h"

namespace composer::cli {
namespace {

using accounting::GroupUsage;
using accounting::Report;
using accounting::TypeMs;
using accounting::Usage;

constexpr const char* kSections[] = {"utilisation", "hourly", "daily",   "workload", "account",
                                     "user",        "top",    "latency", "failures", "windows"};

// Device-hours with two decimals: the table shows hours, the JSON keeps exact milliseconds.
std::string hours(int64_t ms) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(ms) / 3600000.0);
  return buf;
}
std::string decimal(double v, int places) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", places, v);
  return buf;
}
std::string percent(double share) { return decimal(share * 100.0, 2) + "%"; }
std::string seconds(int64_t ms) { return decimal(static_cast<double>(ms) / 1000.0, 3); }

// A section as columns and rows, printable as a table, -P or CSV.
struct Section {
  std::vector<Column> columns;
  std::vector<std::vector<std::string>> rows;
  std::string json_key;
};

std::vector<Column> usage_columns(std::vector<Column> first) {
  for (const char* h : {"TOTAL_H", "AVAILABLE_H", "ATTACHED_H", "IDLE_H", "DRAINED_H", "FAILED_H",
                        "ATTACHED_PCT"}) {
    first.push_back({h, true});
  }
  return first;
}
void add_usage(std::vector<std::string>& row, const Usage& u) {
  for (int64_t ms :
       {u.total_ms(), u.available_ms(), u.attached_ms, u.idle_ms, u.drained_ms, u.failed_ms}) {
    row.push_back(hours(ms));
  }
  row.push_back(percent(u.share_attached()));
}

Section groups(const std::vector<GroupUsage>& in, const char* name, const char* key) {
  Section s{{{name},
             {"GPU_H", true},
             {"MEM_H", true},
             {"NVME_H", true},
             {"MEM_GIB_H", true},
             {"JOBS", true},
             {"COMPOSITIONS", true}},
            {},
            key};
  for (const GroupUsage& g : in) {
    s.rows.push_back({g.name, hours(g.device_ms[0]), hours(g.device_ms[1]), hours(g.device_ms[2]),
                      decimal(g.mem_gib_hours, 2), std::to_string(g.jobs),
                      std::to_string(g.compositions)});
  }
  return s;
}

Section section_of(const Report& r, const std::string& name) {
  if (name == "utilisation") {
    Section s{usage_columns({{"TYPE"}, {"MODEL"}, {"DEVICES", true}}), {}, "pools"};
    for (const auto& p : r.pools) {
      std::vector<std::string> row{p.type, p.model, std::to_string(p.devices)};
      add_usage(row, p.usage);
      s.rows.push_back(std::move(row));
    }
    return s;
  }
  if (name == "hourly" || name == "daily") {
    const bool hourly = name == "hourly";
    Section s{
        usage_columns({{"TYPE"}, {hourly ? "HOUR" : "DAY"}}), {}, hourly ? "by_hour" : "by_day"};
    for (const auto& slot : hourly ? r.by_hour : r.by_day) {
      std::vector<std::string> row{slot.type, slot.slot};
      add_usage(row, slot.usage);
      s.rows.push_back(std::move(row));
    }
    return s;
  }
  if (name == "workload") return groups(r.by_workload, "WORKLOAD", "by_workload");
  if (name == "account") return groups(r.by_account, "ACCOUNT", "by_account");
  if (name == "user") return groups(r.by_user, "USER", "by_user");
  if (name == "top") {
    Section s{{{"JOBID", true},
               {"USER"},
               {"ACCOUNT"},
               {"WORKLOAD"},
               {"NODES", true},
               {"GPU_H", true},
               {"MEM_H", true},
               {"NVME_H", true},
               {"MEM_GIB_H", true}},
              {},
              "top_jobs"};
    for (const auto& j : r.top_jobs) {
      s.rows.push_back({std::to_string(j.job_id), j.user, j.account, j.workload,
                        std::to_string(j.compositions), hours(j.device_ms[0]),
                        hours(j.device_ms[1]), hours(j.device_ms[2]), decimal(j.mem_gib_hours, 2)});
    }
    return s;
  }
  if (name == "latency") {
    Section s{{{"PHASE"},
               {"COUNT", true},
               {"P50_S", true},
               {"P90_S", true},
               {"P99_S", true},
               {"MAX_S", true},
               {"MEAN_S", true}},
              {},
              "latency"};
    for (const auto& l : r.latency) {
      s.rows.push_back({l.phase, std::to_string(l.count), seconds(l.p50_ms), seconds(l.p90_ms),
                        seconds(l.p99_ms), seconds(l.max_ms), decimal(l.mean_ms / 1000.0, 3)});
    }
    return s;
  }
  if (name == "failures") {
    Section s{{{"PHASE"}, {"CAUSE"}, {"COUNT", true}}, {}, "failures"};
    for (const auto& f : r.failures) s.rows.push_back({f.phase, f.cause, std::to_string(f.count)});
    return s;
  }
  Section s{{{"WINDOW"},
             {"WORKLOAD"},
             {"GPU_H", true},
             {"MEM_H", true},
             {"NVME_H", true},
             {"PEAK_GPUS", true},
             {"PEAK_MEM", true},
             {"PEAK_NVME", true},
             {"CAP_GPUS", true},
             {"CAP_MEM_GIB", true},
             {"CAP_NVME", true},
             {"COMPOSITIONS", true}},
            {},
            "by_window"};
  // A cap the policy in force at the range's end does not set shows as "-".
  const auto cap = [](const std::optional<uint64_t>& c) {
    return c ? std::to_string(*c) : std::string("-");
  };
  for (const auto& w : r.by_window) {
    s.rows.push_back({w.window, w.workload, hours(w.device_ms[0]), hours(w.device_ms[1]),
                      hours(w.device_ms[2]), std::to_string(w.peak_devices[0]),
                      std::to_string(w.peak_devices[1]), std::to_string(w.peak_devices[2]),
                      cap(w.cap[0]), cap(w.cap[1]), cap(w.cap[2]), std::to_string(w.compositions)});
  }
  return s;
}

int usage_error(std::ostream& err, const std::string& message) {
  err << "composerctl: error: " << message << "\nRun 'composerctl report --help' for usage.\n";
  return kExitUsage;
}

}  // namespace

ReportArgs& add_report_command(CLI::App& app, ReportArgs& args) {
  std::string sections;
  for (const char* s : kSections) sections += (sections.empty() ? "" : ", ") + std::string(s);
  args.command = app.add_subcommand(
      "report", "Accounting reports from the ledger, like sreport (users: their own jobs)");
  args.command->add_option("SECTION", args.section,
                           "one of " + sections + " (default utilisation)");
  args.command
      ->add_option("-S,--start", args.start,
                   "from this time, as sacct -S: now-7days, today, ... (default yesterday)")
      ->type_name("TIME");
  args.command->add_option("-E,--end", args.end, "until this time (default today 00:00)")
      ->type_name("TIME");
  args.command->add_option("--top", args.top, "how many jobs the top section lists (default 10)");
  args.command->add_flag("--csv", args.csv, "comma-separated values with a header line");
  args.command->add_option("--svg", args.svg,
                           "also write charts (use over time by class, weekday x hour heat map) "
                           "to this SVG file");
  return args;
}

int run_report(const ReportArgs& args, const client::Client& client, const OutputOptions& output,
               std::ostream& out, std::ostream& err) {
  const Format format = output.format;
  bool known = false;
  for (const char* s : kSections) known |= args.section == s;
  if (!known) {
    std::string list;
    for (const char* s : kSections) list += (list.empty() ? "" : ", ") + std::string(s);
    return usage_error(err,
                       "report: '" + args.section + "' is not a section; choose one of " + list);
  }
  if (args.csv && format != Format::kTable) {
    return usage_error(err, "--csv cannot be combined with -P or --json");
  }
  if (!output.fields.empty()) {
    Table shape(section_of(Report{}, args.section).columns);
    if (Status fits = shape.select(output.fields); !fits) {
      return usage_error(err, fits.error().message);
    }
  }
  const int64_t now = SystemClock::instance().now_ms();
  auto start = accounting::parse_slurm_time(args.start.empty() ? "yesterday" : args.start, now);
  if (!start) return usage_error(err, "--start: " + start.error().message);
  auto end = accounting::parse_slurm_time(args.end.empty() ? "today" : args.end, now);
  if (!end) return usage_error(err, "--end: " + end.error().message);
  if (*end <= *start) {
    return usage_error(err, "--end (" + format_time(*end) + ") must be after --start (" +
                                format_time(*start) + ")");
  }
  std::vector<std::pair<std::string, std::string>> params{{"start_ms", std::to_string(*start)},
                                                          {"end_ms", std::to_string(*end)}};
  if (!args.top.empty()) {
    auto n = parse_whole_number("--top", args.top, 0, accounting::kMaxTopJobs);
    if (!n) return usage_error(err, n.error().message);
    params.emplace_back("top", std::to_string(*n));
  }

  auto json = client.get_json({"reports"}, params);
  if (!json) {
    err << "composerctl: error: " << json.error().message << '\n';
    return kExitFailed;
  }
  auto report = accounting::report_from_json(*json);
  if (!report) {
    err << "composerctl: error: composerd's report does not follow the API: "
        << report.error().message << '\n';
    return kExitFailed;
  }
  if (!args.svg.empty()) {
    std::ofstream file(args.svg, std::ios::trunc);
    file << accounting::report_svg(*report);
    file.close();
    if (!file) {
      err << "composerctl: error: cannot write the chart to " << args.svg << '\n';
      return kExitFailed;
    }
  }

  const Section s = section_of(*report, args.section);
  if (format == Format::kJson) {
    const Json::Value& whole = *json;
    print_json(out, whole[s.json_key]);
    return kExitOk;
  }
  if (args.section == "windows" && !report->windows_recorded && format == Format::kTable) {
    err << "composerctl: no composition in this range was made under a policy window\n";
  }
  Table table(s.columns);
  for (const auto& row : s.rows) table.add_row(row);
  if (args.csv) {
    if (!output.fields.empty()) (void)table.select(output.fields);  // checked above
    print_csv(out, table, output.header);
    return kExitOk;
  }
  if (Status printed = print_table(out, std::move(table), output); !printed) {
    err << "composerctl: error: " << printed.error().message << '\n';
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace composer::cli
