// Zones in the scheduler, kept up while jobs wait (docs/ADMIN.md "Zones"): job_submit keeps a
// composed job off the nodes whose zones could not serve it when it was submitted (the job's
// ExcNodeList, recorded as avoid= in its admin comment). Zones fill and empty while jobs pend,
// so every SlurmSync round composerd works out again, for each pending composed job whose
// exclusion is its own, which nodes it should avoid now, and changes the ones that differ: a
// job requeued after a start on a dry zone is steered away from it, and a job kept off a zone
// that has room again may go there. Pure: the caller runs scontrol.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "composer/api/snapshot.h"
#include "composer/common/error.h"

namespace composer::server {

// A pending job as `scontrol -o show jobs` shows it.
struct PendingJob {
  uint32_t id = 0;
  std::string exc_nodes;  // ExcNodeList; "" for (null)
  std::string req_nodes;  // ReqNodeList; "" for (null)
  std::string admin_comment;
  bool operator==(const PendingJob&) const = default;
};

// A job Slurm has given its nodes whose prologs still run (JobState=CONFIGURING): its devices
// may not be composed yet, and then the pool still counts them free.
struct StartingJob {
  uint32_t id = 0;
  std::string nodes;  // NodeList, in Slurm's form ("cn[1-2]")
  std::string admin_comment;
  bool operator==(const StartingJob&) const = default;
};

struct SlurmJobs {
  std::vector<PendingJob> pending;
  std::vector<StartingJob> starting;
};

// The pending (JobState=PENDING) and starting (JobState=CONFIGURING) jobs of
// `scontrol -o show jobs` output, one job per line; "No jobs in the system" is none.
// kInvalidArgument naming a line without a JobId.
Expected<SlurmJobs> parse_slurm_jobs(std::string_view text);

// The snapshot less what the starting composed jobs that `composed` does not know yet will
// take: each node's request taken from the zones that node reaches, in the zones' order, as far
// as they have it. Without this a burst of jobs Slurm starts into one zone in one scheduling
// pass counts the zone's devices free for each of them, and the pending jobs behind them are
// not kept off it (ZoneSteeringTest.WhatAStartingJobWillTakeIsNotFree).
api::PoolSnapshot less_starting(api::PoolSnapshot snapshot,
                                const std::vector<StartingJob>& starting,
                                const std::function<bool(uint32_t)>& composed);

// A change to one pending job: its new ExcNodeList ("" clears it) and admin comment.
struct Steer {
  uint32_t job_id = 0;
  std::string exc_nodes;
  std::string admin_comment;
  // The scontrol arguments that make it: update JobId=N ExcNodeList=... AdminComment=...
  std::vector<std::string> scontrol_args() const;
  bool operator==(const Steer&) const = default;
};

// The changes that bring each pending composed job's exclusion to api::nodes_out_of_reach
// for its request now. Left alone: jobs job_submit did not compose, jobs that name their
// nodes (ReqNodeList), jobs whose ExcNodeList is not the avoid= composer wrote (the user's
// own), and jobs whose exclusion is already right. A snapshot without zones changes nothing.
// ZoneSteeringTest.*.
std::vector<Steer> steer_pending(const std::vector<PendingJob>& jobs,
                                 const api::PoolSnapshot& snapshot);

}  // namespace composer::server
