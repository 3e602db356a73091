#include "composer/http/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "composer/common/strings.h"

namespace composer::http {
namespace {

struct EasyDeleter {
  void operator()(CURL* handle) const { curl_easy_cleanup(handle); }
};
struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using EasyPtr = std::unique_ptr<CURL, EasyDeleter>;
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

// An answer larger than this is not one composerd sends; stop reading instead of exhausting
// memory.
constexpr size_t kMaxBodyBytes = size_t{1} << 30;
// Idle handles kept for reuse (each holds its open connections).
constexpr size_t kMaxIdleHandles = 16;

CURLcode global_init() {
  static std::once_flag once;
  static CURLcode result = CURLE_OK;
  std::call_once(once, [] { result = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return result;
}

struct Received {
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool too_large = false;
};

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<Received*>(user);
  const size_t n = size * count;
  if (r->body.size() + n > kMaxBodyBytes) {
    r->too_large = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  r->body.append(data, n);
  return n;
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<Received*>(user);
  const size_t n = size * count;
  std::string_view line(data, n);
  // A status line starts the headers of each answer (also of a 100 Continue or a redirect):
  // keep only the last answer's headers.
  if (line.starts_with("HTTP/")) {
    r->headers.clear();
  } else if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    r->headers.emplace_back(std::string(trim(line.substr(0, colon))),
                            std::string(trim(line.substr(colon + 1))));
  }
  return n;
}

int on_prereq(void* user, char* /*remote_ip*/, char* /*local_ip*/, int /*remote_port*/,
              int /*local_port*/) {
  *static_cast<bool*>(user) = true;
  return CURL_PREREQFUNC_OK;
}

// What the progress callback needs to ask HttpRequest::abandon, and what it said.
struct Abandon {
  const std::function<std::optional<std::string>()>* ask = nullptr;
  std::chrono::steady_clock::time_point next_ask;
  std::optional<std::string> said;
};

constexpr std::chrono::milliseconds kAbandonAskEvery{500};

int on_progress(void* user, curl_off_t /*dltotal*/, curl_off_t /*dlnow*/, curl_off_t /*ultotal*/,
                curl_off_t /*ulnow*/) {
  auto* a = static_cast<Abandon*>(user);
  const auto now = std::chrono::steady_clock::now();
  if (now < a->next_ask) return 0;
  a->next_ask = now + kAbandonAskEvery;
  a->said = (*a->ask)();
  return a->said ? 1 : 0;  // non-zero: curl stops with CURLE_ABORTED_BY_CALLBACK
}

// One attempt's outcome: an answer, or an error and whether another attempt may help.
struct Attempt {
  std::optional<HttpResponse> response;
  Error error;
  bool connection_failed = false;
};

}  // namespace

struct HttpClient::HandlePool {
  std::mutex mu;
  std::vector<EasyPtr> idle;

  EasyPtr acquire() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle.empty()) {
        EasyPtr h = std::move(idle.back());
        idle.pop_back();
        return h;
      }
    }
    return EasyPtr(curl_easy_init());
  }

  void release(EasyPtr h) {
    curl_easy_reset(h.get());  // keeps the handle's live connections
    std::lock_guard<std::mutex> lock(mu);
    if (idle.size() < kMaxIdleHandles) idle.push_back(std::move(h));
  }
};

HttpClient::HttpClient(HttpOptions options)
    : options_(std::move(options)), handles_(std::make_unique<HandlePool>()) {
  global_init();
}

HttpClient::~HttpClient() = default;

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return value;
  }
  return "";
}

bool HttpClient::idempotent(std::string_view method) {
  return method == "GET" || method == "PUT" || method == "DELETE";
}

std::chrono::milliseconds HttpClient::backoff(int retry) const {
  const HttpOptions& o = options_;
  static thread_local std::minstd_rand rng{std::random_device{}()};
  long delay = std::max(0L, o.backoff_ms);
  for (int i = 1; i < retry && delay < o.max_backoff_ms; ++i) delay *= 2;
  delay = std::min(delay, std::max(0L, o.max_backoff_ms));
  std::uniform_int_distribution<long> jitter(delay / 2, std::max(delay / 2, delay));
  return std::chrono::milliseconds(jitter(rng));
}

bool HttpClient::retryable_status(long status) {
  return status == 502 || status == 503 || status == 504;
}

namespace {

Attempt perform(CURL* h, const HttpOptions& options, const HttpRequest& req,
                const std::vector<std::string>& extra_headers) {
  Attempt a;
  HttpOptions o = options;
  if (req.deadline) {
    const long left = std::max<long>(1, std::chrono::ceil<std::chrono::milliseconds>(
                                            *req.deadline - std::chrono::steady_clock::now())
                                            .count());
    o.connect_timeout_ms = std::min(o.connect_timeout_ms, left);
    o.timeout_ms = std::min(o.timeout_ms, left);
  }
  const std::string& url = req.url;
  char errbuf[CURL_ERROR_SIZE] = {0};
  Received received;
  SlistPtr headers;
  auto add_header = [&headers](const std::string& line) {
    curl_slist* next = curl_slist_append(headers.get(), line.c_str());
    if (next != nullptr) {
      (void)headers.release();
      headers.reset(next);
    }
  };
  add_header("Accept: application/json");
  for (const std::string& line : extra_headers) add_header(line);
  // A DELETE carries a body only when given one (Liqid's unrelate names what to remove in it).
  const bool with_body = req.method == "PUT" || req.method == "POST" || req.method == "PATCH" ||
                         (req.method == "DELETE" && !req.body.empty());
  if (with_body) {
    add_header("Content-Type: application/json");
    add_header("Expect:");  // no 100-continue round trip for large bodies
  } else if (req.method != "GET") {
    // Said outright: some servers (cpp-httplib 0.41) otherwise take the next request on the
    // connection for this one's body.
    add_header("Content-Length: 0");
  }
  // Whether the request went out: curl calls this once connected (or on a reused connection),
  // just before sending. It tells a server that never answered from one never reached, which
  // the transfer times cannot on every libcurl (8.23 reports a PRETRANSFER time after a
  // connect timeout).
  bool sent = false;
  curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, on_prereq);
  curl_easy_setopt(h, CURLOPT_PREREQDATA, &sent);

