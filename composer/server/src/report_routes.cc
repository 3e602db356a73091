#include "report_routes.h"
#include "http_reply.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <memory>
#include <semaphore>
#include <string>

#include "composer/accounting/report.h"
#include "composer/accounting/report_json.h"
#include "composer/api/codec.h"
#include "composer/common/log.h"
#include "composer/common/units.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/parser.h"
#include "composer/policies/zoneinfo.h"

namespace composer::server {
namespace {

Expected<int64_t> ms_param(const httplib::Params& query, const char* name, bool required) {
  auto it = query.find(name);
  if (it == query.end()) {
    if (required) {
      return bad(std::string(name) + ": missing; give a time in milliseconds since the epoch");
    }
    return int64_t{-1};
  }
  const std::string& v = it->second;
  if (v.empty() || v.size() > 15 ||
      !std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
    return bad(std::string(name) + ": '" + v +
               "' is not a time in milliseconds since the epoch (digits only)");
  }
  return static_cast<int64_t>(std::stoll(v));
}

// Each window row's cap under the policy version in force at the report's end (the newest
// applied at or before it), resolved against today's inventory as the report's pool is. A
// version that no longer parses, or rows whose class or window it does not know, get no cap;
// the report's figures do not depend on it.
Status add_window_caps(db::Store& store, const std::vector<Device>& inventory,
                       accounting::Report& report) {
  if (report.by_window.empty()) return Status::Ok();
  auto history = store.policy_history(0);  // newest first
  if (!history) return history.error();
  const PolicyVersion* version = nullptr;
  for (const PolicyVersion& v : *history) {
    if (v.applied_ms <= report.end_ms) {
      version = &v;
      break;
    }
  }
  if (version == nullptr) return Status::Ok();
  auto policy = policies::parse_policy(version->text, version->file, [](std::string_view name) {
    return policies::load_time_zone(name);
  });
  if (!policy) {
    log::warning("report: the policy in force at the range's end no longer parses; no caps shown",
                 {{"version", std::to_string(version->id)}, {"cause", policy.error().message}});
    return Status::Ok();
  }
  policies::Pool pool;
  uint64_t mem_bytes = 0;
  for (const Device& d : inventory) {
    if (d.type == DeviceType::kGpu) ++pool.gpus;
    if (d.type == DeviceType::kNvme) ++pool.nvme;
    if (d.type == DeviceType::kMem) mem_bytes += d.capacity_bytes;
  }
  pool.mem_gib = gib_rounded_down(mem_bytes);
  const policies::Evaluator evaluator(std::move(*policy), pool);
  report.caps_policy_id = version->id;
  for (accounting::WindowUsage& row : report.by_window) {
    if (row.window.empty()) continue;
    auto caps = evaluator.caps(row.workload, row.window);
    if (!caps) continue;
    for (size_t t = 0; t < 3; ++t) {
      if (caps->capped[t]) row.cap[t] = caps->value[t];
    }
  }
  return Status::Ok();
}

class ReportHandler {
 public:
  ReportHandler(db::Store& store, const Authenticator& auth, const Clock& clock)
      : store_(store), auth_(auth), clock_(clock) {}

  void handle(const httplib::Request& req, httplib::Response& res) {
    auto caller = auth_.authenticate(req.get_header_value("Authorization"), req.method, req.path);
    if (!caller) {
      log::warning("request refused",
                   {{"method", req.method}, {"path", req.path}, {"cause", caller.error().message}});
      return send_error(res, caller.error());
    }
    // Only the query string counts (httplib also files form bodies under params).
    httplib::Params query;
    if (const auto q = req.target.find('?'); q != std::string::npos) {
      httplib::detail::parse_query_text(req.target.substr(q + 1), query);
    }
    for (const auto& [key, value] : query) {
      if (key != "start_ms" && key != "end_ms" && key != "top") {
        return send_error(
            res, bad("unknown query parameter '" + key + "' (allowed: start_ms, end_ms, top)"));
      }
    }
    auto start = ms_param(query, "start_ms", true);
    if (!start) return send_error(res, start.error());
    auto end = ms_param(query, "end_ms", true);
    if (!end) return send_error(res, end.error());
    accounting::ReportOptions options{
        .start_ms = *start, .end_ms = *end, .now_ms = clock_.now_ms(), .top_jobs = 10};
    if (auto it = query.find("top"); it != query.end()) {
      auto n = parse_count(it->second, static_cast<uint32_t>(accounting::kMaxTopJobs));
      if (!n) {
        return send_error(res, bad("top: '" + it->second + "' is not a whole number from 0 to " +
                                   std::to_string(accounting::kMaxTopJobs)));
      }
      options.top_jobs = *n;
    }
    if (!caller->admin) options.only_uid = caller->uid;
    if (auto v = accounting::validate(options); !v) return send_error(res, v.error());

    if (!slots_.try_acquire_for(std::chrono::seconds(30))) {
      return send_error(res, Error{ErrorCode::kUnavailable,
                                   "two reports are being computed already; try again shortly"});
    }
    struct Release {
      std::counting_semaphore<2>& s;
      ~Release() { s.release(); }
    } release{slots_};

    const auto began = std::chrono::steady_clock::now();
    auto inventory = store_.devices();
    if (!inventory) return send_error(res, inventory.error());
    accounting::ReportBuilder builder(*inventory, options);
    auto scanned = store_.scan_events(options.start_ms, std::min(options.end_ms, options.now_ms),
                                      [&builder](const Event& e) {
                                        builder.add(e);
                                        return true;
                                      });
    if (!scanned) return send_error(res, scanned.error());
    accounting::Report report = builder.finish();
    if (auto caps = add_window_caps(store_, *inventory, report); !caps) {
      return send_error(res, caps.error());
    }
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - began);
    log::info("report computed", {{"uid", std::to_string(caller->uid)},
                                  {"start_ms", std::to_string(report.start_ms)},
                                  {"end_ms", std::to_string(report.end_ms)},
                                  {"events", std::to_string(report.events_read)},
                                  {"ms", std::to_string(took.count())}});
    send_json(res, 200, accounting::to_json(report));
  }

 private:
  db::Store& store_;
  const Authenticator& auth_;
  const Clock& clock_;
  std::counting_semaphore<2> slots_{2};
};

}  // namespace

void install_report_routes(httplib::Server& server, db::Store& store, const Authenticator& auth,
                           const Clock& clock) {
  auto handler = std::make_shared<ReportHandler>(store, auth, clock);
  server.Get("/v1/reports", [handler](const httplib::Request& req, httplib::Response& res) {
    handler->handle(req, res);
  });
}

}  // namespace composer::server
