#include "composer/cli/composerctl.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "composer/accounting/time_spec.h"
#include "composer/api/codec.h"
#include "composer/cli/blast_radius_command.h"
#include "composer/cli/explain_job_command.h"
#include "composer/cli/output.h"
#include "composer/cli/simulate_command.h"
#include "composer/cli/slurm_config_command.h"
#include "composer/client/client.h"
#include "composer/common/clock.h"
#include "composer/common/secret_file.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/db/store.h"
#include "policy_command.h"
#include "report_command.h"

namespace composer::cli {
namespace {

constexpr char kProgram[] = "composerctl";

// A command-line value that is wrong: reported like CLI11's own usage errors (exit 2).
struct UsageError {
  std::string message;
};

struct Settings {
  std::string server;
  std::string munge_socket;
  bool parsable = false;
  bool json = false;
  bool noheader = false;
  std::string fields;  // -o/--format

  Format format() const {
    return json ? Format::kJson : parsable ? Format::kParsable : Format::kTable;
  }
  OutputOptions output() const { return {format(), !noheader, fields}; }
};

// Which of the output options a command honours.
enum class Shape {
  kTable,  // -P, --json, -o, -n
  kJson,   // --json only (policy apply prints its plan as text)
};

// The output options, on composerctl itself and again on each command that honours them, so
// that the command's --help lists them: they may come before or after the command.
void add_output_options(CLI::App* app, Settings& s, Shape shape, const std::string& group) {
  if (shape == Shape::kTable) {
    app->add_flag("-P,--parsable", s.parsable,
                  "'|'-separated output with a header line, like sacct -P")
        ->group(group);
  }
  app->add_flag("--json", s.json, "the API's JSON objects")->group(group);
  if (shape == Shape::kTable) {
    app->add_option("-o,--format", s.fields,
                    "the columns to print, as sacct -o: NAME[%N|%-N],... (width, left-aligned)")
        ->type_name("FIELDS")
        ->group(group);
    app->add_flag("-n,--noheader", s.noheader, "leave out the header line")->group(group);
  }
}

std::string env_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : std::move(fallback);
}

template <typename T>
T checked(Expected<T> value, std::string_view flag) {
  if (!value) throw UsageError{std::string(flag) + ": " + value.error().message};
  return std::move(*value);
}

uint32_t job_id_arg(const std::string& text, std::string_view flag) {
  auto id = parse_job_id(text, flag);
  if (!id) throw UsageError{id.error().message};
  return *id;
}

size_t limit_arg(const std::string& text) {
  auto n = parse_whole_number("--limit", text, 0, std::numeric_limits<uint32_t>::max());
  if (!n) throw UsageError{n.error().message};
  return *n;
}

// --page-size: items per request, as composerd allows (docs/API.md: 1 to 10000).
size_t page_size_arg(const std::string& text) {
  auto n = parse_whole_number("--page-size", text, 1, 10000);
  if (!n) throw UsageError{n.error().message};
  return *n;
}

template <typename E>
E enum_arg(const std::string& text, std::optional<E> (*parse)(std::string_view),
           std::string_view flag, std::string_view allowed) {
  std::optional<E> e = parse(text);
  if (!e) {
    throw UsageError{std::string(flag) + ": '" + text + "' is not one of " + std::string(allowed)};
  }
  return *e;
}

int64_t past_time_arg(const std::string& text, std::string_view flag) {
  return checked(accounting::parse_slurm_time(text, SystemClock::instance().now_ms()), flag);
}

// Prints the outcome of one call: the table or JSON on `out`, or the error line on `err`.
class Printer {
 public:
  Printer(const Settings& s, std::ostream& out, std::ostream& err) : s_(s), out_(out), err_(err) {}

  template <typename T, typename ToTable, typename ToJson>
  int print(const Expected<T>& result, ToTable to_table, ToJson to_json) const {
    if (!result) return fail(result.error());
    if (s_.json) {
      print_json(out_, to_json(*result));
    } else if (Status printed = print_table(out_, to_table(*result), s_.output()); !printed) {
      return fail(printed.error());
    }
    return kExitOk;
  }

  int fail(const Error& e) const {
    err_ << kProgram << ": error: " << e.message << '\n';
    return kExitFailed;
  }

