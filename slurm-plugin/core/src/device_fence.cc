#include "composer/slurm/device_fence.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::slurm {
namespace fs = std::filesystem;

std::string DeviceNode::rule() const {
  return std::string(1, type) + " " + std::to_string(major) + ":" + std::to_string(minor) + " rwm";
}

std::vector<uint32_t> parse_dev_number(const std::string& text) {
  const std::string_view t = trim(text);
  const size_t colon = t.find(':');
  if (colon == std::string_view::npos) return {};
  const Expected<uint32_t> major = parse_count(t.substr(0, colon), 1u << 12);
  const Expected<uint32_t> minor = parse_count(t.substr(colon + 1), 1u << 20);
  if (!major || !minor) return {};
  return {*major, *minor};
}

bool DeviceFence::available() const {
  std::error_code ec;
  return fs::exists(fs::path(root_) / "devices.deny", ec);
}

std::map<uint32_t, std::vector<std::string>> slurm_job_cgroups(const std::string& hierarchy) {
  std::map<uint32_t, std::vector<std::string>> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(hierarchy, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    const std::string name = it->path().filename().string();
    if (name.rfind("job_", 0) == 0) {
      if (Expected<uint32_t> id = parse_count(std::string_view(name).substr(4), UINT32_MAX); id) {
        out[*id].push_back(it->path().string());
      }
      it.disable_recursion_pending();  // its steps follow their job's rules
    } else if (it.depth() >= 3) {
      it.disable_recursion_pending();
    }
  }
  return out;
}

std::optional<std::set<int>> parse_node_list(const std::string& text) {
  std::set<int> out;
  for (const std::string& part : split(trim(text), ',', {.trim = true, .skip_empty = true})) {
    const size_t dash = part.find('-');
    const Expected<uint32_t> first = parse_count(part.substr(0, dash), 1u << 16);
    const Expected<uint32_t> last =
        dash == std::string::npos ? first : parse_count(part.substr(dash + 1), 1u << 16);
    if (!first || !last || *last < *first) return std::nullopt;
    for (uint32_t n = *first; n <= *last; ++n) out.insert(static_cast<int>(n));
  }
  return out;
}

std::string node_list_text(const std::set<int>& nodes) {
  std::string out;
  for (auto it = nodes.begin(); it != nodes.end();) {
    const int first = *it;
    int last = first;
    while (++it != nodes.end() && *it == last + 1) last = *it;
    out += (out.empty() ? "" : ",") + std::to_string(first);
    if (last != first) out += "-" + std::to_string(last);
  }
  return out;
}

namespace {

// A cgroup's cpuset.mems as it reads; kInternal names the file when it cannot be read.
Expected<std::string> read_mems(const fs::path& file) {
  std::ifstream in(file);
  if (!in) {
    return Error{ErrorCode::kInternal,
                 "cannot read " + file.string() + ": " + std::strerror(errno)};
  }
  std::string text;
  std::getline(in, text, '\0');
  return text;
}

// `mems` written to a cgroup's cpuset.mems, truncated as a shell's `>` does (the kernel takes
// it, and a shorter list leaves no tail in a plain file); kInternal names the value and file.
Status write_mems(const fs::path& file, const std::set<int>& mems) {
  const std::string text = node_list_text(mems) + "\n";
  const int fd = ::open(file.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return Error{ErrorCode::kInternal, "cannot write \"" + node_list_text(mems) + "\" to " +
                                           file.string() + ": " + std::strerror(err)};
  }
  ::close(fd);
  return Status::Ok();
}

// One cgroup's cpuset.mems with `nodes` added; Ok when it already had them, and (`keep_empty`)
// when it has none of its own.
Status add_mems(const fs::path& cgroup, const std::set<int>& nodes, bool keep_empty = false) {
  const fs::path file = cgroup / "cpuset.mems";
  Expected<std::string> had_text = read_mems(file);
  if (!had_text) return had_text.error();
  if (keep_empty && trim(*had_text).empty()) return Status::Ok();
  std::optional<std::set<int>> mems = parse_node_list(*had_text);
  if (!mems) return Error{ErrorCode::kInternal, file.string() + " holds no node list"};
  const size_t had = mems->size();
  mems->insert(nodes.begin(), nodes.end());
  if (mems->size() == had) return Status::Ok();
  return write_mems(file, *mems);
}

// One cgroup's cpuset.mems without `nodes`; Ok when it had none of them, has no node list of
// its own (empty: its parent's) or has gone with its step.
Status remove_mems(const fs::path& cgroup, const std::set<int>& nodes) {
  const fs::path file = cgroup / "cpuset.mems";
  Expected<std::string> text = read_mems(file);
  if (!text || trim(*text).empty()) return Status::Ok();
  std::optional<std::set<int>> mems = parse_node_list(*text);
  if (!mems) return Error{ErrorCode::kInternal, file.string() + " holds no node list"};
  const size_t had = mems->size();
  for (int n : nodes) mems->erase(n);
  if (mems->size() == had) return Status::Ok();
  if (mems->empty()) {
    return Error{ErrorCode::kInternal, file.string() + " holds only NUMA nodes of other jobs (" +
                                           std::string(trim(*text)) + ")"};
  }
  return write_mems(file, *mems);
}

}  // namespace

