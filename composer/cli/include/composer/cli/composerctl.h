// composerctl's commands, callable in-process (tests) as well as from main().
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

#include "composer/common/error.h"

namespace composer::cli {

// Exit statuses, as scripts see them.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // composerd refused or could not be reached
inline constexpr int kExitUsage = 2;   // the command line itself is wrong

// Parses argv (argv[0] is the program name), runs the command against composerd and prints
// the result to `out`; errors go to `err` as one line "composerctl: error: <message>".
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// A Slurm job id given to `flag` (--job, JOB): a whole number from 1 to 4294967295, else
// kInvalidArgument with a sentence naming the flag and the value.
Expected<uint32_t> parse_job_id(std::string_view text, std::string_view flag);

}  // namespace composer::cli
