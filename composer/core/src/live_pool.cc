#include "composer/core/live_pool.h"

#include <algorithm>
#include <chrono>

#include "composer/common/log.h"

namespace composer {
namespace {

std::vector<std::string> device_ids(const Composition& c) {
  std::vector<std::string> ids;
  ids.reserve(c.devices.size());
  for (const auto& d : c.devices) ids.push_back(d.id);
  return ids;
}

}  // namespace

std::string job_on_node(uint32_t job_id, const std::string& node) {
  return "job " + std::to_string(job_id) + " on node " + node;
}

LivePool::LivePool(db::Store& store, const Clock& clock) : store_(store), clock_(clock) {}

void LivePool::load(const std::vector<Host>& hosts, std::vector<Device> devices,
                    const std::vector<Composition>& live,
                    const std::vector<std::string>& host_failed) {
  std::lock_guard lock(mu_);
  host_failed_.clear();
  host_failed_.insert(host_failed.begin(), host_failed.end());
  allocator_.load(hosts, std::move(devices));
  live_.clear();
  for (const auto& c : live) {
    LiveEntry e{.id = c.id,
                .job_id = c.owner.job_id,
                .node = c.node,
                .state = c.state,
                .request = c.request,
                .devices = device_ids(c),
                .since_ms = c.updated_ms,
                .busy = false,
                .workload = c.owner.workload,
                .hold = c.hold};
    // The class of what each live composition holds, for the avoid-shared rules.
    allocator_.take(c.node, e.devices, c.id, c.owner.workload);
    live_.emplace(Key{c.owner.job_id, c.node}, std::move(e));
  }
}

void LivePool::set_admission_check(AdmissionCheck check) {
  std::lock_guard lock(mu_);
  admission_ = std::move(check);
}

void LivePool::set_placement(std::map<std::string, policies::PlacementRule, std::less<>> rules) {
  std::lock_guard lock(mu_);
  allocator_.set_placement(std::move(rules));
}

std::vector<PoolRow> LivePool::pool_summary() const {
  std::lock_guard lock(mu_);
  return allocator_.summary();
}

std::map<DeviceType, std::set<FailureDomain>> LivePool::failure_domains() const {
  std::lock_guard lock(mu_);
  return allocator_.domains();
}

std::vector<Host> LivePool::hosts() const {
  std::lock_guard lock(mu_);
  return allocator_.hosts();
}

std::optional<Device> LivePool::pooled_device(const std::string& id) const {
  std::lock_guard lock(mu_);
  const Device* d = allocator_.device(id);
  if (d == nullptr) return std::nullopt;
  return *d;
}

std::vector<std::string> LivePool::in_domain(const FailureDomain& domain) const {
  std::lock_guard lock(mu_);
  return allocator_.in_domain(domain);
}

std::string LivePool::fabric_host(const std::string& node) const {
  std::lock_guard lock(mu_);
  const Host* h = allocator_.host(node);
  return h != nullptr ? h->fabric_id : node;
}

std::vector<LivePool::LiveEntry> LivePool::live() const {
  std::lock_guard lock(mu_);
  std::vector<LiveEntry> out;
  out.reserve(live_.size());
  for (const auto& [key, e] : live_) out.push_back(e);
  return out;
}

std::vector<LivePool::Impact> LivePool::failure_impacts() const {
  std::lock_guard lock(mu_);
  std::vector<Impact> out;
  for (const auto& [key, e] : live_) {
    if (e.state != CompositionState::kReady) continue;
    Impact impact;
    std::set<FailureDomain> domains;
    for (const std::string& id : e.devices) {
      const Device* d = allocator_.device(id);
      if (d == nullptr || d->health != Health::kCritical) continue;
      impact.failed.push_back(id);
      domains.insert(d->domains.begin(), d->domains.end());
    }
    if (impact.failed.empty()) continue;
    impact.entry = e;
    impact.domains.assign(domains.begin(), domains.end());
    out.push_back(std::move(impact));
  }
  return out;
}

std::map<FailureDomain, uint32_t> LivePool::failed_by_domain() const {
  std::lock_guard lock(mu_);
  return allocator_.failed_by_domain();
}

bool LivePool::host_failed(const std::string& device_id) const {
  std::lock_guard lock(mu_);
  return host_failed_.contains(device_id);
}

void LivePool::begin_holder_round() {
  std::lock_guard lock(mu_);
  touched_.clear();
}

Expected<std::map<std::string, std::string>> LivePool::note_holders(
    const FabricInventory& inventory) {
  std::vector<std::string> seen;
  seen.reserve(inventory.devices.size());
  for (const Device& d : inventory.devices) seen.push_back(d.id);
  return note_holders(seen, inventory.attached, inventory.held);
}

Expected<std::map<std::string, std::string>> LivePool::note_holders(
    const std::vector<std::string>& seen, const std::map<std::string, std::string>& attached,
    const std::map<std::string, std::string>& held) {
  auto claims = store_.claims();
  if (!claims) return claims.error();
  std::map<std::string, std::string> orphans;
  std::vector<std::pair<std::string, std::string>> changes;
  std::map<std::string, std::vector<std::string>> stale_claims;  // fabric host -> devices
  {
    std::lock_guard lock(mu_);
    for (const std::string& id : seen) {
      const Device* d = allocator_.device(id);
      if (d == nullptr || d->composition_id || touched_.count(id) != 0) continue;
      std::string holder;
      auto claim = claims->find(id);
      if (auto h = held.find(id); h != held.end()) {
        holder = h->second;
      } else if (auto at = attached.find(id); at != attached.end()) {
        if (claim != claims->end() && claim->second == at->second) {
          orphans.emplace(id, at->second);
        } else {
          holder = "host " + at->second;
        }
      } else if (claim != claims->end()) {
        stale_claims[claim->second].push_back(id);
      }
      if (holder != d->holder) changes.emplace_back(id, std::move(holder));
    }
  }
  for (const auto& [host, ids] : stale_claims) {
    if (auto s = store_.drop_claims(ids, host); !s) return s.error();
  }
  if (changes.empty()) return orphans;
  if (auto s = store_.set_holders(changes, "foreign", "composerd", "", clock_.now_ms()); !s) {
    return s.error();
  }
  std::lock_guard lock(mu_);
  for (const auto& [id, holder] : changes) {
    allocator_.set_holder(id, holder);
    if (holder.empty()) {
      log::info("the fabric freed a foreign device", {{"device", id}});
    } else {
      log::warning("device held outside composerd; it is not pooled until the fabric frees it",
                   {{"device", id}, {"holder", holder}});
    }
  }
  return orphans;
}

void LivePool::touch(const std::string& device_id) {
  std::lock_guard lock(mu_);
  touched_.insert(device_id);
}

Status LivePool::unclaim(const std::vector<std::string>& device_ids,
                         const std::string& fabric_host) {
  return store_.drop_claims(device_ids, fabric_host);
}

Status LivePool::mark_health(const std::string& device_id, Health health,
                             const std::string& detail) {
  if (auto s = store_.set_health(device_id, health, detail, clock_.now_ms()); !s) return s;
  std::lock_guard lock(mu_);
  allocator_.set_health(device_id, health);
  return Status::Ok();
}

void LivePool::set_holder(const std::string& device_id, const std::string& holder) {
  std::lock_guard lock(mu_);
  allocator_.set_holder(device_id, holder);
}

void LivePool::set_drained(const std::vector<std::string>& ids, bool drained,
                           const std::string& reason) {
  std::lock_guard lock(mu_);
  for (const std::string& id : ids) allocator_.set_drained(id, drained, reason);
}

void LivePool::drain_devices(const std::vector<std::string>& ids, const std::string& reason) {
  for (const auto& id : ids) {
    (void)store_.set_drained(id, true, reason, "composerd", clock_.now_ms());
    std::lock_guard lock(mu_);
    allocator_.set_drained(id, true, reason);
  }
}

void LivePool::mark_host_failed(const std::string& device_id) {
  std::lock_guard lock(mu_);
  host_failed_.insert(device_id);
}

bool LivePool::clear_host_failed(const std::string& device_id) {
  std::lock_guard lock(mu_);
  return host_failed_.erase(device_id) > 0;
}

std::optional<LivePool::LiveEntry> LivePool::wait_idle(std::unique_lock<std::mutex>& lock,
                                                       const Key& key, int64_t timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto it = live_.find(key);
    if (it == live_.end()) return std::nullopt;
    if (!it->second.busy) return it->second;
    if (changed_.wait_until(lock, until) == std::cv_status::timeout) {
      it = live_.find(key);
      if (it == live_.end()) return std::nullopt;
      return it->second;  // still busy: the caller sees busy=true and answers accordingly
    }
  }
}