  Abandon abandon;
  if (req.abandon) {
    abandon.ask = &req.abandon;
    abandon.next_ask = std::chrono::steady_clock::now() + kAbandonAskEvery;
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &abandon);
  }

  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // timeouts without SIGALRM: we are threaded
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, o.connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o.timeout_ms);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "composer-client");
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &received);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &received);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  if (!o.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, o.ca_file.c_str());
  if (!o.unix_socket.empty()) curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, o.unix_socket.c_str());
  if (!o.verify_tls) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (req.method == "GET") {
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
  } else if (with_body) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    if (req.method != "POST") curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }

  const CURLcode rc = curl_easy_perform(h);
  if (rc == CURLE_OK) {
    HttpResponse r;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.status);
    r.body = std::move(received.body);
    r.headers = std::move(received.headers);
    a.response = std::move(r);
    return a;
  }

  std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
  std::string where = url;  // what the sentences name as tried
  std::string what = req.method + " " + url;
  if (!o.unix_socket.empty()) {
    // The URL's host only names the request's Host: the sentence names the socket, and the
    // system's reason replaces curl's "localhost port 80" (http_test, AUnixSocketErrorNamesIt).
    where = "unix:" + o.unix_socket;
    const size_t path = url.find('/', url.find("//") == std::string::npos ? 0 : url.find("//") + 2);
    what = req.method + " " + where + (path == std::string::npos ? "" : url.substr(path));
    long os_errno = 0;
    if (curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno) == CURLE_OK && os_errno != 0) {
      detail = std::strerror(static_cast<int>(os_errno));
    } else {
      detail = curl_easy_strerror(rc);
    }
  }
  switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      a.error = Error{ErrorCode::kUnavailable, "cannot connect to " + where + ": " + detail};
      a.connection_failed = true;
      break;
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
      a.error = Error{ErrorCode::kUnavailable,
                      "the connection to " + where + " broke during " + what + ": " + detail};
      a.connection_failed = true;
      break;
    case CURLE_OPERATION_TIMEDOUT: {
      if (!sent) {
        a.error = Error{ErrorCode::kUnavailable,
                        "cannot connect to " + where + ": no connection within " +
                            std::to_string(std::min(o.connect_timeout_ms, o.timeout_ms)) + " ms"};
        a.connection_failed = true;
      } else {
        a.error = Error{ErrorCode::kTimeout,
                        "no answer to " + what + " within " + std::to_string(o.timeout_ms) + " ms"};
      }
      break;
    }
    case CURLE_ABORTED_BY_CALLBACK:
      a.error = Error{ErrorCode::kUnavailable,
                      "gave up on " + what + ": " + abandon.said.value_or(detail)};
      break;
    case CURLE_WRITE_ERROR:
      a.error = Error{ErrorCode::kInternal,
                      received.too_large ? "the answer to " + what + " is larger than " +
                                               std::to_string(kMaxBodyBytes >> 20) + " MiB; refused"
                                         : "cannot store the answer to " + what + ": " + detail};
      break;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      a.error = Error{ErrorCode::kInvalidArgument,
                      "bad server URL '" + url + "': " + detail +
                          " (expected http://HOST:PORT or https://HOST:PORT)"};
      break;
    default:
      a.error = Error{ErrorCode::kInternal, what + " failed: " + detail};
      break;
  }
  return a;
}

}  // namespace

Expected<HttpResponse> HttpClient::send(const HttpRequest& req) const {
  if (!(idempotent(req.method) || req.method == "POST" || req.method == "PATCH")) {
    return Error{ErrorCode::kInvalidArgument,
                 "HTTP method '" + req.method + "' is not one of GET, PUT, POST, PATCH, DELETE"};
  }
  if (const CURLcode rc = global_init(); rc != CURLE_OK) {
    return Error{ErrorCode::kInternal,
                 std::string("cannot initialise libcurl: ") + curl_easy_strerror(rc)};
  }
  const int max_attempts = 1 + (idempotent(req.method) ? std::max(0, options_.retries) : 0);
  for (int attempt = 1;; ++attempt) {
    std::vector<std::string> extra;
    if (req.headers) {
      auto h = req.headers();
      if (!h) return h.error();
      extra = std::move(*h);
    }
    EasyPtr handle = handles_->acquire();
    if (!handle) return Error{ErrorCode::kInternal, "curl_easy_init failed (out of memory?)"};
    Attempt a = perform(handle.get(), options_, req, extra);
    handles_->release(std::move(handle));

    const bool retry =
        attempt < max_attempts &&
        (a.connection_failed || (a.response && retryable_status(a.response->status)));
    const std::chrono::milliseconds pause = backoff(attempt);
    const bool past_deadline =
        req.deadline && std::chrono::steady_clock::now() + pause >= *req.deadline;
    if (!retry || past_deadline) {
      if (a.response) {
        a.response->attempts = attempt;
        return std::move(*a.response);
      }
      if (attempt > 1) a.error.message += " (after " + std::to_string(attempt) + " attempts)";
      return a.error;
    }
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace composer::http
