// composerd's HTTP/1.1 front door (Boost.Beast on Asio): one io thread that never blocks reads
// and writes every connection; each complete request is handed to a bounded worker pool and its
// answer written back in order (pipelined requests wait their turn in the connection's buffer).
// Hard limits that one client cannot use to starve others: the header block's size and field
// count, the body's size whatever its transfer encoding, no request decompression, a deadline
// for reading a request once its first byte came and for an idle keep-alive connection, and a
// cap on connections in all and per peer address that sheds the oldest idle one first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/error.h"

namespace composer::server {

// The longest request line composerd reads; a longer one answers 414.
inline constexpr size_t kMaxRequestLine = 8192;

struct FrontDoorLimits {
  size_t header_bytes = 32768;          // ApiMaxHeaderBytes: request line and header fields
  size_t header_fields = 100;           // ApiMaxHeaders
  size_t body_bytes = size_t{1} << 20;  // ApiMaxBodyBytes, Content-Length or chunked
  int64_t request_timeout_ms = 30000;   // ApiRequestTimeout: one request read, one answer written
  int64_t idle_timeout_ms = 60000;      // ApiIdleTimeout: a keep-alive connection between requests
  size_t max_connections = 2048;        // ApiMaxConnections
  size_t max_connections_per_peer = 1024;  // ApiMaxConnectionsPerPeer
  size_t workers = 64;                     // ApiThreads: requests handled at once
};

// Who is at the other end of a Unix socket connection, as the kernel says (SO_PEERCRED).
struct LocalPeer {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

// One request as the routes see it.
struct HttpRequest {
  std::string
      method;  // as sent (GET, PUT, HEAD, ...); HEAD is routed as GET, answered without the body
  std::string target;  // the request target as sent
  std::string path;    // the target's path, percent-decoded
  std::string query;   // the text after '?', as sent
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string peer;                  // the client's address ("local uid N" on the Unix socket)
  std::optional<LocalPeer> local;    // set for a request that came through the Unix socket
  std::vector<std::string> matches;  // the route pattern's captures, 0: the whole path

  // The first header named `name` (any case), "" when absent.
  std::string header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// Sends the answer to a request: called exactly once, from any thread (later calls do nothing).
// The request stays valid while a copy of it is held.
using HttpReply = std::function<void(HttpResponse)>;

class FrontDoor {
 public:
  // `answer` runs on a worker thread for each request that passed the limits and hands its
  // answer to the reply, there or later from another thread (a compose waits for the fabric
  // without a worker); `refusal` makes the JSON body of what the HTTP layer refuses (status,
  // sentence); `answered` is called with every answer just before it is written.
  using Answer = std::function<void(HttpRequest&, HttpReply)>;
  using Refusal = std::function<HttpResponse(int status, const std::string& sentence)>;
  using Answered = std::function<void(const HttpRequest&, const HttpResponse&)>;

  FrontDoor(FrontDoorLimits limits, Answer answer, Refusal refusal, Answered answered);
  ~FrontDoor();
  FrontDoor(const FrontDoor&) = delete;
  FrontDoor& operator=(const FrontDoor&) = delete;

  // Binds and listens (backlog SOMAXCONN); the sentence names the address on failure.
  Status bind(const std::string& address, int port);
  // Also listens on a Unix socket at `path` (mode 0666, an old socket there replaced, removed
  // at stop): its requests carry the caller's uid from the kernel, no credential
  // (HttpRequest::local).
  Status bind_local(const std::string& path);
  // The port bound (after bind()).
  int port() const;
  // Serves until stop(): answers what is in progress, then returns.
  void run();
  // Thread-safe, also before run(): stops accepting, closes idle and half-read connections,
  // lets requests being handled finish and their answers go out.
  void stop();

 private:
  friend class Connection;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::server
