#include "composer/slurm/device_fence.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

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

std::map<uint32_t, std::vector<std::string>> DeviceFence::job_cgroups() const {
  std::map<uint32_t, std::vector<std::string>> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root_, fs::directory_options::skip_permission_denied, ec);
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
