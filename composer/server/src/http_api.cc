#include "composer/server/http_api.h"
#include "http_reply.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <initializer_list>
#include <set>

#include "composer/api/codec.h"
#include "composer/common/log.h"
#include "composer/common/names.h"
#include "composer/common/units.h"
#include "metrics.h"
#include "report_routes.h"

namespace composer::server {
namespace {

// Refuses query parameters the endpoint does not know: a typo must not widen a listing.
// Only the query string counts (httplib also files form-encoded bodies under params).
Status only_params(const httplib::Request& req, std::initializer_list<std::string_view> allowed) {
  const auto q = req.target.find('?');
  if (q == std::string::npos) return Status::Ok();
  httplib::Params query;
  httplib::detail::parse_query_text(req.target.substr(q + 1), query);
  for (const auto& [key, value] : query) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return bad(
          "unknown query parameter '" + key + "'" +
          (list.empty() ? std::string(" (this endpoint takes none)") : " (allowed: " + list + ")"));
    }
  }
  return Status::Ok();
}

Expected<uint32_t> job_id_of(const std::string& text) {
  auto n = parse_count(text, 4294967294U);
  if (!n || *n == 0) return bad("job id '" + text + "' is not a number from 1 to 4294967294");
  return *n;
}

Status check_node(const std::string& node) {
  if (node.empty() || node.size() > 255) return bad("node name must have 1 to 255 characters");
  if (!valid_name(node)) {
    return bad("node name '" + node + "' holds a character other than letters, digits, -, _, .");
  }
  return Status::Ok();
}

template <typename T>
Expected<std::optional<T>> optional_param(const httplib::Request& req, const char* name,
                                          auto&& parse) {
  if (!req.has_param(name)) return std::optional<T>{};
  const std::string v = req.get_param_value(name);
  auto parsed = parse(v);
  if (!parsed) return bad(std::string(name) + ": " + parsed.error().message);
  return std::optional<T>{*parsed};
}

Expected<uint32_t> parse_u32(const std::string& v) { return parse_count(v, 4294967294U); }
Expected<int64_t> parse_ms(const std::string& v) {
  if (v.empty() || v.size() > 15 ||
      !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return bad("'" + v + "' is not a time in milliseconds since the epoch");
  }
  return static_cast<int64_t>(std::stoll(v));
}

double seconds_since(std::chrono::steady_clock::time_point began) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

struct JobNode {
  uint32_t job = 0;
  std::string node;
};

// The (job, node) of a /v1/compositions/{job}/{node} request, checked; no query allowed.
Expected<JobNode> job_and_node(const httplib::Request& req) {
  auto job = job_id_of(req.matches[1]);
  if (!job) return job.error();
  JobNode out{*job, req.matches[2]};
  if (auto s = check_node(out.node); !s) return s.error();
  if (auto s = only_params(req, {}); !s) return s.error();
  return out;
}

class Handlers {
 public:
  explicit Handlers(ApiContext& ctx) : ctx_(ctx) {}

  // Authenticates, then runs `fn(caller)`; every exception becomes a 500 with a sentence.
  template <typename Fn>
  void guarded(const httplib::Request& req, httplib::Response& res, bool admin_only, Fn&& fn) {
    auto caller =
        ctx_.auth.authenticate(req.get_header_value("Authorization"), req.method, req.path);
    if (!caller) {
      log::warning("request refused",
                   {{"method", req.method}, {"path", req.path}, {"cause", caller.error().message}});
      return send_error(res, caller.error());
    }
    if (admin_only && !caller->admin) {
      return send_error(res, Error{ErrorCode::kPermissionDenied,
                                   "uid " + std::to_string(caller->uid) +
                                       " may not do this: only root and AdminUsers may " +
                                       (req.method == "GET" ? "read this" : "change the pool")});
    }
    fn(*caller);
  }

