// The job options users give sbatch/srun/salloc, parsed the same way in every place that sees
// them: the SPANK option callback (before submission), job_submit (from the job's SPANK
// environment) and the prolog/epilog.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::slurm {

inline constexpr std::string_view kPluginName = "composer";
// Largest per-node counts accepted: more GPUs or drives than any host could attach is a typo.
inline constexpr uint32_t kMaxGpusPerNode = 64;
inline constexpr uint32_t kMaxNvmePerNode = 64;

// The option names as users type them (without "--").
inline constexpr std::string_view kOptGpus = "compose-gpus";
inline constexpr std::string_view kOptMem = "compose-mem";
inline constexpr std::string_view kOptNvme = "compose-nvme";
inline constexpr std::string_view kOptWorkload = "workload";
inline constexpr std::string_view kOptMemPolicy = "compose-mem-policy";
// In the order the SPANK plugin registers them (its option callback's `val` indexes this).
inline constexpr std::string_view kAllOptions[] = {kOptGpus, kOptMem, kOptNvme, kOptWorkload,
                                                   kOptMemPolicy};

// MemPolicy, to_string(MemPolicy) and kMaxMemWeight are the model's (composer/model/model.h).
// The same words back; the error sentence names the flag, the value and what is allowed.
Expected<MemPolicy> parse_mem_policy(std::string_view value);

// What a job asked for, per node.
struct JobOptions {
  Request request;
  std::string workload;  // empty: not given
  // nullopt: not given (the workload class's default, else preferred, applies).
  std::optional<MemPolicy> mem_policy;

  // The job asked for a composition (a workload class alone asks for nothing).
  bool composes() const { return !request.empty(); }
  bool operator==(const JobOptions&) const = default;
};

// Applies one option to `options`. The error sentence names the flag, the value and the rule:
// "--compose-gpus=two: expected [MODEL:]N with N a whole number from 0 to 64, e.g. A100:2".
Status apply_option(std::string_view name, std::string_view value, JobOptions* options);

// What cannot be told from one option alone: a memory policy needs --compose-mem with a size.
// Checked wherever the options of a job come together (submission, job_submit, the prolog).
Status check_options(const JobOptions& options);

// What an accepted option was read as, when the text leaves room for doubt: a size with a B
// after its unit ("--compose-mem=64GB read as 64G: sizes are binary, as Slurm's --mem reads
// them"); "" otherwise. The SPANK plugin tells the user at submission.
std::string read_as(std::string_view name, std::string_view value);

// How sbatch carries an option to slurmctld in job_desc->spank_job_env:
// "_SLURM_SPANK_OPTION_composer_compose_gpus".
std::string spank_env_name(std::string_view option);

// Parses the composer options out of a job's SPANK environment ("NAME=VALUE" entries; other
// plugins' entries are ignored). Each entry is validated again: SPANK's early check can be
// bypassed by anyone who talks to slurmctld directly.
Expected<JobOptions> options_from_spank_env(const std::vector<std::string>& entries);

// "compose-gpus=A100:2 compose-mem=64G workload=training": for log lines (the memory policy
// only when it is not the default).
std::string describe(const JobOptions& options);

// A job step (srun inside an existing job: SLURM_JOB_ID in its environment) cannot change what
// its job's nodes attach, which was settled when the job started. `step` is what srun's options
// came to; `environment` is srun's as it started ("NAME=VALUE"; srun later adds its own options
// under the names salloc uses), where the job's own options are: in a batch
// job "SLURM_SPANK_" + spank_env_name(option), in salloc's shell spank_env_name(option) itself
// (both seen on Slurm 22.05). Refused, with a sentence, when they differ.
Status check_step_options(const JobOptions& step, const std::vector<std::string>& environment);

}  // namespace composer::slurm
