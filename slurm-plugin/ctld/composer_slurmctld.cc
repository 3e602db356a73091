// composer-slurmctld: Slurm's PrologSlurmctld for compose=controller. slurmctld runs it (as
// SlurmUser, with no arguments) before a job launches; it composes every node of the job with
// one process on the controller's host. It exits non-zero when a node cannot be composed,
// after releasing what it composed: Slurm then requeues a batch job and refuses salloc/srun,
// and no node drains. Its settings are the spank_composer.so line of plugstack.conf
// ($COMPOSER_PLUGSTACK, else the installed plugstack.conf.d/composer.conf). Lines go to
// stderr and to syslog (slurmctld keeps no output of its scripts).
#include <syslog.h>
#include <unistd.h>  // environ

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "../spank/client_api.h"
#include "composer/config/conf_file.h"
#include "composer/slurm/ctld_core.h"
#include "composer/slurm/plugin_config.h"

namespace cs = composer::slurm;

namespace {

void say(int priority, const std::string& line) {
  std::cerr << line << "\n";
  syslog(priority, "%s", line.c_str());
}

int run() {
  const char* context = std::getenv("SLURM_SCRIPT_CONTEXT");
  if (context != nullptr && std::string(context) != "prolog_slurmctld") {
    // As EpilogSlurmctld: each node's epilog releases its node once the host side is clear.
    return 0;
  }
  const char* from = std::getenv("COMPOSER_PLUGSTACK");
  const std::string path = from != nullptr && *from != '\0' ? from : COMPOSER_PLUGSTACK_FILE;
  composer::Expected<std::string> text = composer::config::read_file(path);
  if (!text) {
    say(LOG_ERR, "composer: prolog_slurmctld: " + text.error().message);
    return 1;
  }
  composer::Expected<cs::SpankConfig> config = cs::parse_plugstack_file(*text, path);
  if (!config) {
    say(LOG_ERR, "composer: prolog_slurmctld: " + config.error().message);
    return 1;
  }
  std::vector<std::string> environment;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) environment.emplace_back(*e);
  composer::Expected<cs::ControllerJob> job = cs::controller_job(environment);
  if (!job) {
    say(LOG_ERR, "composer: prolog_slurmctld: " + job.error().message);
    return 1;
  }
  cs::ClientComposerApi api(*config);
  composer::Status s = cs::controller_prolog(*job, api, config->free_wait_s,
                                             [](const std::string& line) { say(LOG_INFO, line); });
  return s ? 0 : 1;
}

}  // namespace

int main() {
  openlog("composer-slurmctld", LOG_PID, LOG_DAEMON);
  try {
    return run();
  } catch (const std::exception& e) {
    say(LOG_ERR, std::string("composer: prolog_slurmctld: ") + e.what());
  } catch (...) {
    say(LOG_ERR, "composer: prolog_slurmctld: unknown exception");
  }
  return 1;
}
