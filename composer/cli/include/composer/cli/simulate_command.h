// composerctl simulate: offline capacity planning. Replays a job trace (the normalised CSV or
// a sacct export) on one cluster file, or on several side by side (`simulate compare`, with
// ratios to the first), through composer/simulate. Needs no composerd and no Slurm.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "composer/cli/output.h"

namespace composer::cli {

struct SimulateArgs {
  CLI::App* command = nullptr;
  CLI::App* compare = nullptr;
  CLI::App* sweep = nullptr;
  std::vector<std::string> vary;  // sweep: NAME=V1,V2,...
  std::string trace;
  std::string cluster;
  std::string policy;
  std::string start;                   // wall clock of the CSV's second 0
  std::string time_zone;               // of the trace's times without an offset; empty: UTC
  std::vector<std::string> scenarios;  // compare: CLUSTER[:POLICY]...
  bool csv = false;
  bool classes = false;
  bool sizes = false;
  bool quiet = false;   // no progress line
  bool strict = false;  // a job the cluster can never run fails the run
  std::string svg;
};

// The progress line composerctl keeps on a terminal's standard error:
// "simulate fixed.conf: 250000 of 1000000 jobs submitted (25.0%), 25000 jobs/s, ETA 00:00:30"
// (SimulateProgress.LineSaysRateAndEta).
std::string progress_line(const std::string& cluster, uint64_t submitted, uint64_t total,
                          double elapsed_s);

// Registers `simulate` and `simulate compare` on `app`.
SimulateArgs& add_simulate_command(CLI::App& app, SimulateArgs& args);

// Runs the simulation and prints it. kExitOk, kExitFailed (a file that cannot be read or
// parsed; with --strict, a job some cluster can never run), kExitUsage (a bad argument).
int run_simulate(const SimulateArgs& args, const OutputOptions& output, std::ostream& out,
                 std::ostream& err);

}  // namespace composer::cli
