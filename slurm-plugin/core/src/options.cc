#include "composer/slurm/options.h"

#include <numeric>
#include <optional>

#include "composer/common/names.h"
#include "composer/common/units.h"

namespace composer::slurm {
namespace {

std::string flag(std::string_view name, std::string_view value) {
  return "--" + std::string(name) + "=" + std::string(value);
}

constexpr size_t kMaxName = 64;  // GPU models and workload classes

Status parse_gpus(std::string_view value, JobOptions* o) {
  const std::string rule = ": expected [MODEL:]N with N a whole number from 0 to " +
                           std::to_string(kMaxGpusPerNode) +
                           " and MODEL made of letters, digits, '-', '_' or '.', e.g. A100:2";
  std::string_view model;
  std::string_view count = value;
  if (const size_t colon = value.rfind(':'); colon != std::string_view::npos) {
    model = value.substr(0, colon);
    count = value.substr(colon + 1);
    if (!valid_name(model, kMaxName))
      return Error{ErrorCode::kInvalidArgument, flag(kOptGpus, value) + rule};
  }
  Expected<uint32_t> n = parse_count(count, kMaxGpusPerNode);
  if (!n) return Error{ErrorCode::kInvalidArgument, flag(kOptGpus, value) + rule};
  if (*n == 0 && !model.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 flag(kOptGpus, value) + ": a GPU model needs a count of at least 1"};
  }
  o->request.gpus = *n;
  o->request.gpu_model = std::string(model);
  return Status::Ok();
}

Status parse_mem(std::string_view value, JobOptions* o) {
  // Zero asks for no memory, as --compose-gpus=0 for no GPU (and Slurm's --gres=gpu:0).
  Expected<uint64_t> bytes = parse_size(value, ZeroSize::kNone);
  if (!bytes) {
    return Error{ErrorCode::kInvalidArgument, flag(kOptMem, value) + ": " + bytes.error().message};
  }
  o->request.mem_bytes = *bytes;
  return Status::Ok();
}

Status parse_nvme(std::string_view value, JobOptions* o) {
  Expected<uint32_t> n = parse_count(value, kMaxNvmePerNode);
  if (!n) {
    return Error{ErrorCode::kInvalidArgument, flag(kOptNvme, value) +
                                                  ": expected a whole number of drives from 0 to " +
                                                  std::to_string(kMaxNvmePerNode)};
  }
  o->request.nvme = *n;
  return Status::Ok();
}

Status parse_workload(std::string_view value, JobOptions* o) {
  if (!valid_name(value, kMaxName)) {
    return Error{ErrorCode::kInvalidArgument,
                 flag(kOptWorkload, value) +
                     ": expected a class name of 1 to 64 letters, digits, '-', '_' or '.', "
                     "e.g. training"};
  }
  o->workload = std::string(value);
  return Status::Ok();
}

}  // namespace

Expected<MemPolicy> parse_mem_policy(std::string_view value) {
  if (std::optional<MemPolicy> p = parse_mem_policy_text(value)) return *p;
  return Error{ErrorCode::kInvalidArgument,
               flag(kOptMemPolicy, value) + ": expected " + std::string(kMemPolicyForms)};
}

Status apply_option(std::string_view name, std::string_view value, JobOptions* options) {
  if (name == kOptGpus) return parse_gpus(value, options);
  if (name == kOptMem) return parse_mem(value, options);
  if (name == kOptNvme) return parse_nvme(value, options);
  if (name == kOptWorkload) return parse_workload(value, options);
  if (name == kOptMemPolicy) {
    Expected<MemPolicy> p = parse_mem_policy(value);
    if (!p) return p.error();
    options->mem_policy = *p;
    return Status::Ok();
  }
  return Error{ErrorCode::kInvalidArgument, "--" + std::string(name) +
                                                " is not an option of the composer plugin "
                                                "(known: --compose-gpus, --compose-mem, "
                                                "--compose-mem-policy, --compose-nvme, "
                                                "--workload)"};
}

