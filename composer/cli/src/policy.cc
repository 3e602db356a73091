#include "policy.h"

#include <sys/stat.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "composer/accounting/time_spec.h"
#include "composer/api/codec.h"
#include "composer/common/clock.h"
#include "composer/common/files.h"
#include "composer/common/subprocess.h"
#include "composer/common/units.h"
#include "composer/policies/parser.h"
#include "composer/policies/slurm_plan.h"
#include "composer/policies/validate.h"
#include "composer/policies/zoneinfo.h"
#include "composerctl.h"

namespace composer::cli {

namespace pol = composer::policies;

struct PolicyCommand {
  CLI::App* policy = nullptr;
  CLI::App* apply = nullptr;
  CLI::App* show = nullptr;
  CLI::App* history = nullptr;
  CLI::App* explain = nullptr;
  std::string file;
  bool dry_run = false;
  std::string slurm_conf;
  std::string limit;
  std::string workload, partition, qos, account, gpus, mem, nvme, time_limit, start;
};

namespace {

constexpr char kProgram[] = "composerctl";

struct Usage {
  std::string message;
};

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s) {
    if (c == '\n') c = ' ';
  }
  return s;
}

Expected<std::string> scontrol(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"scontrol"};
  argv.insert(argv.end(), args.begin(), args.end());
  // From PATH with the caller's environment (SLURM_CONF included), no shell.
  auto ran = run_program({.argv = argv, .with_stderr = true});
  if (!ran && ran.error().code == ErrorCode::kUnavailable) {
    return Error{ran.error().code, ran.error().message + " (is Slurm's " + argv[0] + " on PATH?)"};
  }
  if (!ran) return ran.error();
  if (ran->status != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    return Error{ErrorCode::kUnavailable, "'" + cmd + "' failed (exit " +
                                              std::to_string(ran->status) +
                                              "): " + one_line(ran->output)};
  }
  return ran->output;
}

// "Key=Value" fields of one `scontrol -o` line.
std::string field(const std::vector<std::string>& line, std::string_view key) {
  for (const auto& w : line) {
    if (w.size() > key.size() && w.compare(0, key.size(), key) == 0 && w[key.size()] == '=') {
      return w.substr(key.size() + 1);
    }
  }
  return "";
}

std::vector<pol::LicenseCount> license_list(const std::string& text) {
  std::vector<pol::LicenseCount> out;
  if (text.empty() || text == "(null)") return out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    const auto colon = part.find(':');
    pol::LicenseCount l;
    l.name = part.substr(0, colon);
    l.count = colon == std::string::npos ? 1 : std::stoull(part.substr(colon + 1));
    out.push_back(l);
  }
  return out;
}

// Slurm's "[days-]hours:minutes:seconds" in whole minutes.
int64_t duration_minutes(const std::string& text) {
  int64_t days = 0, h = 0, m = 0, s = 0;
  std::string rest = text;
  if (auto dash = rest.find('-'); dash != std::string::npos) {
    days = std::stoll(rest.substr(0, dash));
    rest = rest.substr(dash + 1);
  }
  if (std::sscanf(rest.c_str(), "%ld:%ld:%ld", &h, &m, &s) != 3) return -1;
  return days * 1440 + h * 60 + m + (s >= 30 ? 1 : 0);
}

Expected<pol::SlurmState> read_slurm_state() {
  pol::SlurmState state;
  auto lic = scontrol({"-o", "show", "licenses"});
  if (!lic) return lic.error();
  std::istringstream lines(*lic);
  std::string line;
  while (std::getline(lines, line)) {
    auto w = words(line);
    const std::string name = field(w, "LicenseName");
    if (name.empty()) continue;
    state.licenses.push_back({name, std::stoull(field(w, "Total"))});
  }
  auto res = scontrol({"-o", "show", "reservations"});
  if (!res) return res.error();
  std::istringstream rl(*res);
  while (std::getline(rl, line)) {
    auto w = words(line);
    pol::ExistingReservation r;
    r.name = field(w, "ReservationName");
    if (r.name.empty()) continue;
    r.start_local = field(w, "StartTime");
    r.duration_min = duration_minutes(field(w, "Duration"));
    std::stringstream flags(field(w, "Flags"));
    std::string f;
    while (std::getline(flags, f, ',')) r.flags.push_back(f);
    r.licenses = license_list(field(w, "Licenses"));
    r.users = field(w, "Users");
    state.reservations.push_back(std::move(r));
  }
  return state;
}

