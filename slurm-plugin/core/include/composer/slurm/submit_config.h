// job_submit_composer's configuration: a few keys of composerd's own config file
// (/etc/slurm/composer.conf, slurm.conf's Key=Value style; keys case-insensitive; other keys
// belong to composerd and are ignored here).
//
//   StateDir=/var/lib/slurm-composer      composerd publishes <StateDir>/snapshot.json
//   SnapshotFile=/path/snapshot.json      where composerd publishes it instead
//   JobSubmitSnapshotMissing=accept       accept|refuse: what to do without a usable snapshot
//   JobSubmitSnapshotMaxAge=0             seconds; older snapshots count as missing; 0: never
//
// The file is found at $COMPOSER_CONF (slurmctld's environment) or /etc/slurm/composer.conf;
// when it does not exist every key keeps its default.
#pragma once

#include <cstdint>
#include <string>

#include "composer/common/error.h"

namespace composer::slurm {

inline constexpr const char* kDefaultComposerConf = "/etc/slurm/composer.conf";
inline constexpr const char* kDefaultStateDir = "/var/lib/slurm-composer";

struct SubmitConfig {
  std::string snapshot_path = std::string(kDefaultStateDir) + "/snapshot.json";
  bool refuse_without_snapshot = false;
  uint32_t snapshot_max_age_s = 0;
};

// Reads `path`; a missing file gives the defaults. Bad values of our keys are errors that
// name the file, line and key.
Expected<SubmitConfig> read_submit_config(const std::string& path);
// $COMPOSER_CONF, else kDefaultComposerConf.
std::string composer_conf_path();

}  // namespace composer::slurm
