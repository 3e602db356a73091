// ComposerApi over composer::client::Client, configured from the plugstack arguments.
#pragma once

#include "composer/client/client.h"
#include "composer/slurm/job_context.h"
#include "composer/slurm/plugin_config.h"

namespace composer::slurm {

client::ClientOptions client_options(const SpankConfig& config);

class ClientComposerApi : public ComposerApi {
 public:
  explicit ClientComposerApi(const SpankConfig& config) : client_(client_options(config)) {}

  Expected<Composition> compose(const ComposeCall& call) override;
  Expected<std::optional<Composition>> release(uint32_t job_id, const std::string& node) override;
  Expected<Composition> show(uint32_t job_id, const std::string& node) override;
  Expected<std::vector<Composition>> compose_job(const ComposeCall& call,
                                                 const std::vector<std::string>& nodes) override;
  Expected<size_t> release_job(uint32_t job_id) override;
  Status hold(uint32_t job_id, const std::string& node, const std::string& reason) override;
  Status drain_unseen(uint32_t job_id, const std::string& node, const std::string& device_id,
                      const std::string& reason) override;
  Status fail_reported(uint32_t job_id, const std::string& node, const std::string& device_id,
                       const std::string& reason) override;

 private:
  client::Client client_;
};

}  // namespace composer::slurm
