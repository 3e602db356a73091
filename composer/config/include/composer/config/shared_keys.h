// The composer.conf keys composerd and the job_submit plugin both read, with the one default
// and the one rule each: where composerd keeps its state and publishes the pool snapshot.
//
//   StateDir=/var/lib/slurm-composer      an absolute path
//   SnapshotFile=/path/snapshot.json      an absolute path; default <StateDir>/snapshot.json
#pragma once

#include <string>

#include "composer/common/error.h"
#include "composer/config/conf_file.h"

namespace composer::config {

inline constexpr const char* kDefaultStateDir = "/var/lib/slurm-composer";
// Where composerd listens without ListenAddress= and ListenPort=: what the SPANK plugin's
// server= argument defaults to.
inline constexpr const char* kDefaultListenAddress = "127.0.0.1";
inline constexpr int kDefaultListenPort = 6830;

struct StatePaths {
  std::string state_dir = kDefaultStateDir;
  std::string snapshot_file;  // SnapshotFile=; empty: not given

  // SnapshotFile=, else <StateDir>/snapshot.json.
  std::string snapshot() const;
};

// Reads `line` when its key is one of the shared keys (then `taken` is true) into `paths`;
// refuses a bad value, a second value on the line or a key set twice (`seen`).
Status read_shared_key(const Line& line, std::set<std::string>& seen, StatePaths& paths,
                       bool& taken);

}  // namespace composer::config
