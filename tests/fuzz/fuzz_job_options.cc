// What users and admins hand the Slurm plugins: --compose-* option values (one "name=value"
// per line, as sbatch passes them; the same lines as job_submit reads them from the job's
// SPANK environment), and the plugstack.conf and job_submit config files.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/strings.h"
#include "composer/slurm/options.h"
#include "composer/slurm/plugin_config.h"
#include "composer/slurm/submit_config.h"

namespace slurm = composer::slurm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> lines = composer::split(text, '\n');
  slurm::JobOptions options;
  std::vector<std::string> env;
  for (const std::string& line : lines) {
    const size_t eq = line.find('=');
    const std::string name = line.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : line.substr(eq + 1);
    (void)slurm::apply_option(name, value, &options);
    env.push_back(slurm::spank_env_name(name) + "=" + value);
  }
  (void)slurm::check_options(options);
  (void)slurm::describe(options);
  (void)slurm::options_from_spank_env(env);
  (void)slurm::check_step_options(options, env);
  (void)slurm::parse_plugstack_args(lines);
  (void)slurm::parse_plugstack_file(text, "plugstack.conf");
  (void)slurm::parse_submit_config(text, "job_submit.conf");
  return 0;
}
