#include "composer/server/http_api.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include "composer/api/codec.h"
#include "composer/common/names.h"
#include "composer/common/strings.h"
#include "metrics.h"
#include "policy_routes.h"
#include "report_routes.h"
#include "route.h"

namespace composer::server {
namespace {

Status check_node(const std::string& node) {
  if (node.empty() || node.size() > 255) return bad("node name must have 1 to 255 characters");
  if (!valid_name(node)) {
    return bad("node name '" + printable(node) +
               "' holds a character other than letters, digits, -, _, .");
  }
  return Status::Ok();
}

// Tells the metrics how long a call took from `began`, and how it ended.
template <typename T>
void observe(Metrics* metrics, void (Metrics::*observe)(double, std::string_view),
             std::chrono::steady_clock::time_point began, const Expected<T>& out) {
  if (metrics == nullptr) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  (metrics->*observe)(seconds, out ? std::string_view() : to_string(out.error().code));
}

// What an asynchronous route does once the service has answered: the metric observed from the
// call (this moment) to the answer, then the answer encoded, or its error; then `changed`,
// when set (a compose or release has ended, whatever its outcome).
template <typename T, typename Encode>
std::function<void(Expected<T>)> answer_when_done(
    Metrics* metrics, void (Metrics::*observe_it)(double, std::string_view), Encode encode,
    Answer answer, std::function<void()> changed = {}) {
  return [metrics, observe_it, began = std::chrono::steady_clock::now(), encode,
          answer = std::move(answer), changed = std::move(changed)](Expected<T> r) {
    observe(metrics, observe_it, began, r);
    if (!r) {
      answer(r.error());
    } else {
      answer(encode(*r));
    }
    if (changed) changed();
  };
}

// Items in one page of a list (GET /v1/devices, /v1/compositions, /v1/events): by default,
// and at most.
constexpr uint64_t kDefaultPage = 1000;
constexpr uint64_t kMaxPage = 10000;

// The page size a list call asks for (`limit`, 1 to kMaxPage), kDefaultPage when not given.
Expected<size_t> page_size(const Call& call) {
  const auto text = call.text("limit");
  if (!text) return static_cast<size_t>(kDefaultPage);
  auto limit = parse_whole_number("limit", *text, 1, kMaxPage);
  if (!limit) return limit.error();
  return static_cast<size_t>(*limit);
}

// One page of `rows`, read with one row more than `page` to tell whether a next page exists;
// its cursor is `cursor_of` the page's last row.
template <typename T, typename CursorOf>
api::Page<T> one_page(std::vector<T> rows, size_t page, CursorOf cursor_of) {
  api::Page<T> out{std::move(rows)};
  if (out.items.size() > page) {
    out.items.resize(page);
    out.next_cursor = cursor_of(out.items.back());
  }
  return out;
}

// A cursor this server gave: `<ts_ms>-<id>` for events, an id for compositions.
Error bad_cursor(const std::string& text, std::string_view form) {
  return bad("cursor: '" + printable(text) + "' is not a cursor of this list (" +
             std::string(form) + "); pass next_cursor from the previous page as it is");
}

Expected<std::optional<int64_t>> composition_cursor(const Call& call) {
  const auto text = call.text("cursor");
  if (!text) return std::optional<int64_t>{};
  auto id = parse_whole_number("cursor", *text, 1, std::numeric_limits<int64_t>::max());
  if (!id) return bad_cursor(*text, "a composition id");
  return std::optional<int64_t>{static_cast<int64_t>(*id)};
}

Expected<std::optional<db::EventCursor>> event_cursor(const Call& call) {
  const auto text = call.text("cursor");
  if (!text) return std::optional<db::EventCursor>{};
  const size_t dash = text->find('-');
  if (dash == std::string::npos) return bad_cursor(*text, "TIME-ID");
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  auto ts = parse_whole_number("cursor", std::string_view(*text).substr(0, dash), 0, kMax);
  auto id = parse_whole_number("cursor", std::string_view(*text).substr(dash + 1), 1, kMax);
  if (!ts || !id) return bad_cursor(*text, "TIME-ID");
  return std::optional<db::EventCursor>{
      db::EventCursor{static_cast<int64_t>(*ts), static_cast<int64_t>(*id)}};
}

// The most nodes one PUT /v1/compositions/{job} composes (Slurm's own jobs stay far below).
constexpr size_t kMaxJobNodes = 65536;

struct JobNode {
  uint32_t job = 0;
  std::string node;
};

// The (job, node) of a /v1/compositions/{job}/{node} request, checked.
Expected<JobNode> job_and_node(const Call& call) {
  auto job = parse_whole_number("job id", call.match(1), 1, kMaxJobId);
  if (!job) return job.error();
  JobNode out{static_cast<uint32_t>(*job), call.match(2)};
  if (auto s = check_node(out.node); !s) return s.error();
  return out;
}

class Handlers {
 public:
  explicit Handlers(ApiContext& ctx) : ctx_(ctx) {}