 private:
  const Settings& s_;
  std::ostream& out_;
  std::ostream& err_;
};

// The blast radius of `target` from the pool's devices and live compositions now.
Expected<BlastRadius> blast_of(const client::Client& c, const std::string& target) {
  auto devices = c.devices({});
  if (!devices) return devices.error();
  client::CompositionQuery live;
  live.live = true;
  auto compositions = c.compositions(live);
  if (!compositions) return compositions.error();
  auto hosts = c.hosts();
  if (!hosts) return hosts.error();
  return blast_radius(target, *devices, *compositions, *hosts);
}

int print_blast(const client::Client& c, const std::string& target, const Settings& s,
                std::ostream& out, std::ostream& err) {
  const Printer p(s, out, err);
  auto radius = blast_of(c, target);
  if (radius && s.format() == Format::kTable) {
    out << blast_text(*radius, s.output());
    return kExitOk;
  }
  return p.print(radius, blast_table, blast_to_json);
}

// After a domain drain: whether it is empty already, else what still uses it.
std::string drained_summary(const BlastRadius& r) {
  if (r.hits.empty()) return r.target + ": drained and empty: ready for maintenance\n";
  std::set<uint32_t> jobs;
  for (const BlastHit& h : r.hits) jobs.insert(h.job_id);
  std::vector<std::string> ids;
  for (uint32_t j : jobs) ids.push_back(std::to_string(j));
  return r.target + ": drained; " + std::to_string(jobs.size()) +
         (jobs.size() == 1 ? " running job keeps its devices until it ends"
                           : " running jobs keep their devices until they end") +
         " (jobs " + join(ids, ", ") +
         "); composerd logs when the domain is empty, and blast-radius " + r.target + " says so\n";
}

}  // namespace

