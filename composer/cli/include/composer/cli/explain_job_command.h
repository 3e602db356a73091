// `composerctl policy explain --job JOBID`: why Slurm holds a pending job on licenses. Slurm
// says only "Reason=Licenses"; composerctl reads the job and the licenses from scontrol (the
// one on PATH, with SLURM_CONF from the environment, as an admin runs it), and for each
// license the job asks for says whether it is what holds the job and why: for a pool license
// (fabric_gpu, fabric_mem, fabric_nvme) the devices composerd cannot serve (drained, failed,
// foreign; its hold reservation hold_<license> keeps them back from Slurm) and those attached
// to other jobs, from composerd's pool; for a cap license (<class>_<type>_cap) the policy's
// window and cap and the earliest start, from composerd's own explain (the call `policy
// explain` makes with flags, given the job's class, amounts and time limit).
#pragma once

#include <json/value.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "composer/api/policy_codec.h"
#include "composer/cli/output.h"
#include "composer/client/client.h"
#include "composer/common/error.h"
#include "composer/common/slurm_text.h"
#include "composer/model/model.h"

namespace composer::cli {

// What `scontrol -o show job ID` says of a job, as far as licenses go.
struct SlurmJob {
  uint32_t id = 0;
  std::string state;   // JobState: PENDING, RUNNING, ...
  std::string reason;  // Reason: Licenses, Priority, None, ...
  std::vector<LicenseCount> licenses;
  std::optional<int64_t> time_limit_s;  // nullopt: UNLIMITED (or a partition's limit)
  std::string partition, account, qos;
  uint32_t nodes = 1;
  std::optional<ComposerComment> composer;  // job_submit's record in AdminComment
};

// The job line of `scontrol -o show job ID`. kInvalidArgument when there is none, or a field
// composerctl reads does not parse.
Expected<SlurmJob> parse_scontrol_job(std::string_view text);

// Whether Slurm holds the job on licenses: pending with reason Licenses.
bool pending_on_licenses(const SlurmJob& job);

// What composerd's policy explain is asked for the job: its class (job_submit's, else the
// partition, QOS and account classify it), the amounts its pool licenses count (memory in
// GiB, as fabric_mem) and its time limit.
client::PolicyQuery policy_query(const SlurmJob& job);

struct LicenseVerdict {
  std::string license;
  uint64_t asked = 0;
  std::optional<LicenseUse> slurm;  // nullopt: Slurm has no such license
  bool holds = false;               // asked > what is free to the job
  std::string why;
};

struct JobExplanation {
  uint32_t job = 0;
  std::string state, reason;
  std::optional<ComposerComment> composer;
  std::string summary;  // one sentence
  // For a pending job composerd refused to compose since it last composed it (a placement
  // rule it cannot meet now, a cap, devices gone): that refusal, in a sentence; else empty.
  std::string refusal;
  std::vector<LicenseVerdict> licenses;
  std::optional<api::PolicyExplanation> policy;
};

// What composerd told: its pool (for pool licenses) and its policy's explanation of the job
// (for cap licenses; an error, e.g. no policy in force, is said in the license's why).
struct ComposerdView {
  std::vector<PoolRow> pool;
  std::optional<Expected<api::PolicyExplanation>> policy;
  // The job's newest "refused" ledger event, when no composition of the job was ready since.
  std::optional<Event> refusal;
};

// The refusal explain reports among a job's ledger events (oldest first): the newest
// "refused" event after the job's last "ready" one; nullopt when there is none.
std::optional<Event> last_refusal(const std::vector<Event>& events);

// The sentences; pure, for tests. `licenses`: `scontrol -o show licenses`, parsed.
JobExplanation explain_job(const SlurmJob& job, const std::vector<LicenseUse>& licenses,
                           const ComposerdView& composerd);

// LICENSE, ASKED, TOTAL, USED, RESERVED, FREE, HOLDS, WHY: one row per license asked.
Table job_explain_table(const JobExplanation& e);
// The summary, the table without WHY, and one "LICENSE: why" line per license.
std::string job_explain_text(const JobExplanation& e, bool header);
// {"job", "state", "reason", "workload", "request", "nodes", "summary", "refusal", "licenses":
// [{"license",
// "asked", "total", "used", "reserved", "free", "holds", "why"}], "policy": PolicyExplanation
// or null}
Json::Value job_explain_to_json(const JobExplanation& e);

// Runs scontrol, asks composerd what it needs, and prints; returns the exit status.
int run_explain_job(uint32_t job, const client::Client& client, const OutputOptions& output,
                    std::ostream& out, std::ostream& err);

}  // namespace composer::cli