  // The answer comes when the fabric's attach has ended; no worker waits for it.
  void compose(const Call& call, const Answer& answer) {
    auto target = job_and_node(call);
    if (!target) return answer(target.error());
    const auto& [job, node] = *target;
    auto in = compose_input(call, job);
    if (!in) return answer(in.error());
    if (!in->second.empty()) {
      return answer(bad("nodes: this path names the node (" + node +
                        "); a job's nodes together go to PUT /v1/compositions/" +
                        std::to_string(job)));
    }
    in->first.node = node;
    ctx_.service.compose_async(in->first, answer_when_done<Composition>(
                                              ctx_.metrics, &Metrics::observe_compose,
                                              [](const Composition& c) { return api::to_json(c); },
                                              answer, ctx_.compositions_changed));
  }

  // PUT /v1/compositions/{job}: every node of the body's `nodes` at once, all or nothing; the
  // answer comes when the last node's attach has ended.
  void compose_job(const Call& call, const Answer& answer) {
    auto job = parse_whole_number("job id", call.match(1), 1, kMaxJobId);
    if (!job) return answer(job.error());
    auto in = compose_input(call, static_cast<uint32_t>(*job));
    if (!in) return answer(in.error());
    const std::vector<std::string>& nodes = in->second;
    if (nodes.empty()) return answer(bad("nodes: name the job's nodes, at least one"));
    if (nodes.size() > kMaxJobNodes) {
      return answer(bad("nodes: " + std::to_string(nodes.size()) + " nodes, at most " +
                        std::to_string(kMaxJobNodes) + " in one call"));
    }
    std::set<std::string_view> seen;
    for (const std::string& node : nodes) {
      if (auto s = check_node(node); !s) {
        return answer(Error{s.error().code, "nodes: " + s.error().message});
      }
      if (!seen.insert(node).second) return answer(bad("nodes: '" + node + "' is named twice"));
    }
    ctx_.service.compose_job_async(
        in->first, nodes,
        answer_when_done<std::vector<Composition>>(ctx_.metrics, &Metrics::observe_compose,
                                                   api::compositions_to_json, answer,
                                                   ctx_.compositions_changed));
  }

  // DELETE /v1/compositions/{job}: every live composition of the job; the answer comes when
  // the last node's detach has ended, and no worker waits for it.
  void release_job(const Call& call, const Answer& answer) {
    auto job = parse_whole_number("job id", call.match(1), 1, kMaxJobId);
    if (!job) return answer(job.error());
    ctx_.service.release_job_async(
        static_cast<uint32_t>(*job),
        answer_when_done<std::vector<Composition>>(ctx_.metrics, &Metrics::observe_release,
                                                   api::compositions_to_json, answer,
                                                   ctx_.compositions_changed));
  }

  Expected<Json::Value> show(const Call& call) {
    auto target = job_and_node(call);
    if (!target) return target.error();
    const auto& [job, node] = *target;
    const Caller& caller = call.caller();
    db::CompositionFilter f;
    f.job_id = job;
    f.node = node;
    f.limit = 1;
    if (!caller.admin) f.uid = caller.uid;
    auto live = ctx_.service.store().live_composition(job, node);
    if (!live) return live.error();
    if (*live && (caller.admin || (*live)->owner.uid == caller.uid)) return api::to_json(**live);
    auto found = ctx_.service.store().compositions(f);
    if (!found) return found.error();
    if (found->empty()) {
      return Error{ErrorCode::kNotFound,
                   "no composition for job " + std::to_string(job) + " on node " + node};
    }
    return api::to_json(found->front());
  }

  // The answer comes when the fabric's detach has ended; no worker waits for it.
  void release(const Call& call, const Answer& answer) {
    auto target = job_and_node(call);
    if (!target) return answer(target.error());
    ctx_.service.release_async(target->job, target->node,
                               answer_when_done<std::optional<Composition>>(
                                   ctx_.metrics, &Metrics::observe_release, api::release_to_json,
                                   answer, ctx_.compositions_changed));
  }

