#include "composer/slurm/submit_config.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "composer/common/units.h"

namespace composer::slurm {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string composer_conf_path() {
  const char* env = std::getenv("COMPOSER_CONF");
  return env != nullptr && env[0] != '\0' ? env : kDefaultComposerConf;
}

Expected<SubmitConfig> read_submit_config(const std::string& path) {
  SubmitConfig config;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return config;
    return Error{ErrorCode::kUnavailable, "cannot read " + path + ": " + std::strerror(errno)};
  }
  std::string state_dir;
  std::string explicit_path;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    line = trim(line);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    const std::string at = path + ":" + std::to_string(number) + ": ";
    if (eq == std::string::npos) {
      return Error{ErrorCode::kInvalidArgument, at + "expected Key=Value, got '" + line + "'"};
    }
    const std::string key = lower(trim(line.substr(0, eq)));
    const std::string value = trim(line.substr(eq + 1));
    if (key == "statedir") {
      state_dir = value;
    } else if (key == "snapshotfile") {
      explicit_path = value;
    } else if (key == "jobsubmitsnapshotmissing") {
      if (lower(value) == "accept") {
        config.refuse_without_snapshot = false;
      } else if (lower(value) == "refuse") {
        config.refuse_without_snapshot = true;
      } else {
        return Error{ErrorCode::kInvalidArgument,
                     at + "JobSubmitSnapshotMissing=" + value + ": expected accept or refuse"};
      }
    } else if (key == "jobsubmitsnapshotmaxage") {
      Expected<uint32_t> n = parse_count(value, 365 * 24 * 3600);
      if (!n) {
        return Error{ErrorCode::kInvalidArgument, at + "JobSubmitSnapshotMaxAge=" + value +
                                                      ": expected seconds as a whole number "
                                                      "(0 turns the age check off)"};
      }
      config.snapshot_max_age_s = *n;
    }
  }
  for (const std::string* p : {&state_dir, &explicit_path}) {
    if (!p->empty() && (*p)[0] != '/') {
      return Error{ErrorCode::kInvalidArgument,
                   path + ": " + (p == &state_dir ? "StateDir=" : "SnapshotFile=") + *p +
                       ": expected an absolute path"};
    }
  }
  if (!explicit_path.empty()) {
    config.snapshot_path = explicit_path;
  } else if (!state_dir.empty()) {
    config.snapshot_path = state_dir + "/snapshot.json";
  }
  return config;
}

}  // namespace composer::slurm
