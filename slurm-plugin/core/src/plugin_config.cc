#include "composer/slurm/plugin_config.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "composer/api/server_list.h"
#include "composer/common/strings.h"
#include "composer/config/conf_file.h"
#include "composer/config/settings.h"

namespace composer::slurm {
namespace {

using config::KeyCase;
using config::Setter;
namespace set = config::set;

Error bad(const std::string& arg, const std::string& rule) {
  return Error{ErrorCode::kInvalidArgument, "plugstack argument '" + arg + "': " + rule};
}

// A setter's sentence ("KEY=VALUE: RULE", conf_file.h) worded as a plugstack argument's.
Error bad(const std::string& arg, const Error& typed) {
  const std::string& m = typed.message;
  return bad(arg, m.rfind(arg + ": ", 0) == 0 ? m.substr(arg.size() + 2) : m);
}

// An absolute path without its trailing '/'; with `may_be_empty`, empty too (none).
Setter<SpankConfig> absolute_path(std::string SpankConfig::*field, bool may_be_empty) {
  return [=](const std::string& key, const std::string& value, SpankConfig& c) -> Status {
    if (!value.empty() || !may_be_empty) {
      if (Status s = config::absolute_path(key, value); !s) return s;
    }
    std::string path = value;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    c.*field = path;
    return Status::Ok();
  };
}

// One of a few words, each naming a value of the field's enum, as written (case matters).
template <class E>
Setter<SpankConfig> one_of(E SpankConfig::*field, std::vector<std::pair<std::string, E>> words,
                           const std::string& rule) {
  return set::one_of<SpankConfig>(field, std::move(words), rule, KeyCase::kSensitive);
}

// A shared library: a file name the dynamic loader looks up (libnvidia-ml.so.1) or an
// absolute path.
Status library(const std::string&, const std::string& value) {
  if (value.empty() || (value.find('/') != std::string::npos && value.front() != '/') ||
      value.find_first_of(" \t") != std::string::npos) {
    return Error{ErrorCode::kInvalidArgument,
                 "expected a library file name (libnvidia-ml.so.1) or an absolute path"};
  }
  return Status::Ok();
}

// composerd's URLs: one, or an active composerd and its standbys separated by commas, each
// http://, https:// or unix:/PATH (its ListenSocket); the clients' own list parser.
Status servers(const std::string&, const std::string& value) {
  if (auto list = api::parse_server_list(value); !list) return list.error();
  return Status::Ok();
}

const config::Settings<SpankConfig>& setters() {
  using S = SpankConfig;
  static const config::Settings<S> table(
      KeyCase::kSensitive,
      {
          {"server", set::text<S>(&S::server, servers)},
          {"controller_server", set::text<S>(&S::controller_server, servers)},
          {"connect_timeout", set::whole<S>(&S::connect_timeout_s, 1, 300)},
          {"timeout", set::whole<S>(&S::timeout_s, 1, 3600)},
          {"retries", set::whole<S>(&S::retries, 0, 20)},
          {"backoff_ms", set::whole<S>(&S::backoff_ms, 0, 60000)},
          {"state_dir", absolute_path(&S::state_dir, false)},
          {"munge_socket", absolute_path(&S::munge_socket, true)},
          {"sysfs_root", absolute_path(&S::sysfs_root, false)},
          {"proc_root", absolute_path(&S::proc_root, false)},
          {"dev_root", absolute_path(&S::dev_root, false)},
          {"host_check", one_of(&S::host_check,
                                {{"wait", HostCheck::kWait},
                                 {"rescan", HostCheck::kRescan},
                                 {"off", HostCheck::kOff}},
                                "expected wait, rescan or off")},
          {"fence",
           one_of(&S::fence,
                  {{"auto", Fence::kAuto}, {"required", Fence::kRequired}, {"off", Fence::kOff}},
                  "expected auto (fence where Slurm made the job a cgroup), "
                  "required (refuse a job's tasks where it did not) or off")},
          {"devices_cgroup", absolute_path(&S::devices_cgroup, false)},
          {"cpuset_cgroup", absolute_path(&S::cpuset_cgroup, false)},
          {"unified_cgroup", absolute_path(&S::unified_cgroup, true)},
          {"host_wait", set::whole<S>(&S::host_wait_s, 0, 3600)},
          {"busy_wait", set::whole<S>(&S::busy_wait_s, 0, 3600)},
          {"free_wait", set::whole<S>(&S::free_wait_s, 0, 3600)},
          {"epilog_wait", set::whole<S>(&S::epilog_wait_s, 0, 86400)},
          {"outage_wait", set::whole<S>(&S::outage_wait_s, 0, 3600)},
          {"compose", one_of(&S::compose_on,
                             {{"node", ComposeOn::kNode}, {"controller", ComposeOn::kController}},
                             "expected node (each node's prolog composes) or controller "
                             "(PrologSlurmctld=composer-slurmctld composes)")},
          {"gpu_health",
           one_of(&S::gpu_health,
                  {{"nvml", GpuHealth::kNvml}, {"bus", GpuHealth::kBus}, {"off", GpuHealth::kOff}},
                  "expected nvml (the bus and NVML), bus (the bus only) or off")},
          {"nvml_library", set::text<S>(&S::nvml_library, library)},
          {"dcgm_job_dir", absolute_path(&S::dcgm_job_dir, true)},
          {"gpu_hook", absolute_path(&S::gpu_hook, true)},
          {"on_unavailable",
           one_of(&S::on_unavailable,
                  {{"drain", OnUnavailable::kDrain}, {"fail_job", OnUnavailable::kFailJob}},
                  "expected drain or fail_job")},
      });
  return table;
}

}  // namespace

Expected<SpankConfig> parse_plugstack_args(const std::vector<std::string>& args) {
  SpankConfig config;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      return bad(arg, "expected key=value (known keys: " + setters().names() + ")");
    }
    const std::string key = arg.substr(0, eq);
    const Setter<SpankConfig>* setter = setters().find(key);
    if (setter == nullptr) {
      return bad(arg, "unknown argument '" + key + "' (known: " + setters().names() + ")");
    }
    if (Status s = (*setter)(key, arg.substr(eq + 1), config); !s) return bad(arg, s.error());
  }
  return config;
}

Expected<SpankConfig> parse_plugstack_file(std::string_view text, const std::string& path) {
  int number = 0;
  for (std::string line : split(text, '\n')) {
    ++number;
    std::replace(line.begin(), line.end(), '\t', ' ');
    std::vector<std::string> words = split(line, ' ', {.trim = true, .skip_empty = true});
    if (words.empty() || words[0].starts_with("#") || words.size() < 2) continue;
    if (!words[1].ends_with("spank_composer.so")) continue;
    Expected<SpankConfig> config =
        parse_plugstack_args(std::vector<std::string>(words.begin() + 2, words.end()));
    if (!config) {
      return Error{config.error().code,
                   path + " line " + std::to_string(number) + ": " + config.error().message};
    }
    return config;
  }
  return Error{ErrorCode::kNotFound, path + ": no spank_composer.so line"};
}

Expected<SpankConfig> read_plugstack(const std::string& installed) {
  const char* from = std::getenv("COMPOSER_PLUGSTACK");
  const std::string path = from != nullptr && *from != '\0' ? from : installed;
  Expected<std::string> text = config::read_file(path);
  if (!text) return text.error();
  return parse_plugstack_file(*text, path);
}

}  // namespace composer::slurm
