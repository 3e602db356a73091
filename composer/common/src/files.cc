#include "composer/common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace composer {

void write_line(int fd, std::string_view line) {
  std::string text;
  text.reserve(line.size() + 1);
  text.append(line).push_back('\n');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

Status write_file_atomically(const std::string& path, std::string_view text, mode_t mode,
                             Durability durability) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& what, const std::string& file) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status(Error{ErrorCode::kUnavailable, what + " " + file + ": " + std::strerror(err)});
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return fail("cannot create", tmp);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = fail("cannot write", tmp);
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  // The umask may have narrowed the mode.
  if (::fchmod(fd, mode) != 0) {
    Status s = fail("cannot set the mode of", tmp);
    ::close(fd);
    return s;
  }
  if (durability == Durability::kPowerLoss && ::fsync(fd) != 0) {
    Status s = fail("cannot sync", tmp);
    ::close(fd);
    return s;
  }
  if (::close(fd) != 0) return fail("cannot close", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename into", path);
  return Status::Ok();
}

}  // namespace composer
