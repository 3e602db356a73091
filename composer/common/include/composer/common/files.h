// Files written so that a reader sees the old content or the new, never half of either.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "composer/common/error.h"

namespace composer {

// What a replaced file survives: kPowerLoss syncs it to disk before the rename; kCrash does
// not, and survives the writer's crash (the kernel keeps what was written) but not always the
// machine's (a file no one may lose to a power cut must be kPowerLoss).
enum class Durability { kPowerLoss, kCrash };

// Replaces `path` with `text`: writes a temporary file beside it (PATH.tmp.PID; short and
// interrupted writes are retried), gives it `mode` (whatever the umask), syncs it (kPowerLoss)
// and renames it over `path`. On failure the temporary file is removed and `path` is left as it
// was; the kUnavailable error names the step and the system's reason ("cannot write
// /x.tmp.42: No space left on device").
Status write_file_atomically(const std::string& path, std::string_view text, mode_t mode = 0644,
                             Durability durability = Durability::kPowerLoss);

// Writes `line` and its newline to `fd` with one write() (the rest again only after a short
// write): the lines of programs that share a log (slurmctld runs composer-slurmctld for many
// jobs at once) never interleave within a line, as a line and its newline written apart do.
// What cannot be written is dropped: a log line is never worth failing for.
void write_line(int fd, std::string_view line);

}  // namespace composer
