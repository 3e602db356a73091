// job_submit/composer: the entry points slurmctld calls (JobSubmitPlugins=composer). Thin:
// it copies the job's fields into composer::slurm::SubmittedJob, lets the core review them
// and writes the changes back with Slurm's allocator. No network call: the pool is known from
// composerd's snapshot file, cached until its mtime changes.
#include <cerrno>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/spank.h>  // slurm_info/slurm_error, exported by slurmctld
}

#include "composer/common/clock.h"
#include "composer/slurm/snapshot_cache.h"
#include "composer/slurm/submit.h"
#include "composer/slurm/submit_config.h"

// Slurm's allocator, exported by slurmctld (libslurmfull) but not declared in public headers;
// declared here as src/common/xmalloc.h and xstring.h define them (the same from 22.05 to
// 26.05). Every string handed to Slurm must come from it: Slurm frees it with xfree.
extern "C" {
char* slurm_xstrdup(const char* str);
void slurm_xfree(void** item);
void* slurm_xrecalloc(void** item, size_t count, size_t size, bool clear, bool try_,
                      const char* file, int line, const char* func);

// slurmctld's job record; private to Slurm, only passed through here.
struct job_record;

// slurmctld checks that these exist; plugin_version must equal the running Slurm's.
extern const char plugin_name[];
extern const char plugin_type[];
extern const uint32_t plugin_version;
const char plugin_name[] = "Composable infrastructure (slurm-composer) job submit plugin";
const char plugin_type[] = "job_submit/composer";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

int init(void);
int fini(void);
int job_submit(job_desc_msg_t* job_desc, uint32_t submit_uid, char** err_msg);
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
int job_modify(job_desc_msg_t* job_desc, struct job_record* job_ptr, uint32_t submit_uid,
               char** err_msg);
#else
int job_modify(job_desc_msg_t* job_desc, struct job_record* job_ptr, uint32_t submit_uid);
#endif
}

