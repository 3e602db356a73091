#include "composer/config/shared_keys.h"

namespace composer::config {

std::string StatePaths::snapshot() const {
  return snapshot_file.empty() ? state_dir + "/snapshot.json" : snapshot_file;
}

Status read_shared_key(const Line& line, std::set<std::string>& seen, StatePaths& paths,
                       bool& taken) {
  const std::string& key = line.key;
  taken = key == "statedir" || key == "snapshotfile";
  if (!taken) return Status::Ok();
  if (Status s = single_setting(line, seen); !s) return s;
  // Both name files composerd writes and slurmctld reads: never relative to either's cwd.
  if (Status s = absolute_path(line.written_key(), line.value()); !s) return s;
  (key == "statedir" ? paths.state_dir : paths.snapshot_file) = line.value();
  return Status::Ok();
}

}  // namespace composer::config
