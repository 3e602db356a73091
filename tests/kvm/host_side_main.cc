// composer_kvm_host_side: the SPANK plugin's node hooks (spank_core.h: job_prolog, task_init,
// job_epilog) run on this host as slurmd would run them, for the kvm level's guests, where no
// slurmd runs them.
//   composer_kvm_host_side prolog|task|epilog JOB UID [--option NAME=VALUE]... [--run COMMAND]
//                          [--own-policy] -- PLUGSTACK-ARGS...
// The plugstack arguments are those of the spank_composer.so line (plugin_config.h); each
// --option is one of the job's --compose-* options (kAllOptions) as the user gave it. The node
// is $SLURMD_NODENAME, else the host's short name; the job's environment is this program's.
// The task hook prints each variable it exports as NAME=VALUE on stdout; with --run, COMMAND
// (sh -c) then replaces this process, as the job's task does, with the environment the hook
// set and the memory policy it asked for in COMPOSER_KVM_TASK_POLICY (see run()); with
// --own-policy (task only) the hook's set_mempolicy(2) call is made as slurmd's task makes it,
// and COMMAND inherits the policy itself. Every hook
// prints its timing on stderr in the guest's boot-time clock (/proc/uptime), so that a test can put
// it beside the kernel's: "timing: prolog start=12.345 compose_done=13.456 end=15.678"
// (compose_done: when composerd answered the compose). Exits 0 when the hook succeeded, 1 with
// its line when it failed, 2 on a bad argument.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "composer/common/files.h"
#include "composer/slurm/client_api.h"
#include "composer/slurm/job_context.h"
#include "composer/slurm/mem_policy.h"
#include "composer/slurm/options.h"
#include "composer/slurm/plugin_config.h"
#include "composer/slurm/spank_core.h"

namespace cs = composer::slurm;

namespace {

double uptime() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

class HostContext : public cs::JobContext {
 public:
  HostContext(uint32_t job, uint32_t uid, std::map<std::string, std::string> options)
      : job_(job), uid_(uid), options_(std::move(options)) {}
  composer::Expected<uint32_t> job_id() override { return job_; }
  // The hooks run here are the job's, never a step's.
  composer::Expected<uint32_t> step_id() override {
    return composer::Error{composer::ErrorCode::kNotFound, "the host side runs outside any step"};
  }
  composer::Expected<uint32_t> uid() override { return uid_; }
  std::string node() override {
    if (const char* name = std::getenv("SLURMD_NODENAME"); name != nullptr && *name != '\0') {
      return name;
    }
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string name = host;
    return name.substr(0, name.find('.'));
  }
  std::optional<std::string> getenv(const std::string& name) override {
    const char* value = std::getenv(name.c_str());
    return value == nullptr ? std::nullopt : std::optional<std::string>(value);
  }
  composer::Status setenv(const std::string& name, const std::string& value) override {
    std::cout << name << "=" << value << "\n";
    ::setenv(name.c_str(), value.c_str(), 1);
    return composer::Status::Ok();
  }
  std::optional<std::string> option(std::string_view name) override {
    auto it = options_.find(std::string(name));
    return it == options_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void info(const std::string& line) override { composer::write_line(STDERR_FILENO, line); }
  void error(const std::string& line) override { composer::write_line(STDERR_FILENO, line); }

 private:
  uint32_t job_;
  uint32_t uid_;
  std::map<std::string, std::string> options_;
};

// The real client, with the time composerd took to answer the compose noted.
class TimedApi : public cs::ClientComposerApi {
 public:
  using cs::ClientComposerApi::ClientComposerApi;
  composer::Expected<composer::Composition> compose(const cs::ComposeCall& call) override {
    auto out = cs::ClientComposerApi::compose(call);
    compose_done = uptime();
    return out;
  }
  double compose_done = 0;
};

bool whole(const char* text, uint32_t* out) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (end == text || *end != '\0' || v > 0xffffffffUL) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

int usage(const std::string& why) {
  std::cerr << "composer_kvm_host_side: " << why
            << "\nusage: composer_kvm_host_side prolog|task|epilog JOB UID "
               "[--option NAME=VALUE]... -- PLUGSTACK-ARGS...\n";
  return 2;
}

int run(int argc, char** argv) {
  if (argc < 5) return usage("too few arguments");
  const std::string hook = argv[1];
  if (hook != "prolog" && hook != "task" && hook != "epilog") {
    return usage("unknown hook '" + hook + "': allowed are prolog, task and epilog");
  }
  uint32_t job = 0;
  uint32_t uid = 0;
  if (!whole(argv[2], &job) || job == 0) {
    return usage(std::string("JOB '") + argv[2] + "': expected a job id from 1 to 4294967295");
  }
  if (!whole(argv[3], &uid)) {
    return usage(std::string("UID '") + argv[3] + "': expected a uid from 0 to 4294967295");
  }
  std::map<std::string, std::string> options;
  std::string run_command;
  bool own_policy = false;
  int i = 4;
  while (i < argc && std::string(argv[i]) != "--") {
    const std::string a = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--own-policy" && hook == "task") {
      own_policy = true;
      ++i;
      continue;
    }
    if (a == "--run" && hook == "task" && !value.empty()) {
      run_command = value;
      i += 2;
      continue;
    }
    const size_t eq = value.find('=');
    if (a != "--option" || eq == std::string::npos) {
      return usage(
          "unknown or incomplete argument '" + a +
          "': allowed are --option NAME=VALUE, --run COMMAND and --own-policy (task only) and "
          "-- before the plugstack arguments");
    }
    bool known = false;
    for (std::string_view name : cs::kAllOptions) known = known || name == value.substr(0, eq);
    if (!known) {
      std::string names;
      for (std::string_view name : cs::kAllOptions) {
        names += (names.empty() ? "" : ", ") + std::string(name);
      }
      return usage("unknown job option '" + value.substr(0, eq) + "': allowed are " + names);
    }
    options[value.substr(0, eq)] = value.substr(eq + 1);
    i += 2;
  }
  if (i >= argc) return usage("no -- before the plugstack arguments");
  const std::vector<std::string> args(argv + i + 1, argv + argc);
  composer::Expected<cs::SpankConfig> config = cs::parse_plugstack_args(args);
  if (!config) return usage(config.error().message);

