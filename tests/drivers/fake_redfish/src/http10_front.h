// A front that makes the fake Redfish service answer like an HTTP/1.0 server: a TCP listener on
// loopback that reads one request per connection, hands it to the real HTTP server behind it,
// and writes the answer back with an "HTTP/1.0" status line, no keep-alive, and no
// Content-Length on complete answers below 400 (their body ends when the connection closes),
// then closes the connection. Error answers and answers cut short by the server behind keep
// their Content-Length, so a cut answer still reads as cut.
#pragma once

#include <atomic>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "composer/common/error.h"

namespace composer::testing {

class Http10Front {
 public:
  // Listens on 127.0.0.1:port (0: any free port) and forwards to 127.0.0.1:backend_port.
  static Expected<std::unique_ptr<Http10Front>> start(int backend_port, int port);
  // Stops accepting, breaks the connections still open and joins every thread.
  ~Http10Front();
  Http10Front(const Http10Front&) = delete;
  Http10Front& operator=(const Http10Front&) = delete;

  int port() const { return port_; }

 private:
  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  Http10Front(int listen_fd, int port, int backend_port);
  void accept_loop();
  void serve(int client);
  // The answer to one request, read from the server behind; "" if it could not be had.
  std::string forward(const std::string& request);
  bool track(int fd);
  void untrack(int fd);

  const int listen_fd_;
  const int port_;
  const int backend_port_;
  std::thread acceptor_;
  std::mutex mu_;
  bool stopping_ = false;
  std::set<int> open_fds_;             // every socket a connection thread uses, to break on stop
  std::list<Connection> connections_;  // touched by the acceptor and the destructor only
};

}  // namespace composer::testing
