// composer-node-check: checks the health of the node's composed GPUs (the bus and NVML; each
// bad one is reported to composerd, which marks it failed: spank_core.h,
// check_gpu_health_on_node), and releases the held compositions of a node once nothing uses
// their devices. An epilog that finds a job's devices still in use after busy_wait leaves them
// attached and tells composerd to hold them; the next prolog or epilog on the node releases
// them once they are free. On a node that runs no further job, this program does: slurmd's
// HealthCheckProgram, or a line in the site's node health script. Root, no arguments; its
// settings are the spank_composer.so line of plugstack.conf ($COMPOSER_PLUGSTACK, else the
// installed plugstack.conf.d/composer.conf). Lines go to stderr and to syslog. Exits 0, also
// when compositions stay held (their holders logged) or GPUs were reported bad (a GPU is no
// reason to take the node out): slurmd runs its HealthCheckProgram before
// it registers (Slurm's documentation of some releases: again until it exits 0), and a device
// still in use is no reason to keep the node from its controller. Exits 1 only when it cannot read
// its settings (the plugin, which reads the same line, cannot load either). It never drains the
// node itself.
#include <syslog.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "composer/common/files.h"
#include "composer/slurm/client_api.h"
#include "composer/slurm/job_context.h"
#include "composer/slurm/plugin_config.h"
#include "composer/slurm/spank_core.h"

namespace cs = composer::slurm;

namespace {

// Whole lines (composer::write_line), as composer-slurmctld's.
void say(int priority, const std::string& line) {
  composer::write_line(STDERR_FILENO, line);
  syslog(priority, "%s", line.c_str());
}

// Outside any job: the node's name ($SLURMD_NODENAME, which slurmd sets for the programs it
// runs, else the host's short name) and the log.
class NodeContext : public cs::JobContext {
 public:
  composer::Expected<uint32_t> job_id() override { return no_job(); }
  composer::Expected<uint32_t> step_id() override { return no_job(); }
  composer::Expected<uint32_t> uid() override { return no_job(); }
  std::string node() override {
    if (const char* name = std::getenv("SLURMD_NODENAME"); name != nullptr && *name != '\0') {
      return name;
    }
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::string name = host;
    return name.substr(0, name.find('.'));
  }
  std::optional<std::string> getenv(const std::string& name) override {
    const char* value = std::getenv(name.c_str());
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  }
  composer::Status setenv(const std::string&, const std::string&) override { return no_job(); }
  std::optional<std::string> option(std::string_view) override { return std::nullopt; }
  void info(const std::string& line) override { say(LOG_INFO, line); }
  void error(const std::string& line) override { say(LOG_ERR, line); }

 private:
  static composer::Error no_job() {
    return composer::Error{composer::ErrorCode::kNotFound, "the node check runs outside any job"};
  }
};

int run() {
  composer::Expected<cs::SpankConfig> config = cs::read_plugstack(COMPOSER_PLUGSTACK_FILE);
  if (!config) {
    say(LOG_ERR, "composer: node check: " + config.error().message);
    return 1;
  }
  NodeContext ctx;
  cs::ClientComposerApi api(*config);
  // Health first: a bad GPU of a held composition is reported before it is released.
  const size_t bad = cs::check_gpu_health_on_node(ctx, api, *config);
  if (bad > 0) {
    say(LOG_WARNING, "composer: node check: node " + ctx.node() + ": " + std::to_string(bad) +
                         " GPU(s) reported failed to composerd; the node stays in service");
  }
  const size_t held = cs::release_held_on_node(ctx, api, *config);
  if (held > 0) {
    say(LOG_INFO, "composer: node check: node " + ctx.node() + ": " + std::to_string(held) +
                      " composition(s) stay held");
  }
  return 0;
}

}  // namespace

int main() {
  openlog("composer-node-check", LOG_PID, LOG_DAEMON);
  try {
    return run();
  } catch (const std::exception& e) {
    say(LOG_ERR, std::string("composer-node-check: ") + e.what());
  } catch (...) {
    say(LOG_ERR, "composer-node-check: unknown exception");
  }
  return 1;
}
