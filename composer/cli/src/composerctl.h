// composerctl's commands, callable in-process (tests) as well as from main().
#pragma once

#include <ostream>

namespace composer::cli {

// Exit statuses, as scripts see them.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // composerd refused or could not be reached
inline constexpr int kExitUsage = 2;   // the command line itself is wrong

// Parses argv (argv[0] is the program name), runs the command against composerd and prints
// the result to `out`; errors go to `err` as one line "composerctl: error: <message>".
int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace composer::cli
