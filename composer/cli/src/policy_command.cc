#include "policy_command.h"

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
#include "composer/cli/composerctl.h"
#include "composer/cli/explain_job_command.h"
#include "composer/common/clock.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::cli {

struct PolicyCommand {
  CLI::App* policy = nullptr;
  CLI::App* apply = nullptr;
  CLI::App* show = nullptr;
  CLI::App* history = nullptr;
  CLI::App* explain = nullptr;
  std::string file;
  bool dry_run = false;
  std::string limit;
  std::string workload, partition, qos, account, gpus, mem, nvme, time_limit, start;
  std::string job;  // --job: the request comes from Slurm instead
};

namespace {

constexpr char kProgram[] = "composerctl";

struct Usage {
  std::string message;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Usage{"FILE: cannot read " + path + ": " + std::strerror(errno)};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Slurm's time limit forms (parse_slurm_duration, common/units.h); a limit is needed here.
int64_t time_limit_arg(const std::string& text) {
  auto s = parse_slurm_duration(text);
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
  auto n = parse_whole_number(flag, text, 0, 1u << 20);
  if (!n) throw Usage{n.error().message};
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

// composerd checks the policy, stores it and brings Slurm to it (SlurmSync=yes); composerctl
// only sends the file and shows the answer.
int apply(const PolicyCommand& cmd, const client::Client& client, Format format, std::ostream& out,
          std::ostream& err) {
  const std::string text = read_file(cmd.file);
  const std::string name = cmd.file.substr(cmd.file.rfind('/') + 1);
  auto answer = client.put_policy({.file = name, .text = text, .dry_run = cmd.dry_run});
  if (!answer) return fail(err, answer.error());
  if (format == Format::kJson) {
    print_json(out, api::to_json(*answer));
    return kExitOk;
  }
  if (answer->slurm_actions.empty()) {
    out << "Changes to Slurm: none.\n";
  } else {
    out << (cmd.dry_run ? "Changes to Slurm (not made):\n" : "Changes to Slurm:\n");
    for (const auto& a : answer->slurm_actions) out << "  " << a << '\n';
  }
  if (!answer->slurm.empty()) out << "Slurm: " << answer->slurm << '\n';
  for (const auto& w : answer->warnings) out << "warning: " << w << '\n';
  if (cmd.dry_run) {
    if (answer->policy.id > 0) {
      out << "composerd already has this policy (version " << answer->policy.id << ").\n";
    }
    out << "Dry run: nothing was changed.\n";
  } else if (answer->changed) {
    out << "composerd stored the policy as version " << answer->policy.id << " ("
        << answer->policy.sha256.substr(0, 12) << ").\n";
  } else {
    out << "composerd already has this policy (version " << answer->policy.id << ").\n";
  }
  return kExitOk;
}

}  // namespace

std::shared_ptr<PolicyCommand> add_policy_command(CLI::App& app) {
  auto cmd = std::make_shared<PolicyCommand>();
  cmd->policy = app.add_subcommand("policy", "Time-of-day policies: apply, show, history, explain");
  cmd->policy->require_subcommand(1);
  cmd->apply = cmd->policy->add_subcommand(
      "apply",
      "Send a policy file to composerd, which checks it, stores it and brings Slurm to it; "
      "shows the changes (admins)");
  cmd->apply->add_option("FILE", cmd->file, "the policy file (policies/README.md)")->required();
  cmd->apply->add_flag("--dry-run", cmd->dry_run, "show the changes to Slurm and change nothing");
  cmd->show = cmd->policy->add_subcommand("show", "The policy in force and its text");
  cmd->history = cmd->policy->add_subcommand("history", "Every applied version, newest first");
  cmd->history->add_option("--limit", cmd->limit, "at most this many");
  cmd->explain = cmd->policy->add_subcommand(
      "explain",
      "Whether, when and why a hypothetical job could start under the policy; with --job, "
      "which license holds a pending Slurm job and why");
  cmd->explain
      ->add_option("--job", cmd->job,
                   "a pending Slurm job: read it with scontrol and say which license holds it "
                   "and why (instead of the request flags)")
      ->type_name("JOBID");
  cmd->explain->add_option("--workload", cmd->workload, "workload class");
  cmd->explain->add_option("--partition", cmd->partition, "partition (classifies the job)");
  cmd->explain->add_option("--qos", cmd->qos, "QOS (classifies the job)");
  cmd->explain->add_option("--account", cmd->account, "account (classifies the job)");
  cmd->explain->add_option("--gpus", cmd->gpus, "GPUs, in total over all nodes");
  cmd->explain->add_option("--mem", cmd->mem, "memory in total, e.g. 256G");
  cmd->explain->add_option("--nvme", cmd->nvme, "NVMe drives in total");
  cmd->explain->add_option("--time-limit", cmd->time_limit,
                           "as sbatch -t: 90, 2:00:00, 1-12 (required without --job)");
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
      Table shape = !cmd.explain->parsed() ? version_table({})
                    : cmd.job.empty()      ? explain_table({})
                                           : job_explain_table({});
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
    if (cmd.explain->parsed() && !cmd.job.empty()) {
      std::vector<std::string> given;
      for (const auto& [flag, value] :
           {std::pair{"--workload", &cmd.workload}, std::pair{"--partition", &cmd.partition},
            std::pair{"--qos", &cmd.qos}, std::pair{"--account", &cmd.account},
            std::pair{"--gpus", &cmd.gpus}, std::pair{"--mem", &cmd.mem},
            std::pair{"--nvme", &cmd.nvme}, std::pair{"--time-limit", &cmd.time_limit},
            std::pair{"--start", &cmd.start}}) {
        if (!value->empty()) given.emplace_back(flag);
      }
      if (!given.empty()) {
        throw Usage{"--job reads the job's request, class and time limit from Slurm; leave out " +
                    join(given, ", ") + ", or leave out --job to explain a hypothetical job"};
      }
      auto id = parse_job_id(cmd.job, "--job");
      if (!id) throw Usage{id.error().message};
      return run_explain_job(*id, client, output, out, err);
    }
    if (cmd.explain->parsed()) {
      if (cmd.time_limit.empty()) {
        throw Usage{
            "policy explain: give --time-limit LIMIT (and the request: --gpus, --mem, "
            "...), or --job JOBID for a pending Slurm job"};
      }
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
