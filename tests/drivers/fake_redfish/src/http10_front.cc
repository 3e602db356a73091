#include "http10_front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

namespace composer::testing {
namespace {

// Bounds: a request head, a request body, an answer, and how long one read may wait.
constexpr size_t kMaxHead = 64 * 1024;
constexpr size_t kMaxBody = 4 * 1024 * 1024;
constexpr size_t kMaxAnswer = 64 * 1024 * 1024;
constexpr int kClientWaitMs = 10000;
constexpr int kBackendWaitMs = 60000;  // the fake's delay faults hold an answer back a while

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Reads what is there within wait_ms; false on EOF, error or timeout.
bool read_some(int fd, std::string* into, int wait_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, wait_ms) <= 0) return false;
  char buf[16384];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0) return false;
  into->append(buf, static_cast<size_t>(n));
  return true;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

struct Head {
  std::string first_line;
  std::vector<std::pair<std::string, std::string>> fields;  // name in lower case, value trimmed

  const std::string* find(std::string_view name) const {
    for (const auto& [n, v] : fields) {
      if (n == name) return &v;
    }
    return nullptr;
  }
};

Head parse_head(std::string_view head) {
  Head h;
  size_t pos = head.find("\r\n");
  h.first_line = std::string(head.substr(0, pos));
  while (pos != std::string_view::npos && pos + 2 < head.size()) {
    const size_t start = pos + 2;
    pos = head.find("\r\n", start);
    const std::string_view line =
        head.substr(start, pos == std::string_view::npos ? pos : pos - start);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    h.fields.emplace_back(lower(line.substr(0, colon)), std::string(value));
  }
  return h;
}

// Content-Length as a number; nullopt when absent or not a number.
std::optional<size_t> content_length(const Head& h) {
  const std::string* v = h.find("content-length");
  if (v == nullptr || v->empty() ||
      !std::all_of(v->begin(), v->end(), [](unsigned char c) { return std::isdigit(c); })) {
    return std::nullopt;
  }
  return static_cast<size_t>(std::stoull(*v));
}

std::string bad_gateway(const std::string& why) {
  return "HTTP/1.0 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: " +
         std::to_string(why.size()) + "\r\n\r\n" + why;
}

}  // namespace

Expected<std::unique_ptr<Http10Front>> Http10Front::start(int backend_port, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return Error{ErrorCode::kUnavailable,
                 std::string("fake redfish: HTTP/1.0 front: socket: ") + std::strerror(errno)};
  }
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Error{ErrorCode::kUnavailable,
                 "fake redfish: cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + why};
  }
  auto front =
      std::unique_ptr<Http10Front>(new Http10Front(fd, ntohs(addr.sin_port), backend_port));
  Http10Front* p = front.get();
  p->acceptor_ = std::thread([p] { p->accept_loop(); });
  return front;
}

Http10Front::Http10Front(int listen_fd, int port, int backend_port)
    : listen_fd_(listen_fd), port_(port), backend_port_(backend_port) {}

Http10Front::~Http10Front() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    // Wakes every connection thread blocked in a read or a write.
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  if (acceptor_.joinable()) acceptor_.join();
  for (Connection& c : connections_) {
    if (c.thread.joinable()) c.thread.join();
  }
  ::close(listen_fd_);
}

bool Http10Front::track(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  open_fds_.insert(fd);
  return true;
}

void Http10Front::untrack(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  open_fds_.erase(fd);
}

void Http10Front::accept_loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    // Threads of connections that ended are joined here, so they never pile up.
    connections_.remove_if([](Connection& c) {
      if (!c.done) return false;
      c.thread.join();
      return true;
    });
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    if (!track(client)) {
      ::close(client);
      return;
    }
    Connection& c = connections_.emplace_back();
    c.thread = std::thread([this, client, &c] {
      serve(client);
      untrack(client);
      ::close(client);
      c.done = true;
    });
  }
}

void Http10Front::serve(int client) {
  // One request: its head, then as many body bytes as its Content-Length says.
  std::string in;
  size_t head_end = std::string::npos;
  while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
    if (in.size() > kMaxHead || !read_some(client, &in, kClientWaitMs)) return;
  }
  const Head request = parse_head(std::string_view(in).substr(0, head_end));
  if (request.find("transfer-encoding") != nullptr) {
    (void)write_all(client, bad_gateway("this HTTP/1.0 service takes no chunked request bodies"));
    return;
  }
  const size_t body_length = content_length(request).value_or(0);
  if (body_length > kMaxBody) {
    (void)write_all(client, bad_gateway("the request body is larger than this service takes"));
    return;
  }
  while (in.size() < head_end + 4 + body_length) {
    if (!read_some(client, &in, kClientWaitMs)) return;
  }
  // The same request to the server behind, on a connection of its own that it closes after
  // answering: no keep-alive, no 100-continue (the body is here already).
  std::string forwarded = request.first_line + "\r\n";
  for (const auto& [name, value] : request.fields) {
    if (name == "connection" || name == "keep-alive" || name == "expect" ||
        name == "proxy-connection") {
      continue;
    }
    forwarded += name + ": " + value + "\r\n";
  }
  forwarded += "Connection: close\r\n\r\n";
  forwarded.append(in, head_end + 4, body_length);

  const std::string answer = forward(forwarded);
  const size_t answer_head_end = answer.find("\r\n\r\n");
  if (answer_head_end == std::string::npos) {
    // The server behind broke the connection before its head was out: so does the front.
    return;
  }
  const Head head = parse_head(std::string_view(answer).substr(0, answer_head_end));
  const std::string_view body = std::string_view(answer).substr(answer_head_end + 4);
  if (head.find("transfer-encoding") != nullptr) {
    (void)write_all(client, bad_gateway("the server behind answered chunked, which HTTP/1.0 "
                                        "cannot carry"));
    return;
  }
  // "HTTP/1.1 200 OK" -> "HTTP/1.0 200 OK".
  const size_t space = head.first_line.find(' ');
  const std::string status_text =
      space == std::string::npos ? " 502 Bad Gateway" : head.first_line.substr(space);
  const int status = std::atoi(status_text.c_str());
  const std::optional<size_t> length = content_length(head);
  const bool cut = length && body.size() < *length;
  const bool drop_length = !cut && status < 400 && !body.empty();
  std::string out = "HTTP/1.0" + status_text + "\r\n";
  for (const auto& [name, value] : head.fields) {
    if (name == "connection" || name == "keep-alive") continue;
    if (name == "content-length" && drop_length) continue;
    out += name + ": " + value + "\r\n";
  }
  out += "\r\n";
  out += body;
  if (!write_all(client, out)) return;
  // The answer ends here: say so, then let the client read it before the socket goes.
  ::shutdown(client, SHUT_WR);
  std::string rest;
  for (size_t drained = 0; drained < kMaxHead && read_some(client, &rest, 1000);) {
    drained += rest.size();
    rest.clear();
  }
}

std::string Http10Front::forward(const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  if (!track(fd)) {
    ::close(fd);
    return "";
  }
  std::string answer;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(backend_port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      write_all(fd, request)) {
    while (answer.size() <= kMaxAnswer && read_some(fd, &answer, kBackendWaitMs)) {
    }
  }
  untrack(fd);
  ::close(fd);
  return answer;
}

}  // namespace composer::testing
