#include "route.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <stdexcept>
#include <utility>

#include "composer/api/codec.h"
#include "composer/common/log.h"
#include "composer/common/strings.h"

namespace composer::server {
namespace {

void send_json(httplib::Response& res, int status, const Json::Value& body) {
  res.status = status;
  res.set_content(api::to_text(body), "application/json");
}

void send_error(httplib::Response& res, const Error& e) {
  send_json(res, api::http_status(e.code), api::to_json(e));
}

// The query string's parameters, percent-decoded. Only the query string counts: httplib
// also files form-encoded bodies under its params.
std::multimap<std::string, std::string> query_of(const httplib::Request& req) {
  httplib::Params query;
  if (const auto q = req.target.find('?'); q != std::string::npos) {
    httplib::detail::parse_query_text(req.target.substr(q + 1), query);
  }
  return {query.begin(), query.end()};
}

// Refuses a query parameter the route does not take: a typo must not widen a listing.
Status only_params(const std::multimap<std::string, std::string>& query,
                   const std::vector<std::string>& allowed) {
  for (const auto& [key, value] : query) {
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    const std::string list = join(allowed, ", ");
    return bad(
        "unknown query parameter '" + printable(key) + "'" +
        (list.empty() ? std::string(" (this endpoint takes none)") : " (allowed: " + list + ")"));
  }
  return Status::Ok();
}

// Authenticates and checks the caller may use the route; an empty Caller when anyone may.
Expected<Caller> admit(const Authenticator& auth, const Access& access,
                       const httplib::Request& req) {
  if (!access.authenticated()) return Caller{};
  auto caller = auth.authenticate(req.get_header_value("Authorization"), req.method, req.path);
  if (!caller) {
    log::warning("request refused",
                 {{"method", req.method}, {"path", req.path}, {"cause", caller.error().message}});
    return caller.error();
  }
  if (access.admin_only() && !caller->admin) {
    return Error{ErrorCode::kPermissionDenied, "uid " + std::to_string(caller->uid) +
                                                   " may not do this: only root and AdminUsers "
                                                   "may " +
                                                   access.may()};
  }
  return caller;
}

// What the HTTP layer refused before any route ran, by the status it chose (docs/API.md).
Error http_layer_error(const httplib::Request& req, int status) {
  switch (status) {
    case 404:
      return Error{ErrorCode::kNotFound, "no such endpoint: " + printable(req.method) + " " +
                                             printable(req.path) + " (see docs/API.md)"};
    case 413:
      return bad("request body larger than " + std::to_string(kMaxBodyBytes) +
                 " bytes, the most composerd reads");
    case 414:
      return bad("request line longer than " + std::to_string(CPPHTTPLIB_REQUEST_URI_MAX_LENGTH) +
                 " bytes, the most composerd reads");
    case 416:
      return bad("unreadable Range header; composerd answers whole bodies only (send no Range)");
    case 400:
      return bad("malformed HTTP request: expected an HTTP/1.1 request line and headers");
    default:
      return Error{status >= 500 ? ErrorCode::kInternal : ErrorCode::kInvalidArgument,
                   "the HTTP layer refused the request with status " + std::to_string(status)};
  }
}

}  // namespace

Error bad(std::string message) { return Error{ErrorCode::kInvalidArgument, std::move(message)}; }

Expected<uint64_t> whole_number(std::string_view name, std::string_view text, uint64_t min,
                                uint64_t max) {
  uint64_t n = 0;
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
  const auto [end, ec] = digits ? std::from_chars(text.data(), text.data() + text.size(), n)
                                : std::from_chars_result{text.data(), std::errc::invalid_argument};
  if (ec != std::errc() || end != text.data() + text.size() || n < min || n > max) {
    return bad(std::string(name) + ": '" + printable(text) + "' is not a whole number from " +
               std::to_string(min) + " to " + std::to_string(max));
  }
  return n;
}

Access Access::anyone() { return Access(Who::kAnyone, ""); }
Access Access::user() { return Access(Who::kUser, ""); }
Access Access::admin(std::string may) { return Access(Who::kAdmin, std::move(may)); }

Call::Call(const httplib::Request& req, Caller caller,
           std::multimap<std::string, std::string> query)
    : req_(req), caller_(caller), query_(std::move(query)) {}

std::string Call::match(size_t i) const { return req_.matches[static_cast<int>(i)]; }

const std::string& Call::body() const { return req_.body; }

std::optional<std::string> Call::text(const std::string& name) const {
  auto it = query_.find(name);
  if (it == query_.end()) return std::nullopt;
  return it->second;
}

Expected<std::optional<uint64_t>> Call::number(const std::string& name, uint64_t max) const {
  auto v = text(name);
  if (!v) return std::optional<uint64_t>{};
  auto n = whole_number(name, *v, 0, max);
  if (!n) return n.error();
  return std::optional<uint64_t>{*n};
}

Expected<std::optional<uint32_t>> Call::job(const std::string& name) const {
  auto v = text(name);
  if (!v) return std::optional<uint32_t>{};
  auto n = whole_number(name, *v, 1, kMaxJobId);
  if (!n) return n.error();
  return std::optional<uint32_t>{static_cast<uint32_t>(*n)};
}

Expected<std::optional<int64_t>> Call::time_ms(const std::string& name) const {
  auto v = text(name);
  if (!v) return std::optional<int64_t>{};
  auto n = whole_number(name, *v, 0, kMaxTimeMs);
  if (!n) {
    return bad(name + ": '" + printable(*v) + "' is not a time in milliseconds since the epoch (" +
               "a whole number from 0 to " + std::to_string(kMaxTimeMs) + ")");
  }
  return std::optional<int64_t>{static_cast<int64_t>(*n)};
}

Expected<int64_t> Call::required_time_ms(const std::string& name) const {
  auto t = time_ms(name);
  if (!t) return t.error();
  if (!*t) return bad(name + ": missing; give a time in milliseconds since the epoch");
  return **t;
}

Routes::Routes(httplib::Server& server, const Authenticator& auth) : server_(server), auth_(auth) {
  // Anything else is JSON with a sentence, not httplib's empty page.
  server_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int status = res.status;
    send_json(res, status, api::to_json(http_layer_error(req, status)));
  });
  server_.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, const std::exception_ptr& ep) {
        std::string what = "unknown exception";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        log::error("request failed", {{"method", req.method}, {"path", req.path}, {"cause", what}});
        send_error(res, Error{ErrorCode::kInternal, "internal error: " + what});
      });
}

