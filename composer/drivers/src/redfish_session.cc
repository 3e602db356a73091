#include "redfish_driver.h"

namespace composer::drivers {
namespace redfish {

Error fabric_error(std::string message) {
  return Error{ErrorCode::kFabric, "redfish: " + std::move(message)};
}

std::string error_message(const std::string& body) {
  Json::Value v;
  std::string why;
  if (body.empty() || !parse_json(body, &v, &why) || !v.isObject()) return "";
  const Json::Value& e = v["error"];
  std::string out;
  if (e.isObject()) {
    for (const Json::Value& info : e["@Message.ExtendedInfo"]) {
      const std::string m = info["Message"].asString();
      if (m.empty()) continue;
      if (!out.empty()) out += "; ";
      out += m;
    }
  }
  auto messages = [&out](const Json::Value& list) {
    for (const Json::Value& info : list) {
      const std::string m = info["Message"].asString();
      if (m.empty()) continue;
      if (!out.empty()) out += "; ";
      out += m;
    }
  };
  // The messages of a body that is not an error object: annotated on the body itself.
  if (out.empty()) messages(v["@Message.ExtendedInfo"]);
  if (out.empty() && e.isObject()) out = e["message"].asString();
  if (out.empty() && e.isString()) out = e.asString();
  // The older shape of some services: {"Status": 400, "Message": "..."} at the top.
  if (out.empty() && v["Message"].isString()) out = v["Message"].asString();
  // A task's own messages (a failed task answers with the Task resource).
  if (out.empty()) messages(v["Messages"]);
  return out;
}

}  // namespace redfish

std::string RedfishFabric::Impl::url(const std::string& uri) const {
  if (uri.starts_with("http://") || uri.starts_with("https://")) return uri;
  return o.base_url + uri;
}

Expected<std::vector<std::string>> RedfishFabric::Impl::auth_headers() {
  if (o.auth == RedfishOptions::Auth::kBasic) {
    return std::vector<std::string>{basic_auth_header(o)};
  }
  std::lock_guard<std::mutex> lock(auth_mu);
  if (token.empty()) return std::vector<std::string>{};
  return std::vector<std::string>{"X-Auth-Token: " + token};
}

Status RedfishFabric::Impl::login() {
  Json::Value body;
  body["UserName"] = o.username;
  body["Password"] = o.password;
  http::HttpRequest req;
  req.method = "POST";
  req.url = url(sessions_uri);
  req.body = api::to_text(body);
  auto r = http.send(req);
  if (!r) return Error{r.error().code, "redfish: session login: " + r.error().message};
  if (r->status != 201) {
    // A service creates a session with 201 Created (DSP0266); anything else (a redirect, 200
    // without a session, 404, 405) is a service whose session login does not work this way.
    std::string m = error_message(r->body);
    const bool refused = r->status == 401 || r->status == 403;
    return Error{refused ? ErrorCode::kUnauthenticated : ErrorCode::kFabric,
                 "redfish: session login at " + sessions_uri + " answered " +
                     std::to_string(r->status) + (m.empty() ? "" : ": " + m) +
                     (refused ? ""
                              : "; a session login is answered 201 Created, so this service "
                                "may not offer sessions: set FabricAuth=basic")};
  }
  const std::string t = r->header("X-Auth-Token");
  if (t.empty()) {
    return fabric_error("session login at " + sessions_uri +
                        " answered no X-Auth-Token header; use basic authentication instead");
  }
  std::string where = r->header("Location");
  if (where.empty()) {
    Json::Value v;
    std::string why;
    if (parse_json(r->body, &v, &why)) where = odata_id(v);
  }
  std::lock_guard<std::mutex> lock(auth_mu);
  token = t;
  session_uri = where;
  log::info("redfish: session opened", {{"url", o.base_url}});
  return Status::Ok();
}

void RedfishFabric::Impl::logout() {
  std::string uri;
  {
    std::lock_guard<std::mutex> lock(auth_mu);
    uri = session_uri;
  }
  if (uri.empty()) return;
  http::HttpRequest req;
  req.method = "DELETE";
  req.url = url(uri);
  req.headers = [this] { return auth_headers(); };
  auto r = http.send(req);
  if (!r || r->status >= 300) {
    log::warning(
        "redfish: session logout failed",
        {{"url", o.base_url}, {"error", r ? std::to_string(r->status) : r.error().message}});
  }
  std::lock_guard<std::mutex> lock(auth_mu);
  token.clear();
  session_uri.clear();
}

Expected<Reply> RedfishFabric::Impl::request(const std::string& method, const std::string& asked,
                                             const Json::Value* body,
                                             const std::vector<std::string>& extra) {
  std::string uri = asked;
  int redirects = 0;
  for (int attempt = 0;; ++attempt) {
    http::HttpRequest req;
    req.method = method;
    req.url = url(uri);
    if (body != nullptr) req.body = api::to_text(*body);
    req.headers = [this, extra, changes = method != "GET",
                   what = method + " " + uri]() -> Expected<std::vector<std::string>> {
      // Asked here, as the request leaves, not only before the change began.
      if (changes && o.may_change && !o.may_change()) {
        return Error{ErrorCode::kUnavailable,
                     "this composerd may no longer change the fabric: " + what + " not sent"};
      }
      auto h = auth_headers();
      if (!h) return h;
      for (const std::string& line : extra) h->push_back(line);
      if (changes && o.epoch > 0) h->push_back("X-Composer-Epoch: " + std::to_string(o.epoch));
      return h;
    };
    auto r = http.send(req);
    if (!r) return Error{r.error().code, "redfish: " + r.error().message};
    if (r->status == 401 && o.auth == RedfishOptions::Auth::kSession && attempt == 0 &&
        !sessions_uri.empty()) {
      log::info("redfish: session refused, logging in again", {{"url", o.base_url}});
      if (Status s = login(); !s) return s.error();
      continue;
    }
    if (method == "GET" &&
        (r->status == 301 || r->status == 302 || r->status == 307 || r->status == 308)) {
      // Followed within the service only: credentials never go to another origin.
      const std::string to = r->header("Location");
      if (to.empty()) {
        return fabric_error("GET " + uri + " answered " + std::to_string(r->status) +
                            " without a Location to go to");
      }
      const bool absolute = to.starts_with("http://") || to.starts_with("https://");
      if ((absolute && to != o.base_url && !to.starts_with(o.base_url + "/")) ||
          (!absolute && !to.starts_with("/"))) {
        return fabric_error("GET " + uri + " was redirected to " + to +
                            ", outside the service at " + o.base_url +
                            "; redirects are followed only within the service's own origin");
      }
      if (++redirects > kMaxRedirects) {
        return fabric_error("GET " + asked + " was redirected more than " +
                            std::to_string(kMaxRedirects) + " times (last to " + to + ")");
      }
      uri = path_of(to);
      --attempt;  // a redirect is no second attempt of the session
      continue;
    }
    Reply out;
    out.status = r->status;
    out.location = r->header("Location");
    out.etag = r->header("ETag");
    if (!r->body.empty()) {
      std::string why;
      if (!parse_json(r->body, &out.body, &why)) {
        if (r->status < 300) {
          return fabric_error(method + " " + uri + " answered " + std::to_string(r->status) +
                              " with a body that is not JSON: " + why);
        }
        out.body = Json::Value();
      }
    }
    if (r->status >= 400) {
      const std::string m = error_message(r->body);
      return Error{error_code_for_manager_status(r->status),
                   "redfish: " + method + " " + uri + " answered " + std::to_string(r->status) +
                       (m.empty() ? "" : ": " + m)};
    }
    return out;
  }
}

Expected<Json::Value> RedfishFabric::Impl::get(const std::string& uri) {
  auto r = request("GET", uri);
  if (!r) return r.error();
  if (!r->body.isObject()) {
    return fabric_error("GET " + uri + " answered " + std::to_string(r->status) +
                        " without a JSON object");
  }
  return std::move(r->body);
}

}  // namespace composer::drivers
