#include "composer/slurm/submit_config.h"

#include <set>

#include "composer/common/strings.h"

namespace composer::slurm {
namespace {

constexpr const char* kOwnKeys = "JobSubmitSnapshotMissing, JobSubmitSnapshotMaxAge";

Error invalid(const std::string& why) { return Error{ErrorCode::kInvalidArgument, why}; }

}  // namespace

std::string composer_conf_path() { return config::path_from_environment(); }

Expected<SubmitConfig> parse_submit_config(std::string_view text, const std::string& path) {
  SubmitConfig out;
  config::StatePaths state;
  std::set<std::string> seen;
  Status read = config::read_lines(text, path, [&](const config::Line& line) -> Status {
    const std::string& key = line.key;
    bool shared = false;
    if (Status s = config::read_shared_key(line, seen, state, shared); !s || shared) return s;
    // composerd's own keys and object lines: its reader checks them.
    if (key.rfind("jobsubmit", 0) != 0) return Status::Ok();
    if (Status s = config::single_setting(line, seen); !s) return s;
    const std::string& k = line.written_key();
    const std::string& value = line.value();
    if (key == "jobsubmitsnapshotmissing") {
      const std::string v = lower(value);
      if (v != "accept" && v != "refuse")
        return invalid(k + "=" + value + ": expected accept or refuse");
      out.refuse_without_snapshot = v == "refuse";
    } else if (key == "jobsubmitsnapshotmaxage") {
      Expected<int64_t> n = config::whole_number(k, value, 0, int64_t{365} * 24 * 3600);
      if (!n) return invalid(n.error().message + " (seconds; 0 turns the age check off)");
      out.snapshot_max_age_s = static_cast<uint32_t>(*n);
    } else {
      return invalid("unknown key '" + k + "' (the job_submit plugin's keys: " + kOwnKeys + ")");
    }
    return Status::Ok();
  });
  if (!read) return read.error();
  out.snapshot_path = state.snapshot();
  return out;
}

Expected<SubmitConfig> read_submit_config(const std::string& path) {
  Expected<std::string> text = config::read_file(path);
  if (!text) {
    if (text.error().code == ErrorCode::kNotFound) return SubmitConfig{};
    return text.error();
  }
  return parse_submit_config(*text, path);
}

}  // namespace composer::slurm