  void compose(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, true, [&](const Caller&) {
      auto target = job_and_node(req);
      if (!target) return send_error(res, target.error());
      const auto& [job, node] = *target;
      auto body = api::from_text<api::ComposeBody>(req.body);
      if (!body) return send_error(res, body.error());
      if (!body->workload.empty() && !ctx_.workloads.empty() &&
          std::find(ctx_.workloads.begin(), ctx_.workloads.end(), body->workload) ==
              ctx_.workloads.end()) {
        std::string list;
        for (const auto& w : ctx_.workloads) list += (list.empty() ? "" : ", ") + w;
        return send_error(res, bad("workload: unknown class '" + body->workload +
                                   "' (configured: " + list + ")"));
      }
      ComposeInput in{.job_id = job,
                      .node = node,
                      .uid = body->uid,
                      .user = body->user,
                      .account = body->account,
                      .workload = body->workload,
                      .request = body->request};
      const auto began = std::chrono::steady_clock::now();
      auto c = ctx_.service.compose(in);
      if (ctx_.metrics != nullptr) {
        ctx_.metrics->observe_compose(seconds_since(began),
                                      c ? std::string_view() : to_string(c.error().code));
      }
      if (!c) return send_error(res, c.error());
      send_json(res, 200, api::to_json(*c));
    });
  }

  void show(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, false, [&](const Caller& caller) {
      auto target = job_and_node(req);
      if (!target) return send_error(res, target.error());
      const auto& [job, node] = *target;
      db::CompositionFilter f;
      f.job_id = job;
      f.node = node;
      f.limit = 1;
      if (!caller.admin) f.uid = caller.uid;
      auto live = ctx_.service.store().live_composition(job, node);
      if (!live) return send_error(res, live.error());
      if (*live && (caller.admin || (*live)->uid == caller.uid)) {
        return send_json(res, 200, api::to_json(**live));
      }
      auto found = ctx_.service.store().compositions(f);
      if (!found) return send_error(res, found.error());
      if (found->empty()) {
        return send_error(
            res, Error{ErrorCode::kNotFound,
                       "no composition for job " + std::to_string(job) + " on node " + node});
      }
      send_json(res, 200, api::to_json(found->front()));
    });
  }

  void release(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, true, [&](const Caller&) {
      auto target = job_and_node(req);
      if (!target) return send_error(res, target.error());
      const auto& [job, node] = *target;
      const auto began = std::chrono::steady_clock::now();
      auto r = ctx_.service.release(job, node);
      if (ctx_.metrics != nullptr) {
        ctx_.metrics->observe_release(seconds_since(began),
                                      r ? std::string_view() : to_string(r.error().code));
      }
      if (!r) return send_error(res, r.error());
      send_json(res, 200, api::release_to_json(*r));
    });
  }

  void list_compositions(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, false, [&](const Caller& caller) {
      if (auto s = only_params(req, {"job", "user", "state", "node", "live", "limit"}); !s) {
        return send_error(res, s.error());
      }
      db::CompositionFilter f;
      auto job = optional_param<uint32_t>(req, "job", parse_u32);
      if (!job) return send_error(res, job.error());
      f.job_id = *job;
      if (req.has_param("user")) f.user = req.get_param_value("user");
      if (req.has_param("node")) f.node = req.get_param_value("node");
      if (req.has_param("state")) {
        const std::string s = req.get_param_value("state");
        auto st = parse_composition_state(s);
        if (!st) {
          return send_error(res, bad("state: '" + s +
                                     "' is not one of requested, composing, ready, releasing, "
                                     "released, failed"));
        }
        f.state = *st;
      }
      if (req.has_param("live")) {
        const std::string v = req.get_param_value("live");
        if (v != "0" && v != "1") return send_error(res, bad("live: expected 0 or 1"));
        f.live_only = v == "1";
      }
      auto limit = optional_param<uint32_t>(req, "limit", parse_u32);
      if (!limit) return send_error(res, limit.error());
      f.limit = limit->value_or(0);
      if (!caller.admin) f.uid = caller.uid;  // users see their own jobs only
      auto list = ctx_.service.store().compositions(f);
      if (!list) return send_error(res, list.error());
      send_json(res, 200, api::compositions_to_json(*list));
    });
  }

  void pool(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, false, [&](const Caller&) {
      if (auto s = only_params(req, {}); !s) return send_error(res, s.error());
      send_json(res, 200, api::pool_to_json(ctx_.service.pool_summary()));
    });
  }

  void hosts(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, false, [&](const Caller&) {
      if (auto s = only_params(req, {}); !s) return send_error(res, s.error());
      send_json(res, 200, api::hosts_to_json(ctx_.service.hosts()));
    });
  }

  void devices(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, false, [&](const Caller&) {
      if (auto s = only_params(req, {"type", "state", "zone", "node"}); !s) {
        return send_error(res, s.error());
      }
      db::DeviceFilter f;
      if (req.has_param("type")) {
        const std::string v = req.get_param_value("type");
        auto t = parse_device_type(v);
        if (!t) return send_error(res, bad("type: '" + v + "' is not one of gpu, mem, nvme"));
        f.type = *t;
      }
      if (req.has_param("state")) {
        const std::string v = req.get_param_value("state");
        auto s = parse_device_state(v);
        if (!s) {
          return send_error(
              res, bad("state: '" + v + "' is not one of free, attached, drained, failed"));
        }
        f.state = *s;
      }
      if (req.has_param("zone")) f.zone = req.get_param_value("zone");
      if (req.has_param("node")) f.node = req.get_param_value("node");
      auto list = ctx_.service.store().devices(f);
      if (!list) return send_error(res, list.error());
      send_json(res, 200, api::devices_to_json(*list));
    });
  }

  void drain(const httplib::Request& req, httplib::Response& res, bool drained) {
    guarded(req, res, true, [&](const Caller& caller) {
      if (auto s = only_params(req, {}); !s) return send_error(res, s.error());
      const std::string id = req.matches[1];
      std::string reason;
      if (drained) {
        auto body = api::from_text<api::DrainBody>(req.body);
        if (!body) return send_error(res, body.error());
        reason = body->reason;
      } else if (!req.body.empty()) {
        auto json = api::parse_json(req.body);
        if (!json) return send_error(res, json.error());
        if (!json->isObject() || !json->empty()) {
          return send_error(res, bad("resume takes an empty object {} as its body"));
        }
      }
      const std::string actor = "uid " + std::to_string(caller.uid);
      auto d = drained ? ctx_.service.drain(id, reason, actor) : ctx_.service.resume(id, actor);
      if (!d) return send_error(res, d.error());
      if (ctx_.pool_changed) ctx_.pool_changed();
      send_json(res, 200, api::to_json(*d));
    });
  }

  void events(const httplib::Request& req, httplib::Response& res) {
    guarded(req, res, true, [&](const Caller&) {
      if (auto s = only_params(req, {"job", "since_ms", "until_ms", "limit"}); !s) {
        return send_error(res, s.error());
      }
      db::EventFilter f;
      auto job = optional_param<uint32_t>(req, "job", parse_u32);
      if (!job) return send_error(res, job.error());
      f.job_id = *job;
      auto since = optional_param<int64_t>(req, "since_ms", parse_ms);
      if (!since) return send_error(res, since.error());
      f.since_ms = *since;
      auto until = optional_param<int64_t>(req, "until_ms", parse_ms);
      if (!until) return send_error(res, until.error());
      f.until_ms = *until;
      auto limit = optional_param<uint32_t>(req, "limit", parse_u32);
      if (!limit) return send_error(res, limit.error());
      f.limit = limit->value_or(0);
      auto list = ctx_.service.store().events(f);
      if (!list) return send_error(res, list.error());
      send_json(res, 200, api::events_to_json(*list));
    });
  }

  void health(const httplib::Request& req, httplib::Response& res) {
    if (auto s = only_params(req, {}); !s) return send_error(res, s.error());
    api::HealthInfo h{.status = "ok",
                      .fabric = ctx_.fabric,
                      .version = ctx_.version,
                      .uptime_s = (ctx_.clock.now_ms() - ctx_.started_ms) / 1000};
    send_json(res, 200, api::to_json(h));
  }

 private:
  ApiContext& ctx_;
};

}  // namespace

