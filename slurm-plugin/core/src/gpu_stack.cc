#include "composer/slurm/gpu_stack.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "composer/common/strings.h"
#include "composer/common/subprocess.h"
#include "composer/slurm/job_state.h"

namespace fs = std::filesystem;

namespace composer::slurm {
namespace {

bool all_digits(const std::string& name) {
  return !name.empty() &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Status write_whole(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.parent_path() / ("." + path.filename().string() + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) {
      return Error{ErrorCode::kInternal, "cannot write " + tmp.string()};
    }
  }
  ::chmod(tmp.c_str(), 0644);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Error{ErrorCode::kInternal, "cannot rename " + tmp.string() + ": " + ec.message()};
  return Status::Ok();
}

}  // namespace

Status write_job_map(const SpankConfig& config, const HostDevices& host, uint32_t leaving) {
  if (config.dcgm_job_dir.empty()) return Status::Ok();
  const fs::path dir = config.dcgm_job_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error{ErrorCode::kInternal, "cannot make " + dir.string() + ": " + ec.message()};

  const std::vector<std::string> gpus = host.nvidia_gpus();
  std::map<std::string, uint32_t> job_of_index;
  for (uint32_t job : other_jobs(config.state_dir, leaving)) {
    Expected<std::optional<JobState>> file = read_job_state(config.state_dir, job);
    if (!file || !file->has_value() || !(*file)->held.empty() || !(*file)->error.empty()) continue;
    for (const Device& d : (*file)->devices) {
      if (d.type != DeviceType::kGpu || d.address.empty()) continue;
      auto it = std::find(gpus.begin(), gpus.end(), d.address);
      if (it != gpus.end()) job_of_index[std::to_string(it - gpus.begin())] = job;
    }
  }
  std::string failed;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!all_digits(name) || job_of_index.contains(name)) continue;
    std::error_code gone;
    if (!fs::remove(entry.path(), gone) && gone) {
      failed += (failed.empty() ? "" : "; ") + ("cannot remove " + entry.path().string());
    }
  }
  for (const auto& [index, job] : job_of_index) {
    if (Status s = write_whole(dir / index, std::to_string(job) + "\n"); !s) {
      failed += (failed.empty() ? "" : "; ") + s.error().message;
    }
  }
  if (!failed.empty()) return Error{ErrorCode::kInternal, "DCGM job map: " + failed};
  return Status::Ok();
}

Status run_gpu_hook(const SpankConfig& config, std::string_view event, uint32_t job_id,
                    const std::vector<Device>& gpus) {
  if (config.gpu_hook.empty()) return Status::Ok();
  RunOptions run;
  run.argv = {config.gpu_hook, std::string(event), std::to_string(job_id)};
  for (const Device& d : gpus) {
    if (d.type == DeviceType::kGpu && !d.address.empty()) run.argv.push_back(d.address);
  }
  if (run.argv.size() == 3) return Status::Ok();
  run.with_stderr = true;
  run.timeout_ms = static_cast<int>(std::chrono::milliseconds(kGpuHookWait).count());
  Expected<std::string> done = run_checked(run);
  if (!done) return done.error();
  return Status::Ok();
}

}  // namespace composer::slurm
