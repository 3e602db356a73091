#include "failure_reactor.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "composer/server/slurm_jobs.h"

namespace composer::server {

namespace pol = composer::policies;
using Action = pol::FailureReaction::Action;

namespace {

// The ledger kinds of the three reactions.
constexpr char kRequeued[] = "requeued";
constexpr char kDegraded[] = "degraded";
constexpr char kIgnored[] = "failure_ignored";

bool is_reaction(const Event& e) {
  return e.kind == kRequeued || e.kind == kDegraded || e.kind == kIgnored;
}

Status slurm_call(std::vector<std::string> argv, const std::string& slurm_conf, int timeout_ms) {
  auto ran = run_checked(slurm_command(std::move(argv), slurm_conf, timeout_ms, true));
  if (!ran) return ran.error();
  return Status::Ok();
}

}  // namespace

SlurmJobActions scontrol_job_actions(const std::string& scontrol, const std::string& slurm_conf,
                                     int timeout_ms) {
  SlurmJobActions a;
  a.requeue = [=](uint32_t job) {
    return slurm_call({scontrol, "requeue", std::to_string(job)}, slurm_conf, timeout_ms);
  };
  a.notify = [=](uint32_t job, const std::string& message) {
    return slurm_call({scontrol, "notify", std::to_string(job), message}, slurm_conf, timeout_ms);
  };
  return a;
}

SlurmJobActions no_slurm_job_actions() {
  const auto off = [] {
    return Error{ErrorCode::kUnavailable,
                 "composerd does not reach Slurm: SlurmJobCheck=no and SlurmSync=no"};
  };
  return {.requeue = [off](uint32_t) -> Status { return off(); },
          .notify = [off](uint32_t, const std::string&) -> Status { return off(); }};
}

FailureReactor::FailureReactor(const LivePool& pool, db::Store& store, ReactionOf reaction_of,
                               SlurmJobActions slurm, const Clock& clock)
    : pool_(pool),
      store_(store),
      reaction_of_(std::move(reaction_of)),
      slurm_(std::move(slurm)),
      clock_(clock) {}

FailureReactor::Report FailureReactor::run_once() {
  std::lock_guard pass(pass_mu_);
  Report report;
  // The compositions failed devices hit, by job: a job on several nodes reacts once.
  std::map<uint32_t, std::vector<LivePool::Impact>> by_job;
  for (auto& impact : pool_.failure_impacts()) {
    by_job[impact.entry.job_id].push_back(std::move(impact));
  }
  if (by_job.empty()) return report;
  // The live compositions of the jobs hit, read once for the pass.
  std::map<uint32_t, std::set<int64_t>> live_ids;
  for (const auto& e : pool_.live()) {
    if (by_job.count(e.job_id)) live_ids[e.job_id].insert(e.id);
  }
  for (const auto& [job, impacts] : by_job) {
    auto events = store_.events(db::EventFilter{.job_id = job});
    if (!events) {
      ++report.errors;
      log::warning("cannot read a job's ledger to react to its failed devices",
                   {{"job", std::to_string(job)}, {"cause", events.error().message}});
      continue;
    }
    // Once per composition: a reaction recorded for any of the job's live compositions was
    // this failure's (a requeued job keeps its compositions until its epilog has run).
    const std::set<int64_t>& live = live_ids[job];
    uint32_t requeues = 0;
    bool reacted = false;
    for (const Event& e : *events) {
      if (!is_reaction(e)) continue;
      if (e.kind == kRequeued) ++requeues;
      if (e.composition_id && live.count(*e.composition_id)) reacted = true;
    }
    if (reacted) continue;

    const LivePool::LiveEntry& first = impacts.front().entry;
    std::vector<std::string> failed, nodes;
    std::set<FailureDomain> domain_set;
    for (const auto& impact : impacts) {
      failed.insert(failed.end(), impact.failed.begin(), impact.failed.end());
      nodes.push_back(impact.entry.node);
      domain_set.insert(impact.domains.begin(), impact.domains.end());
    }
    std::vector<std::string> domains;
    for (const FailureDomain& d : domain_set) domains.push_back(to_string(d));
    const pol::FailureReaction reaction = reaction_of_(first.workload);
    const std::string klass = first.workload.empty() ? "(no class)" : first.workload;
    std::string cause =
        (failed.size() == 1 ? "device " : "devices ") + and_list(failed) + " failed";
    if (!domains.empty()) cause += " (" + join(domains, ", ") + ")";
    const std::string rule = "class " + klass + " reacts with " +
                             std::string(pol::to_string(reaction.action)) +
                             (reaction.line > 0 ? "" : " (no OnFailure line: the default)");

    Event ev;
    ev.ts_ms = clock_.now_ms();
    ev.composition_id = first.id;
    if (auto c = store_.composition(first.id); c) {
      ev.owner = c->owner;
      ev.window = c->window;
    }
    ev.owner.job_id = job;
    ev.owner.workload = first.workload;
    ev.node = join(nodes, ",");
    ev.devices = failed;
    std::string done;
    Action action = reaction.action;
    if (action == Action::kRequeue && requeues >= reaction.max_requeues) {
      done = "not requeued: it was requeued " + std::to_string(requeues) +
             " times for failed devices already (MaxRequeues=" +
             std::to_string(reaction.max_requeues) + "); it keeps running, degraded";
      action = Action::kNotify;
    } else if (action == Action::kRequeue) {
      if (Status s = slurm_.requeue(job); s) {
        done = "job " + std::to_string(job) + " requeued through Slurm (" +
               std::to_string(requeues + 1) + " of at most " +
               std::to_string(reaction.max_requeues) +
               "); its epilog releases the healthy devices and it composes again when it "
               "restarts";
      } else {
        done = "Slurm did not requeue it (" + s.error().message + "); it keeps running, degraded";
        action = Action::kNotify;
      }
    } else if (action == Action::kNotify) {
      done = "it keeps running, degraded";
    } else {
      done = "nothing done to the job";
    }
    if (action == Action::kNotify) {
      const std::string message = "slurm-composer: " + cause + "; job " + std::to_string(job) +
                                  " keeps running without " + (failed.size() == 1 ? "it" : "them");
      if (Status s = slurm_.notify(job, message); !s) {
        done += " (the job could not be told: " + s.error().message + ")";
      }
    }
    ev.kind = action == Action::kRequeue  ? kRequeued
              : action == Action::kNotify ? kDegraded
                                          : kIgnored;
    ev.detail = cause + "; " + rule + ": " + done;
    if (auto s = store_.add_event(ev); !s) {
      // Without its event the reaction would repeat next pass: a requeue must not.
      ++report.errors;
      log::error("cannot record a failure reaction in the ledger",
                 {{"job", std::to_string(job)}, {"cause", s.error().message}});
      continue;
    }
    if (action == Action::kRequeue) ++report.requeued;
    if (action == Action::kNotify) ++report.notified;
    if (action == Action::kNone) ++report.ignored;
    log::write(action == Action::kNone ? log::Level::kInfo : log::Level::kWarning,
               "a job's devices failed",
               {{"job", std::to_string(job)},
                {"class", klass},
                {"reaction", std::string(ev.kind)},
                {"detail", ev.detail}});
  }
  std::lock_guard lock(mu_);
  totals_.requeued += report.requeued;
  totals_.notified += report.notified;
  totals_.ignored += report.ignored;
  totals_.errors += report.errors;
  return report;
}

FailureReactor::Report FailureReactor::totals() const {
  std::lock_guard lock(mu_);
  return totals_;
}

}  // namespace composer::server