Expected<LivePool::Reservation> LivePool::reserve(const ComposeInput& in, int64_t wait_ms) {
  const Key key{in.owner.job_id, in.node};
  std::unique_lock lock(mu_);
  Reservation out;
  out.existing = wait_idle(lock, key, wait_ms);
  if (out.existing) return out;
  // Without a policy the job's own memory policy stands, preferred where it gave none.
  Admission admitted{.workload = in.owner.workload,
                     .window = "",
                     .mem_policy = in.mem_policy.empty() ? "preferred" : in.mem_policy};
  if (admission_) {
    auto held = [this](std::string_view workload) {
      std::vector<Request> requests;
      for (const auto& [k, e] : live_) {
        if (e.workload == workload) requests.push_back(e.request);
      }
      return requests;
    };
    auto a = admission_(in, held);
    if (!a) return a.error();
    admitted = std::move(*a);
  }
  out.window = admitted.window;
  // Placement over DRAM and CXL means nothing to a composition without memory.
  if (in.request.mem_bytes > 0) out.mem_policy = admitted.mem_policy;
  auto picked = allocator_.allocate(in.node, in.request, admitted.workload);
  if (!picked) return picked.error();
  allocator_.take(in.node, *picked, 0, admitted.workload);
  touched_.insert(picked->begin(), picked->end());
  out.entry = LiveEntry{.id = 0,
                        .job_id = in.owner.job_id,
                        .node = in.node,
                        .state = CompositionState::kComposing,
                        .request = in.request,
                        .devices = *picked,
                        .since_ms = clock_.now_ms(),
                        .busy = true,
                        .workload = admitted.workload};
  live_[key] = out.entry;
  return out;
}

