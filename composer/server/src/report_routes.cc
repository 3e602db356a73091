#include "report_routes.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <semaphore>
#include <string>

#include "composer/accounting/report.h"
#include "composer/accounting/report_json.h"
#include "composer/common/log.h"
#include "composer/common/units.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/parser.h"
#include "composer/policies/zoneinfo.h"
#include "route.h"

namespace composer::server {
namespace {

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
  policies::PoolSize pool;
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
  ReportHandler(db::Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  Expected<Json::Value> handle(const Call& call) {
    auto start = call.required_time_ms("start_ms");
    if (!start) return start.error();
    auto end = call.required_time_ms("end_ms");
    if (!end) return end.error();
    auto top = call.number("top", accounting::kMaxTopJobs);
    if (!top) return top.error();
    accounting::ReportOptions options{.start_ms = *start,
                                      .end_ms = *end,
                                      .now_ms = clock_.now_ms(),
                                      .top_jobs = static_cast<size_t>(top->value_or(10))};
    const Caller& caller = call.caller();
    if (!caller.admin) options.only_uid = caller.uid;
    if (auto v = accounting::validate(options); !v) return v.error();

    if (!slots_.try_acquire_for(std::chrono::seconds(30))) {
      return Error{ErrorCode::kUnavailable,
                   "two reports are being computed already; try again shortly"};
    }
    // Destroyed after the report's working memory (declared before it). A report over a year
    // takes tens of MiB in the worker thread's malloc arena, which glibc keeps for that thread
    // once freed: with reports landing on different workers, composerd's resident memory grew
    // by that much per worker. malloc_trim hands the freed pages of every arena back.
    struct Release {
      std::counting_semaphore<2>& s;
      ~Release() {
        malloc_trim(0);
        s.release();
      }
    } release{slots_};

    const auto began = std::chrono::steady_clock::now();
    auto inventory = store_.devices();
    if (!inventory) return inventory.error();
    accounting::ReportBuilder builder(*inventory, options);
    // Ended compositions from the ledger's rollup, not event by event: a year's report reads
    // a row per composition (docs/BENCHMARKS.md, "Reports").
    auto walked =
        store_.walk_report(options.start_ms, std::min(options.end_ms, options.now_ms),
                           {.event = [&builder](const Event& e) { builder.add(e); },
                            .began = [&builder](const CompositionRollup& c) { builder.begin(c); },
                            .ended = [&builder](const CompositionRollup& c) { builder.end(c); },
                            .unattached = [&builder](uint64_t n) { builder.add_unattached(n); }});
    if (!walked) return walked.error();
    accounting::Report report = builder.finish();
    if (auto caps = add_window_caps(store_, *inventory, report); !caps) return caps.error();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - began);
    log::info("report computed", {{"uid", std::to_string(caller.uid)},
                                  {"start_ms", std::to_string(report.start_ms)},
                                  {"end_ms", std::to_string(report.end_ms)},
                                  {"events", std::to_string(report.events_read)},
                                  {"ms", std::to_string(took.count())}});
    return accounting::to_json(report);
  }

 private:
  db::Store& store_;
  const Clock& clock_;
  std::counting_semaphore<2> slots_{2};
};

}  // namespace

void install_report_routes(RoutePipeline& routes, db::Store& store, const Clock& clock) {
  auto handler = std::make_shared<ReportHandler>(store, clock);
  routes.add("GET", "/v1/reports", Access::user(), {"start_ms", "end_ms", "top"},
             [handler](const Call& call) { return handler->handle(call); });
}

}  // namespace composer::server
