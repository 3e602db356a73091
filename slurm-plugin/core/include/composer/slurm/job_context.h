// The two seams of the SPANK plugin's core. The plugin fills JobContext with spank_* calls
// and ComposerApi with composer::client::Client; tests fill both with fakes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::slurm {

// The step id Slurm gives a batch script (slurm.h's SLURM_BATCH_SCRIPT).
constexpr uint32_t kBatchStep = 0xfffffffb;

// What the core needs to know about the job and may do to it.
class JobContext {
 public:
  virtual ~JobContext() = default;

  virtual Expected<uint32_t> job_id() = 0;
  // The step's id (kBatchStep for the batch script); only in a step (remote context).
  virtual Expected<uint32_t> step_id() = 0;
  virtual Expected<uint32_t> uid() = 0;
  // Name of this node as Slurm knows it.
  virtual std::string node() = 0;
  // The job's environment (prolog/epilog: the script environment; tasks: the task's).
  virtual std::optional<std::string> getenv(const std::string& name) = 0;
  virtual Status setenv(const std::string& name, const std::string& value) = 0;
  // Value of one of the plugin's options for this job (kAllOptions), if the job gave it.
  virtual std::optional<std::string> option(std::string_view name) = 0;

  // Every line starts with "composer: ".
  virtual void info(const std::string& line) = 0;
  virtual void error(const std::string& line) = 0;
};

struct ComposeCall {
  JobOwner owner{};
  std::string node;
  Request request;
  // --compose-mem-policy as given; nullopt: composerd gives the class's default.
  std::optional<MemPolicy> mem_policy;
};

// composerd, as the plugin uses it. Both calls are idempotent; the implementation bounds
// each with a timeout and retries transport failures. Errors keep composerd's codes:
// kUnavailable when composerd cannot be reached, kFabric/kTimeout for fabric faults,
// kInsufficient/kConflict/kInvalidArgument for what is wrong with the request.
class ComposerApi {
 public:
  virtual ~ComposerApi() = default;
  virtual Expected<Composition> compose(const ComposeCall& call) = 0;
  // The composition released, with its devices as composerd has them now (a device the
  // fabric lost while the job held it is failed, its drain reason kLostByTheFabric and why);
  // nullopt when there was none.
  virtual Expected<std::optional<Composition>> release(uint32_t job_id,
                                                       const std::string& node) = 0;
  // The job's composition on the node (kNotFound when it has none): with compose=controller.
  virtual Expected<Composition> show(uint32_t job_id, const std::string& node) = 0;
  // compose=controller: the job on all of `nodes` at once (call.node unused), all or nothing;
  // and the release of every composition of the job, answering how many there were.
  virtual Expected<std::vector<Composition>> compose_job(const ComposeCall& call,
                                                         const std::vector<std::string>& nodes) = 0;
  virtual Expected<size_t> release_job(uint32_t job_id) = 0;
  // The node's hold on the job's composition there: set with the reason (its devices are
  // still in use after the job), cleared with "". While held, composerd releases it for no one.
  virtual Status hold(uint32_t job_id, const std::string& node, const std::string& reason) = 0;
  // The host never showed `device_id` of the job's composition: composerd drains it.
  virtual Status drain_unseen(uint32_t job_id, const std::string& node,
                              const std::string& device_id, const std::string& reason) = 0;
  // The host found `device_id` of the job's composition bad (gpu_health.h): composerd marks it
  // failed, out of the pool until an admin resumes it; the node is not drained.
  virtual Status fail_reported(uint32_t job_id, const std::string& node,
                               const std::string& device_id, const std::string& reason) = 0;
};

}  // namespace composer::slurm
