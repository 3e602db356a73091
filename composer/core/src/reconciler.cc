#include "composer/core/reconciler.h"

#include <condition_variable>
#include <mutex>
#include <set>
#include <utility>

#include "composer/common/log.h"
#include "composer/common/thread_name.h"

namespace composer {
namespace {

// Releases of ended jobs the reconciler has under way at once, at most (the fabric's own
// limit, MaxFabricOperations, queues what it cannot take).
constexpr size_t kReleasesAtOnce = 64;

}  // namespace

Reconciler::Reconciler(CompositionService& service, LivePool& pool, const Clock& clock,
                       ReconcilerOptions options)
    : service_(service), pool_(pool), clock_(clock), options_(std::move(options)) {}

Reconciler::~Reconciler() { stop(); }

ReconcileReport Reconciler::run_once() {
  ReconcileReport report;
  const int64_t now = clock_.now_ms();

  // 1. Stuck compositions.
  for (const auto& e : pool_.live()) {
    if (e.busy || e.state == CompositionState::kReady) continue;
    if (now - e.since_ms < options_.stuck_after_ms) continue;
    if (auto s = service_.resolve_unfinished(e.id, true); s) {
      ++report.stuck_settled;
      log::warning("reconciler settled a stuck composition",
                   {{"composition", std::to_string(e.id)},
                    {"job", std::to_string(e.job_id)},
                    {"node", e.node},
                    {"state", std::string(to_string(e.state))}});
    } else {
      ++report.errors;
    }
  }

  // 2. Records against the fabric's inventory.
  pool_.begin_holder_round();
  auto inventory = service_.fabric().inventory();
  if (!inventory) {
    ++report.errors;
    log::warning("reconciler could not read the fabric's inventory",
                 {{"cause", inventory.error().message}});
  } else {
    std::map<std::string, std::string> host_of_node;
    for (const auto& h : pool_.hosts()) host_of_node[h.node] = h.fabric_id;
    // device -> fabric host that should hold it, from live compositions
    std::map<std::string, std::string> owned;
    const auto live = pool_.live();
    for (const auto& e : live) {
      const auto host = host_of_node.count(e.node) ? host_of_node[e.node] : e.node;
      for (const auto& d : e.devices) {
        owned[d] = host;
      }
    }
    // Foreign devices (held outside composerd) are marked and never touched. Orphans are
    // composerd's own: claimed (the ledger shows composerd attached them there), attached,
    // owned by no live composition; they are taken back after the grace period.
    auto orphans = pool_.note_holders(*inventory);
    if (!orphans) {
      ++report.errors;
      log::warning("reconciler could not record the fabric's holders",
                   {{"cause", orphans.error().message}});
      orphans = std::map<std::string, std::string>{};
    }
    std::set<std::string> still_orphaned;
    for (const auto& [device, host] : *orphans) {
      still_orphaned.insert(device);
      auto [seen, inserted] = orphan_seen_ms_.emplace(device, now);
      if (inserted || now - seen->second < options_.orphan_grace_ms) continue;
      auto op = service_.fabric().detach(host, {device});
      if (op && op->state != OperationState::kFailed) {
        ++report.orphans_detached;
        still_orphaned.erase(device);
        // A detach still running keeps the claim: the next round drops it once the fabric
        // shows the device free.
        if (op->state == OperationState::kDone) (void)pool_.unclaim({device}, host);
        log::warning("reconciler detached an orphaned device",
                     {{"device", device}, {"host", host}});
      } else {
        ++report.errors;
        log::error(
            "reconciler could not detach an orphaned device",
            {{"device", device}, {"host", host}, {"cause", op ? op->error : op.error().message}});
      }
    }
    std::erase_if(orphan_seen_ms_,
                  [&](const auto& kv) { return still_orphaned.count(kv.first) == 0; });

    // Lost: a ready composition holds a device the fabric no longer shows on its host.
    for (const auto& e : live) {
      if (e.state != CompositionState::kReady || e.busy) continue;
      const auto& host = owned[e.devices.empty() ? "" : e.devices.front()];
      for (const auto& d : e.devices) {
        auto it = inventory->attached.find(d);
        if (it != inventory->attached.end() && it->second == host) continue;
        if (auto known = pool_.pooled_device(d); !known || known->health == Health::kCritical) {
          continue;  // already failed
        }
        const std::string detail = "the fabric lost the attachment to node " + e.node +
                                   " while job " + std::to_string(e.job_id) + " held it";
        if (pool_.mark_health(d, Health::kCritical, detail)) {
          // Drained too, so that it stays out once released and the fabric calls it healthy
          // again, until an admin resumes it (ReconcilerTest.MarksADeviceTheFabricLostAsFailed).
          pool_.drain_devices({d}, std::string(kLostByTheFabric) + detail);
          ++report.lost_marked_failed;
          log::error("device lost by the fabric",
                     {{"device", d}, {"node", e.node}, {"job", std::to_string(e.job_id)}});
        } else {
          ++report.errors;
        }
      }
    }
    // Health as the fabric reported it in the same inventory, where it changed (a lost device
    // stays failed while its composition holds it, and drained after). Reading
    // Fabric::health() as well would walk the whole fabric again.
    for (const Device& d : inventory->devices) {
      auto known = pool_.pooled_device(d.id);
      if (!known || known->health == d.health) continue;
      // A failure a host reported stands until an admin resumes the device.
      if (pool_.host_failed(d.id)) continue;
      if (known->health == Health::kCritical && owned.count(d.id) &&
          inventory->attached.count(d.id) == 0) {
        continue;
      }
      if (pool_.mark_health(d.id, d.health, "reported by the fabric")) ++report.health_changes;
    }
  }

  // 3. Compositions of jobs Slurm no longer has: release them after the grace period.
  if (options_.active_jobs) {
    auto jobs = options_.active_jobs();
    auto ended = pool_.live();
    if (jobs) {
      std::erase_if(ended, [&](const auto& e) {
        return e.busy || e.state != CompositionState::kReady || jobs->count(e.job_id) != 0;
      });
    }
    // Slurm's drained nodes are asked only when a job has ended with devices still composed.
    Expected<std::set<std::string>> drained = std::set<std::string>{};
    if (jobs && !ended.empty() && options_.drained_nodes) drained = options_.drained_nodes();
    if (!jobs || !drained) {
      ++report.errors;
      log::warning(
          "reconciler could not list Slurm's jobs or drained nodes; skipping the "
          "ended-job check",
          {{"cause", !jobs ? jobs.error().message : drained.error().message}});
    } else {
      std::set<int64_t> still_gone;
      std::set<int64_t> still_kept;
      std::vector<const LivePool::LiveEntry*> due;  // past their grace
      for (const auto& e : ended) {
        if (!e.hold.empty()) {
          // The node found its devices in use after the job and holds them; it releases them
          // itself once they are free (or an admin clears the hold).
          still_kept.insert(e.id);
          if (kept_.insert(e.id).second) {
            log::warning(
                "reconciler keeps the devices of a job Slurm no longer runs: its node holds "
                "them (a process still uses them)",
                {{"job", std::to_string(e.job_id)}, {"node", e.node}, {"hold", e.hold}});
          }
          continue;
        }
        if (drained->count(e.node) != 0) {
          // Kept while the node is drained; the grace starts again once it is resumed.
          still_kept.insert(e.id);
          if (kept_.insert(e.id).second) {
            log::warning(
                "reconciler keeps the devices of a job Slurm no longer runs: its node "
                "is drained (an epilog that found them in use drains it); resume the "
                "node once nothing holds them, or release them with composerctl",
                {{"job", std::to_string(e.job_id)}, {"node", e.node}});
          }
          continue;
        }
        still_gone.insert(e.id);
        auto [seen, inserted] = gone_seen_ms_.emplace(e.id, now);
        if (inserted || now - seen->second < options_.orphan_grace_ms) continue;
        due.push_back(&e);
      }
      // Released at once, at most kReleasesAtOnce in flight: one slow detach holds up none of
      // the others past their grace (reconciler_test, ReleasesEndedJobsAtOnce).
      std::mutex mu;
      std::condition_variable idle;
      size_t in_flight = 0;
      for (const auto* e : due) {
        {
          std::unique_lock lock(mu);
          idle.wait(lock, [&] { return in_flight < kReleasesAtOnce; });
          ++in_flight;
        }
        service_.release_async(
            e->job_id, e->node, [&, e](const Expected<std::optional<Composition>>& released) {
              std::lock_guard lock(mu);
              if (released) {
                ++report.ended_jobs_released;
                still_gone.erase(e->id);
                log::warning("reconciler released the devices of a job Slurm no longer runs",
                             {{"job", std::to_string(e->job_id)}, {"node", e->node}});
              } else {
                ++report.errors;
              }
              --in_flight;
              idle.notify_all();
            });
      }
      std::unique_lock lock(mu);
      idle.wait(lock, [&] { return in_flight == 0; });
      std::erase_if(gone_seen_ms_, [&](const auto& kv) { return still_gone.count(kv.first) == 0; });
      std::erase_if(kept_, [&](int64_t id) { return still_kept.count(id) == 0; });
    }
  }

  if (options_.after_pass) options_.after_pass();

  std::lock_guard lock(mu_);
  totals_.ended_jobs_released += report.ended_jobs_released;
  totals_.stuck_settled += report.stuck_settled;
  totals_.orphans_detached += report.orphans_detached;
  totals_.lost_marked_failed += report.lost_marked_failed;
  totals_.health_changes += report.health_changes;
  totals_.errors += report.errors;
  return report;
}

void Reconciler::start() {
  thread_ = std::thread([this] {
    name_this_thread("reconciler");
    std::unique_lock lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms));
      if (stopping_) break;
      lock.unlock();
      (void)run_once();
      lock.lock();
    }
  });
}

void Reconciler::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ReconcileReport Reconciler::totals() const {
  std::lock_guard lock(mu_);
  return totals_;
}

}  // namespace composer
