// `composerctl policy apply|show|history|explain`: the time-of-day policy (policies/README.md).
//
// apply FILE [--dry-run] [--slurm-conf FILE] validates the file (locally and in composerd),
// compiles it into Slurm licenses and blocker reservations, compares that with what Slurm has
// now (`scontrol show licenses` / `scontrol show reservations`, the scontrol on PATH with
// SLURM_CONF from the environment) and prints the changes and the warnings. Without --dry-run
// it then brings Slurm there (reservations created or updated in place, never deleted and
// re-created) and stores the policy in composerd. Licenses live in slurm.conf: with
// --slurm-conf the Licenses= line of that file is rewritten and `scontrol reconfigure` run;
// without it, apply prints the line and stops before changing anything.
//
// explain asks composerd about a hypothetical job given by flags, or with --job about a pending
// Slurm job: which license holds it and why (explain_job.h).
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "composer/client/client.h"
#include "output.h"

namespace CLI {
class App;
}

namespace composer::cli {

struct PolicyCommand;

// Adds the `policy` subcommand to `app`. The returned object holds the parsed arguments.
std::shared_ptr<PolicyCommand> add_policy_command(CLI::App& app);
// `policy` and its subcommands that print tables (all but apply), and apply, which prints its
// plan as text or --json: the caller adds the output options to each.
std::vector<CLI::App*> policy_commands(const PolicyCommand& command);
CLI::App* policy_apply_command(const PolicyCommand& command);
// Whether the command line chose `policy`.
bool policy_chosen(const PolicyCommand& command);
// Runs the chosen policy subcommand; returns the exit status (kExitOk, kExitFailed, kExitUsage).
int run_policy(const PolicyCommand& command, const client::Client& client,
               const OutputOptions& output, std::ostream& out, std::ostream& err);

}  // namespace composer::cli
