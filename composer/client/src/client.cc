#include "composer/client/client.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "composer/api/codec.h"
#include "composer/client/munge_credential.h"
#include "composer/common/strings.h"

namespace composer::client {
namespace {

// One server's HTTP client: alone, it retries as HttpClient does; among several, each call
// tries it once per round and the rounds are Client::call's.
// How long a server may take before the others are asked whether one took over, and how often
// they are asked after that (client.h's header comment).
constexpr std::chrono::milliseconds kTakeoverPatience{3000};
constexpr std::chrono::milliseconds kProbeEvery{1000};

http::HttpOptions http_options(const ClientOptions& o, const std::string& url, bool alone) {
  http::HttpOptions h;
  h.connect_timeout_ms = o.connect_timeout_ms;
  h.timeout_ms = o.timeout_ms;
  h.retries = alone ? o.retries : 0;
  h.backoff_ms = o.backoff_ms;
  if (url.starts_with(kUnixScheme)) h.unix_socket = url.substr(kUnixScheme.size());
  return h;
}

// A shortened, single-line copy of a body that does not follow the API, for messages.
std::string excerpt(std::string_view body) {
  constexpr size_t kMax = 200;
  std::string out(body.substr(0, kMax));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (body.size() > kMax) out += "...";
  return out;
}

Status require_name(std::string_view value, std::string_view what) {
  if (value.empty()) {
    return Error{ErrorCode::kInvalidArgument, std::string(what) + " must not be empty"};
  }
  return Status::Ok();
}

}  // namespace

// The request path twice: percent-encoded with its query, as sent, and plain, as the munge
// payload names it (docs/API.md, "Authentication").
struct Client::Path {
  std::string wire;
  std::string plain;
  std::string query;

