// `composerctl policy apply|show|history|explain`: the time-of-day policy (policies/README.md).
//
// apply FILE [--dry-run] sends the file to composerd (admins), which validates it, compiles it
// into its cap licenses' hold and blocker reservations, compares that with what Slurm has and
// answers the changes and the warnings; without --dry-run composerd then brings Slurm there
// (reservations created or updated in place, never deleted and re-created) and stores the
// policy. composerctl itself runs no scontrol for apply and edits no slurm.conf.
//
// explain asks composerd about a hypothetical job given by flags, or with --job about a pending
// Slurm job: which license holds it and why (explain_job_command.h).
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "composer/cli/output.h"
#include "composer/client/client.h"

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