  // POST (with {"reason": ...}) and DELETE /v1/compositions/{job}/{node}/hold: the node's
  // hold on a composition whose devices a process on the host still holds after the job.
  Expected<Json::Value> hold(const Call& call, bool set) {
    auto target = job_and_node(call);
    if (!target) return target.error();
    std::string reason;
    if (set) {
      auto body = api::from_text<api::DrainBody>(call.body());
      if (!body) return body.error();
      reason = std::move(body->reason);
    }
    auto held = ctx_.admin.set_hold(target->job, target->node, reason,
                                    "uid " + std::to_string(call.caller().uid));
    if (!held) return held.error();
    return api::to_json(*held);
  }

  // POST /v1/compositions/{job}/{node}/devices/{id}/drain: the node's host never showed a
  // device of the job's composition.
  Expected<Json::Value> drain_unseen(const Call& call) {
    auto target = job_and_node(call);
    if (!target) return target.error();
    auto body = api::from_text<api::DrainBody>(call.body());
    if (!body) return body.error();
    auto drained = ctx_.admin.drain_unseen(target->job, target->node, call.match(3), body->reason,
                                           "uid " + std::to_string(call.caller().uid));
    if (!drained) return drained.error();
    return api::to_json(*drained);
  }

  // POST /v1/compositions/{job}/{node}/devices/{id}/fail: the node's host found a device of
  // the job's composition bad (slurm-plugin's GPU health check).
  Expected<Json::Value> fail_reported(const Call& call) {
    auto target = job_and_node(call);
    if (!target) return target.error();
    auto body = api::from_text<api::DrainBody>(call.body());
    if (!body) return body.error();
    auto failed = ctx_.admin.fail_reported(target->job, target->node, call.match(3), body->reason,
                                           "uid " + std::to_string(call.caller().uid));
    if (!failed) return failed.error();
    if (ctx_.pool_changed) ctx_.pool_changed();
    return api::to_json(*failed);
  }

  Expected<Json::Value> list_compositions(const Call& call) {
    db::CompositionFilter f;
    auto job = call.job("job");
    if (!job) return job.error();
    f.job_id = *job;
    f.user = call.text("user");
    f.node = call.text("node");
    auto state =
        call.choice<CompositionState>("state", parse_composition_state,
                                      "requested, composing, ready, releasing, released, failed");
    if (!state) return state.error();
    f.state = *state;
    auto live = call.choice<bool>(
        "live",
        [](std::string_view v) {
          return v == "0" || v == "1" ? std::optional<bool>(v == "1") : std::nullopt;
        },
        "0, 1");
    if (!live) return live.error();
    f.live_only = live->value_or(false);
    // One page, newest first: no answer grows with the history.
    auto page = page_size(call);
    if (!page) return page.error();
    auto cursor = composition_cursor(call);
    if (!cursor) return cursor.error();
    f.before_id = *cursor;
    f.limit = *page + 1;
    if (!call.caller().admin) f.uid = call.caller().uid;  // users see their own jobs only
    auto list = ctx_.service.store().compositions(f);
    if (!list) return list.error();
    return api::to_json(one_page(std::move(*list), *page,
                                 [](const Composition& c) { return std::to_string(c.id); }));
  }

  Expected<Json::Value> pool(const Call&) { return api::pool_to_json(ctx_.pool.pool_summary()); }
  Expected<Json::Value> snapshot(const Call&) {
    if (!ctx_.snapshot) return Error{ErrorCode::kNotFound, "this composerd publishes no snapshot"};
    return api::to_json(ctx_.snapshot());
  }

  Expected<Json::Value> hosts(const Call&) { return api::hosts_to_json(ctx_.pool.hosts()); }

  Expected<Json::Value> devices(const Call& call) {
    db::DeviceFilter f;
    auto type = call.choice<DeviceType>("type", parse_device_type, "gpu, mem, nvme");
    if (!type) return type.error();
    f.type = *type;
    auto state = call.choice<DeviceState>("state", parse_device_state, kDeviceStateNames);
    if (!state) return state.error();
    f.state = *state;
    f.zone = call.text("zone");
    f.node = call.text("node");
    // One page: no answer grows with the pool.
    auto page = page_size(call);
    if (!page) return page.error();
    f.after = call.text("cursor");
    f.limit = *page + 1;
    auto list = ctx_.service.store().devices(f);
    if (!list) return list.error();
    return api::to_json(one_page(std::move(*list), *page, [](const Device& d) { return d.id; }));
  }

