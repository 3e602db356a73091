// A fabric manager for the driver fuzz targets: an HTTP server on loopback that answers each
// path with the body the fuzz input gives it. The input is records separated by lines "%%";
// a record's first line is the path (without a query), the rest its body, answered with 200
// to every method; a path without a record answers 404. So the fuzzer shapes a whole service
// tree, and the driver's readers see exactly what a real service could send.
#pragma once

// Without it every answer waits out the client's delayed ACK (40 ms on loopback).
#define CPPHTTPLIB_TCP_NODELAY true
#include <httplib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "composer/common/log.h"
#include "composer/drivers/fabric_manager.h"

namespace composer::fuzz {

// A driver's options pointed at `server`: basic authentication, short timeouts, no retries,
// so a fuzz input that stalls the driver costs milliseconds, not seconds.
inline void point_at(const std::string& url, drivers::FabricManagerOptions& o) {
  o.base_url = url;
  o.username = "fuzz";
  o.password = "fuzz";
  o.connect_timeout_ms = 500;
  o.request_timeout_ms = 1000;
  o.get_retries = 0;
}

// What a driver fuzz target runs on a driver create() gave: every reader of the service's
// answers. Errors are the driver's word on a bad answer, never a crash.
template <typename Created>
void read_everything(Created& created) {
  if (!created) return;
  (void)(*created)->inventory();
  (void)(*created)->health();
}

class AnswerServer {
 public:
  AnswerServer() {
    // COMPOSER_FUZZ_PATHS=FILE: every path asked is appended there (seed_from_mockup.py keeps
    // only the records a driver reads).
    if (const char* log = std::getenv("COMPOSER_FUZZ_PATHS")) paths_.open(log, std::ios::app);
    const auto answer = [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      if (paths_.is_open()) paths_ << req.path << '\n' << std::flush;
      auto it = answers_.find(req.path);
      if (it == answers_.end()) {
        res.status = 404;
        res.set_content("{}", "application/json");
        return;
      }
      res.status = 200;
      res.set_content(it->second, "application/json");
    };
    // One request per connection: the drivers open one per request, and a kept-alive one
    // would hold a server thread until its timeout.
    server_.set_keep_alive_max_count(1);
    server_.Get(".*", answer);
    server_.Post(".*", answer);
    server_.Patch(".*", answer);
    server_.Delete(".*", answer);
    server_.Put(".*", answer);
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) std::abort();
    // bind_to_any_port already listens: a request waits in the backlog until the loop runs.
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~AnswerServer() {
    server_.stop();
    thread_.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Reads the records of one fuzz input.
  void load(std::string_view input) {
    std::map<std::string, std::string> answers;
    while (!input.empty()) {
      size_t end = input.find("\n%%\n");
      std::string_view record = input.substr(0, end);
      input = end == std::string_view::npos ? std::string_view() : input.substr(end + 4);
      const size_t nl = record.find('\n');
      const std::string path(record.substr(0, nl));
      answers[path] = nl == std::string_view::npos ? "" : std::string(record.substr(nl + 1));
    }
    std::lock_guard lock(mu_);
    answers_ = std::move(answers);
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, std::string> answers_;
  std::ofstream paths_;
};

// The one server of a driver fuzz target, holding this input's answers.
inline AnswerServer& serve(const uint8_t* data, size_t size) {
  static AnswerServer server;
  server.load(std::string_view(reinterpret_cast<const char*>(data), size));
  return server;
}

}  // namespace composer::fuzz

// A driver fuzz target logs errors only: a driver's warnings on every bad answer would bury
// libFuzzer's own output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  composer::log::set_level(composer::log::Level::kError);
  return 0;
}
