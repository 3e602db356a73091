#include "composer/slurm/job_state.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <json/value.h>
#include <json/writer.h>

#include "composer/api/codec.h"
#include "composer/api/json_reader.h"
#include "composer/common/files.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/slurm/host_devices.h"

namespace composer::slurm {
namespace {

Error io_error(const std::string& what, const std::string& path) {
  return Error{ErrorCode::kInternal, what + " " + path + ": " + std::strerror(errno)};
}

Status mkdirs(const std::string& dir) {
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || (dir[i] == '/' && i > 0)) {
      path = dir.substr(0, i);
      if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        return io_error("cannot create state directory", path);
      }
    }
  }
  return Status::Ok();
}

// A device as files written before the state file held the API's form of it: id, type, model,
// address and capacity_bytes only (a job that ran across an upgrade of the plugin). The rest
// is what a device of the job's composition is.
Json::Value upgraded_device(const Json::Value& d, const JobState& s) {
  if (!d.isObject() || d.isMember("state")) return d;
  Json::Value full = d;
  for (const char* key : {"zone", "drain_reason"}) full[key] = "";
  full["health"] = "ok";
  full["state"] = "attached";
  full["drained"] = false;
  full["composition_id"] = Json::Int64(s.composition_id);
  full["node"] = s.node;
  return full;
}

}  // namespace

std::string state_path(const std::string& state_dir, uint32_t job_id) {
  return state_dir + "/job-" + std::to_string(job_id) + ".json";
}

Status write_job_state(const std::string& state_dir, const JobState& state) {
  if (Status s = mkdirs(state_dir); !s) return s;
  Json::Value v(Json::objectValue);
  v["job_id"] = state.job_id;
  v["node"] = state.node;
  v["composition_id"] = Json::Int64(state.composition_id);
  v["cuda_visible_devices"] = state.cuda_visible_devices;
  v["error"] = state.error;
  if (!state.held.empty()) v["held"] = state.held;
  if (!state.mem_policy.empty()) v["mem_policy"] = state.mem_policy;
  if (!state.weights_before.empty()) {
    Json::Value before(Json::objectValue);
    for (const auto& [file, text] : state.weights_before) before[file] = text;
    v["weights_before"] = before;
  }
  if (state.nvme_paths) {
    Json::Value paths(Json::arrayValue);
    for (const std::string& p : *state.nvme_paths) paths.append(p);
    v["nvme_paths"] = paths;
  }
  Json::Value devices(Json::arrayValue);
  for (const Device& d : state.devices) devices.append(api::to_json(d));
  v["devices"] = devices;
  const std::string text = Json::writeString(Json::StreamWriterBuilder(), v) + "\n";
  const std::string path = state_path(state_dir, state.job_id);
  return write_file_atomically(path, text, 0644);
}

Expected<std::optional<JobState>> read_job_state(const std::string& state_dir, uint32_t job_id) {
  const std::string path = state_path(state_dir, job_id);
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return std::optional<JobState>();
    return io_error("cannot open", path);
  }
  std::ostringstream text;
  text << in.rdbuf();
  const std::string context = "state file " + path;
  Expected<Json::Value> json = api::parse_json(text.str());
  if (!json) return Error{ErrorCode::kInternal, context + ": " + json.error().message};
  Expected<JobState> state = api::read_json(
      [&] {
        api::JsonObject r(*json, "", "a job state",
                          {"job_id", "node", "composition_id", "cuda_visible_devices", "error",
                           "devices", "nvme_paths", "held", "mem_policy", "weights_before"});
        JobState s;
        s.job_id = r.u32("job_id");
        s.node = r.string("node");
        s.composition_id = r.id("composition_id");
        s.cuda_visible_devices = r.string("cuda_visible_devices");
        s.error = r.string("error");
        // Optional: files of the earlier version have none.
        if (r.has("nvme_paths")) s.nvme_paths = r.strings("nvme_paths");
        if (r.has("held")) s.held = r.string("held");
        if (r.has("mem_policy")) s.mem_policy = r.string("mem_policy");
        if (const Json::Value* w = r.optional("weights_before")) {
          const api::JsonObject before =
              api::JsonObject::map(*w, r.path("weights_before"), "a map of files to weights");
          for (const std::string& file : before.names()) {
            s.weights_before[file] = before.string(file);
          }
        }
        s.devices = r.array("devices", [&](const Json::Value& d, const std::string& at) {
          return api::as_device(upgraded_device(d, s), at);
        });
        return s;
      },
      context);
  if (!state) return Error{ErrorCode::kInternal, state.error().message};
  if (state->job_id != job_id) {
    return Error{ErrorCode::kInternal, context + " belongs to job " +
                                           std::to_string(state->job_id) + ", not " +
                                           std::to_string(job_id)};
  }
  return std::optional<JobState>(std::move(*state));
}

