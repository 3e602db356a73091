// composer-slurmctld: Slurm's PrologSlurmctld and EpilogSlurmctld for compose=controller.
// slurmctld runs it (as SlurmUser, with no arguments) before a job launches: it composes all
// of the job's nodes with one call to composerd, and exits non-zero when that fails (Slurm
// then requeues a batch job and refuses salloc/srun; no node drains). At the job's end it
// releases the nodes that ran no epilog (each node's epilog releases its own).
// Its settings are the spank_composer.so line of plugstack.conf ($COMPOSER_PLUGSTACK, else
// the installed plugstack.conf.d/composer.conf). Lines go to stderr and to syslog (slurmctld
// keeps no output of its scripts).
#include <syslog.h>
#include <unistd.h>  // environ

#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "composer/common/files.h"
#include "composer/common/slurm_text.h"
#include "composer/common/strings.h"
#include "composer/common/subprocess.h"
#include "composer/slurm/client_api.h"
#include "composer/slurm/ctld_core.h"
#include "composer/slurm/plugin_config.h"

namespace cs = composer::slurm;

namespace {

constexpr int kSlurmTimeoutMs = 30000;

// What a Slurm command printed, or why it could not answer.
composer::Expected<std::string> slurm_answer(const std::vector<std::string>& argv) {
  return composer::run_checked(
      {.argv = argv, .env = {}, .with_stderr = true, .timeout_ms = kSlurmTimeoutMs});
}

// Asks squeue and sinfo (EpilogSlurmctld runs while slurmctld answers them), hidden
// partitions included.
cs::SlurmProbe slurm_probe(uint32_t job_id) {
  cs::SlurmProbe probe;
  probe.completing = [job_id]() -> composer::Expected<std::vector<std::string>> {
    composer::Expected<std::string> out = slurm_answer(
        {"squeue", "--all", "-h", "-t", "all", "-j", std::to_string(job_id), "-o", "%A|%N"});
    if (!out) return out.error();
    return cs::completing_nodes(*out, job_id);
  };
  probe.drained =
      [](const std::vector<std::string>& nodes) -> composer::Expected<std::vector<std::string>> {
    composer::Expected<std::string> out = slurm_answer(
        {"sinfo", "--all", "-h", "-N", "-n", composer::join(nodes, ","), "-o", "%N|%T"});
    if (!out) return out.error();
    return composer::drained_nodes(*out);
  };
  return probe;
}

// Whole lines: slurmctld runs this program for many jobs at once into one log
// (check_whole_lines.sh).
void say(int priority, const std::string& line) {
  composer::write_line(STDERR_FILENO, line);
  syslog(priority, "%s", line.c_str());
}

int run() {
  const char* context = std::getenv("SLURM_SCRIPT_CONTEXT");
  const bool epilog = context != nullptr && std::string(context) == "epilog_slurmctld";
  const std::string at = epilog ? "composer: epilog_slurmctld: " : "composer: prolog_slurmctld: ";
  composer::Expected<cs::SpankConfig> config = cs::read_plugstack(COMPOSER_PLUGSTACK_FILE);
  if (!config) {
    say(LOG_ERR, at + config.error().message);
    return 1;
  }
  std::vector<std::string> environment;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) environment.emplace_back(*e);
  composer::Expected<cs::ControllerJob> job = cs::controller_job(environment);
  if (!job) {
    say(LOG_ERR, at + job.error().message);
    return 1;
  }
  if (!config->controller_server.empty()) config->server = config->controller_server;
  cs::ClientComposerApi api(*config);
  auto log = [](const std::string& line) { say(LOG_INFO, line); };
  if (epilog) {
    // Never fails the epilog: what an ended job still holds, the reconciler releases.
    (void)cs::controller_epilog(*job, api, slurm_probe(job->owner.job_id), log);
    return 0;
  }
  return cs::controller_prolog(*job, api, config->free_wait_s, config->outage_wait_s, log) ? 0 : 1;
}

}  // namespace

int main() {
  openlog("composer-slurmctld", LOG_PID, LOG_DAEMON);
  try {
    return run();
  } catch (const std::exception& e) {
    say(LOG_ERR, std::string("composer-slurmctld: ") + e.what());
  } catch (...) {
    say(LOG_ERR, "composer-slurmctld: unknown exception");
  }
  return 1;
}
