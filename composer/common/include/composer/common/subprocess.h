// Runs another program (squeue, scontrol) without a shell and collects what it prints.
#pragma once

#include <string>
#include <vector>

#include "composer/common/error.h"

namespace composer {

struct RunOptions {
  // argv[0] is looked up on PATH unless it holds a '/'.
  std::vector<std::string> argv;
  // Changes to this process's environment, which the program inherits: "NAME=VALUE" sets NAME,
  // "NAME" alone removes it.
  std::vector<std::string> env;
  // Collect stderr with stdout; otherwise stderr goes to /dev/null.
  bool with_stderr = false;
  // Kill the program after this long (kTimeout); 0: wait for it however long it takes.
  int timeout_ms = 0;
};

struct RunResult {
  int status = -1;     // exit status, or 128 + the signal that ended it
  std::string output;  // stdout (and stderr with with_stderr)
};

// kUnavailable "cannot run PROGRAM: REASON" when it cannot be started; kTimeout "PROGRAM did
// not answer within N ms" when it ran past timeout_ms. A program that runs and fails is not an
// error here: see RunResult::status.
Expected<RunResult> run_program(const RunOptions& options);

// What a program that must succeed printed: run_program's errors, and for any exit status but
// 0 kUnavailable "'NAME ARGS' failed (exit N): OUTPUT" (NAME: argv[0] without its directory;
// OUTPUT on one line: with with_stderr it says why).
Expected<std::string> run_checked(const RunOptions& options);

}  // namespace composer
