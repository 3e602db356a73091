#include "slurm_sync.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>

#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "composer/common/thread_name.h"
#include "composer/config/conf_file.h"
#include "composer/server/slurm_jobs.h"
#include "composer/server/zone_steering.h"

namespace composer::server {

namespace pol = composer::policies;

namespace {

bool name_in(const std::vector<LicenseCount>& licenses, const std::string& name) {
  for (const auto& l : licenses) {
    if (l.name == name) return true;
  }
  return false;
}

}  // namespace

SlurmSync::SlurmSync(const LivePool& pool, const PolicyKeeper& keeper, const Clock& clock,
                     SlurmSyncOptions options)
    : pool_(pool), keeper_(keeper), clock_(clock), options_(std::move(options)) {}

SlurmSync::~SlurmSync() { stop(); }

void SlurmSync::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] {
    name_this_thread("slurm-sync");
    loop();
  });
}

void SlurmSync::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SlurmSync::poke() {
  {
    std::lock_guard lock(mu_);
    poked_ = true;
  }
  wake_.notify_all();
}

void SlurmSync::loop() {
  for (;;) {
    round(true);
    steer_zones();
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms),
                   [this] { return stopping_ || poked_; });
    if (stopping_) return;
    poked_ = false;
  }
}

void SlurmSync::steer_zones() {
  const api::PoolSnapshot pool =
      api::make_snapshot(pool_.pool_summary(), pool_.hosts(), clock_.now_ms());
  if (pool.node_zones.empty()) return;  // every node reaches the same zones
  Expected<SlurmJobs> jobs = [&]() -> Expected<SlurmJobs> {
    auto text = scontrol({"--all", "-o", "show", "job"});
    if (!text) return text.error();
    return parse_slurm_jobs(*text);
  }();
  if (!jobs) {
    if (jobs.error().message != last_steer_error_) {
      log::warning("slurm: cannot read the pending jobs; zones steer none this round",
                   {{"cause", jobs.error().message}});
      last_steer_error_ = jobs.error().message;
    }
    return;
  }
  last_steer_error_.clear();
  const api::PoolSnapshot zones = less_starting(
      pool, jobs->starting, [this](uint32_t id) { return !pool_.job_nodes(id).empty(); });
  for (const Steer& s : steer_pending(jobs->pending, zones)) {
    if (auto ran = scontrol(s.scontrol_args()); !ran) {
      // A job that started or ended since it was read: the next round reads it again.
      log::info("slurm: could not change a pending job's excluded nodes",
                {{"job", std::to_string(s.job_id)}, {"cause", ran.error().message}});
      continue;
    }
    log::info("slurm: a pending job's excluded nodes follow the zones",
              {{"job", std::to_string(s.job_id)},
               {"excluded", s.exc_nodes.empty() ? "none" : s.exc_nodes}});
  }
}

Expected<std::string> SlurmSync::slurm(const std::string& program,
                                       const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {program == "sacctmgr" ? options_.sacctmgr : options_.scontrol};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_checked(
      slurm_command(std::move(argv), options_.slurm_conf, options_.timeout_ms, true));
}

Expected<SlurmSync::SlurmRead> SlurmSync::read_state() const {
  auto lic = scontrol({"-o", "show", "licenses"});
  if (!lic) return lic.error();
  auto res = scontrol({"-o", "show", "reservations"});
  if (!res) return res.error();
  auto state = parse_slurm_state(*lic, *res);
  if (!state) return state.error();
  SlurmRead read{std::move(*state), {}};
  if (options_.remote_licenses) {
    // Always -i: without it sacctmgr asks for a confirmation on standard input.
    auto text = slurm("sacctmgr", {"-i", "-P", "-n", "show", "resource", "withclusters",
                                   "format=name,server,count,cluster,allowed"});
    if (!text) return text.error();
    auto remote = parse_remote_licenses(*text);
    if (!remote) return remote.error();
    read.remote = std::move(*remote);
  }
  return read;
}

std::string SlurmSync::slurm_name(const std::string& license) const {
  return options_.remote_licenses ? pol::remote_license_name(license, options_.license_server)
                                  : license;
}

