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

namespace composer::slurm {
namespace {

using Setter =
    std::function<Status(const std::string& arg, const std::string& value, SpankConfig* c)>;

Error bad(const std::string& arg, const std::string& rule) {
  return Error{ErrorCode::kInvalidArgument, "plugstack argument '" + arg + "': " + rule};
}

// composer.conf's typed values (composer/config), their sentences ("KEY=VALUE: RULE") worded
// as a plugstack argument's.
Error bad(const std::string& arg, const Error& typed) {
  const std::string& m = typed.message;
  return bad(arg, m.rfind(arg + ": ", 0) == 0 ? m.substr(arg.size() + 2) : m);
}

Setter number(uint32_t SpankConfig::*field, uint32_t min, uint32_t max) {
  return [=](const std::string& arg, const std::string& value, SpankConfig* c) -> Status {
    const std::string key = arg.substr(0, arg.find('='));
    Expected<int64_t> n = config::whole_number(key, value, min, max);
    if (!n) return bad(arg, n.error());
    c->*field = static_cast<uint32_t>(*n);
    return Status::Ok();
  };
}

Setter absolute_path(std::string SpankConfig::*field, bool may_be_empty) {
  return [=](const std::string& arg, const std::string& value, SpankConfig* c) -> Status {
    const std::string key = arg.substr(0, arg.find('='));
    if (!value.empty() || !may_be_empty) {
      if (Status s = config::absolute_path(key, value); !s) return bad(arg, s.error());
    }
    std::string path = value;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    c->*field = path;
    return Status::Ok();
  };
}

// One of a few words, each naming a value of the field's enum; `rule` is the sentence for any
// other word ("expected drain or fail_job").
template <class E>
Setter one_of(E SpankConfig::*field, const std::vector<std::pair<std::string, E>>& words,
              const std::string& rule) {
  return [=](const std::string& arg, const std::string& value, SpankConfig* c) -> Status {
    for (const auto& [word, e] : words) {
      if (value == word) {
        c->*field = e;
        return Status::Ok();
      }
    }
    return bad(arg, rule);
  };
}

// A shared library: a file name the dynamic loader looks up (libnvidia-ml.so.1) or an
// absolute path.
Setter library(std::string SpankConfig::*field) {
  return [field](const std::string& arg, const std::string& value, SpankConfig* c) -> Status {
    if (value.empty() || (value.find('/') != std::string::npos && value.front() != '/') ||
        value.find_first_of(" \t") != std::string::npos) {
      return bad(arg, "expected a library file name (libnvidia-ml.so.1) or an absolute path");
    }
    c->*field = value;
    return Status::Ok();
  };
}

// composerd's URLs: one, or an active composerd and its standbys separated by commas, each
// http://, https:// or unix:/PATH (its ListenSocket); the clients' own list parser.
Setter servers(std::string SpankConfig::*field) {
  return [field](const std::string& arg, const std::string& value, SpankConfig* c) -> Status {
    if (auto list = api::parse_server_list(value); !list) return bad(arg, list.error().message);
    c->*field = value;
    return Status::Ok();
  };
}

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"server", servers(&SpankConfig::server)},
      {"controller_server", servers(&SpankConfig::controller_server)},
      {"connect_timeout", number(&SpankConfig::connect_timeout_s, 1, 300)},
      {"timeout", number(&SpankConfig::timeout_s, 1, 3600)},
      {"retries", number(&SpankConfig::retries, 0, 20)},
      {"backoff_ms", number(&SpankConfig::backoff_ms, 0, 60000)},
      {"state_dir", absolute_path(&SpankConfig::state_dir, false)},
      {"munge_socket", absolute_path(&SpankConfig::munge_socket, true)},
      {"sysfs_root", absolute_path(&SpankConfig::sysfs_root, false)},
      {"proc_root", absolute_path(&SpankConfig::proc_root, false)},
      {"dev_root", absolute_path(&SpankConfig::dev_root, false)},
      {"host_check",
       one_of(
           &SpankConfig::host_check,
           {{"wait", HostCheck::kWait}, {"rescan", HostCheck::kRescan}, {"off", HostCheck::kOff}},
           "expected wait, rescan or off")},
      {"fence",
       one_of(&SpankConfig::fence,
              {{"auto", Fence::kAuto}, {"required", Fence::kRequired}, {"off", Fence::kOff}},
              "expected auto (fence where Slurm made the job a cgroup), "
              "required (refuse a job's tasks where it did not) or off")},
      {"devices_cgroup", absolute_path(&SpankConfig::devices_cgroup, false)},
      {"cpuset_cgroup", absolute_path(&SpankConfig::cpuset_cgroup, false)},
      {"unified_cgroup", absolute_path(&SpankConfig::unified_cgroup, true)},
      {"host_wait", number(&SpankConfig::host_wait_s, 0, 3600)},
      {"busy_wait", number(&SpankConfig::busy_wait_s, 0, 3600)},
      {"free_wait", number(&SpankConfig::free_wait_s, 0, 3600)},
      {"epilog_wait", number(&SpankConfig::epilog_wait_s, 0, 86400)},
      {"outage_wait", number(&SpankConfig::outage_wait_s, 0, 3600)},
      {"compose", one_of(&SpankConfig::compose_on,
                         {{"node", ComposeOn::kNode}, {"controller", ComposeOn::kController}},
                         "expected node (each node's prolog composes) or controller "
                         "(PrologSlurmctld=composer-slurmctld composes)")},
      {"gpu_health",
       one_of(&SpankConfig::gpu_health,
              {{"nvml", GpuHealth::kNvml}, {"bus", GpuHealth::kBus}, {"off", GpuHealth::kOff}},
              "expected nvml (the bus and NVML), bus (the bus only) or off")},
      {"nvml_library", library(&SpankConfig::nvml_library)},
      {"dcgm_job_dir", absolute_path(&SpankConfig::dcgm_job_dir, true)},
      {"gpu_hook", absolute_path(&SpankConfig::gpu_hook, true)},
      {"on_unavailable",
       one_of(&SpankConfig::on_unavailable,
              {{"drain", OnUnavailable::kDrain}, {"fail_job", OnUnavailable::kFailJob}},
              "expected drain or fail_job")},
  };
  return table;
}

std::string known_names() {
  std::string out;
  for (const auto& [name, setter] : setters()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

Expected<SpankConfig> parse_plugstack_args(const std::vector<std::string>& args) {
  SpankConfig config;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      return bad(arg, "expected key=value (known keys: " + known_names() + ")");
    }
    const std::string key = arg.substr(0, eq);
    auto it = setters().find(key);
    if (it == setters().end()) {
      return bad(arg, "unknown argument '" + key + "' (known: " + known_names() + ")");
    }
    if (Status s = it->second(arg, arg.substr(eq + 1), &config); !s) return s.error();
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