void Routes::add(std::string_view method, const std::string& pattern, Access access,
                 std::initializer_list<std::string_view> params, Handler handler) {
  install(method, pattern, std::move(access), params,
          [handler = std::move(handler)](const Call& call, httplib::Response& res) {
            auto body = handler(call);
            if (!body) return send_error(res, body.error());
            send_json(res, 200, *body);
          });
}

void Routes::add_text(const std::string& pattern, Access access,
                      std::initializer_list<std::string_view> params, std::string content_type,
                      TextHandler handler) {
  install("GET", pattern, std::move(access), params,
          [type = std::move(content_type), handler = std::move(handler)](const Call& call,
                                                                         httplib::Response& res) {
            res.status = 200;
            res.set_content(handler(call), type);
          });
}

void Routes::install(std::string_view method, const std::string& pattern, Access access,
                     std::initializer_list<std::string_view> params, Sender send) {
  auto run = [&auth = auth_, access = std::move(access),
              allowed = std::vector<std::string>(params.begin(), params.end()),
              send = std::move(send)](const httplib::Request& req, httplib::Response& res) {
    auto caller = admit(auth, access, req);
    if (!caller) return send_error(res, caller.error());
    auto query = query_of(req);
    if (auto s = only_params(query, allowed); !s) return send_error(res, s.error());
    send(Call(req, *caller, std::move(query)), res);
  };
  if (method == "GET") {
    server_.Get(pattern, std::move(run));
  } else if (method == "PUT") {
    server_.Put(pattern, std::move(run));
  } else if (method == "POST") {
    server_.Post(pattern, std::move(run));
  } else if (method == "DELETE") {
    server_.Delete(pattern, std::move(run));
  } else {
    throw std::invalid_argument("Routes::install: no method " + std::string(method));
  }
}

}  // namespace composer::server
