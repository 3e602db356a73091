// job_submit_composer's configuration: a few keys of composerd's own config file
// (/etc/slurm/composer.conf), read with composerd's reader (composer/config): the same
// grammar, the same rules and defaults for the keys both read, and the same sentences.
//
//   StateDir=/var/lib/slurm-composer      composerd publishes <StateDir>/snapshot.json
//   SnapshotFile=/path/snapshot.json      where composerd publishes it instead
//   JobSubmitSnapshotMissing=accept       accept|refuse: what to do without a usable snapshot
//   JobSubmitSnapshotMaxAge=0             seconds; older snapshots count as missing; 0: never
//
// Strict about these (a bad value, a key set twice, an unknown JobSubmit* key: composerd
// leaves every JobSubmit* key to this reader) and lax about composerd's own keys, which it
// checks itself. The file is found at $COMPOSER_CONF (slurmctld's environment) or
// /etc/slurm/composer.conf; when it does not exist every key keeps its default.
#pragma once

#include <cstdint>
#include <string>

#include "composer/common/error.h"
#include "composer/config/conf_file.h"
#include "composer/config/shared_keys.h"

namespace composer::slurm {

inline constexpr const char* kDefaultComposerConf = config::kDefaultPath;

struct SubmitConfig {
  std::string snapshot_path = config::StatePaths().snapshot();
  bool refuse_without_snapshot = false;
  uint32_t snapshot_max_age_s = 0;
};

// Parses composer.conf's text (`path` names it in the sentences).
Expected<SubmitConfig> parse_submit_config(std::string_view text, const std::string& path);
// Reads `path`; a missing file gives the defaults.
Expected<SubmitConfig> read_submit_config(const std::string& path);
// $COMPOSER_CONF, else kDefaultComposerConf.
std::string composer_conf_path();

}  // namespace composer::slurm
