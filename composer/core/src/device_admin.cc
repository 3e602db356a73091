#include "composer/core/device_admin.h"

#include <set>

#include "composer/common/log.h"
#include "composer/common/strings.h"

namespace composer {

DeviceAdmin::DeviceAdmin(CompositionService& service, LivePool& pool, const Clock& clock)
    : service_(service),
      store_(service.store()),
      fabric_(service.fabric()),
      pool_(pool),
      clock_(clock) {}

Expected<Composition> DeviceAdmin::set_hold(uint32_t job_id, const std::string& node,
                                            const std::string& cause, const std::string& actor) {
  const LivePool::Key key{job_id, node};
  auto taken = pool_.take(
      key, service_.options().release_timeout_ms, [&](const LivePool::LiveEntry& e) -> Status {
        if (cause.empty() || e.state == CompositionState::kReady) {
          return Status::Ok();
        }
        return Error{ErrorCode::kConflict, job_on_node(job_id, node) + ": the composition is " +
                                               std::string(to_string(e.state)) +
                                               "; only a ready one can be held"};
      });
  if (!taken) return taken.error();
  if (!*taken) {
    return Error{ErrorCode::kNotFound, job_on_node(job_id, node) + " has no live composition"};
  }
  if ((*taken)->busy) {
    return Error{ErrorCode::kTimeout,
                 job_on_node(job_id, node) + ": another call is still working on this composition"};
  }
  auto held = store_.set_hold((*taken)->id, cause, actor, clock_.now_ms());
  if (held) pool_.set_hold(key, held->hold);
  pool_.unbusy(key);
  if (!held) return held.error();
  if (cause.empty()) {
    log::info("hold cleared", {{"job", std::to_string(job_id)}, {"node", node}, {"by", actor}});
  } else {
    log::warning(
        "devices held on the host after the job; not released until the node clears "
        "the hold",
        {{"job", std::to_string(job_id)}, {"node", node}, {"hold", cause}});
  }
  return held;
}

Expected<Device> DeviceAdmin::drain_unseen(uint32_t job_id, const std::string& node,
                                           const std::string& device_id, const std::string& reason,
                                           const std::string& actor) {
  if (Status s = pool_.held_by(job_id, node, device_id); !s) return s.error();
  auto drained = drain(device_id, reason, actor);
  if (drained) {
    log::warning("a node's host never showed a device it was given; drained",
                 {{"job", std::to_string(job_id)},
                  {"node", node},
                  {"device", device_id},
                  {"reason", reason}});
  }
  return drained;
}

Expected<Device> DeviceAdmin::fail_reported(uint32_t job_id, const std::string& node,
                                            const std::string& device_id, const std::string& reason,
                                            const std::string& actor) {
  if (reason.empty()) {
    return Error{ErrorCode::kInvalidArgument, "a failure report needs a reason: what the host saw"};
  }
  if (Status s = pool_.held_by(job_id, node, device_id); !s) return s.error();
  if (pool_.host_failed(device_id)) return store_.device(device_id);
  const std::string why = std::string(LivePool::kHostFailed) + reason;
  // Drained first: the device stays out of the pool even if the health write fails.
  if (auto d = drain(device_id, why, actor); !d) return d.error();
  if (Status s = pool_.mark_health(device_id, Health::kCritical,
                                   "reported by node " + node + ": " + reason);
      !s) {
    return s.error();
  }
  pool_.mark_host_failed(device_id);
  log::error(
      "a node's host reports a device of its job failed; marked failed",
      {{"job", std::to_string(job_id)}, {"node", node}, {"device", device_id}, {"reason", reason}});
  return store_.device(device_id);
}

Expected<Device> DeviceAdmin::drain(const std::string& device_id, const std::string& reason,
                                    const std::string& actor) {
  if (reason.empty()) {
    return Error{ErrorCode::kInvalidArgument, "drain needs a reason, as scontrol's does"};
  }
  if (auto s = store_.set_drained(device_id, true, reason, actor, clock_.now_ms()); !s) {
    return s.error();
  }
  pool_.set_drained({device_id}, true, reason);
  return store_.device(device_id);
}

Expected<Device> DeviceAdmin::resume(const std::string& device_id, const std::string& actor) {
  if (auto s = store_.set_drained(device_id, false, "", actor, clock_.now_ms()); !s) {
    return s.error();
  }
  pool_.set_drained({device_id}, false, "");
  const bool was_host_failed = pool_.clear_host_failed(device_id);
  // The admin vouches for it; the reconciler's next pass reads the fabric's own health again.
  if (was_host_failed) {
    if (Status s = pool_.mark_health(device_id, Health::kOk, "resumed by " + actor); !s)
      return s.error();
  }
  return store_.device(device_id);
}

Expected<std::vector<Device>> DeviceAdmin::set_domain_drained(const FailureDomain& domain,
                                                              bool drained,
                                                              const std::string& reason,
                                                              const std::string& actor) {
  if (drained && reason.empty()) {
    return Error{ErrorCode::kInvalidArgument, "drain needs a reason, as scontrol's does"};
  }
  const std::vector<std::string> ids = pool_.in_domain(domain);
  if (ids.empty()) {
    std::set<FailureDomain> known;
    for (const auto& [type, of_type] : pool_.failure_domains()) {
      known.insert(of_type.begin(), of_type.end());
    }
    std::vector<std::string> names;
    for (const FailureDomain& d : known) names.push_back(to_string(d));
    return Error{ErrorCode::kNotFound,
                 "no device is in failure domain " + to_string(domain) +
                     (names.empty() ? "; the pool has no failure domains"
                                    : "; the pool's domains: " + join(names, ", "))};
  }
  // All of the domain or nothing, in one transaction.
  if (auto s = store_.set_drained(ids, drained, drained ? reason : "", actor, clock_.now_ms());
      !s) {
    return s.error();
  }
  pool_.set_drained(ids, drained, drained ? reason : "");
  std::vector<Device> out;
  out.reserve(ids.size());
  for (const std::string& id : ids) {
    auto d = store_.device(id);
    if (!d) return d.error();
    out.push_back(std::move(*d));
  }
  return out;
}

Expected<Device> DeviceAdmin::adopt(const std::string& device_id, const std::string& actor) {
  auto d = pool_.pooled_device(device_id);
  if (!d) return Error{ErrorCode::kNotFound, "no device '" + device_id + "'"};
  if (!d->foreign()) {
    return Error{ErrorCode::kConflict,
                 "device " + device_id + " is " + std::string(to_string(d->state())) +
                     ", not foreign: only a device held outside composerd can be adopted"};
  }
  auto inventory = fabric_.inventory();
  if (!inventory) {
    return Error{inventory.error().code,
                 "adopting " + device_id + ": reading the fabric: " + inventory.error().message};
  }
  if (auto held = inventory->held.find(device_id); held != inventory->held.end()) {
    return Error{ErrorCode::kConflict,
                 "device " + device_id + " is " + held->second +
                     "; composerd adopts only a device composed into one host: free it on the "
                     "fabric first"};
  }
  std::string detail = "adopted by " + actor;
  if (auto at = inventory->attached.find(device_id); at != inventory->attached.end()) {
    if (auto s = service_.detach_from_host(at->second, {device_id},
                                           service_.options().release_timeout_ms);
        !s) {
      return Error{s.error().code, "adopting " + device_id + ": detaching it from host " +
                                       at->second + ": " + s.error().message};
    }
    detail += "; detached from host " + at->second;
  }
  pool_.touch(device_id);
  if (auto s = store_.set_holders({{device_id, ""}}, "adopt", actor, detail, clock_.now_ms()); !s) {
    return s.error();
  }
  pool_.set_holder(device_id, "");
  log::warning("foreign device adopted into the pool", {{"device", device_id}, {"by", actor}});
  return store_.device(device_id);
}

Expected<Device> DeviceAdmin::release_foreign(const std::string& device_id,
                                              const std::string& actor) {
  auto d = pool_.pooled_device(device_id);
  if (!d) return Error{ErrorCode::kNotFound, "no device '" + device_id + "'"};
  if (d->composition_id) {
    return Error{ErrorCode::kConflict, "device " + device_id + " is in composition " +
                                           std::to_string(*d->composition_id) + " on node " +
                                           d->node + "; release the job instead"};
  }
  if (d->foreign()) {
    return Error{ErrorCode::kConflict,
                 "device " + device_id + " is already foreign (held by " + d->holder + ")"};
  }
  auto claims = store_.claims();
  if (!claims) return claims.error();
  auto inventory = fabric_.inventory();
  if (!inventory) {
    return Error{inventory.error().code,
                 "releasing " + device_id + ": reading the fabric: " + inventory.error().message};
  }
  auto at = inventory->attached.find(device_id);
  auto claim = claims->find(device_id);
  if (at == inventory->attached.end() || claim == claims->end() || claim->second != at->second) {
    return Error{ErrorCode::kConflict,
                 "device " + device_id +
                     " is not attached by composerd to any host, so there is nothing to hand "
                     "over; release-foreign is for a device composerd attached that no job owns"};
  }
  const std::string host = at->second;
  pool_.touch(device_id);
  if (auto s = store_.drop_claims({device_id}, host); !s) return s.error();
  const std::string holder = "host " + host;
  if (auto s = store_.set_holders(
          {{device_id, holder}}, "release-foreign", actor,
          "released by " + actor + ": composerd no longer claims it on " + holder, clock_.now_ms());
      !s) {
    return s.error();
  }
  pool_.set_holder(device_id, holder);
  log::warning("device handed over to its host; composerd no longer claims it",
               {{"device", device_id}, {"host", host}, {"by", actor}});
  return store_.device(device_id);
}

}  // namespace composer