void install_routes(httplib::Server& server, ApiContext& ctx) {
  auto h = std::make_shared<Handlers>(ctx);
  const std::string comp = R"(/v1/compositions/(\d+)/([^/]+))";
  server.Put(comp, [h](const auto& req, auto& res) { h->compose(req, res); });
  server.Get(comp, [h](const auto& req, auto& res) { h->show(req, res); });
  server.Delete(comp, [h](const auto& req, auto& res) { h->release(req, res); });
  server.Get("/v1/compositions",
             [h](const auto& req, auto& res) { h->list_compositions(req, res); });
  server.Get("/v1/pool", [h](const auto& req, auto& res) { h->pool(req, res); });
  server.Get("/v1/devices", [h](const auto& req, auto& res) { h->devices(req, res); });
  server.Get("/v1/hosts", [h](const auto& req, auto& res) { h->hosts(req, res); });
  server.Post(R"(/v1/devices/([^/]+)/drain)",
              [h](const auto& req, auto& res) { h->drain(req, res, true); });
  server.Post(R"(/v1/devices/([^/]+)/resume)",
              [h](const auto& req, auto& res) { h->drain(req, res, false); });
  server.Get("/v1/events", [h](const auto& req, auto& res) { h->events(req, res); });
  server.Get("/v1/health", [h](const auto& req, auto& res) { h->health(req, res); });
  install_report_routes(server, ctx.service.store(), ctx.auth, ctx.clock);
  if (ctx.metrics != nullptr) {
    Metrics* metrics = ctx.metrics;
    server.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics->render(), "text/plain; version=0.0.4; charset=utf-8");
    });
  }

  // Anything else is a JSON 404/405 with a sentence, not httplib's empty page.
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const ErrorCode code = res.status == 404 ? ErrorCode::kNotFound : ErrorCode::kInvalidArgument;
    const int status = res.status;
    send_json(res, status,
              api::to_json(Error{code, "no such endpoint: " + req.method + " " + req.path +
                                           " (see docs/API.md)"}));
  });
  server.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
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

}  // namespace composer::server
