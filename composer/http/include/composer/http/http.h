// The one HTTP client of the project, over libcurl.
//
// Every call has a connect timeout and a total timeout. Idempotent methods (GET, PUT, DELETE)
// are retried with capped exponential backoff and jitter when the connection fails or the
// server answers 502, 503 or 504; POST and PATCH are never retried. Safe to use from many threads
// at once: each call borrows an easy handle from a small pool, so connections are reused.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/error.h"

namespace composer::http {

struct HttpOptions {
  long connect_timeout_ms = 2000;
  long timeout_ms = 60000;  // per attempt, from connect to the last byte of the answer
  int retries = 3;          // extra attempts after the first, idempotent methods only
  long backoff_ms = 100;    // delay before the first retry; doubles for each further one
  long max_backoff_ms = 5000;
  // TLS: a CA bundle to trust instead of the system's (empty: the system's), and whether the
  // server's certificate and host name are checked at all.
  std::string ca_file;
  bool verify_tls = true;
  // Connect to this Unix socket instead of the URL's host and port (which still name the
  // request's Host).
  std::string unix_socket;
};

struct HttpRequest {
  std::string method;  // GET, PUT, POST, PATCH or DELETE
  std::string url;
  std::string body;  // sent as application/json by PUT, POST, PATCH, and DELETE when not empty
  // Called before every attempt for extra header lines ("Authorization: ..."), so each attempt
  // can carry a fresh credential. An error ends the call without sending anything.
  std::function<Expected<std::vector<std::string>>()> headers;
  // When set, no attempt runs past it: each one's connect and total timeouts shrink to the time
  // left, and no attempt starts after it (a caller that shares one bound among several
  // servers, composer::client::Client; http_test, NoAttemptRunsPastTheDeadline).
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // When set, asked about twice a second, on the calling thread, while an attempt is under
  // way: a sentence ends the attempt there with kUnavailable ("gave up on ...: SENTENCE"),
  // not retried. For a caller that learns elsewhere that this server will not answer
  // (composer::client::Client, when another composerd took over; http_test,
  // AnAttemptIsAbandonedWhenTheCallerSaysSo).
  std::function<std::optional<std::string>()> abandon;
};

// Any HTTP answer, whatever its status; transport failures are an Error instead.
struct HttpResponse {
  long status = 0;
  std::string body;
  int attempts = 1;  // how many requests were sent to get this answer
  // Every header line of the final answer, names as the server spelt them, values trimmed.
  std::vector<std::pair<std::string, std::string>> headers;

  // The value of the first header with this name (case-insensitive), or "" if none.
  std::string header(std::string_view name) const;
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Errors: kUnavailable when no connection could be made or it broke (the sentence names
  // the URL), kTimeout when the server did not answer within timeout_ms, kInvalidArgument for
  // a malformed URL or unknown method, kInternal for anything else curl reports.
  Expected<HttpResponse> send(const HttpRequest& request) const;

  // The pause before retry number `retry` (1 for the first): backoff_ms doubled per further
  // retry, capped at max_backoff_ms, then a random point in its upper half so that many
  // clients failing together (a job array's prologs) do not retry together.
  std::chrono::milliseconds backoff(int retry) const;

  const HttpOptions& options() const { return options_; }
  static bool idempotent(std::string_view method);
  static bool retryable_status(long status);

 private:
  struct HandlePool;
  HttpOptions options_;
  std::unique_ptr<HandlePool> handles_;
};

}  // namespace composer::http
