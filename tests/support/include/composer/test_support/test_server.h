// A real HTTP server on 127.0.0.1 (any free port) for one test, stopped when destroyed.
#pragma once

#include <httplib.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace composer::testing {

class TestServer {
 public:
  TestServer() {
    server.set_keep_alive_timeout(1);  // stop() waits for idle keep-alive connections
    port_ = server.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("cannot bind a test server on 127.0.0.1");
    thread_ = std::thread([this] { server.listen_after_bind(); });
    for (int i = 0; i < 500 && !server.is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  ~TestServer() {
    server.stop();
    thread_.join();
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  httplib::Server server;

 private:
  int port_ = 0;
  std::thread thread_;
};

}  // namespace composer::testing
