#include "composer/slurm/job_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <json/reader.h>
#include <json/value.h>
#include <json/writer.h>

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
  Json::Value devices(Json::arrayValue);
  for (const Device& d : state.devices) {
    Json::Value jd(Json::objectValue);
    jd["id"] = d.id;
    jd["type"] = std::string(to_string(d.type));
    jd["model"] = d.model;
    jd["address"] = d.address;
    jd["capacity_bytes"] = Json::UInt64(d.capacity_bytes);
    devices.append(jd);
  }
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
  Json::Value v;
  std::string errs;
  if (!Json::parseFromStream(Json::CharReaderBuilder(), in, &v, &errs) || !v.isObject()) {
    return Error{ErrorCode::kInternal, "state file " + path + " is not valid JSON: " + errs};
  }
  auto text = [](const Json::Value& j, const char* key) {
    return j[key].isString() ? j[key].asString() : std::string();
  };
  JobState s;
  s.job_id = v["job_id"].isUInt() ? v["job_id"].asUInt() : 0;
  if (s.job_id != job_id) {
    return Error{ErrorCode::kInternal, "state file " + path + " belongs to job " +
                                           std::to_string(s.job_id) + ", not " +
                                           std::to_string(job_id)};
  }
  s.node = text(v, "node");
  s.composition_id = v["composition_id"].isInt64() ? v["composition_id"].asInt64() : 0;
  s.cuda_visible_devices = text(v, "cuda_visible_devices");
  s.error = text(v, "error");
  for (const Json::Value& jd : v["devices"]) {
    Device d;
    d.id = text(jd, "id");
    std::optional<DeviceType> type = parse_device_type(text(jd, "type"));
    if (d.id.empty() || !type) {
      return Error{ErrorCode::kInternal,
                   "state file " + path + " holds a device without id or type"};
    }
    d.type = *type;
    d.model = text(jd, "model");
    d.address = text(jd, "address");
    d.capacity_bytes = jd["capacity_bytes"].isUInt64() ? jd["capacity_bytes"].asUInt64() : 0;
    s.devices.push_back(std::move(d));
  }
  return std::optional<JobState>(std::move(s));
}

Status remove_job_state(const std::string& state_dir, uint32_t job_id) {
  const std::string path = state_path(state_dir, job_id);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return io_error("cannot remove", path);
  return Status::Ok();
}

std::vector<std::pair<std::string, std::string>> task_environment(const JobState& state) {
  std::vector<std::string> gpus;
  std::vector<std::string> nvme;
  std::vector<std::string> numa;
  uint64_t mem_bytes = 0;
  size_t mem_devices = 0;
  for (const Device& d : state.devices) {
    switch (d.type) {
      case DeviceType::kGpu:
        gpus.push_back(d.id);
        break;
      case DeviceType::kNvme:
        nvme.push_back(d.id);
        break;
      case DeviceType::kMem: {
        ++mem_devices;
        mem_bytes += d.capacity_bytes;
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
  // NUMA nodes when every memory block has one; else the attached size (e.g. "64G").
  const bool all_numa =
      mem_devices > 0 && numa.size() > 0 &&
      std::all_of(state.devices.begin(), state.devices.end(), [](const Device& d) {
        return d.type != DeviceType::kMem || !numa_node(d.address).empty();
      });
  env.emplace_back("COMPOSER_MEM_NUMA",
                   all_numa ? join(numa) : (mem_bytes > 0 ? format_size(mem_bytes) : ""));
  env.emplace_back("COMPOSER_NVME", join(nvme));
  return env;
}

}  // namespace composer::slurm