// The Licenses= value the configure action asks for ("..., set Licenses=X in slurm.conf").
std::string licenses_line(const pol::Action& a) {
  const std::string key = "set Licenses=";
  const auto at = a.detail.find(key);
  if (at == std::string::npos) return "";
  const auto end = a.detail.find(' ', at + key.size());
  return a.detail.substr(at + key.size(), end - at - key.size());
}

// Rewrites the Licenses= line of slurm.conf (or adds one), through a temporary file renamed
// over the original so slurmctld never reads half a file.
Status write_licenses(const std::string& path, const std::string& value) {
  std::ifstream in(path);
  if (!in) {
    return Error{ErrorCode::kNotFound,
                 "--slurm-conf: cannot read " + path + ": " + std::strerror(errno)};
  }
  std::string out, line;
  bool replaced = false;
  while (std::getline(in, line)) {
    size_t b = 0;
    while (b < line.size() && (line[b] == ' ' || line[b] == '\t')) ++b;
    if (strncasecmp(line.c_str() + b, "Licenses=", 9) == 0) {
      if (!replaced) out += "Licenses=" + value + "\n";
      replaced = true;
      continue;
    }
    out += line + "\n";
  }
  if (!replaced) out += "Licenses=" + value + "\n";
  struct stat st {};
  const mode_t mode = stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644;
  if (Status s = write_file_atomically(path, out, mode); !s) {
    return Error{s.error().code, "--slurm-conf: " + s.error().message};
  }
  return Status::Ok();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Usage{"FILE: cannot read " + path + ": " + std::strerror(errno)};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Slurm's time limit forms (accounting::parse_slurm_duration); a limit is needed here.
int64_t time_limit_arg(const std::string& text) {
  auto s = accounting::parse_slurm_duration(text);
  if (!s || !*s) {
    throw Usage{"--time-limit: '" + text +
                "' is not a time limit; use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                "D-HH:MM:SS"};
  }
  if (**s <= 0) throw Usage{"--time-limit: '" + text + "' must be longer than zero"};
  return **s;
}

uint64_t count_arg(const std::string& text, std::string_view flag) {
  if (text.empty()) return 0;
  auto n = parse_count(text, 1u << 20);
  if (!n)
    throw Usage{std::string(flag) + ": '" + text + "' is not a whole number from 0 to 1048576"};
  return *n;
}

Table explain_table(const api::PolicyExplanation& e) {
  Table t({{"WORKLOAD"}, {"ADMITTED"}, {"EARLIEST"}, {"EXPLANATION"}});
  t.add_row({e.workload, e.admitted ? "yes" : "no",
             e.earliest_ms ? format_time(*e.earliest_ms) : "", e.explanation});
  return t;
}

Table version_table(const std::vector<PolicyVersion>& versions) {
  Table t({{"ID", true}, {"APPLIED"}, {"USER"}, {"FILE"}, {"SHA256"}});
  for (const auto& v : versions) {
    t.add_row(
        {std::to_string(v.id), format_time(v.applied_ms), v.user, v.file, v.sha256.substr(0, 12)});
  }
  return t;
}

int fail(std::ostream& err, const Error& e) {
  err << kProgram << ": error: " << e.message << '\n';
  return kExitFailed;
}

int apply(const PolicyCommand& cmd, const client::Client& client, Format format, std::ostream& out,
          std::ostream& err) {
  const std::string text = read_file(cmd.file);
  const std::string name = cmd.file.substr(cmd.file.rfind('/') + 1);
  auto parsed =
      pol::parse_policy(text, name, [](std::string_view z) { return pol::load_time_zone(z); });
  if (!parsed)
    return fail(err,
                Error{parsed.error().code, "the policy has errors:\n" + parsed.error().message});
  auto rows = client.pool();
  if (!rows) return fail(err, rows.error());
  const pol::PoolSize pool = pol::PoolSize::from_rows(*rows);
  const pol::Validation checked = pol::validate(*parsed, pool);
  if (!checked.ok())
    return fail(
        err, Error{ErrorCode::kInvalidArgument, "the policy has errors:\n" + checked.to_string()});
  // composerd has the last word (it also checks the classes against composer.conf).
  auto trial = client.put_policy({.file = name, .text = text, .dry_run = true});
  if (!trial) return fail(err, trial.error());

  const pol::Plan plan = pol::compile_plan(*parsed, pool, SystemClock::instance().now_ms() / 1000);
  auto state = read_slurm_state();
  if (!state) return fail(err, state.error());
  const auto actions = pol::diff_plan(plan, *state, parsed->time_zone);

  bool slurm_changes = false;
  const pol::Action* configure = nullptr;
  for (const auto& a : actions) {
    if (a.kind != pol::ActionKind::kLeave) slurm_changes = true;
    if (a.kind == pol::ActionKind::kConfigure) configure = &a;
  }
  if (format != Format::kJson) {
    out << "Policy " << name << " (time zone " << plan.time_zone << "), pool: " << pool.gpus
        << " GPUs, " << pool.mem_gib << " GiB of memory, " << pool.nvme << " NVMe drives\n";
    if (slurm_changes) {
      out << "Changes to Slurm:\n" << pol::render_actions(actions);
    } else {
      out << "Slurm already matches the policy: nothing to change.\n";
    }
    std::vector<std::string> warnings = checked.warnings;
    warnings.insert(warnings.end(), plan.warnings.begin(), plan.warnings.end());
    for (const auto& w : warnings) out << "warning: " << w << '\n';
    for (const auto& n : plan.notes) out << "note: " << n << '\n';
    if (trial->policy.id > 0) {
      out << "composerd already has this policy (version " << trial->policy.id << ").\n";
    }
  }
  if (cmd.dry_run) {
    if (format == Format::kJson)
      print_json(out, api::to_json(*trial));
    else
      out << "Dry run: nothing was changed.\n";
    return kExitOk;
  }
  if (configure != nullptr) {
    const std::string value = licenses_line(*configure);
    if (cmd.slurm_conf.empty()) {
      err << kProgram << ": error: Slurm's licenses must change first, and they live in "
          << "slurm.conf: set\n  Licenses=" << value
          << "\nthere, run 'scontrol reconfigure', and apply again (or give --slurm-conf FILE "
             "to let composerctl do it). Nothing was changed.\n";
      return kExitFailed;
    }
    if (value.empty())
      return fail(err, Error{ErrorCode::kInternal, "the plan has no Licenses= line"});
  }
  for (const auto& a : actions) {
    if (a.kind == pol::ActionKind::kLeave) continue;
    if (a.kind == pol::ActionKind::kConfigure) {
      if (Status s = write_licenses(cmd.slurm_conf, licenses_line(a)); !s)
        return fail(err, s.error());
      out << "wrote Licenses=" << licenses_line(a) << " to " << cmd.slurm_conf << '\n';
    }
    auto argv = words(a.command);
    if (argv.empty() || argv[0] != "scontrol") {
      return fail(err, Error{ErrorCode::kInternal, "unexpected command in the plan: " + a.command});
    }
    argv.erase(argv.begin());
    auto ran = scontrol(argv);
    if (!ran) {
      return fail(err, Error{ran.error().code, ran.error().message +
                                                   "; Slurm may be part-way: run 'composerctl "
                                                   "policy apply --dry-run' to see what is left"});
    }
    out << "done: " << a.command << '\n';
  }
  auto stored = client.put_policy({.file = name, .text = text, .dry_run = false});
  if (!stored) return fail(err, stored.error());
  if (format == Format::kJson) {
    print_json(out, api::to_json(*stored));
  } else if (stored->changed) {
    out << "composerd stored the policy as version " << stored->policy.id << " ("
        << stored->policy.sha256.substr(0, 12) << ").\n";
  } else {
    out << "composerd already has this policy (version " << stored->policy.id << ").\n";
  }
  return kExitOk;
}

}  // namespace

std::shared_ptr<PolicyCommand> add_policy_command(CLI::App& app) {
  auto cmd = std::make_shared<PolicyCommand>();
  cmd->policy = app.add_subcommand("policy", "Time-of-day policies: apply, show, history, explain");
  cmd->policy->require_subcommand(1);
  cmd->apply = cmd->policy->add_subcommand(
      "apply", "Check a policy file, show what changes in Slurm, apply it and store it (admins)");
  cmd->apply->add_option("FILE", cmd->file, "the policy file (policies/README.md)")->required();
  cmd->apply->add_flag("--dry-run", cmd->dry_run, "show the changes and change nothing");
  cmd->apply->add_option("--slurm-conf", cmd->slurm_conf,
                         "rewrite the Licenses= line of this slurm.conf and run 'scontrol "
                         "reconfigure' when the licenses must change");
  cmd->show = cmd->policy->add_subcommand("show", "The policy in force and its text");
  cmd->history = cmd->policy->add_subcommand("history", "Every applied version, newest first");
  cmd->history->add_option("--limit", cmd->limit, "at most this many");
  cmd->explain = cmd->policy->add_subcommand(
      "explain", "Whether, when and why a hypothetical job could start under the policy");
  cmd->explain->add_option("--workload", cmd->workload, "workload class");
  cmd->explain->add_option("--partition", cmd->partition, "partition (classifies the job)");
  cmd->explain->add_option("--qos", cmd->qos, "QOS (classifies the job)");
  cmd->explain->add_option("--account", cmd->account, "account (classifies the job)");
  cmd->explain->add_option("--gpus", cmd->gpus, "GPUs, in total over all nodes");
  cmd->explain->add_option("--mem", cmd->mem, "memory in total, e.g. 256G");
  cmd->explain->add_option("--nvme", cmd->nvme, "NVMe drives in total");
  cmd->explain->add_option("--time-limit", cmd->time_limit, "as sbatch -t: 90, 2:00:00, 1-12")
      ->required();
  cmd->explain
      ->add_option("--start", cmd->start,
                   "when it would start, as sbatch --begin: 16:00, tomorrow, ... (default now)")
      ->type_name("TIME");
  return cmd;
}

std::vector<CLI::App*> policy_commands(const PolicyCommand& command) {
  return {command.policy, command.show, command.history, command.explain};
}
CLI::App* policy_apply_command(const PolicyCommand& command) { return command.apply; }

bool policy_chosen(const PolicyCommand& command) { return command.policy->parsed(); }

int run_policy(const PolicyCommand& cmd, const client::Client& client, const OutputOptions& output,
               std::ostream& out, std::ostream& err) {
  const Format format = output.format;
  try {
    if (cmd.apply->parsed()) {
      if (format == Format::kParsable || !output.fields.empty()) {
        throw Usage{"policy apply prints its plan as text, or --json; -P and -o do not apply"};
      }
      return apply(cmd, client, format, out, err);
    }
    // The fields -o names, checked before anything is sent.
    if (!output.fields.empty()) {
      Table shape = cmd.explain->parsed() ? explain_table({}) : version_table({});
      if (Status fits = shape.select(output.fields); !fits) throw Usage{fits.error().message};
    }
    if (cmd.show->parsed()) {
      auto v = client.policy();
      if (!v) return fail(err, v.error());
      if (format == Format::kJson) {
        print_json(out, api::to_json(*v));
      } else {
        if (Status s = print_table(out, version_table({*v}), output); !s)
          return fail(err, s.error());
        if (format == Format::kTable && output.fields.empty()) out << '\n' << v->text;
      }
      return kExitOk;
    }
    if (cmd.history->parsed()) {
      size_t limit = 0;
      if (!cmd.limit.empty()) limit = count_arg(cmd.limit, "--limit");
      auto list = client.policy_history(limit);
      if (!list) return fail(err, list.error());
      if (format == Format::kJson) {
        print_json(out, api::policy_history_to_json(*list));
      } else if (Status s = print_table(out, version_table(*list), output); !s) {
        return fail(err, s.error());
      }
      return kExitOk;
    }
    if (cmd.explain->parsed()) {
      client::PolicyQuery q;
      q.workload = cmd.workload;
      q.partition = cmd.partition;
      q.qos = cmd.qos;
      q.account = cmd.account;
      q.gpus = count_arg(cmd.gpus, "--gpus");
      q.nvme = count_arg(cmd.nvme, "--nvme");
      if (!cmd.mem.empty()) {
        auto m = parse_size(cmd.mem);
        if (!m) throw Usage{"--mem: " + m.error().message};
        q.mem_bytes = *m;
      }
      q.time_limit_s = time_limit_arg(cmd.time_limit);
      if (!cmd.start.empty()) {
        auto t = accounting::parse_slurm_time(cmd.start, SystemClock::instance().now_ms(),
                                              accounting::TimeDirection::kFuture);
        if (!t) throw Usage{"--start: " + t.error().message};
        q.start_ms = *t;
      }
      auto e = client.explain_policy(q);
      if (!e) return fail(err, e.error());
      if (format == Format::kJson) {
        print_json(out, api::to_json(*e));
      } else if (format == Format::kParsable || !output.fields.empty()) {
        if (Status s = print_table(out, explain_table(*e), output); !s) return fail(err, s.error());
      } else {
        out << e->explanation << '\n';
      }
      return kExitOk;
    }
  } catch (const Usage& u) {
    err << kProgram << ": error: " << u.message << "\nRun '" << kProgram
        << " policy --help' for usage.\n";
    return kExitUsage;
  }
  err << kProgram << ": error: no policy command given\n";
  return kExitUsage;
}

}  // namespace composer::cli
