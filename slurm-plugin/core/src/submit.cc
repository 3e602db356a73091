#include "composer/slurm/submit.h"

#include <algorithm>
#include <utility>

#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/policies/classify.h"
#include "composer/policies/policy.h"

namespace composer::slurm {
namespace {

Error refuse(ErrorCode code, const std::string& sentence) {
  return Error{code, "composer: " + sentence};
}

// The non-empty parts of a Slurm list ("a,,b" -> a b).
std::vector<std::string> parts(const std::string& s, char sep) {
  return split(s, sep, {.skip_empty = true});
}

std::string append(const std::string& list, const std::string& item) {
  if (item.empty()) return list;
  return list.empty() ? item : list + "," + item;
}

std::string on_nodes(uint32_t nodes) {
  return nodes == 1 ? "" : " on " + std::to_string(nodes) + " nodes";
}

std::string join_keys(const std::map<std::string, uint32_t>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none" : out;
}

// License names ("fabric_gpu:2" -> "fabric_gpu") the user gave by hand.
std::vector<std::string> license_names(const std::string& licenses) {
  std::vector<std::string> names;
  for (const std::string& part : parts(licenses, ',')) {
    for (const std::string& alt : parts(part, '|')) names.push_back(alt.substr(0, alt.find(':')));
  }
  return names;
}

// The entries of a tres_per_* field: comma-separated (Slurm's header says semicolons; accept
// both).
std::vector<std::string> split_tres(const std::string& tres) {
  std::vector<std::string> out;
  for (const std::string& part : parts(tres, ',')) {
    for (std::string& entry : parts(part, ';')) out.push_back(std::move(entry));
  }
  return out;
}

// The GRES name of one TRES entry in any spelling Slurm hands over: "gres/NAME[:TYPE][:N]"
// (23.11 and later), "gres:NAME[:TYPE][:N]" (before), "gres/NAME=N", or a bare "NAME[:N]".
// Empty for a TRES of another kind ("cpu:4", "license/x:1").
std::string gres_name(const std::string& entry) {
  std::string rest = entry;
  if (rest.rfind("gres/", 0) == 0 || rest.rfind("gres:", 0) == 0) {
    rest = rest.substr(5);
  } else if (rest.find('/') != std::string::npos) {
    return "";
  }
  return rest.substr(0, rest.find_first_of(":="));
}

Status check_pool(const JobOptions& o, uint32_t nodes, const api::PoolSnapshot& s) {
  const Request& r = o.request;
  if (r.gpus > 0) {
    const std::string asked =
        "--compose-gpus=" + (r.gpu_model.empty() ? "" : r.gpu_model + ":") + std::to_string(r.gpus);
    uint32_t pool = s.gpu.total;
    std::string what = "GPUs";
    if (!r.gpu_model.empty()) {
      auto it = s.gpu.models.find(r.gpu_model);
      if (it == s.gpu.models.end()) {
        return refuse(ErrorCode::kInsufficient, asked + ": the pool has no GPU of model '" +
                                                    r.gpu_model +
                                                    "' (models: " + join_keys(s.gpu.models) + ")");
      }
      pool = it->second;
      what = r.gpu_model + " GPUs";
    }
    if (uint64_t{r.gpus} * nodes > pool) {
      return refuse(ErrorCode::kInsufficient,
                    asked + on_nodes(nodes) + " needs " + std::to_string(uint64_t{r.gpus} * nodes) +
                        " " + what + " but the pool holds " + std::to_string(pool));
    }
    if (r.gpus > s.gpu.max_node_slots) {
      return refuse(ErrorCode::kInsufficient, asked + ": no host can attach more than " +
                                                  std::to_string(s.gpu.max_node_slots) + " GPUs");
    }
  }
  if (r.mem_bytes > 0) {
    const std::string asked = "--compose-mem=" + format_size(r.mem_bytes);
    const uint64_t need = r.mem_bytes * nodes;
    if (r.mem_bytes > kMaxMemBytes / nodes || need > s.mem.total_bytes) {
      return refuse(ErrorCode::kInsufficient, asked + on_nodes(nodes) + " needs " +
                                                  format_size(need) + " but the pool holds " +
                                                  format_size(s.mem.total_bytes));
    }
    // What Slurm is charged: whole blocks per node (policies::mem_charge), which must fit the
    // fabric_mem license (the pool's GiB, rounded down) or the job would wait for ever.
    const policies::MemCharge charge = policies::mem_charge(r.mem_bytes, s.mem.largest_bytes);
    if (s.mem.largest_bytes > 0 && charge.gib * nodes > gib_rounded_down(s.mem.total_bytes)) {
      return refuse(ErrorCode::kInsufficient,
                    asked + on_nodes(nodes) + " takes " + std::to_string(charge.blocks * nodes) +
                        " whole memory blocks of " + format_size(s.mem.largest_bytes) + " (" +
                        std::to_string(charge.gib * nodes) + "G) but the pool holds " +
                        format_size(s.mem.total_bytes));
    }
    if (s.mem.largest_bytes > 0 && charge.blocks > s.mem.max_node_slots) {
      return refuse(ErrorCode::kInsufficient,
                    asked + ": needs at least " + std::to_string(charge.blocks) +
                        " memory blocks of at most " + format_size(s.mem.largest_bytes) +
                        " but no host can attach more than " +
                        std::to_string(s.mem.max_node_slots));
    }
  }
  if (r.nvme > 0) {
    const std::string asked = "--compose-nvme=" + std::to_string(r.nvme);
    if (uint64_t{r.nvme} * nodes > s.nvme.total) {
      return refuse(ErrorCode::kInsufficient,
                    asked + on_nodes(nodes) + " needs " + std::to_string(uint64_t{r.nvme} * nodes) +
                        " NVMe drives but the pool holds " + std::to_string(s.nvme.total));
    }
    if (r.nvme > s.nvme.max_node_slots) {
      return refuse(ErrorCode::kInsufficient, asked + ": no host can attach more than " +
                                                  std::to_string(s.nvme.max_node_slots) +
                                                  " NVMe drives");
    }
  }
  return Status::Ok();
}

// The class's placement rule as the snapshot spells it.
policies::PlacementRule placement_rule(const api::WorkloadClass& c) {
  policies::PlacementRule rule;
  rule.kind = policies::parse_placement_kind(c.placement).value_or(rule.kind);
  rule.level = c.placement_level;
  rule.count = c.placement_count;
  rule.type = parse_device_type(c.placement_type);
  return rule;
}

// The class's MemPolicy line as the snapshot carries it (policies::class_mem_policy).
policies::ClassMemPolicy class_mem_line(const api::WorkloadClass& c) {
  policies::ClassMemPolicy line;
  line.class_name = c.name;
  line.line = c.mem_policy_line;
  line.default_policy = parse_mem_policy_text(c.mem_policy_default);
  for (const std::string& k : c.mem_policy_allow) {
    if (std::optional<MemPolicy::Kind> kind = parse_mem_policy_kind(k))
      line.allowed.push_back(*kind);
  }
  return line;
}

// The policy's rules as composerd applies them (policies::classify), for a job without
// --workload.
Expected<policies::Classification> classify(const SubmittedJob& job, const api::PoolSnapshot& s) {
  policies::Policy policy;
  for (const api::WorkloadClass& c : s.workload_classes) {
    policy.classes.push_back(policies::WorkloadClass{
        .name = c.name, .partitions = c.partitions, .qos = c.qos, .accounts = c.accounts});
  }
  policy.default_class = s.default_class;
  return policies::classify(
      policy, {.workload = "", .partition = job.partition, .qos = job.qos, .account = job.account});
}

// A job asking for more than the class's lowest cap runs only while the cap is at least its
// amount; one whose time limit is longer than the longest such stretch never starts (Slurm's
// blocker reservations hold the cap license down in between).
Status check_stretch(const api::WorkloadClass& cls, DeviceType t, uint64_t amount,
                     int64_t time_limit_s) {
  const std::string type(to_string(t));
  const auto min = cls.min.find(type);
  const auto stretches = cls.stretches.find(type);
  if (min == cls.min.end() || stretches == cls.stretches.end() || amount <= min->second) {
    return Status::Ok();
  }
  const api::CapStretch* fits = nullptr;
  for (const api::CapStretch& st : stretches->second) {
    if (st.cap >= amount) {
      fits = &st;
      break;
    }
  }
  if (fits == nullptr || time_limit_s <= fits->seconds) return Status::Ok();
  // What the job could ask for instead: the most the class holds for its whole time limit.
  uint64_t could = min->second;
  for (const api::CapStretch& st : stretches->second) {
    if (st.seconds >= time_limit_s) could = std::max(could, st.cap);
  }
  return refuse(ErrorCode::kInsufficient,
                "workload class " + cls.name + " may hold " + policies::format_amount(t, amount) +
                    " for at most " + policies::format_duration(fits->seconds) +
                    " at a stretch (at other times its cap is as low as " +
                    policies::format_amount(t, min->second) + "), but the job's time limit is " +
                    policies::format_duration(time_limit_s) +
                    ": it could never start; ask for at most " + policies::format_amount(t, could) +
                    " or a time limit of at most " + policies::format_duration(fits->seconds));
}

// Whether the options the SPANK environment refuses are refused for --workload's value: the
// resource options parse without it.
bool workload_refused(const std::vector<std::string>& spank_env) {
  const std::string workload = spank_env_name(kOptWorkload) + "=";
  std::vector<std::string> others;
  for (const std::string& entry : spank_env) {
    if (entry.rfind(workload, 0) != 0) others.push_back(entry);
  }
  return options_from_spank_env(others).ok();
}

// The node count a composed job is priced on, which the glue then pins: every node of the
// job attaches what the options ask, and the licenses are per job, so the count must be known
// now. Slurm's clients send: -N 3 as 3-3, -N 1-4 as 1-4, -w a,b as a minimum of 2 without a
// maximum (Slurm may add nodes), -n 64 --ntasks-per-node=8 as tasks and tasks per node without
// nodes, -n 4 as tasks alone (1 to 4 nodes), nothing as nothing (one node).
Expected<uint32_t> priced_nodes(const SubmittedJob& job) {
  const uint32_t min = job.min_nodes.value_or(1);
  if (job.max_nodes && *job.max_nodes != min) {
    return refuse(ErrorCode::kInvalidArgument,
                  "-N " + std::to_string(min) + "-" + std::to_string(*job.max_nodes) +
                      ": a composed job needs a fixed node count, since what every node attaches "
                      "is priced per job; use -N " +
                      std::to_string(*job.max_nodes) + " (or -N " + std::to_string(min) + ")");
  }
  if (job.max_nodes) return min;  // -N N
  const uint32_t tasks = job.num_tasks.value_or(0);
  if (job.ntasks_per_node && *job.ntasks_per_node > 0) {
    const uint32_t per = *job.ntasks_per_node;
    return std::max(min, (tasks + per - 1) / per);
  }
  if (tasks > min) {
    return refuse(ErrorCode::kInvalidArgument,
                  "-n " + std::to_string(tasks) + " without -N may run on " + std::to_string(min) +
                      " to " + std::to_string(tasks) +
                      " nodes, and what every node attaches is priced per job: give the node "
                      "count with -N (e.g. -N " +
                      std::to_string(min) + " -n " + std::to_string(tasks) +
                      ") or --ntasks-per-node");
  }
  return min;
}

}  // namespace

Expected<SubmitChanges> review_submission(const SubmittedJob& job,
                                          const api::PoolSnapshot* snapshot,
                                          const std::string& snapshot_problem,
                                          bool refuse_without_snapshot, Refusal* refusal) {
  auto refused = [refusal](Refusal kind, Error e) {
    if (refusal != nullptr) *refusal = kind;
    return e;
  };
  Expected<JobOptions> options = options_from_spank_env(job.spank_env);
  if (!options) {
    return refused(workload_refused(job.spank_env) ? Refusal::kBadWorkload : Refusal::kBadRequest,
                   refuse(ErrorCode::kInvalidArgument, options.error().message));
  }
  SubmitChanges out;
  out.options = *options;
  out.licenses = job.licenses;
  out.tres_per_node = job.tres_per_node;
  out.admin_comment = job.admin_comment;

  // Our license names may only be added by us: a hand-made one would take from the pool
  // without attaching anything, or under-count what the job attaches.
  std::vector<std::string> ours;
  for (DeviceType t : kAllDeviceTypes) ours.push_back(policies::pool_license_name(t));
  if (snapshot != nullptr) {
    for (const api::WorkloadClass& c : snapshot->workload_classes) {
      for (const auto& [type, name] : c.cap_licenses) ours.push_back(name);
    }
    for (const auto& [model, n] : snapshot->gpu.models) {
      ours.push_back(policies::model_license_name(model));
    }
    ours.insert(ours.end(), snapshot->model_licenses.begin(), snapshot->model_licenses.end());
    if (!snapshot->license_server.empty()) {
      // Remote licenses: Slurm knows the pool's and the models' as NAME@SERVER.
      const size_t local = ours.size();
      for (size_t i = 0; i < local; ++i) {
        ours.push_back(policies::remote_license_name(ours[i], snapshot->license_server));
      }
    }
  }
  for (const std::string& name : license_names(job.licenses)) {
    if (std::find(ours.begin(), ours.end(), name) != ours.end()) {
      return refused(Refusal::kLicenses,
                     refuse(ErrorCode::kInvalidArgument,
                            "license '" + name +
                                "' is managed by the composer plugin: ask with --compose-gpus, "
                                "--compose-mem or --compose-nvme instead of -L"));
    }
  }
  for (const std::string* tres :
       {&job.tres_per_node, &job.tres_per_job, &job.tres_per_socket, &job.tres_per_task}) {
    for (const std::string& entry : split_tres(*tres)) {
      const std::string name = gres_name(entry);
      if (name == kGpuGres || name == kMemGres || name == kNvmeGres) {
        return refused(Refusal::kGres,
                       refuse(ErrorCode::kInvalidArgument,
                              "GRES '" + name +
                                  "' is managed by the composer plugin: ask with --compose-gpus, "
                                  "--compose-mem or --compose-nvme instead of --gres or "
                                  "--tres-per-*"));
      }
    }
  }
  if (snapshot != nullptr && !job.reservation.empty()) {
    for (const std::string& r : parts(job.reservation, ',')) {
      const auto& b = snapshot->blocker_reservations;
      if (std::find(b.begin(), b.end(), r) != b.end()) {
        return refused(
            Refusal::kReservation,
            refuse(ErrorCode::kInsufficient,
                   "reservation '" + r +
                       "' only keeps pool capacity free during a policy window; no job may "
                       "run in it"));
      }
    }
  }
  if (!options->composes()) {
    // A workload class alone asks for nothing; still refuse one that does not exist.
    if (snapshot != nullptr && !options->workload.empty() && !snapshot->workload_classes.empty() &&
        !snapshot->workload_class(options->workload)) {
      return refused(Refusal::kBadWorkload,
                     refuse(ErrorCode::kInsufficient,
                            "--workload=" + options->workload + ": no such workload class"));
    }
    return out;
  }
  out.composes = true;
  if (job.licenses.find('|') != std::string::npos) {
    return refused(
        Refusal::kLicenses,
        refuse(ErrorCode::kInvalidArgument,
               "composed jobs cannot use alternative licenses ('|' in -L " + job.licenses +
                   "): the pool licenses must be added to every one of them"));
  }

  if (job.het_job_offset) {
    return refused(Refusal::kHetJob,
                   refuse(ErrorCode::kInvalidArgument,
                          "--compose-* in a heterogeneous job (component " +
                              std::to_string(*job.het_job_offset) +
                              "): composed jobs must be homogeneous; submit each component as "
                              "its own job (with --dependency if one must wait for another)"));
  }
  Expected<uint32_t> nodes = priced_nodes(job);
  if (!nodes) return refused(Refusal::kNodeCount, nodes.error());
  out.nodes = *nodes;

  if (snapshot == nullptr) {
    if (refuse_without_snapshot) {
      return refused(Refusal::kNoSnapshot,
                     refuse(ErrorCode::kUnavailable,
                            "cannot check the request against the pool: " + snapshot_problem +
                                " (JobSubmitSnapshotMissing=refuse); try again later"));
    }
  } else {
    if (Status s = check_pool(*options, out.nodes, *snapshot); !s) {
      return refused(Refusal::kPool, s.error());
    }
  }

  const Request& r = options->request;
  // Memory as the pool hands it out: whole blocks per node. Without a snapshot the block size
  // is unknown, and the request itself is counted.
  const policies::MemCharge mem = policies::mem_charge(
      r.mem_bytes, snapshot != nullptr ? snapshot->mem.largest_bytes : uint64_t{0});
  const uint64_t amounts[] = {uint64_t{r.gpus} * out.nodes, mem.gib * out.nodes,
                              uint64_t{r.nvme} * out.nodes};
  const api::WorkloadClass* cls = nullptr;
  if (snapshot != nullptr && !options->workload.empty() && !snapshot->workload_classes.empty()) {
    cls = snapshot->workload_class(options->workload);
    if (cls == nullptr) {
      std::string known;
      for (const api::WorkloadClass& c : snapshot->workload_classes) {
        known += (known.empty() ? "" : ", ") + c.name;
      }
      return refused(
          Refusal::kBadWorkload,
          refuse(ErrorCode::kInsufficient, "--workload=" + options->workload +
                                               ": no such workload class (known: " + known + ")"));
    }
  }
  if (!options->workload.empty()) {
    out.workload = options->workload;
    out.workload_reason = "--workload=" + options->workload;
  } else if (snapshot != nullptr && snapshot->policy_id > 0) {
    // No --workload: the class composerd will count the job against.
    Expected<policies::Classification> chosen = classify(job, *snapshot);
    if (!chosen) {
      return refused(Refusal::kPolicy, refuse(ErrorCode::kInvalidArgument, chosen.error().message));
    }
    out.workload = chosen->class_name;
    out.workload_reason = chosen->reason;
    out.spank_env_add.push_back(spank_env_name(kOptWorkload) + "=" + chosen->class_name);
    cls = snapshot->workload_class(chosen->class_name);
  }
  if (cls != nullptr && !cls->placement.empty()) {
    // A rule the job's request can never meet anywhere in the pool: refused now, not queued.
    const policies::PlacementRule rule = placement_rule(*cls);
    for (DeviceType t : kAllDeviceTypes) {
      const uint64_t n = t == DeviceType::kGpu    ? r.gpus
                         : t == DeviceType::kNvme ? r.nvme
                                                  : (r.mem_bytes > 0 ? 1 : 0);
      const auto& levels = snapshot->pool(t).domains;
      const auto at = levels.find(rule.level);
      const std::string never = policies::placement_never(
          rule, cls->name, t, n, at == levels.end() ? 0 : at->second, snapshot->mem.max_node_slots,
          {"the pool holds", "no node has more than"});
      if (!never.empty()) {
        return refused(Refusal::kPolicy, refuse(ErrorCode::kInvalidArgument, never));
      }
    }
  }
  if (cls != nullptr && cls->mem_policy_line > 0 && options->mem_policy) {
    // A memory policy over the class's cap: refused now, with composerd's sentence, never
    // changed (SubmitTest.AMemoryPolicyOverTheClasssCapIsRefused).
    Expected<MemPolicy> m =
        policies::class_mem_policy({class_mem_line(*cls)}, cls->name, options->mem_policy);
    if (!m) return refused(Refusal::kPolicy, refuse(m.error().code, m.error().message));
  }
  // The pool's and the models' licenses as Slurm names them: NAME, or NAME@SERVER where they
  // are slurmdbd's remote licenses.
  const auto slurm_name = [&](const std::string& name) {
    return snapshot != nullptr && !snapshot->license_server.empty()
               ? policies::remote_license_name(name, snapshot->license_server)
               : name;
  };
  for (size_t i = 0; i < 3; ++i) {
    if (amounts[i] == 0) continue;
    out.licenses =
        append(out.licenses, slurm_name(policies::pool_license_name(kAllDeviceTypes[i])) + ":" +
                                 std::to_string(amounts[i]));
    if (kAllDeviceTypes[i] == DeviceType::kGpu && !r.gpu_model.empty() && snapshot != nullptr) {
      // The model's own license, where Slurm has it: a job for an exhausted model then waits
      // on Licenses while jobs for other models start.
      const std::string model_license = policies::model_license_name(r.gpu_model);
      const auto& have = snapshot->model_licenses;
      if (std::find(have.begin(), have.end(), model_license) != have.end()) {
        out.licenses =
            append(out.licenses, slurm_name(model_license) + ":" + std::to_string(amounts[i]));
      }
    }
    if (cls == nullptr) continue;
    const std::string type(to_string(kAllDeviceTypes[i]));
    if (auto max = cls->max.find(type); max != cls->max.end() && amounts[i] > max->second) {
      const char* unit[] = {" GPUs", " GiB of memory", " NVMe drives"};
      return refused(Refusal::kPolicy,
                     refuse(ErrorCode::kInsufficient,
                            "workload class " + cls->name + " may never hold more than " +
                                std::to_string(max->second) + unit[i] + ", the job asks for " +
                                std::to_string(amounts[i])));
    }
    if (job.time_limit_s) {
      if (Status st = check_stretch(*cls, kAllDeviceTypes[i], amounts[i], *job.time_limit_s); !st)
        return refused(Refusal::kPolicy, st.error());
    }
    if (auto lic = cls->cap_licenses.find(type); lic != cls->cap_licenses.end()) {
      out.licenses = append(out.licenses, lic->second + ":" + std::to_string(amounts[i]));
    }
  }
  if (r.gpus > 0) {
    out.tres_per_node =
        append(out.tres_per_node, job.gres_prefix + kGpuGres + ":" + std::to_string(r.gpus));
  }
  if (mem.blocks > 0) {
    out.tres_per_node =
        append(out.tres_per_node, job.gres_prefix + kMemGres + ":" + std::to_string(mem.blocks));
  }
  if (r.nvme > 0) {
    out.tres_per_node =
        append(out.tres_per_node, job.gres_prefix + kNvmeGres + ":" + std::to_string(r.nvme));
  }
  // Zones in the scheduler: keep the job off nodes whose zones are dry while others are not,
  // so that Slurm does not start it where PrologSlurmctld must refuse it and have it requeued.
  // A job that chose its nodes itself keeps its choice. The comment's avoid= tells composerd
  // the exclusion is its own to change while the job waits.
  if (snapshot != nullptr && job.req_nodes.empty() && job.exc_nodes.empty()) {
    out.exc_nodes = join(api::nodes_out_of_reach(*snapshot, r, out.nodes));
  }
  const std::string comment = to_admin_comment(
      {.request = r, .workload = out.workload, .nodes = out.nodes, .avoid = out.exc_nodes});
  out.admin_comment = job.admin_comment.empty() ? comment : job.admin_comment + "; " + comment;
  return out;
}

}  // namespace composer::slurm
