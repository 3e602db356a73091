#include "composer/test_support/ports.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace composer::test_support {

namespace {

// A port handed out here stays this process's until it exits: a lock on a file named after it
// in kReservations, which free_port() of other test processes skips. Without it, a test that
// stops its server and starts it again on the same port could meet another test's server
// there, started in between on a port the kernel saw free.
constexpr const char* kReservations = "/tmp/composer-test-ports";

bool reserve(int port) {
  ::mkdir(kReservations, 01777);
  const std::string path = std::string(kReservations) + "/" + std::to_string(port);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return true;  // no reservations possible here: the kernel's word alone
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  // Kept open until the process ends; past kMaxHeld the kernel's word alone, so that a process
  // asking for many ports keeps its descriptors.
  constexpr size_t kMaxHeld = 256;
  static std::mutex mu;
  static std::vector<int> held;
  std::lock_guard lock(mu);
  if (held.size() >= kMaxHeld) {
    ::close(fd);
    return true;
  }
  held.push_back(fd);
  return true;
}

int kernel_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("free_port: socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("free_port: cannot bind 127.0.0.1:0: " + why);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

int free_port() {
  for (int tries = 0;; ++tries) {
    const int port = kernel_port();
    if (reserve(port) || tries >= 20) return port;
  }
}

}  // namespace composer::test_support
