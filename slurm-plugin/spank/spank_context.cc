#include "spank_context.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

extern "C" {
#include <slurm/slurm.h>  // SLURM_BATCH_SCRIPT
}

#include "composer/common/units.h"
#include "composer/slurm/options.h"

namespace composer::slurm {
namespace {

Error spank_failure(const char* what, spank_err_t err) {
  return Error{ErrorCode::kInternal, std::string(what) + ": " + spank_strerror(err)};
}

}  // namespace

static_assert(kBatchStep == SLURM_BATCH_SCRIPT);

Expected<uint32_t> SpankJobContext::step_id() {
  uint32_t id = 0;
  if (spank_err_t err = spank_get_item(sp_, S_JOB_STEPID, &id); err != ESPANK_SUCCESS) {
    return spank_failure("spank_get_item(S_JOB_STEPID)", err);
  }
  return id;
}

Expected<uint32_t> SpankJobContext::job_id() {
  uint32_t id = 0;
  if (spank_err_t err = spank_get_item(sp_, S_JOB_ID, &id); err != ESPANK_SUCCESS) {
    // Some contexts only have the environment.
    if (std::optional<std::string> env = getenv("SLURM_JOB_ID")) {
      Expected<uint32_t> parsed = parse_count(*env, UINT32_MAX);
      if (parsed) return parsed;
    }
    return spank_failure("spank_get_item(S_JOB_ID)", err);
  }
  return id;
}

Expected<uint32_t> SpankJobContext::uid() {
  uid_t uid = 0;
  if (spank_err_t err = spank_get_item(sp_, S_JOB_UID, &uid); err != ESPANK_SUCCESS) {
    if (std::optional<std::string> env = getenv("SLURM_JOB_UID")) {
      Expected<uint32_t> parsed = parse_count(*env, UINT32_MAX);
      if (parsed) return parsed;
    }
    return spank_failure("spank_get_item(S_JOB_UID)", err);
  }
  return static_cast<uint32_t>(uid);
}

std::string SpankJobContext::node() {
  if (std::optional<std::string> env = getenv("SLURMD_NODENAME"); env && !env->empty()) {
    return *env;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  std::string name(host);
  return name.substr(0, name.find('.'));
}

std::optional<std::string> SpankJobContext::getenv(const std::string& name) {
  if (spank_remote(sp_) == 1) {
    std::vector<char> buf(4096);
    spank_err_t err = spank_getenv(sp_, name.c_str(), buf.data(), static_cast<int>(buf.size()));
    if (err == ESPANK_SUCCESS) return std::string(buf.data());
    if (err == ESPANK_ENV_NOEXIST) return std::nullopt;
  }
  // The job prolog and epilog run with the job's variables in their own environment.
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

Status SpankJobContext::setenv(const std::string& name, const std::string& value) {
  if (spank_err_t err = spank_setenv(sp_, name.c_str(), value.c_str(), 1); err != ESPANK_SUCCESS) {
    return spank_failure("spank_setenv", err);
  }
  return Status::Ok();
}

std::optional<std::string> SpankJobContext::option(std::string_view name) {
  if (struct spank_option* opt = find_spank_option(name)) {
    char* value = nullptr;
    if (spank_option_getopt(sp_, opt, &value) == ESPANK_SUCCESS && value != nullptr) {
      return std::string(value);
    }
  }
  // Where the option table is not loaded, slurmd hands the job's options over as variables.
  return getenv("SPANK_" + spank_env_name(name));
}

void SpankJobContext::info(const std::string& line) { slurm_info("%s", line.c_str()); }
void SpankJobContext::error(const std::string& line) { slurm_error("%s", line.c_str()); }

}  // namespace composer::slurm