namespace {

using composer::Expected;
namespace cs = composer::slurm;

// Since Slurm 23.02 slurmctld may run job_submit and job_modify calls concurrently (earlier
// releases called them under its job write lock). Everything below is read and changed only
// with g_mutex held: the snapshot cache and the configuration it was made from.
std::mutex g_mutex;
std::unique_ptr<cs::SnapshotCache> g_cache;
cs::SubmitConfig g_config;

std::string text(const char* s) { return s == nullptr ? std::string() : std::string(s); }

void replace(char** field, const std::string& value) {
  if (text(*field) == value) return;
  if (*field != nullptr) slurm_xfree(reinterpret_cast<void**>(field));
  *field = value.empty() ? nullptr : slurm_xstrdup(value.c_str());
}

// Appends to the job's SPANK environment, which the prolog reads the job's options from.
void append_spank_env(job_desc_msg_t* job, const std::vector<std::string>& entries) {
  if (entries.empty()) return;
  const size_t size = job->spank_job_env == nullptr ? 0 : job->spank_job_env_size;
  const size_t grown = size + entries.size();
  slurm_xrecalloc(reinterpret_cast<void**>(&job->spank_job_env), grown, sizeof(char*), true, false,
                  __FILE__, __LINE__, __func__);
  for (size_t i = 0; i < entries.size(); ++i) {
    job->spank_job_env[size + i] = slurm_xstrdup(entries[i].c_str());
  }
  job->spank_job_env_size = static_cast<uint32_t>(grown);
}

// How this Slurm spells a GRES in tres_per_* (SchedMD commit 53ec8d6697, 23.11).
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
constexpr const char* kGresPrefix = "gres/";
#else
constexpr const char* kGresPrefix = "gres:";
#endif

// The job's requests that review_submission checks, as the core sees them.
void copy_tres(const job_desc_msg_t* job, cs::SubmittedJob& in) {
  in.licenses = text(job->licenses);
  in.tres_per_node = text(job->tres_per_node);
  in.tres_per_job = text(job->tres_per_job);
  in.tres_per_socket = text(job->tres_per_socket);
  in.tres_per_task = text(job->tres_per_task);
  in.gres_prefix = kGresPrefix;
}

// The Slurm error code of each kind of refusal: the client prints its text after ours
// ("sbatch: error: Batch job submission failed: <text>"), so it must not name another cause.
// Every code is in slurm_errno.h from 22.05 to 26.05; slurm-plugin/README.md, "Refusals".
int slurm_code(cs::Refusal refusal) {
  switch (refusal) {
    case cs::Refusal::kBadRequest:
      return ESLURM_INVALID_TRES;  // Invalid Trackable RESource (TRES) specification
    case cs::Refusal::kBadWorkload:
      return SLURM_ERROR;  // Unspecified error: Slurm has no word for a workload class
    case cs::Refusal::kLicenses:
      return ESLURM_INVALID_LICENSES;  // Invalid license specification
    case cs::Refusal::kGres:
      return ESLURM_INVALID_GRES;  // Invalid generic resource (gres) specification
    case cs::Refusal::kNodeCount:
      return ESLURM_INVALID_NODE_COUNT;  // Node count specification invalid
    case cs::Refusal::kHetJob:
      return ESLURM_NOT_SUPPORTED;  // Requested operation not supported on this system
    case cs::Refusal::kPool:
      return ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE;  // Requested node configuration is not ...
    case cs::Refusal::kPolicy:
      return ESLURM_ACCOUNTING_POLICY;  // Job violates accounting/QOS policy (...)
    case cs::Refusal::kReservation:
      return ESLURM_RESERVATION_ACCESS;  // Access denied to requested reservation
    case cs::Refusal::kNoSnapshot:
      return ESLURM_DISABLED;  // Requested operation is presently disabled
  }
  return SLURM_ERROR;
}

int review(job_desc_msg_t* job, uint32_t submit_uid, char** err_msg) {
  cs::SubmittedJob in;
  for (uint32_t i = 0; job->spank_job_env != nullptr && i < job->spank_job_env_size; ++i) {
    if (job->spank_job_env[i] != nullptr) in.spank_env.emplace_back(job->spank_job_env[i]);
  }
  if (job->min_nodes != NO_VAL && job->min_nodes != 0) in.min_nodes = job->min_nodes;
  if (job->max_nodes != NO_VAL && job->max_nodes != 0) in.max_nodes = job->max_nodes;
  if (job->num_tasks != NO_VAL && job->num_tasks != 0) in.num_tasks = job->num_tasks;
  if (job->ntasks_per_node != NO_VAL16 && job->ntasks_per_node != 0) {
    in.ntasks_per_node = job->ntasks_per_node;
  }
  if (job->het_job_offset != NO_VAL) in.het_job_offset = job->het_job_offset;
  copy_tres(job, in);
  in.admin_comment = text(job->admin_comment);
  in.reservation = text(job->reservation);
  in.partition = text(job->partition);
  in.qos = text(job->qos);
  in.account = text(job->account);
  in.req_nodes = text(job->req_nodes);
  in.exc_nodes = text(job->exc_nodes);
  if (job->time_limit != NO_VAL && job->time_limit != INFINITE) {
    in.time_limit_s = int64_t{job->time_limit} * 60;
  }

  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_cache) return SLURM_SUCCESS;
  cs::SnapshotCache::View view = g_cache->get();
  cs::Refusal refusal = cs::Refusal::kBadRequest;
  Expected<cs::SubmitChanges> changes = cs::review_submission(
      in, view.snapshot.get(), view.problem, g_config.refuse_without_snapshot, &refusal);
  if (!changes) {
    slurm_info("composer: %s: refused a job of uid %u: %s", __func__, submit_uid,
               changes.error().message.c_str());
    if (err_msg != nullptr) *err_msg = slurm_xstrdup(changes.error().message.c_str());
    return slurm_code(refusal);
  }
  if (!changes->composes) return SLURM_SUCCESS;
  if (!view.snapshot) {
    slurm_verbose("composer: %s: accepted without pool checks: %s", __func__, view.problem.c_str());
  }
  // Pinned to the count the licenses are priced on: Slurm may not add nodes (-w without -N).
  job->min_nodes = changes->nodes;
  job->max_nodes = changes->nodes;
  replace(&job->licenses, changes->licenses);
  replace(&job->tres_per_node, changes->tres_per_node);
  replace(&job->admin_comment, changes->admin_comment);
  if (!changes->exc_nodes.empty()) {
    replace(&job->exc_nodes, changes->exc_nodes);
    slurm_verbose("composer: %s: uid %u: kept off %s: their zones cannot serve the job now",
                  __func__, submit_uid, changes->exc_nodes.c_str());
  }
  append_spank_env(job, changes->spank_env_add);
  slurm_verbose("composer: %s: uid %u: nodes=%u licenses=%s tres_per_node=%s workload=%s (%s)",
                __func__, submit_uid, changes->nodes, changes->licenses.c_str(),
                changes->tres_per_node.c_str(), changes->workload.c_str(),
                changes->workload_reason.c_str());
  return SLURM_SUCCESS;
}

