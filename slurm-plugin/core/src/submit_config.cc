#include "composer/slurm/submit_config.h"

#include <set>

#include "composer/common/strings.h"
#include "composer/config/settings.h"

namespace composer::slurm {
namespace {

namespace set = config::set;

Error invalid(const std::string& why) { return Error{ErrorCode::kInvalidArgument, why}; }

// The job_submit plugin's own keys of composer.conf; composerd's reader passes them by.
const config::Settings<SubmitConfig>& settings() {
  using S = SubmitConfig;
  static const config::Settings<S> table(
      config::KeyCase::kInsensitive,
      {
          {"JobSubmitSnapshotMissing", set::one_of<S>(&S::refuse_without_snapshot,
                                                      std::vector<std::pair<std::string, bool>>{
                                                          {"accept", false}, {"refuse", true}},
                                                      "expected accept or refuse")},
          {"JobSubmitSnapshotMaxAge",
           [](const std::string& k, const std::string& value, S& c) -> Status {
             Expected<int64_t> n = config::whole_number(k, value, 0, int64_t{365} * 24 * 3600);
             if (!n) return invalid(n.error().message + " (seconds; 0 turns the age check off)");
             c.snapshot_max_age_s = static_cast<uint32_t>(*n);
             return Status::Ok();
           }},
      });
  return table;
}

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
    const config::Setter<SubmitConfig>* setter = settings().find(key);
    if (setter == nullptr) {
      return invalid("unknown key '" + k +
                     "' (the job_submit plugin's keys: " + settings().names() + ")");
    }
    return (*setter)(k, line.value(), out);
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