SyncPlan SlurmSync::compute(const std::optional<PolicyKeeper::PlanInForce>& plan,
                            const SlurmRead& read, const std::vector<PoolRow>& rows) const {
  const SlurmState& state = read.state;
  // Pool licenses: what the pool can serve now, for every type the pool has devices of.
  const pol::PoolSize pool = pol::PoolSize::from_rows(rows);
  std::vector<LicenseCount> wanted;
  for (DeviceType t : kAllDeviceTypes) {
    bool any = false;
    for (const auto& r : rows) any = any || (r.type == t && r.total > 0);
    if (any) wanted.push_back({pol::pool_license_name(t), pool.size(t)});
  }
  // Per-model GPU licenses, each sized to what the pool can serve of its models.
  for (const auto& [name, size] : pol::model_license_sizes(rows)) wanted.push_back({name, size});
  // Remote: slurmdbd's counts follow the pool; only the caps are held by reservations.
  std::vector<SyncAction> remote;
  if (options_.remote_licenses) {
    remote = remote_license_plan(wanted, read.remote, options_.license_server, options_.cluster);
  }
  std::vector<LicenseCount> held = options_.remote_licenses ? std::vector<LicenseCount>{} : wanted;
  if (plan) {
    // The plan's cap licenses, each sized to its class's highest cap (its pool licenses are
    // sized above, from the pool as it is now).
    for (const auto& l : plan->plan.licenses) {
      if (pol::parse_cap_license_name(l.name)) held.push_back(l);
    }
  }
  SyncPlan out = plan ? sync_plan(held, plan->plan.reservations, state, plan->time_zone)
                      : sync_plan(held, {}, state, pol::TimeZone::utc());
  if (!remote.empty()) {
    // Everything that loosens before everything that tightens, as within each part.
    remote.insert(remote.end(), out.actions.begin(), out.actions.end());
    std::stable_partition(remote.begin(), remote.end(),
                          [](const SyncAction& a) { return !a.tightens; });
    out.actions = std::move(remote);
  }
  return out;
}

std::vector<std::string> SlurmSync::model_licenses() const {
  std::lock_guard lock(mu_);
  return model_licenses_;
}

Expected<SyncPlan> SlurmSync::preview(const std::optional<PolicyKeeper::PlanInForce>& plan) {
  std::lock_guard lock(round_mu_);
  auto state = read_state();
  if (!state) return state.error();
  return compute(plan, *state, pool_.pool_summary());
}