  // A drain's body is {"reason": ...}; every other action takes {} or nothing. The reason.
  static Expected<std::string> action_body(const Call& call, bool drain) {
    if (drain) {
      auto body = api::from_text<api::DrainBody>(call.body());
      if (!body) return body.error();
      return body->reason;
    }
    if (!call.body().empty()) {
      auto json = api::parse_json(call.body());
      if (!json) return json.error();
      if (!json->isObject() || !json->empty()) {
        return bad(std::string(call.match(2)) + " takes an empty object {} as its body");
      }
    }
    return std::string();
  }

  Expected<Json::Value> domain_action(const Call& call, bool drain) {
    const std::string name = call.match(1);
    const std::optional<FailureDomain> domain = parse_failure_domain(name);
    if (!valid_utf8(name, false) || !domain) {
      return bad("failure domain '" + printable(name) +
                 "' is not LEVEL:NAME (e.g. appliance:mem-a)");
    }
    auto body = action_body(call, drain);
    if (!body) return body.error();
    const std::string actor = "uid " + std::to_string(call.caller().uid);
    auto devices = ctx_.admin.set_domain_drained(*domain, drain, *body, actor);
    if (!devices) return devices.error();
    if (ctx_.pool_changed) ctx_.pool_changed();
    return api::devices_to_json(*devices);
  }

  enum class DeviceAction { kDrain, kResume, kAdopt, kReleaseForeign };
  Expected<Json::Value> device_action(const Call& call, DeviceAction action) {
    const std::string id = call.match(1);
    if (!valid_utf8(id, false)) {
      return bad("device id '" + printable(id) +
                 "' is not text (UTF-8 without control characters)");
    }
    auto body = action_body(call, action == DeviceAction::kDrain);
    if (!body) return body.error();
    const std::string& reason = *body;
    const std::string actor = "uid " + std::to_string(call.caller().uid);
    auto d = [&] {
      switch (action) {
        case DeviceAction::kDrain:
          return ctx_.admin.drain(id, reason, actor);
        case DeviceAction::kResume:
          return ctx_.admin.resume(id, actor);
        case DeviceAction::kAdopt:
          return ctx_.admin.adopt(id, actor);
        case DeviceAction::kReleaseForeign:
          break;
      }
      return ctx_.admin.release_foreign(id, actor);
    }();
    if (!d) return d.error();
    if (ctx_.pool_changed) ctx_.pool_changed();
    return api::to_json(*d);
  }

  Expected<Json::Value> events(const Call& call) {
    db::EventFilter f;
    auto job = call.job("job");
    if (!job) return job.error();
    f.job_id = *job;
    auto since = call.time_ms("since_ms");
    if (!since) return since.error();
    f.since_ms = *since;
    auto until = call.time_ms("until_ms");
    if (!until) return until.error();
    f.until_ms = *until;
    // One page, oldest first: no answer grows with the ledger.
    auto page = page_size(call);
    if (!page) return page.error();
    auto cursor = event_cursor(call);
    if (!cursor) return cursor.error();
    f.after = *cursor;
    f.limit = *page + 1;
    auto list = ctx_.service.store().events(f);
    if (!list) return list.error();
    return api::to_json(one_page(std::move(*list), *page, [](const Event& e) {
      return std::to_string(e.ts_ms) + "-" + std::to_string(e.id);
    }));
  }

  Expected<Json::Value> health(const Call&) {
    api::HealthInfo h{.status = "ok",
                      .fabric = ctx_.fabric,
                      .version = ctx_.version,
                      .uptime_s = (ctx_.clock.now_ms() - ctx_.started_ms) / 1000,
                      .slurm_licenses = ctx_.slurm_licenses,
                      .license_server = ctx_.license_server};
    if (ctx_.pool.pool_summary().empty()) {
      h.status = "warning";
      h.warnings.push_back(
          "the fabric shows no pooled device: every compose is refused (composerd --check "
          "--discover shows what the fabric holds and what was skipped)");
    }
    if (ctx_.leadership) ctx_.leadership(h);
    return api::to_json(h);
  }

 private:
  // A compose body read and checked: the input (node not set) and the body's nodes.
  Expected<std::pair<ComposeInput, std::vector<std::string>>> compose_input(const Call& call,
                                                                            uint32_t job) const {
    auto body = api::from_text<api::ComposeBody>(call.body());
    if (!body) return body.error();
    if (!body->owner.workload.empty() && !ctx_.workloads.empty() &&
        std::find(ctx_.workloads.begin(), ctx_.workloads.end(), body->owner.workload) ==
            ctx_.workloads.end()) {
      return bad("workload: unknown class '" + body->owner.workload +
                 "' (configured: " + join(ctx_.workloads, ", ") + ")");
    }
    body->owner.job_id = job;  // the path's, never the body's
    ComposeInput in{.owner = std::move(body->owner),
                    .node = "",
                    .request = body->request,
                    .mem_policy = body->mem_policy};
    return std::pair{std::move(in), std::move(body->nodes)};
  }

