// JobContext filled with SPANK calls: the only place the core meets spank_*.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "composer/slurm/job_context.h"

namespace composer::slurm {

// The plugin's option table (spank_composer.cc); used to read option values back.
struct spank_option* find_spank_option(std::string_view name);

class SpankJobContext : public JobContext {
 public:
  explicit SpankJobContext(spank_t sp) : sp_(sp) {}

  Expected<uint32_t> job_id() override;
  Expected<uint32_t> step_id() override;
  Expected<uint32_t> uid() override;
  std::string node() override;
  std::optional<std::string> getenv(const std::string& name) override;
  Status setenv(const std::string& name, const std::string& value) override;
  std::optional<std::string> option(std::string_view name) override;
  void info(const std::string& line) override;
  void error(const std::string& line) override;

 private:
  spank_t sp_;
};

}  // namespace composer::slurm