  Path& segment(std::string_view s) {
    wire += "/" + percent_encode(s);
    plain += "/" + std::string(s);
    return *this;
  }
  // /v1/compositions/{job}, and /{node} after it when a node is given: a job's compositions,
  // or its composition on one node.
  static Path composition(uint32_t job_id, std::string_view node = {}) {
    Path p;
    p.segment("v1").segment("compositions").segment(std::to_string(job_id));
    if (!node.empty()) p.segment(node);
    return p;
  }
  Path& param(std::string_view name, std::string_view value) {
    query += (query.empty() ? "?" : "&") + std::string(name) + "=" + percent_encode(value);
    return *this;
  }
};

struct Client::Server {
  std::string url;   // as the list names it
  std::string base;  // what request paths are appended to
  bool unix_socket = false;
  std::unique_ptr<http::HttpClient> http;
};

Client::Client(ClientOptions options) : options_(std::move(options)) {
  Expected<std::vector<std::string>> urls = parse_server_list(options_.servers);
  if (!urls) {
    usable_ = urls.error();
    return;
  }
  for (const std::string& url : *urls) {
    Server s;
    s.url = url;
    s.unix_socket = url.starts_with(kUnixScheme);
    // On composerd's Unix socket the URL's host only names the request's Host.
    std::string_view base = s.unix_socket ? std::string_view("http://localhost") : url;
    while (base.ends_with('/')) base.remove_suffix(1);
    s.base = base;
    s.http = std::make_unique<http::HttpClient>(http_options(options_, url, urls->size() == 1));
    servers_.push_back(std::move(s));
  }
}

Client::~Client() = default;

std::string Client::active_server() const {
  return servers_.empty() ? "" : servers_[active_.load() % servers_.size()].url;
}

namespace {

// A standby's answer (HTTP 503 whose JSON body carries "active"): the active composerd's URL
// as the standby names it ("" when it knows none), or nullopt for any other answer.
std::optional<std::string> standby_naming(const http::HttpResponse& answer) {
  if (answer.status != 503) return std::nullopt;
  auto json = api::parse_json(answer.body);
  if (!json || !json->isObject() || !json->isMember("active")) return std::nullopt;
  const Json::Value& active = (*json)["active"];
  return active.isString() ? active.asString() : std::string();
}

// What a standby said, for the sentences.
std::string standby_sentence(const std::string& active, bool listed) {
  if (active.empty()) return "a standby that knows no active composerd";
  return "a standby naming " + active + " as active" + (listed ? "" : " (not in the server list)");
}

}  // namespace

namespace {

// The answer of the server that answered as the active one, as the API's value or its error.
Expected<Json::Value> read_answer(const http::HttpResponse& answer, const std::string& what) {
  auto json = api::parse_json(answer.body);
  if (answer.status >= 200 && answer.status < 300) {
    if (!json) {
      return Error{ErrorCode::kInternal,
                   "composerd's answer to " + what + " is not JSON: " + json.error().message};
    }
    return std::move(*json);
  }
  if (json) {
    if (auto error = api::from_json<api::ErrorBody>(*json)) return error->error;
  }
  std::string message = "composerd answered HTTP " + std::to_string(answer.status) + " to " + what;
  if (!answer.body.empty()) message += ": " + excerpt(answer.body);
  return Error{api::error_code_for_status(answer.status), message};
}

}  // namespace

Expected<Json::Value> Client::call(const std::string& method, const Path& path,
                                   const std::string& body, bool authenticate) const {
  if (!usable_) return usable_.error();
  const std::string what = method + " " + path.plain;
  Expected<http::HttpResponse> answer = send_to_active(method, path, body, authenticate, what);
  if (!answer) return answer.error();
  return read_answer(*answer, what);
}

std::chrono::steady_clock::time_point Client::call_deadline(int rounds) const {
  // One bound for the whole call: what a single server could take (client.h).
  const http::HttpClient& pacing = *servers_.front().http;
  std::chrono::milliseconds bound{rounds * (options_.connect_timeout_ms + options_.timeout_ms)};
  for (int r = 1; r < rounds; ++r) {
    bound += std::chrono::milliseconds(
        std::min(pacing.options().max_backoff_ms, options_.backoff_ms << std::min(r - 1, 20)));
  }
  return std::chrono::steady_clock::now() + bound;
}

std::optional<size_t> Client::other_active(size_t waiting_on,
                                           std::chrono::milliseconds within) const {
  for (size_t j = 0; j < servers_.size(); ++j) {
    if (j == waiting_on) continue;
    http::HttpRequest req;
    req.method = "GET";
    req.url = servers_[j].base + "/v1/health";
    req.deadline = std::chrono::steady_clock::now() + within;
    Expected<http::HttpResponse> got = servers_[j].http->send(req);
    if (!got || got->status != 200) continue;
    auto json = api::parse_json(got->body);
    if (!json) continue;
    auto health = api::from_json<api::HealthInfo>(*json);
    if (health && health->role == "active") return j;
  }
  return std::nullopt;
}

Expected<http::HttpResponse> Client::send_to_active(const std::string& method, const Path& path,
                                                    const std::string& body, bool authenticate,
                                                    const std::string& what) const {
  const int rounds = 1 + (http::HttpClient::idempotent(method) ? std::max(0, options_.retries) : 0);
  const auto deadline = call_deadline(rounds);
  const http::HttpClient& pacing = *servers_.front().http;

  auto request_to = [&](const Server& s) {
    http::HttpRequest req;
    req.method = method;
    req.url = s.base + path.wire + path.query;
    req.body = body;
    if (servers_.size() > 1) req.deadline = deadline;
    // On composerd's Unix socket the kernel tells composerd who calls: no credential.
    if (authenticate && !s.unix_socket) {
      req.headers = [this, payload = what]() -> Expected<std::vector<std::string>> {
        auto cred = munge_credential(payload, options_.munge_socket);
        if (!cred) return cred.error();
        return std::vector<std::string>{"Authorization: Munge " + *cred};
      };
    }
    return req;
  };
  auto find = [&](const std::string& url) -> std::optional<size_t> {
    for (size_t i = 0; i < servers_.size(); ++i) {
      if (api::same_server(servers_[i].url, url)) return i;
    }
    return std::nullopt;
  };

  // Whether a slow server is watched for another taking over (client.h's header comment).
  const bool watch = servers_.size() > 1 && http::HttpClient::idempotent(method);
  std::vector<std::string> said(servers_.size());  // each server's last word, for the sentence
  bool standby_only = false;  // the lone server is a standby (its sentence is the error)
  int rounds_done = 0;
  for (int round = 1; round <= rounds; ++round) {
    if (round > 1) {
      const auto pause = pacing.backoff(round - 1);
      if (std::chrono::steady_clock::now() + pause >= deadline) break;
      std::this_thread::sleep_for(pause);
    }
    ++rounds_done;
    std::vector<bool> tried(servers_.size(), false);
    bool revisited = false;  // a server that took over was asked again this round
    std::optional<size_t> next = active_.load() % servers_.size();
    while (next) {
      const size_t i = *next;
      tried[i] = true;
      next.reset();
      if (servers_.size() > 1 && std::chrono::steady_clock::now() >= deadline) {
        if (said[i].empty()) said[i] = "not tried: the call's time was up";
      } else {
        // A server that did not answer before the call's bound is no answer either.
        const bool capped =
            servers_.size() > 1 && deadline - std::chrono::steady_clock::now() <
                                       std::chrono::milliseconds(options_.timeout_ms);
        http::HttpRequest req = request_to(servers_[i]);
        std::optional<size_t> took_over;
        if (watch) {
          req.abandon = [&, i,
                         next_probe = std::chrono::steady_clock::now() +
                                      kTakeoverPatience]() mutable -> std::optional<std::string> {
            const auto now = std::chrono::steady_clock::now();
            if (now < next_probe) return std::nullopt;
            next_probe = now + kProbeEvery;
            took_over = other_active(i, kProbeEvery);
            if (!took_over) return std::nullopt;
            return servers_[*took_over].url + " says it is the active composerd now";
          };
        }
        Expected<http::HttpResponse> got = servers_[i].http->send(req);
        const bool cut = capped && !got && got.error().code == ErrorCode::kTimeout;
        if (!got) {
          if (got.error().code != ErrorCode::kUnavailable && !cut) return got.error();
          if (servers_.size() == 1) return got.error();
          said[i] = got.error().message;
          // Asked next even if it answered as a standby earlier in this round.
          if (took_over && !revisited) {
            revisited = true;
            next = *took_over;
          }
        } else if (std::optional<std::string> active = standby_naming(*got)) {
          const std::optional<size_t> named = find(*active);
          said[i] = standby_sentence(*active, named.has_value());
          standby_only = servers_.size() == 1;
          if (named && !tried[*named]) next = named;
        } else {
          active_.store(i);
          return std::move(*got);
        }
      }
      for (size_t j = 0; !next && j < servers_.size(); ++j) {
        if (!tried[j]) next = j;
      }
    }
  }
  if (standby_only) {
    return Error{ErrorCode::kUnavailable, "composerd at " + servers_.front().url + " is " +
                                              said.front() + " (" + what + ")"};
  }
  std::string message = "no composerd answered " + what + " as the active one:";
  for (size_t i = 0; i < servers_.size(); ++i) {
    message +=
        (i == 0 ? " " : "; ") + servers_[i].url + ": " + (said[i].empty() ? "not tried" : said[i]);
  }
  if (rounds_done > 1) message += " (" + std::to_string(rounds_done) + " rounds)";
  return Error{ErrorCode::kUnavailable, message};
}

namespace {

// Decodes a successful answer, or passes the call's error on.
template <typename T, typename F>
Expected<T> decoded(Expected<Json::Value> json, const std::string& what, F decode) {
  if (!json) return json.error();
  Expected<T> value = decode(*json);
  if (!value) {
    return Error{ErrorCode::kInternal, "composerd's answer to " + what +
                                           " does not follow the API: " + value.error().message};
  }
  return value;
}

// The server's largest page (docs/API.md).
constexpr size_t kMaxPage = 10000;

// A list read page after page (GET /v1/devices, /v1/compositions, /v1/events): every item, or
// the first `want` when want > 0, `page` items a request (the server's default when 0; never
// more than `want` needs). `get` sends one request.
template <typename T, typename Path, typename Get>
Expected<std::vector<T>> read_pages(const Path& p, size_t page, size_t want, Get get,
                                    Expected<api::Page<T>> (*decode)(const Json::Value&)) {
  if (want > 0) page = std::min(page > 0 ? page : want, std::min(want, kMaxPage));
  std::vector<T> out;
  for (std::string cursor;;) {
    Path one = p;
    if (page > 0) one.param("limit", std::to_string(page));
    if (!cursor.empty()) one.param("cursor", cursor);
    auto got = decoded<api::Page<T>>(get(one), "GET " + one.plain, decode);
    if (!got) return got.error();
    out.insert(out.end(), std::make_move_iterator(got->items.begin()),
               std::make_move_iterator(got->items.end()));
    if (want > 0 && out.size() >= want) {
      out.resize(want);
      return out;
    }
    if (got->next_cursor.empty()) return out;
    if (got->next_cursor == cursor) {
      return Error{ErrorCode::kInternal,
                   "GET " + p.plain + ": the next page repeats the cursor '" + cursor + "'"};
    }
    cursor = std::move(got->next_cursor);
  }
}

}  // namespace

Expected<Composition> Client::compose(uint32_t job_id, std::string_view node,
                                      const api::ComposeBody& body) const {
  if (Status s = require_name(node, "node"); !s) return s.error();
  const Path p = Path::composition(job_id, node);
  return decoded<Composition>(call("PUT", p, api::to_text(api::to_json(body)), true),
                              "PUT " + p.plain,
                              [](const Json::Value& v) { return api::from_json<Composition>(v); });
}

Expected<std::optional<Composition>> Client::release(uint32_t job_id, std::string_view node) const {
  if (Status s = require_name(node, "node"); !s) return s.error();
  const Path p = Path::composition(job_id, node);
  return decoded<std::optional<Composition>>(call("DELETE", p, "", true), "DELETE " + p.plain,
                                             api::release_from_json);
}

Expected<Composition> Client::hold(uint32_t job_id, std::string_view node,
                                   std::string_view reason) const {
  if (Status s = require_name(node, "node"); !s) return s.error();
  Path p = Path::composition(job_id, node);
  p.segment("hold");
  const bool set = !reason.empty();
  const std::string body =
      set ? api::to_text(api::to_json(api::DrainBody{std::string(reason)})) : "";
  const std::string method = set ? "POST" : "DELETE";
  return decoded<Composition>(call(method, p, body, true), method + " " + p.plain,
                              [](const Json::Value& v) { return api::from_json<Composition>(v); });
}

Expected<Device> Client::drain_unseen(uint32_t job_id, std::string_view node, std::string_view id,
                                      std::string_view reason) const {
  if (Status s = require_name(node, "node"); !s) return s.error();
  if (Status s = require_name(id, "device id"); !s) return s.error();
  if (Status s = require_name(reason, "drain reason"); !s) return s.error();
  Path p = Path::composition(job_id, node);
  p.segment("devices").segment(id).segment("drain");
  return decoded<Device>(
      call("POST", p, api::to_text(api::to_json(api::DrainBody{std::string(reason)})), true),
      "POST " + p.plain, [](const Json::Value& v) { return api::from_json<Device>(v); });
}

Expected<Device> Client::fail_reported(uint32_t job_id, std::string_view node, std::string_view id,
                                       std::string_view reason) const {
  if (Status s = require_name(node, "node"); !s) return s.error();
  if (Status s = require_name(id, "device id"); !s) return s.error();
  if (Status s = require_name(reason, "failure reason"); !s) return s.error();
  Path p = Path::composition(job_id, node);
  p.segment("devices").segment(id).segment("fail");
  return decoded<Device>(
      call("POST", p, api::to_text(api::to_json(api::DrainBody{std::string(reason)})), true),
      "POST " + p.plain, [](const Json::Value& v) { return api::from_json<Device>(v); });
}

Expected<std::vector<Composition>> Client::compose_job(uint32_t job_id,
                                                       const api::ComposeBody& body) const {
  for (const std::string& node : body.nodes) {
    if (Status s = require_name(node, "node"); !s) return s.error();
  }
  const Path p = Path::composition(job_id);
  return decoded<std::vector<Composition>>(call("PUT", p, api::to_text(api::to_json(body)), true),
                                           "PUT " + p.plain, api::compositions_from_json);
}

Expected<std::vector<Composition>> Client::release_job(uint32_t job_id) const {
  const Path p = Path::composition(job_id);
  return decoded<std::vector<Composition>>(call("DELETE", p, "", true), "DELETE " + p.plain,
                                           api::compositions_from_json);
}

Expected<Composition> Client::show(uint32_t job_id, std::string_view node) const {
  if (Status s = require_name(node, "node"); !s) return s.error();
  const Path p = Path::composition(job_id, node);
  return decoded<Composition>(call("GET", p, "", true), "GET " + p.plain,
                              [](const Json::Value& v) { return api::from_json<Composition>(v); });
}

Expected<std::vector<Composition>> Client::compositions(const CompositionQuery& q) const {
  Path p;
  p.segment("v1").segment("compositions");
  if (q.job) p.param("job", std::to_string(*q.job));
  if (q.user) p.param("user", *q.user);
  if (q.state) p.param("state", to_string(*q.state));
  if (q.node) p.param("node", *q.node);
  if (q.live) p.param("live", "1");
  return read_pages<Composition>(
      p, q.page, q.limit, [this](const Path& one) { return call("GET", one, "", true); },
      api::composition_page_from_json);
}

Expected<Json::Value> Client::get_json(
    const std::vector<std::string>& segments,
    const std::vector<std::pair<std::string, std::string>>& params) const {
  Path p;
  p.segment("v1");
  for (const auto& s : segments) p.segment(s);
  for (const auto& [name, value] : params) p.param(name, value);
  return call("GET", p, "", true);
}

Expected<std::vector<PoolRow>> Client::pool() const {
  Path p;
  p.segment("v1").segment("pool");
  return decoded<std::vector<PoolRow>>(call("GET", p, "", true), "GET " + p.plain,
                                       api::pool_from_json);
}

Expected<std::vector<Device>> Client::devices(const DeviceQuery& q) const {
  Path p;
  p.segment("v1").segment("devices");
  if (q.type) p.param("type", to_string(*q.type));
  if (q.state) p.param("state", to_string(*q.state));
  if (q.zone) p.param("zone", *q.zone);
  if (q.node) p.param("node", *q.node);
  return read_pages<Device>(
      p, q.page, 0, [this](const Path& one) { return call("GET", one, "", true); },
      api::device_page_from_json);
}

Expected<std::vector<Host>> Client::hosts() const {
  Path p;
  p.segment("v1").segment("hosts");
  return decoded<std::vector<Host>>(call("GET", p, "", true), "GET " + p.plain,
                                    api::hosts_from_json);
}

Expected<Device> Client::drain(std::string_view id, std::string_view reason) const {
  if (Status s = require_name(id, "device id"); !s) return s.error();
  if (Status s = require_name(reason, "drain reason"); !s) return s.error();
  Path p;
  p.segment("v1").segment("devices").segment(id).segment("drain");
  const std::string body = api::to_text(api::to_json(api::DrainBody{std::string(reason)}));
  return decoded<Device>(call("POST", p, body, true), "POST " + p.plain,
                         [](const Json::Value& v) { return api::from_json<Device>(v); });
}

Expected<Device> Client::device_action(std::string_view id, std::string_view action) const {
  if (Status s = require_name(id, "device id"); !s) return s.error();
  Path p;
  p.segment("v1").segment("devices").segment(id).segment(action);
  return decoded<Device>(call("POST", p, "{}", true), "POST " + p.plain,
                         [](const Json::Value& v) { return api::from_json<Device>(v); });
}

Expected<Device> Client::resume(std::string_view id) const { return device_action(id, "resume"); }

Expected<std::vector<Device>> Client::domain_action(std::string_view domain,
                                                    std::string_view action,
                                                    const std::string& body) const {
  if (Status s = require_name(domain, "failure domain"); !s) return s.error();
  Path p;
  p.segment("v1").segment("domains").segment(domain).segment(action);
  return decoded<std::vector<Device>>(call("POST", p, body, true), "POST " + p.plain,
                                      api::devices_from_json);
}

Expected<std::vector<Device>> Client::drain_domain(std::string_view domain,
                                                   std::string_view reason) const {
  if (Status s = require_name(reason, "drain reason"); !s) return s.error();
  return domain_action(domain, "drain",
                       api::to_text(api::to_json(api::DrainBody{std::string(reason)})));
}

Expected<std::vector<Device>> Client::resume_domain(std::string_view domain) const {
  return domain_action(domain, "resume", "{}");
}
Expected<Device> Client::adopt(std::string_view id) const { return device_action(id, "adopt"); }
Expected<Device> Client::release_foreign(std::string_view id) const {
  return device_action(id, "release-foreign");
}

Expected<api::HealthInfo> Client::health() const {
  Path p;
  p.segment("v1").segment("health");
  return decoded<api::HealthInfo>(
      call("GET", p, "", false), "GET " + p.plain,
      [](const Json::Value& v) { return api::from_json<api::HealthInfo>(v); });
}

Expected<std::vector<Event>> Client::events(const EventQuery& q) const {
  Path p;
  p.segment("v1").segment("events");
  if (q.job) p.param("job", std::to_string(*q.job));
  if (q.since_ms) p.param("since_ms", std::to_string(*q.since_ms));
  if (q.until_ms) p.param("until_ms", std::to_string(*q.until_ms));
  return read_pages<Event>(
      p, q.page, q.limit, [this](const Path& one) { return call("GET", one, "", true); },
      api::event_page_from_json);
}

Expected<api::PolicyApplied> Client::put_policy(const api::PolicyBody& body) const {
  Path p;
  p.segment("v1").segment("policy");
  return decoded<api::PolicyApplied>(call("PUT", p, api::to_text(api::to_json(body)), true),
                                     "PUT " + p.plain, api::policy_applied_from_json);
}

Expected<PolicyVersion> Client::policy() const {
  Path p;
  p.segment("v1").segment("policy");
  return decoded<PolicyVersion>(call("GET", p, "", true), "GET " + p.plain,
                                api::policy_version_from_json);
}

Expected<std::vector<PolicyVersion>> Client::policy_history(size_t limit) const {
  Path p;
  p.segment("v1").segment("policy").segment("history");
  if (limit > 0) p.param("limit", std::to_string(limit));
  return decoded<std::vector<PolicyVersion>>(call("GET", p, "", true), "GET " + p.plain,
                                             api::policy_history_from_json);
}

Expected<api::PolicyExplanation> Client::explain_policy(const PolicyQuery& q) const {
  Path p;
  p.segment("v1").segment("policy").segment("explain");
  if (!q.workload.empty()) p.param("workload", q.workload);
  if (!q.partition.empty()) p.param("partition", q.partition);
  if (!q.qos.empty()) p.param("qos", q.qos);
  if (!q.account.empty()) p.param("account", q.account);
  p.param("gpus", std::to_string(q.gpus));
  p.param("mem_bytes", std::to_string(q.mem_bytes));
  p.param("nvme", std::to_string(q.nvme));
  p.param("time_limit_s", std::to_string(q.time_limit_s));
  if (q.start_ms) p.param("start_ms", std::to_string(*q.start_ms));
  return decoded<api::PolicyExplanation>(call("GET", p, "", true), "GET " + p.plain,
                                         api::policy_explanation_from_json);
}

}  // namespace composer::client