Status check_options(const JobOptions& options) {
  if (options.mem_policy && *options.mem_policy != MemPolicy{} && options.request.mem_bytes == 0) {
    return Error{ErrorCode::kInvalidArgument,
                 flag(kOptMemPolicy, to_string(*options.mem_policy)) +
                     ": a memory policy places the job's composed CXL memory; give " +
                     "--compose-mem=SIZE with it"};
  }
  return Status::Ok();
}

std::string read_as(std::string_view name, std::string_view value) {
  if (name != kOptMem || value.empty() || (value.back() != 'B' && value.back() != 'b')) return "";
  Expected<uint64_t> bytes = parse_size(value, ZeroSize::kNone);
  if (!bytes || *bytes == 0) return "";
  return flag(kOptMem, value) + " read as " + format_size(*bytes) +
         ": sizes are binary, as Slurm's --mem reads them (1G is 1024M)";
}

std::string spank_env_name(std::string_view option) {
  std::string name = "_SLURM_SPANK_OPTION_" + std::string(kPluginName) + "_";
  for (char c : option) name += c == '-' ? '_' : c;
  return name;
}

Expected<JobOptions> options_from_spank_env(const std::vector<std::string>& entries) {
  JobOptions options;
  for (std::string_view option : kAllOptions) {
    const std::string prefix = spank_env_name(option) + "=";
    for (const std::string& entry : entries) {
      if (entry.compare(0, prefix.size(), prefix) != 0) continue;
      if (Status s = apply_option(option, std::string_view(entry).substr(prefix.size()), &options);
          !s) {
        return s.error();
      }
    }
  }
  if (Status s = check_options(options); !s) return s.error();
  return options;
}

std::string describe(const JobOptions& o) {
  std::string out;
  auto add = [&out](std::string_view name, const std::string& value) {
    if (!out.empty()) out += ' ';
    out += std::string(name) + "=" + value;
  };
  if (o.request.gpus > 0) {
    add(kOptGpus, (o.request.gpu_model.empty() ? "" : o.request.gpu_model + ":") +
                      std::to_string(o.request.gpus));
  }
  if (o.request.mem_bytes > 0) add(kOptMem, format_size(o.request.mem_bytes));
  if (o.request.nvme > 0) add(kOptNvme, std::to_string(o.request.nvme));
  if (!o.workload.empty()) add(kOptWorkload, o.workload);
  if (o.mem_policy) add(kOptMemPolicy, to_string(*o.mem_policy));
  return out.empty() ? "nothing" : out;
}

Status check_step_options(const JobOptions& step, const std::vector<std::string>& environment) {
  constexpr std::string_view kJobId = "SLURM_JOB_ID=";
  constexpr std::string_view kExported = "SLURM_SPANK_";
  const std::string salloc_name = spank_env_name("");
  std::string job_id;
  std::vector<std::string> job_env;
  for (const std::string& entry : environment) {
    if (entry.starts_with(kJobId)) job_id = entry.substr(kJobId.size());
    if (entry.starts_with(kExported)) job_env.push_back(entry.substr(kExported.size()));
    if (entry.starts_with(salloc_name)) job_env.push_back(entry);
  }
  // srun asks for a job of its own, or the step asks for nothing of its own.
  if (job_id.empty() || step == JobOptions{}) return {};
  Expected<JobOptions> job = options_from_spank_env(job_env);
  if (job && *job == step) return {};
  // describe()'s words as the flags a user types: "--compose-gpus=2 --workload=training".
  auto flags = [](const JobOptions& o) {
    std::string out = describe(o);
    if (out == "nothing") return out;
    out.insert(0, "--");
    for (size_t at = out.find(' '); at != std::string::npos; at = out.find(' ', at + 3)) {
      out.insert(at + 1, "--");
    }
    return out;
  };
  return Error{ErrorCode::kInvalidArgument,
               "composer: " + flags(step) + " on a step of job " + job_id +
                   ": a job step cannot change what its job's nodes attach (the job asked for " +
                   (job ? flags(*job) : std::string("what cannot be read back")) +
                   "); give --compose-* and --workload to sbatch or salloc"};
}

}  // namespace composer::slurm
