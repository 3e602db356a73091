// spank_composer.so: the SPANK entry points. Each hook only picks the work for its context;
// the work itself is in the Slurm-free core (composer/slurm/spank_core.h). No exception leaves
// this file: every hook catches, logs with slurm_error and returns an error code.
#include <unistd.h>  // environ

#include <exception>
#include <iterator>
#include <string>
#include <vector>

extern "C" {
#include <slurm/spank.h>
}

#include "composer/slurm/client_api.h"
#include "composer/slurm/options.h"
#include "composer/slurm/plugin_config.h"
#include "composer/slurm/spank_core.h"
#include "spank_context.h"

// SPANK_PLUGIN defines const globals, which C++ gives internal linkage: declare them first.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(composer, 1)
}

namespace cs = composer::slurm;

namespace {

// Options as seen before submission (sbatch/srun/salloc): validated in the callback so bad
// syntax is refused before the job reaches slurmctld.
cs::JobOptions g_options;

// srun's environment as it started, before srun exports its own options into it (it does, as
// _SLURM_SPANK_OPTION_composer_*, before init_post_opt): what the job asked for is read here.
std::vector<std::string> g_start_environment;

int option_callback(int val, const char* optarg, int /*remote*/) {
  try {
    const std::string_view name = cs::kAllOptions[val];
    const char* value = optarg == nullptr ? "" : optarg;
    composer::Status s = cs::apply_option(name, value, &g_options);
    if (!s) {
      slurm_error("composer: %s", s.error().message.c_str());
      return -1;
    }
    if (const std::string note = cs::read_as(name, value); !note.empty()) {
      slurm_info("composer: %s", note.c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    slurm_error("composer: option: %s", e.what());
  }
  return -1;
}

struct spank_option g_spank_options[] = {
    {const_cast<char*>("compose-gpus"), const_cast<char*>("[MODEL:]N"),
     const_cast<char*>("Attach N pooled GPUs (of MODEL) to each node of the job."), 1, 0,
     option_callback},
    {const_cast<char*>("compose-mem"), const_cast<char*>("SIZE"),
     const_cast<char*>("Attach SIZE of pooled CXL memory (K/M/G/T) to each node of the job."), 1, 1,
     option_callback},
    {const_cast<char*>("compose-nvme"), const_cast<char*>("N"),
     const_cast<char*>("Attach N pooled NVMe drives to each node of the job."), 1, 2,
     option_callback},
    {const_cast<char*>("workload"), const_cast<char*>("CLASS"),
     const_cast<char*>("Workload class of the job for the pool's policies (e.g. training)."), 1, 3,
     option_callback},
    {const_cast<char*>("compose-mem-policy"), const_cast<char*>("POLICY"),
     const_cast<char*>("Place the job's memory: bind (CXL only), preferred (DRAM first, the "
                       "default), interleave (all nodes) or weighted:D:C (D pages on DRAM to C "
                       "on CXL; Linux 6.9+). Needs --compose-mem."),
     1, 4, option_callback},
};

// option_callback's `val` indexes kAllOptions.
static_assert(sizeof(g_spank_options) / sizeof(g_spank_options[0]) == std::size(cs::kAllOptions));

composer::Expected<cs::SpankConfig> load_config(int ac, char** av) {
  std::vector<std::string> args;
  for (int i = 0; i < ac; ++i) args.emplace_back(av[i] == nullptr ? "" : av[i]);
  composer::Expected<cs::SpankConfig> config = cs::parse_plugstack_args(args);
  if (!config) slurm_error("composer: refusing to load: %s", config.error().message.c_str());
  return config;
}

// Runs `body`, turning exceptions into a logged error and -1.
template <typename F>
int guarded(const char* hook, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    slurm_error("composer: %s: %s", hook, e.what());
  } catch (...) {
    slurm_error("composer: %s: unknown exception", hook);
  }
  return -1;
}

}  // namespace

namespace composer::slurm {
struct spank_option* find_spank_option(std::string_view name) {
  for (struct spank_option& o : g_spank_options) {
    if (name == o.name) return &o;
  }
  return nullptr;
}
}  // namespace composer::slurm

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded(__func__, [&] {
    composer::Expected<cs::SpankConfig> config = load_config(ac, av);
    if (!config) return -1;
    const spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR) return 0;
    if (ctx == S_CTX_LOCAL) {
      for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        g_start_environment.emplace_back(*e);
      }
    }
    for (struct spank_option& o : g_spank_options) {
      if (spank_err_t err = spank_option_register(sp, &o); err != ESPANK_SUCCESS) {
        slurm_error("composer: cannot register --%s: %s", o.name, spank_strerror(err));
        return -1;
      }
    }
    if (ctx != S_CTX_REMOTE) return 0;
    // In slurmstepd, before the step's processes start.
    cs::SpankJobContext job(sp);
    return cs::job_step_started(job, *config) ? 0 : -1;
  });
}

// In slurmstepd, once every process of the step is gone: the batch script's end asks for the
// epilog's busy check.
extern "C" int slurm_spank_exit(spank_t sp, int ac, char** av) {
  return guarded(__func__, [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    composer::Expected<cs::SpankConfig> config = load_config(ac, av);
    if (!config) return -1;
    cs::SpankJobContext job(sp);
    cs::job_step_ended(job, *config);
    return 0;
  });
}

// What no single option shows (a memory policy without memory) is refused before submission;
// srun inside a job: a step that asks for a composition of its own is refused before it starts.
extern "C" int slurm_spank_init_post_opt(spank_t /*sp*/, int /*ac*/, char** /*av*/) {
  return guarded(__func__, [&] {
    const spank_context_t ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
    if (composer::Status s = cs::check_options(g_options); !s) {
      slurm_error("composer: %s", s.error().message.c_str());
      return -1;
    }
    if (ctx != S_CTX_LOCAL) return 0;
    composer::Status s = cs::check_step_options(g_options, g_start_environment);
    if (!s) {
      slurm_error("%s", s.error().message.c_str());
      return -1;
    }
    return 0;
  });
}

extern "C" int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  return guarded(__func__, [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    composer::Expected<cs::SpankConfig> config = load_config(ac, av);
    if (!config) return -1;
    cs::SpankJobContext ctx(sp);
    return cs::task_init(ctx, *config) ? 0 : -1;
  });
}

// Root, in each task before it becomes the job's user: the job fenced from other jobs' devices,
// its cpuset widened to its CXL memory.
extern "C" int slurm_spank_task_init_privileged(spank_t sp, int ac, char** av) {
  return guarded(__func__, [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    composer::Expected<cs::SpankConfig> config = load_config(ac, av);
    if (!config) return -1;
    cs::SpankJobContext ctx(sp);
    return cs::task_init_privileged(ctx, *config) ? 0 : -1;
  });
}

namespace {

// The job prolog and epilog (root, slurmd): one step of the core with a client of composerd.
template <class Step>
int job_script_hook(const char* hook, spank_t sp, int ac, char** av, Step step) {
  return guarded(hook, [&] {
    if (spank_context() != S_CTX_JOB_SCRIPT) return 0;
    composer::Expected<cs::SpankConfig> config = load_config(ac, av);
    if (!config) return -1;
    cs::SpankJobContext ctx(sp);
    cs::ClientComposerApi api(*config);
    return step(ctx, api, *config) ? 0 : -1;
  });
}

}  // namespace

extern "C" int slurm_spank_job_prolog(spank_t sp, int ac, char** av) {
  return job_script_hook(__func__, sp, ac, av, cs::job_prolog);
}

extern "C" int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  return job_script_hook(__func__, sp, ac, av, cs::job_epilog);
}