Expected<uint32_t> parse_job_id(std::string_view text, std::string_view flag) {
  auto id = parse_count(text, std::numeric_limits<uint32_t>::max());
  if (!id || *id == 0) {
    return Error{ErrorCode::kInvalidArgument,
                 std::string(flag) + ": '" + std::string(text) +
                     "' is not a Slurm job id (a whole number from 1 to 4294967295)"};
  }
  return *id;
}

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "Show and steer the pool of composable GPUs, CXL memory and NVMe drives that composerd\n"
      "attaches to Slurm jobs.",
      kProgram};
  app.require_subcommand(1);
  app.fallthrough();  // global flags may also follow the subcommand
  app.set_version_flag("-V,--version", std::string(kProgram) + " " + COMPOSER_VERSION,
                       "print composerctl's version and exit");
  Settings s;
  app.add_option("--server", s.server,
                 "composerd's URL, or several separated by commas, tried in order (else "
                 "$COMPOSER_SERVER, else " +
                     std::string(client::kDefaultServerUrl) + ")")
      ->type_name("URL[,URL...]");
  app.add_option("--munge-socket", s.munge_socket,
                 "munged's socket (else $COMPOSER_MUNGE_SOCKET, else munge's default)")
      ->type_name("PATH");
  add_output_options(&app, s, Shape::kTable, "Options");
  // Each command's own copy of the output options, under a heading of their own.
  const auto output_options = [&s](CLI::App* command, Shape shape = Shape::kTable) {
    add_output_options(command, s, shape, "Output options");
  };

  auto* pool = app.add_subcommand(
      "pool", "Devices per type, model and zone: free, attached, drained, failed, foreign");
  std::string pool_by = "zone";
  pool->add_option("--by", pool_by,
                   "zone (type, model and zone; the default) or domain (failure domain and type)")
      ->type_name("zone|domain");
  output_options(pool);

  auto* devices =
      app.add_subcommand("devices", "List, drain, resume, adopt or release pooled devices");
  devices->require_subcommand(0, 1);
  std::string dev_type, dev_state, dev_zone, dev_node;
  devices->add_option("--type", dev_type, "gpu, mem or nvme");
  devices->add_option("--state", dev_state, "free, attached, drained, failed or foreign");
  devices->add_option("--zone", dev_zone, "fabric zone");
  devices->add_option("--node", dev_node, "attached to this node");
  std::string page_size;
  const std::string page_help =
      "items per request to composerd, 1 to 10000 (default: composerd's, 1000); every page is "
      "read";
  devices->add_option("--page-size", page_size, page_help);
  auto* devices_list = devices->add_subcommand("list", "List devices (the default)");
  auto* drain = devices->add_subcommand(
      "drain", "Take a device, or a whole failure domain, out of service (admins)");
  std::string drain_id, drain_reason, drain_domain;
  bool drain_dry_run = false;
  drain->add_option("ID", drain_id, "device id");
  drain->add_option("--domain", drain_domain, "every device of this failure domain")
      ->type_name("LEVEL:NAME");
  drain->add_option("--reason", drain_reason, "why, shown in the device list");
  drain->add_flag("--dry-run", drain_dry_run,
                  "change nothing; show what the drain would take from running jobs");
  auto* resume = devices->add_subcommand(
      "resume", "Put a drained device, or a whole failure domain, back in service (admins)");
  std::string resume_id, resume_domain;
  resume->add_option("ID", resume_id, "device id");
  resume->add_option("--domain", resume_domain, "every device of this failure domain")
      ->type_name("LEVEL:NAME");
  auto* adopt = devices->add_subcommand(
      "adopt", "Detach a foreign device from the host holding it and pool it (admins)");
  std::string adopt_id;
  adopt->add_option("ID", adopt_id, "device id")->required();
  auto* release_foreign = devices->add_subcommand(
      "release-foreign",
      "Leave a device composerd attached, and no job owns, to its host: foreign (admins)");
  std::string release_foreign_id;
  release_foreign->add_option("ID", release_foreign_id, "device id")->required();
  for (CLI::App* c : {devices, devices_list, drain, resume, adopt, release_foreign}) {
    output_options(c);
  }

  auto* comps =
      app.add_subcommand("compositions", "List, show or release the devices attached to jobs");
  comps->require_subcommand(0, 1);
  std::string c_job, c_user, c_state, c_node, c_limit;
  bool c_live = false;
  comps->add_option("--job", c_job, "Slurm job id");
  comps->add_option("--user", c_user, "user name");
  comps->add_option("--state", c_state,
                    "requested, composing, ready, releasing, released or failed");
  comps->add_option("--node", c_node, "node name");
  comps->add_flag("--live", c_live, "only compositions that still hold devices");
  comps->add_option("--limit", c_limit, "at most this many, newest first");
  comps->add_option("--page-size", page_size, page_help);
  auto* comps_list = comps->add_subcommand("list", "List compositions (the default)");
  std::string one_job, one_node;
  auto* show = comps->add_subcommand("show", "One job's composition on one node");
  show->add_option("JOB", one_job, "Slurm job id")->required();
  show->add_option("NODE", one_node, "node name")->required();
  auto* release = comps->add_subcommand("release", "Detach a job's devices from a node (admins)");
  release->add_option("JOB", one_job, "Slurm job id")->required();
  release->add_option("NODE", one_node, "node name")->required();
  auto* unhold = comps->add_subcommand(
      "unhold",
      "Clear a node's hold on a job's devices (they were still in use after the job), so that "
      "they can be released (admins)");
  unhold->add_option("JOB", one_job, "Slurm job id")->required();
  unhold->add_option("NODE", one_node, "node name")->required();
  for (CLI::App* c : {comps, comps_list, show, release, unhold}) output_options(c);

  auto* blast = app.add_subcommand(
      "blast-radius",
      "What a failure of a device or failure domain would hit now: jobs, users, nodes, classes");
  std::string blast_target;
  blast->add_option("TARGET", blast_target, "device id, or failure domain as LEVEL:NAME")
      ->required();
  output_options(blast);

  auto* explain = app.add_subcommand(
      "explain",
      "Why a pending Slurm job waits: which license holds it and why (policy explain --job)");
  std::string explain_job;
  explain->add_option("JOB", explain_job, "Slurm job id")->required();
  output_options(explain);

  auto* health =
      app.add_subcommand("health", "composerd's status; exits 1 unless the status is ok");
  output_options(health);

  auto* events = app.add_subcommand("events", "The ledger of state changes (admins)");
  std::string e_job, e_since, e_until, e_limit;
  events->add_option("--job", e_job, "Slurm job id");
  events->add_option("--since", e_since, "from this time, as sacct -S: now-1hour, yesterday, ...")
      ->type_name("TIME");
  events->add_option("--until", e_until, "before this time, in the same forms")->type_name("TIME");
  events->add_option("--limit", e_limit, "at most this many, oldest first");
  events->add_option("--page-size", page_size, page_help);
  output_options(events);
  auto* config_cmd = app.add_subcommand(
      "slurm-config",
      "The slurm.conf and gres.conf lines (Licenses, GresTypes, Gres) for the pool");
  output_options(config_cmd);
  auto* backup_cmd = app.add_subcommand(
      "backup", "A consistent copy of composerd's database, while it runs (on its host)");
  std::string backup_file;
  std::string backup_database = "/var/lib/slurm-composer/composer.db";
  backup_cmd->add_option("FILE", backup_file, "the new file (an existing one is not overwritten)")
      ->required();
  backup_cmd
      ->add_option("--database", backup_database,
                   "composerd's database (StateDir/composer.db; default " + backup_database + ")")
      ->type_name("PATH");
  auto* state_cmd =
      app.add_subcommand("state", "composerd's stored state (on its host, composerd stopped)");
  state_cmd->require_subcommand(1);
  auto* copy_cmd = state_cmd->add_subcommand(
      "copy-to-postgresql",
      "Copy composerd's SQLite database into an empty PostgreSQL store, with checks");
  std::string copy_database = "/var/lib/slurm-composer/composer.db";
  std::string copy_url_file;
  copy_cmd
      ->add_option("--database", copy_database,
                   "composerd's database (StateDir/composer.db; default " + copy_database + ")")
      ->type_name("PATH");
  copy_cmd
      ->add_option("--url-file", copy_url_file,
                   "the file holding the store's libpq connection string, as StateUrlFile= "
                   "names it (root or composerd's user only, mode 0600)")
      ->type_name("FILE")
      ->required();
  auto policy = add_policy_command(app);
  for (CLI::App* c : policy_commands(*policy)) output_options(c);
  output_options(policy_apply_command(*policy), Shape::kJson);
  ReportArgs report_args;
  add_report_command(app, report_args);
  output_options(report_args.command);
  SimulateArgs simulate_args;
  add_simulate_command(app, simulate_args);
  output_options(simulate_args.command);
  output_options(simulate_args.compare);
  output_options(simulate_args.sweep);
  // After the commands, which would inherit it.
  app.footer("Run 'composerctl COMMAND --help' for the options of a command.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
      return app.exit(e, out, err);
    err << kProgram << ": error: " << e.what() << "\nRun '" << kProgram << " --help' for usage.\n";
    return kExitUsage;
  }

  if (copy_cmd->parsed()) {
    // Local: the file and the database, composerd stopped; the string is never printed.
    auto conninfo = read_secret_line(copy_url_file, "--url-file");
    if (!conninfo) {
      err << kProgram << ": error: " << conninfo.error().message << "\n";
      return kExitFailed;
    }
    auto copied = db::copy_to_postgresql(copy_database, *conninfo);
    if (!copied) {
      err << kProgram << ": error: " << copied.error().message << "\n";
      return kExitFailed;
    }
    for (const auto& [table, rows] : copied->rows) {
      out << "composerctl: " << table << ": " << rows << " rows copied\n";
    }
    out << "composerctl: " << copy_database << " copied to PostgreSQL; both hold the same "
        << copied->live_compositions << " live compositions and " << copied->claims
        << " device claims. Set StateBackend=postgresql and StateUrlFile=" << copy_url_file
        << " in composer.conf, then start composerd.\n";
    return kExitOk;
  }
  if (backup_cmd->parsed()) {
    // Local: SQLite's online backup of the file composerd writes; composerd is not asked.
    if (Status s_backup = db::backup(backup_database, backup_file); !s_backup) {
      err << kProgram << ": error: " << s_backup.error().message << "\n";
      return kExitFailed;
    }
    out << "composerctl: " << backup_database << " copied to " << backup_file << "\n";
    return kExitOk;
  }

  try {
    // Offline: no composerd to reach.
    if (simulate_args.command->parsed()) {
      if (s.parsable && s.json) throw UsageError{"-P/--parsable and --json exclude each other"};
      if (!s.fields.empty() && s.json) {
        throw UsageError{"-o/--format chooses the fields of a table; --json prints whole objects"};
      }
      return run_simulate(simulate_args, s.output(), out, err);
    }
    client::ClientOptions options;
    const bool from_flag = !s.server.empty();
    options.servers = from_flag ? s.server : env_or("COMPOSER_SERVER", client::kDefaultServerUrl);
    options.munge_socket =
        s.munge_socket.empty() ? env_or("COMPOSER_MUNGE_SOCKET", "") : s.munge_socket;
    if (auto list = client::parse_server_list(options.servers); !list) {
      throw UsageError{std::string(from_flag ? "--server" : "$COMPOSER_SERVER") + ": " +
                       list.error().message};
    }
    // Validate every argument before anything is sent.
    client::DeviceQuery dq;
    if (!dev_type.empty())
      dq.type = enum_arg(dev_type, parse_device_type, "--type", "gpu, mem, nvme");
    if (!dev_state.empty()) {
      dq.state = enum_arg(dev_state, parse_device_state, "--state", std::string(kDeviceStateNames));
    }
    if (!dev_zone.empty()) dq.zone = dev_zone;
    if (!dev_node.empty()) dq.node = dev_node;
    client::CompositionQuery cq;
    if (!c_job.empty()) cq.job = job_id_arg(c_job, "--job");
    if (!c_user.empty()) cq.user = c_user;
    if (!c_state.empty()) {
      cq.state = enum_arg(c_state, parse_composition_state, "--state",
                          "requested, composing, ready, releasing, released, failed");
    }
    if (!c_node.empty()) cq.node = c_node;
    cq.live = c_live;
    if (!c_limit.empty()) cq.limit = limit_arg(c_limit);
    client::EventQuery eq;
    if (!e_job.empty()) eq.job = job_id_arg(e_job, "--job");
    if (!e_since.empty()) eq.since_ms = past_time_arg(e_since, "--since");
    if (!e_until.empty()) eq.until_ms = past_time_arg(e_until, "--until");
    if (!e_limit.empty()) eq.limit = limit_arg(e_limit);
    if (!page_size.empty()) {
      dq.page = cq.page = eq.page = page_size_arg(page_size);
    }
    const uint32_t job = one_job.empty() ? 0 : job_id_arg(one_job, "JOB");
    if (s.parsable && s.json) throw UsageError{"-P/--parsable and --json exclude each other"};
    if (!s.fields.empty() && s.json) {
      throw UsageError{"-o/--format chooses the fields of a table; --json prints whole objects"};
    }
    // A device or a domain, never both or neither.
    const auto one_target = [](const std::string& id, const std::string& domain,
                               const std::string& command) {
      if (id.empty() == domain.empty()) {
        throw UsageError{"devices " + command +
                         (id.empty() ? ": needs a device ID or --domain LEVEL:NAME"
                                     : ": give a device ID or --domain, not both")};
      }
      if (!domain.empty() && !parse_failure_domain(domain)) {
        throw UsageError{"--domain: '" + domain +
                         "' is not LEVEL:NAME (e.g. appliance:mem-a; composerctl pool --by "
                         "domain lists them)"};
      }
    };
    if (drain->parsed()) {
      one_target(drain_id, drain_domain, "drain");
      if (drain_reason.empty() && !drain_dry_run) {
        throw UsageError{"devices drain: --reason is required (why, shown in the device list)"};
      }
    }
    if (resume->parsed()) one_target(resume_id, resume_domain, "resume");
    // The fields -o names, checked against the command's columns before anything is sent.
    std::optional<Table> shape;
    if (pool_by != "zone" && pool_by != "domain") {
      throw UsageError{"--by: '" + pool_by + "' is not one of zone, domain"};
    }
    if (pool->parsed()) shape = pool_by == "domain" ? domain_table({}) : pool_table({});
    if (devices->parsed()) shape = device_table({});
    if (comps->parsed()) shape = composition_table({});
    if (health->parsed()) shape = health_table({});
    if (events->parsed()) shape = event_table({});
    if (blast->parsed() || (drain->parsed() && drain_dry_run)) shape = blast_table({});
    if (config_cmd->parsed()) shape = slurm_config_table({});
    if (explain->parsed()) shape = job_explain_table({});
    if (shape && !s.fields.empty()) {
      if (Status fits = shape->select(s.fields); !fits) throw UsageError{fits.error().message};
    }

    const client::Client c(options);
    const Printer p(s, out, err);
    if (pool->parsed() && pool_by == "domain") {
      auto rows = c.devices({});
      if (!rows) return p.fail(rows.error());
      return p.print(Expected<std::vector<DomainRow>>(domain_rows(*rows)), domain_table,
                     domain_rows_to_json);
    }
    if (pool->parsed()) {
      return p.print(c.pool(), pool_table, api::pool_to_json);
    }
    if (devices->parsed()) {
      auto one = [](const Device& d) { return device_table({d}); };
      auto one_json = [](const Device& d) { return api::to_json(d); };
      if (drain->parsed() && drain_dry_run) {
        return print_blast(c, drain_id.empty() ? drain_domain : drain_id, s, out, err);
      }
      if (drain->parsed() && !drain_domain.empty()) {
        const int rc =
            p.print(c.drain_domain(drain_domain, drain_reason), device_table, api::devices_to_json);
        if (rc != kExitOk || s.format() != Format::kTable) return rc;
        // What still runs on it: the drain takes nothing from running jobs.
        auto radius = blast_of(c, drain_domain);
        if (!radius) return p.fail(radius.error());
        out << "\n" << drained_summary(*radius);
        return kExitOk;
      }
      if (drain->parsed()) return p.print(c.drain(drain_id, drain_reason), one, one_json);
      if (resume->parsed() && !resume_domain.empty()) {
        return p.print(c.resume_domain(resume_domain), device_table, api::devices_to_json);
      }
      if (resume->parsed()) return p.print(c.resume(resume_id), one, one_json);
      if (adopt->parsed()) return p.print(c.adopt(adopt_id), one, one_json);
      if (release_foreign->parsed()) {
        return p.print(c.release_foreign(release_foreign_id), one, one_json);
      }
      return p.print(c.devices(dq), device_table, api::devices_to_json);
    }
    if (comps->parsed()) {
      if (show->parsed()) {
        return p.print(
            c.show(job, one_node), [](const Composition& x) { return composition_table({x}); },
            [](const Composition& x) { return api::to_json(x); });
      }
      if (unhold->parsed()) {
        return p.print(
            c.hold(job, one_node, ""), [](const Composition& x) { return composition_table({x}); },
            [](const Composition& x) { return api::to_json(x); });
      }
      if (release->parsed()) {
        auto released = c.release(job, one_node);
        if (released && !released->has_value() && s.format() == Format::kTable) {
          out << "job " << job << " holds no composition on " << one_node
              << "; nothing to release\n";
          return kExitOk;
        }
        return p.print(
            released,
            [](const std::optional<Composition>& x) {
              return composition_table(x ? std::vector<Composition>{*x}
                                         : std::vector<Composition>{});
            },
            api::release_to_json);
      }
      return p.print(c.compositions(cq), composition_table, api::compositions_to_json);
    }
    if (config_cmd->parsed()) {
      auto pool_rows = c.pool();
      if (!pool_rows) return p.fail(pool_rows.error());
      auto hosts = c.hosts();
      if (!hosts) return p.fail(hosts.error());
      // How composerd keeps the licenses: slurm.conf's, or slurmdbd's (SlurmLicenses=remote).
      auto info = c.health();
      if (!info) return p.fail(info.error());
      const Expected<SlurmConfig> config = slurm_config(
          *pool_rows, *hosts, info->slurm_licenses == "remote" ? info->license_server : "");
      if (s.format() == Format::kTable && s.fields.empty()) {
        out << slurm_config_text(*config);
        return kExitOk;
      }
      return p.print(config, slurm_config_table, slurm_config_to_json);
    }
    if (health->parsed()) {
      auto info = c.health();
      const int rc =
          p.print(info, health_table, [](const api::HealthInfo& h) { return api::to_json(h); });
      if (rc == kExitOk && info->status != "ok") return kExitFailed;
      return rc;
    }
    if (report_args.command->parsed()) {
      return run_report(report_args, c, s.output(), out, err);
    }
    if (events->parsed()) {
      return p.print(c.events(eq), event_table, api::events_to_json);
    }
    if (blast->parsed()) return print_blast(c, blast_target, s, out, err);
    if (explain->parsed()) {
      return run_explain_job(job_id_arg(explain_job, "JOB"), c, s.output(), out, err);
    }
    if (policy_chosen(*policy)) return run_policy(*policy, c, s.output(), out, err);
    err << kProgram << ": error: no command given\nRun '" << kProgram << " --help' for usage.\n";
    return kExitUsage;
  } catch (const UsageError& e) {
    err << kProgram << ": error: " << e.message << "\nRun '" << kProgram << " --help' for usage.\n";
    return kExitUsage;
  }
}

}  // namespace composer::cli
