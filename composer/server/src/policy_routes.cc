#include "policy_routes.h"

#include <optional>
#include <utility>

#include "composer/api/codec.h"
#include "composer/common/strings.h"
#include "composer/common/units.h"
#include "route.h"
#include "slurm_sync.h"

namespace composer::server {

namespace {

void show_actions(const SyncPlan& plan, api::PolicyApplied& answer) {
  for (const auto& a : plan.actions) {
    if (a.action.kind == policies::ActionKind::kLeave) continue;
    std::string line = policies::render_actions({a.action});
    if (!line.empty() && line.back() == '\n') line.pop_back();
    answer.slurm_actions.push_back(std::move(line));
  }
  for (const auto& w : plan.warnings) answer.warnings.push_back("Slurm: " + w);
}

}  // namespace

void install_policy_routes(RoutePipeline& routes, PolicyKeeper& keeper,
                           std::function<void()> changed, SlurmSync* slurm) {
  const auto user = Access::user();
  routes.add(
      "PUT", "/v1/policy", Access::admin("change the policy"), {},
      [&keeper, changed = std::move(changed), slurm](const Call& call) -> Expected<Json::Value> {
        auto json = api::parse_json(call.body());
        if (!json) return json.error();
        auto body = api::policy_body_from_json(*json);
        if (!body) return body.error();
        std::optional<PolicyKeeper::PlanInForce> plan;
        if (slurm != nullptr && !body->dry_run) {
          // A policy Slurm cannot take (a cap license slurm.conf lacks) is refused whole.
          api::PolicyBody trial = *body;
          trial.dry_run = true;
          auto checked = keeper.apply(trial, call.caller(), &plan);
          if (!checked) return checked.error();
          auto diff = slurm->preview(plan);
          if (diff && !diff->problems.empty()) {
            return Error{ErrorCode::kInvalidArgument,
                         "Slurm cannot take this policy: " + join(diff->problems, "; ") +
                             "; nothing was changed"};
          }
        }
        Expected<api::PolicyApplied> applied =
            Error{ErrorCode::kInternal, "the policy was not stored"};
        std::optional<SyncReport> report;
        if (slurm != nullptr && !body->dry_run) {
          // Stored under the round's lock: no background round (every ReconcileInterval)
          // comes between, so this request's round is the one that makes the changes.
          report = slurm->round(true, [&]() -> Status {
            applied = keeper.apply(*body, call.caller(), &plan);
            if (!applied) return applied.error();
            return Status::Ok();
          });
        } else {
          applied = keeper.apply(*body, call.caller(), &plan);
        }
        if (!applied) return applied.error();
        if (slurm == nullptr) {
          applied->slurm =
              "SlurmSync=no: composerd does not change Slurm; set SlurmSync=yes in composer.conf "
              "to have it keep the blockers and holds in step";
        } else if (body->dry_run) {
          auto diff = slurm->preview(plan);
          if (!diff) {
            applied->slurm = "cannot show the changes: " + diff.error().message;
          } else {
            show_actions(*diff, *applied);
            applied->slurm = !diff->problems.empty()
                                 ? "would not be applied: " + join(diff->problems, "; ")
                             : diff->changes() ? "dry run: nothing was changed"
                                               : "nothing to change";
          }
        } else {
          const SyncReport& r = *report;
          show_actions(r.plan, *applied);
          applied->slurm = !r.error.empty() ? std::string(r.rolled_back ? "not applied (undone): "
                                                                        : "not applied: ") +
                                                  r.error + "; composerd tries again every round"
                           : r.plan.changes() ? "applied"
                                              : "nothing to change";
        }
        // After the round, so that the round this request ran is the one that shows the
        // changes (the snapshot's publication also wakes the background round).
        if (applied->changed && changed) changed();
        return api::to_json(*applied);
      });
  routes.add("GET", "/v1/policy", user, {}, [&keeper](const Call&) -> Expected<Json::Value> {
    auto current = keeper.current();
    if (!current) return current.error();
    if (!*current) {
      return Error{ErrorCode::kNotFound,
                   "no policy has been applied yet (composerctl policy apply)"};
    }
    return api::to_json(**current);
  });
  routes.add("GET", "/v1/policy/history", user, {"limit"},
             [&keeper](const Call& call) -> Expected<Json::Value> {
               auto limit = call.number("limit", kMaxListLimit);
               if (!limit) return limit.error();
               auto list = keeper.history(limit->value_or(0));
               if (!list) return list.error();
               return api::policy_history_to_json(*list);
             });
  routes.add("GET", "/v1/policy/explain", user,
             {"workload", "partition", "qos", "account", "gpus", "mem_bytes", "nvme",
              "time_limit_s", "start_ms"},
             [&keeper](const Call& call) -> Expected<Json::Value> {
               PolicyKeeper::Query q;
               q.workload = call.text("workload").value_or("");
               q.partition = call.text("partition").value_or("");
               q.qos = call.text("qos").value_or("");
               q.account = call.text("account").value_or("");
               constexpr uint64_t kMaxCount = 1u << 20;
               auto gpus = call.number("gpus", kMaxCount);
               if (!gpus) return gpus.error();
               auto mem = call.number("mem_bytes", kMaxMemBytes);
               if (!mem) return mem.error();
               auto nvme = call.number("nvme", kMaxCount);
               if (!nvme) return nvme.error();
               auto limit = call.number("time_limit_s", 366ULL * 86400);
               if (!limit) return limit.error();
               auto start = call.time_ms("start_ms");
               if (!start) return start.error();
               q.gpus = gpus->value_or(0);
               q.mem_bytes = mem->value_or(0);
               q.nvme = nvme->value_or(0);
               q.time_limit_s = static_cast<int64_t>(limit->value_or(0));
               q.start_s = start->value_or(keeper.clock().now_ms()) / 1000;
               auto answer = keeper.explain(q);
               if (!answer) return answer.error();
               return api::to_json(*answer);
             });
}

}  // namespace composer::server