Status narrow_mems(const std::string& job_cgroup, const std::set<int>& nodes) {
  if (nodes.empty()) return Status::Ok();
  std::vector<fs::path> cgroups{job_cgroup};
  std::error_code ec;
  // Parents come before their children in a recursive walk: backwards, children come first.
  fs::recursive_directory_iterator it(job_cgroup, fs::directory_options::skip_permission_denied,
                                      ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) cgroups.push_back(it->path());
  }
  for (auto c = cgroups.rbegin(); c != cgroups.rend(); ++c) {
    if (Status s = remove_mems(*c, nodes); !s) return s;
  }
  return Status::Ok();
}

Status widen_mems(const std::string& hierarchy, const std::string& job_cgroup,
                  const std::set<int>& nodes) {
  if (nodes.empty()) return Status::Ok();
  const fs::path root(hierarchy);
  const fs::path relative = fs::path(job_cgroup).lexically_relative(root);
  if (relative.empty() || *relative.begin() == "..") {
    return Error{ErrorCode::kInternal, job_cgroup + " is not below " + hierarchy};
  }
  fs::path level = root;
  for (const fs::path& part : relative) {
    level /= part;
    if (Status s = add_mems(level, nodes); !s) return s;
  }
  std::error_code ec;
  for (const auto& step : fs::directory_iterator(job_cgroup, ec)) {
    std::error_code type_ec;
    if (!step.is_directory(type_ec)) continue;
    if (Status s = add_mems(step.path(), nodes); !s) return s;
  }
  return Status::Ok();
}

Status widen_unified_mems(const std::string& job_cgroup, const std::set<int>& nodes) {
  if (nodes.empty()) return Status::Ok();
  std::error_code ec;
  auto widen = [&](const fs::path& cgroup) -> Status {
    std::error_code exists_ec;
    if (!fs::exists(cgroup / "cpuset.mems", exists_ec)) return Status::Ok();  // no cpuset here
    return add_mems(cgroup, nodes, true);
  };
  if (Status s = widen(job_cgroup); !s) return s;
  // Parents come before their children in a recursive walk.
  fs::recursive_directory_iterator it(job_cgroup, fs::directory_options::skip_permission_denied,
                                      ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    if (Status s = widen(it->path()); !s) return s;
  }
  return Status::Ok();
}

Status DeviceFence::deny(const std::string& cgroup, const std::vector<DeviceNode>& nodes) const {
  if (nodes.empty()) return Status::Ok();
  const std::string path = cgroup + "/devices.deny";
  // One write per rule: the kernel reads one rule from each.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::Ok();  // the job ended and its cgroup went
    return Error{ErrorCode::kInternal,
                 "cannot open " + path + " for writing: " + std::strerror(errno)};
  }
  for (const DeviceNode& n : nodes) {
    const std::string rule = n.rule() + "\n";
    if (::write(fd, rule.data(), rule.size()) != static_cast<ssize_t>(rule.size())) {
      const int err = errno;
      ::close(fd);
      if (err == ENODEV || err == ENOENT) return Status::Ok();
      return Error{ErrorCode::kInternal, "cannot write \"" + n.rule() + "\" (" + n.name + ") to " +
                                             path + ": " + std::strerror(err)};
    }
  }
  ::close(fd);
  return Status::Ok();
}

}  // namespace composer::slurm
