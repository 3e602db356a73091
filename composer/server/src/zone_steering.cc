#include "composer/server/zone_steering.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "composer/common/slurm_text.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/config/conf_file.h"

namespace composer::server {
namespace {

std::string null_is_empty(const std::string& v) { return v == "(null)" ? std::string() : v; }

// A node list in either form (Slurm's "cn[1,3]", composer's "cn1,cn3"), sorted; nullopt when
// it does not expand.
std::optional<std::vector<std::string>> node_set(const std::string& list) {
  if (list.empty()) return std::vector<std::string>{};
  Expected<std::vector<std::string>> names = config::expand_hostlist(list);
  if (!names) return std::nullopt;
  std::sort(names->begin(), names->end());
  return *names;
}

}  // namespace

Expected<SlurmJobs> parse_slurm_jobs(std::string_view text) {
  SlurmJobs out;
  for (const std::string& raw : split(std::string(text), '\n')) {
    const std::string line(trim(raw));
    if (line.empty() || line.starts_with("No jobs")) continue;
    const ScontrolFields f = parse_scontrol_line(line);
    Expected<uint32_t> id = parse_count(scontrol_field(f, "JobId"), 0xfffffff0U);
    if (!id) {
      return Error{ErrorCode::kInvalidArgument, "scontrol show jobs: no JobId in: " + line};
    }
    const std::string state = scontrol_field(f, "JobState");
    if (state == "PENDING") {
      out.pending.push_back({.id = *id,
                             .exc_nodes = null_is_empty(scontrol_field(f, "ExcNodeList")),
                             .req_nodes = null_is_empty(scontrol_field(f, "ReqNodeList")),
                             .admin_comment = null_is_empty(scontrol_field(f, "AdminComment"))});
    } else if (state == "CONFIGURING") {
      out.starting.push_back({.id = *id,
                              .nodes = null_is_empty(scontrol_field(f, "NodeList")),
                              .admin_comment = null_is_empty(scontrol_field(f, "AdminComment"))});
    }
  }
  return out;
}

api::PoolSnapshot less_starting(api::PoolSnapshot snapshot,
                                const std::vector<StartingJob>& starting,
                                const std::function<bool(uint32_t)>& composed) {
  for (const StartingJob& job : starting) {
    if (composed(job.id)) continue;  // what it holds is out of the pool's free counts already
    Expected<std::optional<ComposerComment>> comment = parse_admin_comment(job.admin_comment);
    if (!comment || !*comment) continue;
    const Request& want = (*comment)->request;
    const auto nodes = node_set(job.nodes);
    if (!nodes) continue;
    for (const std::string& node : *nodes) {
      const auto reach = snapshot.node_zones.find(node);
      if (reach == snapshot.node_zones.end()) continue;
      uint32_t gpus = want.gpus;
      uint64_t mem = want.mem_bytes;
      uint32_t nvme = want.nvme;
      for (const std::string& zone : reach->second) {
        const auto z = snapshot.zones.find(zone);
        if (z == snapshot.zones.end()) continue;
        api::ZoneFree& free = z->second;
        uint32_t g = std::min(gpus, free.gpus);
        if (!want.gpu_model.empty()) {
          const auto model = free.gpu_models.find(want.gpu_model);
          g = model == free.gpu_models.end() ? 0 : std::min(g, model->second);
          if (g > 0) model->second -= g;
        }
        free.gpus -= g;
        gpus -= g;
        const uint64_t m = std::min(mem, free.mem_bytes);
        free.mem_bytes -= m;
        mem -= m;
        const uint32_t n = std::min(nvme, free.nvme);
        free.nvme -= n;
        nvme -= n;
      }
    }
  }
  return snapshot;
}

std::vector<std::string> Steer::scontrol_args() const {
  return {"update", "JobId=" + std::to_string(job_id), "ExcNodeList=" + exc_nodes,
          "AdminComment=" + admin_comment};
}

std::vector<Steer> steer_pending(const std::vector<PendingJob>& jobs,
                                 const api::PoolSnapshot& snapshot) {
  std::vector<Steer> out;
  if (snapshot.node_zones.empty()) return out;
  for (const PendingJob& job : jobs) {
    if (!job.req_nodes.empty()) continue;
    Expected<std::optional<ComposerComment>> comment = parse_admin_comment(job.admin_comment);
    if (!comment || !*comment) continue;
    ComposerComment c = std::move(**comment);
    const auto have = node_set(job.exc_nodes);
    const auto ours = node_set(c.avoid);
    if (!have || !ours || *have != *ours) continue;  // the user's exclusion, or not parsable
    std::vector<std::string> want = api::nodes_out_of_reach(snapshot, c.request, c.nodes);
    std::sort(want.begin(), want.end());
    if (want == *have) continue;
    c.avoid = join(want);
    // The composer part is the comment's last (job_submit appends it): what comes before
    // it is kept as it is.
    const size_t at = job.admin_comment.rfind("composer: ");
    out.push_back({.job_id = job.id,
                   .exc_nodes = c.avoid,
                   .admin_comment = job.admin_comment.substr(0, at) + to_admin_comment(c)});
  }
  return out;
}

}  // namespace composer::server
