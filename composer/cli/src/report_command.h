// composerctl report: accounting reports from composerd's ledger (GET /v1/reports), shown like
// sreport: one section at a time as an aligned table, -P parsable, --csv or --json; --svg
// writes the charts of the same report to a file.
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>

#include "composer/cli/output.h"
#include "composer/client/client.h"

namespace composer::cli {

struct ReportArgs {
  CLI::App* command = nullptr;
  std::string section = "utilisation";
  std::string start;  // Slurm time; default: yesterday 00:00, like sreport
  std::string end;    // default: today 00:00
  std::string top;
  bool csv = false;
  std::string svg;
};

// Registers `report` on `app`; the returned arguments are filled by app.parse().
ReportArgs& add_report_command(CLI::App& app, ReportArgs& args);

// Validates the arguments, fetches the report and prints the section. Returns an exit status
// (kExitOk, kExitFailed when composerd refused, kExitUsage for a bad argument).
int run_report(const ReportArgs& args, const client::Client& client, const OutputOptions& output,
               std::ostream& out, std::ostream& err);

}  // namespace composer::cli
