// Remote licenses (composer.conf's SlurmLicenses=remote): slurmdbd's resources as sacctmgr
// prints them, and the sacctmgr commands that bring them to the pool. Pure: the caller reads
// sacctmgr and runs the commands.
//
// Where slurmdbd runs, the pool's and the models' licenses can be slurmdbd resources instead of
// slurm.conf licenses: Slurm names each NAME@SERVER and takes a new count from slurmdbd within
// milliseconds, without a reconfigure (measured on 22.05.8; ADMIN.md). composerd then sets each
// count to what the pool can serve, and no hold reservation is needed for them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"
#include "slurm_holds.h"

namespace composer::server {

// One row of `sacctmgr -P -n show resource withclusters format=name,server,count,cluster,allowed`:
// a resource and the share (percent) of it one cluster has; a resource given to no cluster has
// one row with an empty cluster.
struct RemoteLicense {
  std::string name;
  std::string server;
  uint64_t count = 0;
  std::string cluster;
  uint64_t allowed = 0;
  bool operator==(const RemoteLicense&) const = default;
};
// kInvalidArgument naming a line that does not parse.
Expected<std::vector<RemoteLicense>> parse_remote_licenses(std::string_view sacctmgr_text);

// The sacctmgr commands ("sacctmgr -i ...") that bring slurmdbd's resources of `server` to
// `wanted` (plain names, e.g. fabric_gpu) for `cluster`: a resource missing is added (type
// license, the count, all of it to the cluster), a cluster without its share or with less than
// all of it gets it, a count that differs is changed. A resource of `server` named fabric_* that
// is no longer wanted (a model the pool lost) is set to 0, never deleted: deleting a license
// that jobs ask for crashes slurmctld 22.05's backfill. Each action says how to undo it; those
// that lower a count tighten.
std::vector<SyncAction> remote_license_plan(const std::vector<LicenseCount>& wanted,
                                            const std::vector<RemoteLicense>& have,
                                            std::string_view server, std::string_view cluster);

}  // namespace composer::server