// Runs one entry point's body; an exception stops here (logged, SLURM_ERROR, and for a job
// a sentence that sends the user to slurmctld's log).
template <class F>
int guarded(const char* entry, char** err_msg, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    slurm_error("composer: %s: %s", entry, e.what());
  } catch (...) {
    slurm_error("composer: %s: unknown exception", entry);
  }
  if (err_msg != nullptr) *err_msg = slurm_xstrdup("composer: internal error, see slurmctld's log");
  return SLURM_ERROR;
}

}  // namespace

extern "C" int init(void) {
  return guarded(__func__, nullptr, [] {
    const std::string conf = cs::composer_conf_path();
    Expected<cs::SubmitConfig> config = cs::read_submit_config(conf);
    if (!config) {
      slurm_error("composer: init: %s", config.error().message.c_str());
      return SLURM_ERROR;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_config = *config;
    g_cache = std::make_unique<cs::SnapshotCache>(g_config.snapshot_path,
                                                  g_config.snapshot_max_age_s, composer::now_ms);
    slurm_info("composer: job_submit loaded: config %s, snapshot %s, without snapshot: %s",
               conf.c_str(), g_config.snapshot_path.c_str(),
               g_config.refuse_without_snapshot ? "refuse" : "accept");
    return SLURM_SUCCESS;
  });
}

extern "C" int fini(void) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_cache.reset();
  return SLURM_SUCCESS;
}

extern "C" int job_submit(job_desc_msg_t* job_desc, uint32_t submit_uid, char** err_msg) {
  return guarded(__func__, err_msg, [&] {
    if (job_desc == nullptr) return SLURM_SUCCESS;
    return review(job_desc, submit_uid, err_msg);
  });
}

// The job record is opaque in Slurm's public headers, so a modification cannot be compared
// with the job's composition. Pool licenses and slot GRES set by hand are refused, the same
// rule as at submit; the rest passes (see README.md, "Limits").
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
extern "C" int job_modify(job_desc_msg_t* job_desc, struct job_record* /*job_ptr*/,
                          uint32_t submit_uid, char** err_msg) {
#else
extern "C" int job_modify(job_desc_msg_t* job_desc, struct job_record* /*job_ptr*/,
                          uint32_t submit_uid) {
  char** err_msg = nullptr;
#endif
  return guarded(__func__, err_msg, [&] {
    if (job_desc == nullptr || submit_uid == 0) return SLURM_SUCCESS;
    cs::SubmittedJob in;
    copy_tres(job_desc, in);
    if (in.licenses.empty() && in.tres_per_node.empty() && in.tres_per_job.empty() &&
        in.tres_per_socket.empty() && in.tres_per_task.empty()) {
      return SLURM_SUCCESS;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_cache) return SLURM_SUCCESS;
    cs::SnapshotCache::View view = g_cache->get();
    cs::Refusal refusal = cs::Refusal::kBadRequest;
    Expected<cs::SubmitChanges> changes =
        cs::review_submission(in, view.snapshot.get(), view.problem, false, &refusal);
    if (!changes) {
      slurm_info("composer: job_modify: refused a change to job %s by uid %u: %s",
                 job_desc->job_id_str != nullptr ? job_desc->job_id_str : "?", submit_uid,
                 changes.error().message.c_str());
      if (err_msg != nullptr) *err_msg = slurm_xstrdup(changes.error().message.c_str());
      return slurm_code(refusal);
    }
    return SLURM_SUCCESS;
  });
}