  ApiContext& ctx_;
};

}  // namespace

void install_routes(Router& router, ApiContext& ctx) {
  RoutePipeline routes(router, ctx.auth);
  auto h = std::make_shared<Handlers>(ctx);
  const auto user = Access::user();
  const auto admin = Access::admin("change the pool");
  const std::string comp = R"(/v1/compositions/(\d+)/([^/]+))";
  const auto composer = Access::composer();
  routes.add_async("PUT", comp, composer, {},
                   [h](const Call& c, const Answer& answer) { h->compose(c, answer); });
  routes.add("GET", comp, user, {}, [h](const Call& c) { return h->show(c); });
  routes.add_async("DELETE", comp, composer, {},
                   [h](const Call& c, const Answer& answer) { h->release(c, answer); });
  routes.add("POST", comp + "/hold", composer, {}, [h](const Call& c) { return h->hold(c, true); });
  routes.add("DELETE", comp + "/hold", composer, {},
             [h](const Call& c) { return h->hold(c, false); });
  routes.add("POST", comp + "/devices/([^/]+)/drain", composer, {},
             [h](const Call& c) { return h->drain_unseen(c); });
  routes.add("POST", comp + "/devices/([^/]+)/fail", composer, {},
             [h](const Call& c) { return h->fail_reported(c); });
  const std::string job = R"(/v1/compositions/([^/]+))";
  routes.add_async("PUT", job, composer, {},
                   [h](const Call& c, const Answer& answer) { h->compose_job(c, answer); });
  routes.add_async("DELETE", job, composer, {},
                   [h](const Call& c, const Answer& answer) { h->release_job(c, answer); });
  routes.add("GET", "/v1/compositions", user,
             {"job", "user", "state", "node", "live", "limit", "cursor"},
             [h](const Call& c) { return h->list_compositions(c); });
  routes.add("GET", "/v1/pool", user, {}, [h](const Call& c) { return h->pool(c); });
  routes.add("GET", "/v1/snapshot", user, {}, [h](const Call& c) { return h->snapshot(c); });
  routes.add("GET", "/v1/devices", user, {"type", "state", "zone", "node", "limit", "cursor"},
             [h](const Call& c) { return h->devices(c); });
  routes.add("GET", "/v1/hosts", user, {}, [h](const Call& c) { return h->hosts(c); });
  routes.add("POST", R"(/v1/devices/([^/]+)/(drain))", admin, {},
             [h](const Call& c) { return h->device_action(c, Handlers::DeviceAction::kDrain); });
  routes.add("POST", R"(/v1/devices/([^/]+)/(resume))", admin, {},
             [h](const Call& c) { return h->device_action(c, Handlers::DeviceAction::kResume); });
  routes.add("POST", R"(/v1/domains/([^/]+)/(drain))", admin, {},
             [h](const Call& c) { return h->domain_action(c, true); });
  routes.add("POST", R"(/v1/domains/([^/]+)/(resume))", admin, {},
             [h](const Call& c) { return h->domain_action(c, false); });
  routes.add("POST", R"(/v1/devices/([^/]+)/(adopt))", admin, {},
             [h](const Call& c) { return h->device_action(c, Handlers::DeviceAction::kAdopt); });
  routes.add("POST", R"(/v1/devices/([^/]+)/(release-foreign))", admin, {}, [h](const Call& c) {
    return h->device_action(c, Handlers::DeviceAction::kReleaseForeign);
  });
  routes.add("GET", "/v1/events", Access::admin("read this"),
             {"job", "since_ms", "until_ms", "limit", "cursor"},
             [h](const Call& c) { return h->events(c); });
  routes.add("GET", "/v1/health", Access::anyone(), {},
             [h](const Call& c) { return h->health(c); });
  install_report_routes(routes, ctx.service.store(), ctx.clock);
  if (ctx.policy != nullptr)
    install_policy_routes(routes, *ctx.policy, ctx.pool_changed, ctx.slurm);
  if (ctx.metrics != nullptr) {
    Metrics* metrics = ctx.metrics;
    routes.add_text("/metrics", Access::anyone(), {}, "text/plain; version=0.0.4; charset=utf-8",
                    [metrics](const Call&) { return metrics->render(); });
  }
}

}  // namespace composer::server