  // The memory policy the task hook sets is not set on this process but kept, printed
  // ("mempolicy: MODE:MASK", the numbers of set_mempolicy(2)) and given to --run's COMMAND as
  // COMPOSER_KVM_TASK_POLICY, which composer_kvm_touch applies to its buffer with mbind(2).
  // Under QEMU 7.2's TCG the CXL window is emulated I/O memory: data there works, but code run
  // from it and page tables walked in it do not, and a task's own policy places those too (the
  // task died of SIGSEGV at once). With --own-policy the call is made (memory that is RAM to
  // QEMU, such as an NVDIMM's) and COMMAND runs under it, as a job's task does.
  std::string task_policy;
  cs::MempolicyCall real;
  real = cs::replace_mempolicy_call([&](cs::MempolicyMode mode, const std::set<int>& nodes) {
    unsigned long mask = 0;
    for (int n : nodes) mask |= 1UL << n;
    task_policy = std::to_string(static_cast<int>(mode)) + ":" + std::to_string(mask);
    return own_policy ? real(mode, nodes) : 0;
  });
  HostContext ctx(job, uid, options);
  TimedApi api(*config);
  const double start = uptime();
  composer::Status s = composer::Status::Ok();
  if (hook == "prolog") {
    s = cs::job_prolog(ctx, api, *config);
  } else if (hook == "task") {
    s = cs::task_init(ctx, *config);
  } else {
    s = cs::job_epilog(ctx, api, *config);
  }
  const double end = uptime();
  char timing[160];
  std::snprintf(timing, sizeof timing, "timing: %s start=%.3f compose_done=%.3f end=%.3f",
                hook.c_str(), start, api.compose_done, end);
  composer::write_line(STDERR_FILENO, timing);
  if (!s) {
    composer::write_line(STDERR_FILENO,
                         "composer_kvm_host_side: " + hook + ": " + s.error().message);
    return 1;
  }
  if (!task_policy.empty()) composer::write_line(STDERR_FILENO, "mempolicy: " + task_policy);
  if (!run_command.empty()) {
    if (!task_policy.empty() && !own_policy) {
      ::setenv("COMPOSER_KVM_TASK_POLICY", task_policy.c_str(), 1);
    }
    std::cout.flush();
    ::execl("/bin/sh", "sh", "-c", run_command.c_str(), static_cast<char*>(nullptr));
    composer::write_line(STDERR_FILENO, "composer_kvm_host_side: cannot run /bin/sh: " +
                                            std::string(std::strerror(errno)));
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "composer_kvm_host_side: " << e.what() << "\n";
  }
  return 1;
}
