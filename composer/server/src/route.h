// The one request pipeline of composerd's HTTP API (docs/API.md). Every route is declared
// with who may call it and the query parameters it takes; the pipeline authenticates and
// refuses, refuses unknown query parameters, hands the handler typed parameters (one parser,
// one set of limits, one wording for a bad value) and sends its answer or its error as JSON.
// Unknown paths and exceptions answer JSON too.
#pragma once

#include <json/value.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "composer/server/auth.h"
#include "front_door.h"

namespace composer::server {

// The limits every route's parameters share.
inline constexpr uint64_t kMaxJobId = 4294967294U;         // Slurm's largest job id
inline constexpr uint64_t kMaxListLimit = 4294967295U;     // `limit` of a listing; 0: no limit
inline constexpr uint64_t kMaxTimeMs = uint64_t{1} << 52;  // a time in ms since the epoch

// The caller's input is wrong: 400 with this sentence.
Error bad(std::string message);

// Who may call a route.
class Access {
 public:
  static Access anyone();  // no credential needed (health, metrics)
  static Access user();    // any caller with a valid credential
  // Root and AdminUsers only; others get "only root and AdminUsers may <may>".
  static Access admin(std::string may);
  // Root, AdminUsers and ComposeUsers (compose and release jobs).
  static Access composer();

  bool authenticated() const { return who_ != Who::kAnyone; }
  bool admin_only() const { return who_ == Who::kAdmin; }
  bool composer_only() const { return who_ == Who::kComposer; }
  const std::string& may() const { return may_; }

 private:
  enum class Who { kAnyone, kUser, kComposer, kAdmin };
  Access(Who who, std::string may) : who_(who), may_(std::move(may)) {}
  Who who_;
  std::string may_;
};

// One authenticated request with its checked query: what a handler reads.
class Call {
 public:
  Call(const HttpRequest& req, Caller caller, std::multimap<std::string, std::string> query);

  const Caller& caller() const { return caller_; }
  // The `i`th capture of the route's path pattern.
  std::string match(size_t i) const;
  const std::string& body() const;

  // The query parameter as given (percent-decoded); nullopt when absent.
  std::optional<std::string> text(const std::string& name) const;
  // A whole number from 0 to `max`; nullopt when absent.
  Expected<std::optional<uint64_t>> number(const std::string& name, uint64_t max) const;
  // A job id, 1 to kMaxJobId; nullopt when absent.
  Expected<std::optional<uint32_t>> job(const std::string& name) const;
  // A time in milliseconds since the epoch, 0 to kMaxTimeMs; nullopt when absent.
  Expected<std::optional<int64_t>> time_ms(const std::string& name) const;
  // The same, refused when absent.
  Expected<int64_t> required_time_ms(const std::string& name) const;
  // One of the names `parse` knows ("NAME: 'TEXT' is not one of ALLOWED" otherwise).
  template <typename T, typename Parse>
  Expected<std::optional<T>> choice(const std::string& name, Parse&& parse,
                                    std::string_view allowed) const {
    auto v = text(name);
    if (!v) return std::optional<T>{};
    std::optional<T> parsed = parse(*v);
    if (!parsed) {
      return bad(name + ": '" + printable(*v) + "' is not one of " + std::string(allowed));
    }
    return parsed;
  }

 private:
  const HttpRequest& req_;
  Caller caller_;
  std::multimap<std::string, std::string> query_;
};

// A route's work: the JSON body of its 200 answer, or the error to answer with.
using Handler = std::function<Expected<Json::Value>(const Call&)>;
// The same answered later, from any thread, exactly once: a route whose work waits for the fabric.
// The handler reads what it needs from the Call before it returns (the Call does not outlive
// the handler; `answer` may).
using Answer = std::function<void(Expected<Json::Value>)>;
using AsyncHandler = std::function<void(const Call&, Answer answer)>;
// A route that answers text of a content type (GET /metrics).
using TextHandler = std::function<std::string(const Call&)>;

// The routes of a server, in the order added: the first whose method and pattern (the whole
// percent-decoded path) match answers. An unknown path answers a JSON 404, an exception a JSON
// 500; what the HTTP layer refuses (400, 413, 414, 415, 416, 431) answers invalid_argument
// with its sentence under the status it chose (503, no room for a connection: unavailable).
class Router {
 public:
  using Run = std::function<void(const HttpRequest&, const HttpReply&)>;
  void add(std::string_view method, const std::string& pattern, Run run);
  // Runs on a worker thread; routes are not added once the server runs. The reply is called
  // once, there or later.
  void answer(HttpRequest& req, const HttpReply& reply) const;
  static HttpResponse refusal(int status, const std::string& sentence);

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    Run run;
  };
  std::vector<Route> routes_;
};

// Installs routes on a Router, each through the pipeline.
class RoutePipeline {
 public:
  RoutePipeline(Router& router, const Authenticator& auth);

  // `method` is GET, PUT, POST or DELETE; `pattern` a regular expression for the path;
  // `params` the query parameters the route takes (others are refused).
  void add(std::string_view method, const std::string& pattern, Access access,
           std::initializer_list<std::string_view> params, Handler handler);
  // A route whose answer comes later (it waits for the fabric without holding a worker).
  void add_async(std::string_view method, const std::string& pattern, Access access,
                 std::initializer_list<std::string_view> params, AsyncHandler handler);
  // A GET answering text of `content_type`, through the same pipeline.
  void add_text(const std::string& pattern, Access access,
                std::initializer_list<std::string_view> params, std::string content_type,
                TextHandler handler);

 private:
  using Sender = std::function<void(const Call&, const HttpReply&)>;
  void install(std::string_view method, const std::string& pattern, Access access,
               std::initializer_list<std::string_view> params, Sender send);

  Router& router_;
  const Authenticator& auth_;
};

}  // namespace composer::server