Status remove_job_state(const std::string& state_dir, uint32_t job_id) {
  const std::string path = state_path(state_dir, job_id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error("cannot remove", path);
  return Status::Ok();
}

std::vector<uint32_t> other_jobs(const std::string& state_dir, uint32_t job_id) {
  std::vector<uint32_t> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(state_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("job-") || !name.ends_with(".json")) continue;
    const Expected<uint32_t> other = parse_count(name.substr(4, name.size() - 9), UINT32_MAX);
    if (other && *other != job_id) out.push_back(*other);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Device> devices_of_other_jobs(const std::string& state_dir, uint32_t job_id) {
  std::vector<Device> out;
  for (uint32_t other : other_jobs(state_dir, job_id)) {
    Expected<std::optional<JobState>> s = read_job_state(state_dir, other);
    if (!s || !s->has_value()) continue;
    out.insert(out.end(), (*s)->devices.begin(), (*s)->devices.end());
  }
  return out;
}

std::set<std::string> addresses_of_other_jobs(const std::string& state_dir, uint32_t job_id) {
  std::set<std::string> out;
  for (const Device& d : devices_of_other_jobs(state_dir, job_id)) {
    if (!d.address.empty() && d.type != DeviceType::kMem) out.insert(d.address);
  }
  return out;
}

Expected<HostLock> HostLock::take(const std::string& state_dir, std::chrono::milliseconds wait,
                                  std::string_view name, bool shared) {
  if (Status s = mkdirs(state_dir); !s) return s.error();
  const std::string path = state_dir + "/" + std::string(name);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("cannot open", path);
  HostLock lock(fd);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (::flock(fd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) return io_error("cannot lock", path);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error{ErrorCode::kTimeout, "another prolog on this node held " + path +
                                            " for more than " +
                                            std::to_string(wait.count() / 1000) + " s"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return lock;
}

HostLock::~HostLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::pair<std::string, std::string>> task_environment(const JobState& state) {
  std::vector<std::string> gpus;
  std::vector<std::string> nvme;
  std::vector<std::string> numa;
  bool memory = false;
  for (const Device& d : state.devices) {
    switch (d.type) {
      case DeviceType::kGpu:
        gpus.push_back(d.id);
        break;
      case DeviceType::kNvme:
        nvme.push_back(d.id);
        break;
      case DeviceType::kMem: {
        memory = true;
        const std::string n = numa_node(d.address);
        if (!n.empty() && std::find(numa.begin(), numa.end(), n) == numa.end()) numa.push_back(n);
        break;
      }
    }
  }
  std::vector<std::pair<std::string, std::string>> env;
  if (!gpus.empty()) {
    env.emplace_back("CUDA_VISIBLE_DEVICES", state.cuda_visible_devices);
    env.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  }
  env.emplace_back("COMPOSER_GPUS", join(gpus));
  env.emplace_back("COMPOSER_MEM_NUMA", join(numa));
  env.emplace_back("COMPOSER_NVME", state.nvme_paths ? join(*state.nvme_paths) : join(nvme));
  if (memory) {
    env.emplace_back("COMPOSER_MEM_POLICY",
                     state.mem_policy.empty() ? std::string("preferred") : state.mem_policy);
  }
  return env;
}

}  // namespace composer::slurm
