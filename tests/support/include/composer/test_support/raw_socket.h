// HTTP over a plain socket, for what the client library hides: connections held open and
// idle, requests written byte by byte or all at once, answers read as they arrive.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <string>
#include <vector>

namespace composer::test_support {

// A blocking TCP connection to 127.0.0.1:port, or -1.
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Writes all of `data`; false when the connection failed or was closed.
inline bool send_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The status and body of each whole answer in `text`, in order (Content-Length framed); an
// answer whose body has not all arrived is left out.
struct Answer {
  int status = 0;
  std::string body;
};
inline std::vector<Answer> answers_in(const std::string& text) {
  std::vector<Answer> out;
  size_t at = 0;
  while (true) {
    const size_t head_end = text.find("\r\n\r\n", at);
    if (head_end == std::string::npos || text.compare(at, 9, "HTTP/1.1 ") != 0) break;
    Answer a;
    a.status = std::stoi(text.substr(at + 9, 3));
    std::string head = text.substr(at, head_end - at);
    for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const size_t cl = head.find("content-length: ");
    const size_t length = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 16));
    if (text.size() < head_end + 4 + length) break;
    a.body = text.substr(head_end + 4, length);
    out.push_back(a);
    at = head_end + 4 + length;
  }
  return out;
}

}  // namespace composer::test_support