void LivePool::record_id(const Key& key, int64_t id) {
  std::lock_guard lock(mu_);
  LiveEntry& e = live_[key];
  allocator_.take(e.node, e.devices, id, e.workload);
  e.id = id;
}

Expected<std::optional<LivePool::LiveEntry>> LivePool::take(
    const Key& key, int64_t wait_ms, const std::function<Status(const LiveEntry&)>& check) {
  std::unique_lock lock(mu_);
  auto existing = wait_idle(lock, key, wait_ms);
  if (!existing || existing->busy) return existing;
  if (Status s = check(*existing); !s) return s.error();
  live_[key].busy = true;
  return existing;
}

Expected<std::optional<std::pair<LivePool::Key, LivePool::LiveEntry>>> LivePool::take_id(
    int64_t composition_id) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(live_.begin(), live_.end(),
                         [&](const auto& kv) { return kv.second.id == composition_id; });
  if (it == live_.end()) return std::optional<std::pair<Key, LiveEntry>>{};
  if (it->second.busy) {
    return Error{ErrorCode::kConflict,
                 "composition " + std::to_string(composition_id) + " is being worked on"};
  }
  it->second.busy = true;
  return std::optional<std::pair<Key, LiveEntry>>{std::in_place, it->first, it->second};
}

std::vector<int64_t> LivePool::unfinished() const {
  std::lock_guard lock(mu_);
  std::vector<int64_t> out;
  for (const auto& [key, e] : live_) {
    if (e.state != CompositionState::kReady) out.push_back(e.id);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> LivePool::job_nodes(uint32_t job_id) const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = live_.lower_bound(Key{job_id, ""}); it != live_.end() && it->first.first == job_id;
       ++it) {
    out.emplace_back(it->first.second, it->second.hold);
  }
  return out;
}

bool LivePool::contains(const Key& key) const {
  std::lock_guard lock(mu_);
  return live_.contains(key);
}

void LivePool::set_state(const Key& key, CompositionState state, bool busy) {
  std::lock_guard lock(mu_);
  LiveEntry& e = live_[key];
  e.state = state;
  e.since_ms = clock_.now_ms();
  e.busy = busy;
  if (!busy) changed_.notify_all();
}

void LivePool::set_hold(const Key& key, const std::string& hold) {
  std::lock_guard lock(mu_);
  live_[key].hold = hold;
}

void LivePool::unbusy(const Key& key) {
  std::lock_guard lock(mu_);
  if (auto it = live_.find(key); it != live_.end()) it->second.busy = false;
  changed_.notify_all();
}

void LivePool::forget(const Key& key, const std::vector<std::string>& free_devices) {
  std::vector<std::pair<FailureDomain, size_t>> emptied;
  {
    std::lock_guard lock(mu_);
    allocator_.give_back(free_devices);
    touched_.insert(free_devices.begin(), free_devices.end());
    live_.erase(key);
    changed_.notify_all();
    // A drained domain whose last composition this was is ready for its maintenance.
    std::set<FailureDomain> seen;
    for (const std::string& id : free_devices) {
      const Device* d = allocator_.device(id);
      if (d == nullptr || !d->drained) continue;
      for (const FailureDomain& dom : d->domains) {
        if (!seen.insert(dom).second) continue;
        const std::vector<std::string> ids = allocator_.in_domain(dom);
        const bool empty = std::all_of(ids.begin(), ids.end(), [&](const std::string& other) {
          const Device* o = allocator_.device(other);
          return o->drained && !o->composition_id;
        });
        if (empty) emptied.emplace_back(dom, ids.size());
      }
    }
  }
  for (const auto& [dom, n] : emptied) {
    log::info("failure domain drained and empty: no composition uses it",
              {{"domain", to_string(dom)}, {"devices", std::to_string(n)}});
  }
}

Status LivePool::held_by(uint32_t job_id, const std::string& node,
                         const std::string& device_id) const {
  std::lock_guard lock(mu_);
  auto it = live_.find(Key{job_id, node});
  if (it == live_.end()) {
    return Error{ErrorCode::kNotFound, job_on_node(job_id, node) + " has no live composition"};
  }
  const auto& held = it->second.devices;
  if (std::find(held.begin(), held.end(), device_id) == held.end()) {
    return Error{ErrorCode::kInvalidArgument, job_on_node(job_id, node) +
                                                  ": its composition does not hold '" + device_id +
                                                  "'; a node drains only what it was given"};
  }
  return Status::Ok();
}

}  // namespace composer
