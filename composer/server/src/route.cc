#include "route.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <utility>

#include "composer/api/codec.h"
#include "composer/common/log.h"
#include "composer/common/strings.h"

namespace composer::server {
namespace {

void send_json(HttpResponse& res, int status, const Json::Value& body) {
  res.status = status;
  res.body = api::to_text(body);
  res.content_type = "application/json";
}

void send_error(HttpResponse& res, const Error& e) {
  send_json(res, api::http_status(e.code), api::to_json(e));
}

// The query string's parameters, percent-decoded ('+' is a space); a parameter without '='
// has an empty value. Only the query string counts, never a form-encoded body.
std::multimap<std::string, std::string> query_of(const HttpRequest& req) {
  std::multimap<std::string, std::string> query;
  for (const std::string& pair : split(req.query, '&')) {
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const std::string_view text(pair);
    query.emplace(percent_decode(text.substr(0, eq), true),
                  eq == std::string::npos ? "" : percent_decode(text.substr(eq + 1), true));
  }
  return query;
}

// Refuses a query parameter the route does not take (a typo must not widen a listing), one
// given twice (which one would count?) and a value that is not text: what a filter holds may be
// repeated in an answer.
Status only_params(const std::multimap<std::string, std::string>& query,
                   const std::vector<std::string>& allowed) {
  for (const auto& [key, value] : query) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      const std::string list = join(allowed, ", ");
      return bad(
          "unknown query parameter '" + printable(key) + "'" +
          (list.empty() ? std::string(" (this endpoint takes none)") : " (allowed: " + list + ")"));
    }
    if (query.count(key) > 1) return bad("query parameter '" + key + "' is given twice");
    if (!valid_utf8(value, false)) {
      return bad(key + ": '" + printable(value) +
                 "' is not text (UTF-8 without control characters)");
    }
  }
  return Status::Ok();
}

// Authenticates and checks the caller may use the route; an empty Caller when anyone may.
Expected<Caller> admit(const Authenticator& auth, const Access& access, const HttpRequest& req) {
  if (!access.authenticated()) return Caller{};
  Expected<Caller> caller =
      req.local ? Expected<Caller>(auth.local(req.local->uid, req.local->gid))
                : auth.authenticate(req.header("Authorization"), req.method, req.path);
  if (!caller) {
    log::warning("request refused",
                 {{"method", req.method}, {"path", req.path}, {"cause", caller.error().message}});
    return caller.error();
  }
  const bool denied =
      (access.admin_only() && !caller->admin) || (access.composer_only() && !caller->composer);
  if (denied) {
    return Error{
        ErrorCode::kPermissionDenied,
        "uid " + std::to_string(caller->uid) + " may not do this: only root" +
            (access.composer_only() ? ", AdminUsers and ComposeUsers" : " and AdminUsers") +
            " may " + access.may()};
  }
  return caller;
}

}  // namespace