SyncReport SlurmSync::round(bool apply, const std::function<Status()>& first) {
  std::lock_guard lock(round_mu_);
  SyncReport report;
  if (first) {
    if (Status s = first(); !s) {
      report.error = s.error().message;
      return report;
    }
  }
  auto state = read_state();
  if (!state) {
    if (apply) in_step_ = 0;
    report.error = "cannot read Slurm's licenses and reservations: " + state.error().message;
    if (report.error != last_error_) {
      log::error("slurm: cannot read Slurm's state; nothing changed this round",
                 {{"cause", state.error().message}});
      last_error_ = report.error;
    }
    return report;
  }
  const std::vector<PoolRow> rows = pool_.pool_summary();
  {
    // The model licenses Slurm has: job_submit may add them to jobs (the snapshot says so).
    std::vector<std::string> models;
    for (const auto& [name, size] : pol::model_license_sizes(rows)) {
      if (name_in(state->state.licenses, slurm_name(name))) models.push_back(name);
    }
    std::lock_guard models_lock(mu_);
    model_licenses_ = std::move(models);
  }
  report.plan = compute(keeper_.plan_at(clock_.now_ms() / 1000), *state, rows);
  const SyncPlan& plan = report.plan;
  // Drift: a reservation composerd keeps that Slurm had last round and has no more, or that
  // holds something else than last round although composerd did not change it.
  std::map<std::string, std::string> now_known;
  std::set<std::string> changed_outside;
  for (const auto& r : state->state.reservations) {
    if (!pol::is_hold_name(r.name) && !pol::is_blocker_name(r.name)) continue;
    const std::string held =
        format_licenses(r.licenses) + " " + r.users + " " + std::to_string(r.duration_min);
    auto before = known_.find(r.name);
    if (before != known_.end() && !before->second.empty() && before->second != held) {
      changed_outside.insert(r.name);
    }
    now_known[r.name] = held;
  }
  // The same for the remote licenses composerd counts (NAME@SERVER; no reservation has an '@').
  for (const auto& r : state->remote) {
    if (!options_.remote_licenses || r.server != options_.license_server ||
        r.cluster != options_.cluster) {
      continue;
    }
    const std::string name = pol::remote_license_name(r.name, r.server);
    const std::string held = std::to_string(r.count) + " " + std::to_string(r.allowed);
    auto before = known_.find(name);
    if (before != known_.end() && !before->second.empty() && before->second != held) {
      changed_outside.insert(name);
    }
    now_known[name] = held;
  }
  for (const auto& a : plan.actions) {
    const bool remote = a.action.object.find('@') != std::string::npos;
    const std::string what = remote ? "remote license" : "reservation";
    if (a.action.kind == pol::ActionKind::kCreate && known_.count(a.action.object)) {
      if (apply) ++drift_recreated_;
      log::warning(
          "slurm: a " + what + " composerd keeps was deleted outside composerd; creating it again",
          {{remote ? "license" : "reservation", a.action.object}});
    } else if (a.action.kind == pol::ActionKind::kUpdate &&
               changed_outside.count(a.action.object)) {
      if (apply) ++drift_updated_;
      log::info(
          "slurm: a " + what + " differs from what composerd keeps; " +
              (remote ? "setting it back" : "updating it in place"),
          {{remote ? "license" : "reservation", a.action.object}, {"change", a.action.detail}});
    }
  }
  known_ = std::move(now_known);
  if (!apply) return report;
  // Logged when they change, not every round.
  if (const std::string warnings = join(plan.warnings, "\n"); warnings != last_warnings_) {
    for (const auto& w : plan.warnings) log::warning("slurm: " + w);
    last_warnings_ = warnings;
  }
  if (!plan.problems.empty()) {
    in_step_ = 0;
    report.error = join(plan.problems, "; ");
    if (report.error != last_error_) {
      log::error("slurm: plan not applied, nothing changed", {{"cause", report.error}});
      last_error_ = report.error;
    }
    return report;
  }
  if (!plan.changes()) {
    in_step_ = 1;
    report.applied = true;
    if (!last_error_.empty()) log::info("slurm: Slurm matches the pool and the policy again");
    last_error_.clear();
    return report;
  }
  std::vector<const SyncAction*> done;
  for (const auto& a : plan.actions) {
    if (a.action.kind == pol::ActionKind::kLeave) continue;
    auto argv = split(a.action.command, ' ', {.skip_empty = true});
    const std::string program = argv.front();  // scontrol or sacctmgr
    argv.erase(argv.begin());
    auto ran = slurm(program, argv);
    if (ran) {
      done.push_back(&a);
      continue;
    }
    in_step_ = 0;
    report.error = ran.error().message;
    bool undone = true;
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      auto back = split((*it)->undo, ' ', {.skip_empty = true});
      if (back.empty()) continue;
      const std::string undo_program = back.front();
      back.erase(back.begin());
      if (auto u = slurm(undo_program, back); !u) {
        undone = false;
        log::error("slurm: could not undo a change",
                   {{"reservation", (*it)->action.object}, {"cause", u.error().message}});
      }
    }
    report.rolled_back = undone;
    log::error(undone ? "slurm: plan not applied, the changes made were undone"
                      : "slurm: plan applied in part; the next round tries again",
               {{"failed", a.action.command},
                {"cause", report.error},
                {"undone", std::to_string(done.size())}});
    last_error_ = report.error;
    return report;
  }
  for (const auto* a : done) {
    // A reservation composerd removed is not drift when a later round creates it again.
    if (a->action.kind == pol::ActionKind::kRemove) {
      known_.erase(a->action.object);
    } else {
      known_[a->action.object].clear();
    }
    log::info("slurm: " + std::string(pol::to_string(a->action.kind)) + " " + a->action.object,
              {{"change", a->action.detail}});
  }
  log::info("slurm: plan applied whole", {{"changes", std::to_string(done.size())}});
  in_step_ = 1;
  report.applied = true;
  last_error_.clear();
  return report;
}

Status check_slurm_sync(const setup::Config& c) {
  if (!c.slurm_sync) return Status::Ok();
  for (const auto& [key, name, path] :
       {std::tuple{"SlurmScontrol", "scontrol", c.slurm_scontrol},
        std::tuple{"SlurmSacctmgr", "sacctmgr", c.slurm_remote_licenses ? c.slurm_sacctmgr : ""}}) {
    // Found on PATH when it runs, without a '/'.
    if (path.find('/') == std::string::npos || ::access(path.c_str(), X_OK) == 0) continue;
    return config::at(c.path, c.line_of(lower(key)),
                      std::string(key) + "=" + path + " is not an executable file; give the path " +
                          "of Slurm's " + name + ", or leave it out to use the one on PATH");
  }
  return Status::Ok();
}

}  // namespace composer::server