Error bad(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

Access Access::anyone() { return Access(Who::kAnyone, ""); }
Access Access::user() { return Access(Who::kUser, ""); }
Access Access::admin(std::string may) { return Access(Who::kAdmin, std::move(may)); }
Access Access::composer() { return Access(Who::kComposer, "compose and release jobs"); }

Call::Call(const HttpRequest& req, Caller caller, std::multimap<std::string, std::string> query)
    : req_(req), caller_(caller), query_(std::move(query)) {}

std::string Call::match(size_t i) const { return i < req_.matches.size() ? req_.matches[i] : ""; }

const std::string& Call::body() const { return req_.body; }

std::optional<std::string> Call::text(const std::string& name) const {
  auto it = query_.find(name);
  if (it == query_.end()) return std::nullopt;
  return it->second;
}

Expected<std::optional<uint64_t>> Call::number(const std::string& name, uint64_t max) const {
  auto v = text(name);
  if (!v) return std::optional<uint64_t>{};
  auto n = parse_whole_number(name, *v, 0, max);
  if (!n) return n.error();
  return std::optional<uint64_t>{*n};
}

Expected<std::optional<uint32_t>> Call::job(const std::string& name) const {
  auto v = text(name);
  if (!v) return std::optional<uint32_t>{};
  auto n = parse_whole_number(name, *v, 1, kMaxJobId);
  if (!n) return n.error();
  return std::optional<uint32_t>{static_cast<uint32_t>(*n)};
}

Expected<std::optional<int64_t>> Call::time_ms(const std::string& name) const {
  auto v = text(name);
  if (!v) return std::optional<int64_t>{};
  auto n = parse_whole_number(name, *v, 0, kMaxTimeMs);
  if (!n) {
    return bad(name + "=" + printable(*v) + ": expected a time in milliseconds since the epoch (" +
               whole_number_rule(0, kMaxTimeMs) + ")");
  }
  return std::optional<int64_t>{static_cast<int64_t>(*n)};
}

Expected<int64_t> Call::required_time_ms(const std::string& name) const {
  auto t = time_ms(name);
  if (!t) return t.error();
  if (!*t) return bad(name + ": missing; give a time in milliseconds since the epoch");
  return **t;
}

void Router::add(std::string_view method, const std::string& pattern, Run run) {
  static constexpr std::string_view kMethods[] = {"GET", "PUT", "POST", "DELETE"};
  if (std::find(std::begin(kMethods), std::end(kMethods), method) == std::end(kMethods)) {
    throw std::invalid_argument("Router::add: no method " + std::string(method));
  }
  routes_.push_back(Route{std::string(method), std::regex(pattern), std::move(run)});
}

void Router::answer(HttpRequest& req, const HttpReply& reply) const {
  // HEAD is GET without the body (the front door leaves the body out); its credential still
  // names HEAD (composerd_front_door_test, HeadIsAuthenticatedAsHead).
  const std::string_view method = req.method == "HEAD" ? std::string_view("GET") : req.method;
  for (const Route& route : routes_) {
    std::smatch m;
    if (route.method != method || !std::regex_match(req.path, m, route.pattern)) continue;
    req.matches.assign(m.begin(), m.end());
    // A reply already sent makes the one below a no-op (HttpReply is called once).
    const auto failed = [&](const std::string& cause) {
      log::error("request failed", {{"method", req.method}, {"path", req.path}, {"cause", cause}});
      HttpResponse res;
      send_error(res, Error{ErrorCode::kInternal, "internal error: " + cause});
      reply(std::move(res));
    };
    try {
      route.run(req, reply);
    } catch (const std::exception& e) {
      failed(e.what());
    } catch (...) {
      failed("unknown exception");
    }
    return;
  }
  HttpResponse res;
  send_error(res, Error{ErrorCode::kNotFound, "no such endpoint: " + printable(req.method) + " " +
                                                  printable(req.path) + " (see docs/API.md)"});
  reply(std::move(res));
}

HttpResponse Router::refusal(int status, const std::string& sentence) {
  HttpResponse res;
  const ErrorCode code = status == 503   ? ErrorCode::kUnavailable
                         : status >= 500 ? ErrorCode::kInternal
                                         : ErrorCode::kInvalidArgument;
  const Error e{code, sentence};
  send_json(res, status, api::to_json(e));
  return res;
}

RoutePipeline::RoutePipeline(Router& router, const Authenticator& auth)
    : router_(router), auth_(auth) {}

namespace {

HttpResponse json_answer(const Expected<Json::Value>& body) {
  HttpResponse res;
  if (!body) {
    send_error(res, body.error());
  } else {
    send_json(res, 200, *body);
  }
  return res;
}

}  // namespace

void RoutePipeline::add(std::string_view method, const std::string& pattern, Access access,
                        std::initializer_list<std::string_view> params, Handler handler) {
  install(method, pattern, std::move(access), params,
          [handler = std::move(handler)](const Call& call, const HttpReply& reply) {
            reply(json_answer(handler(call)));
          });
}

void RoutePipeline::add_async(std::string_view method, const std::string& pattern, Access access,
                              std::initializer_list<std::string_view> params,
                              AsyncHandler handler) {
  install(method, pattern, std::move(access), params,
          [handler = std::move(handler)](const Call& call, const HttpReply& reply) {
            handler(call, [reply](const Expected<Json::Value>& body) { reply(json_answer(body)); });
          });
}

void RoutePipeline::add_text(const std::string& pattern, Access access,
                             std::initializer_list<std::string_view> params,
                             std::string content_type, TextHandler handler) {
  install("GET", pattern, std::move(access), params,
          [type = std::move(content_type), handler = std::move(handler)](const Call& call,
                                                                         const HttpReply& reply) {
            HttpResponse res;
            res.status = 200;
            res.body = handler(call);
            res.content_type = type;
            reply(std::move(res));
          });
}

void RoutePipeline::install(std::string_view method, const std::string& pattern, Access access,
                            std::initializer_list<std::string_view> params, Sender send) {
  auto run = [&auth = auth_, access = std::move(access),
              allowed = std::vector<std::string>(params.begin(), params.end()),
              send = std::move(send)](const HttpRequest& req, const HttpReply& reply) {
    auto caller = admit(auth, access, req);
    if (!caller) return reply(json_answer(caller.error()));
    auto query = query_of(req);
    if (auto s = only_params(query, allowed); !s) return reply(json_answer(s.error()));
    send(Call(req, *caller, std::move(query)), reply);
  };
  router_.add(method, pattern, std::move(run));
}

}  // namespace composer::server
