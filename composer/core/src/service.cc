#include "composer/core/service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <set>

#include "composer/common/log.h"
#include "composer/common/strings.h"

namespace composer {
namespace {

// A fabric change that failed or timed out counts in `errors` (for metrics).
Status counted(Status s, std::atomic<uint64_t>& errors) {
  if (!s) errors.fetch_add(1, std::memory_order_relaxed);
  return s;
}

// Compositions start-up recovery settles at once, at most (each holds a thread while its
// fabric operation runs).
constexpr size_t kRecoverAtOnce = 64;

// The answer of an asynchronous call, waited for on this thread.
template <typename T, typename Call>
T wait_for(Call&& call) {
  auto answered = std::make_shared<std::promise<T>>();
  auto answer = answered->get_future();
  call([answered](T value) { answered->set_value(std::move(value)); });
  return answer.get();
}

// Starts `n` asynchronous calls at once (start(i, answer): call i, which answers once) and
// hands every answer, in call order, to `all` once the last has come.
template <typename T>
void gather(size_t n, const std::function<void(size_t, std::function<void(T)>)>& start,
            std::function<void(std::vector<T>)> all) {
  struct Pending {
    std::mutex mu;
    std::vector<std::optional<T>> got;
    size_t left = 0;
    std::function<void(std::vector<T>)> all;
  };
  auto p = std::make_shared<Pending>();
  p->got.resize(n);
  p->left = n;
  p->all = std::move(all);
  for (size_t i = 0; i < n; ++i) {
    start(i, [p, i](T answer) {
      {
        std::lock_guard lock(p->mu);
        p->got[i] = std::move(answer);
        if (--p->left > 0) return;
      }
      std::vector<T> out;
      out.reserve(p->got.size());
      for (auto& g : p->got) out.push_back(std::move(*g));
      p->all(std::move(out));
    });
  }
}

}  // namespace

CompositionService::CompositionService(db::Store& store, Fabric& fabric, LivePool& pool,
                                       const Clock& clock, ServiceOptions options)
    : store_(store),
      fabric_(fabric),
      pool_(pool),
      clock_(clock),
      options_(options),
      steps_(std::make_unique<WorkQueue>(options.completion_threads, "compose-step")),
      waiter_(std::make_unique<OperationWaiter>(
          fabric, clock,
          OperationWaiterOptions{.poll_interval_ms = options.poll_interval_ms,
                                 .max_in_flight = options.max_fabric_operations,
                                 .completion_threads = options.completion_threads})) {}

CompositionService::~CompositionService() {
  // Every fabric change still waited for gets its answer first (its completion may still write);
  // then the writes under way end and their steps run, before anything they use goes.
  waiter_->stop();
  std::unique_lock lock(steps_mu_);
  steps_idle_.wait(lock, [this] { return steps_pending_ == 0; });
}

template <typename T>
db::Store::Answer<T> CompositionService::then(std::function<void(Expected<T>)> next) {
  {
    std::lock_guard lock(steps_mu_);
    ++steps_pending_;
  }
  return [this, next = std::move(next)](Expected<T> answer) {
    steps_->post([this, next, answer = std::move(answer)]() mutable {
      struct Ended {
        CompositionService& service;
        ~Ended() {
          std::lock_guard lock(service.steps_mu_);
          if (--service.steps_pending_ == 0) service.steps_idle_.notify_all();
        }
      } ended{*this};
      next(std::move(answer));
    });
  };
}

Status CompositionService::start() {
  auto inventory = fabric_.inventory();
  if (!inventory) {
    return Error{inventory.error().code,
                 "reading the fabric's inventory: " + inventory.error().message};
  }
  if (auto s = store_.upsert_hosts(inventory->hosts); !s) return s;
  if (auto s = store_.upsert_devices(inventory->devices, clock_.now_ms()); !s) return s;
  for (const auto& why : inventory->skipped) {
    log::info("fabric resource not pooled", {{"resource", why}});
  }
  // The store holds the pool now: of the fabric's list only the ids stay (for note_holders
  // below), so that the allocator's copy is not made while this one is still held.
  std::vector<std::string> seen;
  seen.reserve(inventory->devices.size());
  for (Device& d : inventory->devices) seen.push_back(std::move(d.id));
  std::vector<Device>().swap(inventory->devices);

  auto hosts = store_.hosts();
  if (!hosts) return hosts.error();
  auto devices = store_.devices();
  if (!devices) return devices.error();
  const size_t pooled = devices->size();
  db::CompositionFilter filter;
  filter.live_only = true;
  auto live = store_.compositions(filter);
  if (!live) return live.error();

  // A failure a host reported stands across restarts: its drain reason says so, and the
  // fabric's health (which upsert_devices wrote) does not lift it.
  std::vector<std::string> reported;
  for (const Device& d : *devices) {
    if (d.drained && d.drain_reason.starts_with(LivePool::kHostFailed)) reported.push_back(d.id);
  }
  pool_.load(*hosts, std::move(*devices), *live, reported);  // empties `devices`
  for (const std::string& id : reported) {
    if (Status s =
            pool_.mark_health(id, Health::kCritical, "failed on its host before the restart");
        !s) {
      return s;
    }
  }
  // What the fabric already holds outside composerd is foreign from the first request on.
  auto orphans = pool_.note_holders(seen, inventory->attached, inventory->held);
  if (!orphans) return orphans.error();
  uint32_t foreign = 0;
  for (const auto& row : pool_.pool_summary()) foreign += row.foreign;
  log::info("pool loaded", {{"hosts", std::to_string(hosts->size())},
                            {"devices", std::to_string(pooled)},
                            {"live_compositions", std::to_string(live->size())},
                            {"fabric", std::string(fabric_.driver())},
                            {"foreign", std::to_string(foreign)}});
  if (pooled == 0) {
    log::warning("the fabric shows no pooled device; every compose will be refused",
                 {{"fabric", std::string(fabric_.driver())}});
  }
  return Status::Ok();
}

Expected<int> CompositionService::recover() {
  const std::vector<int64_t> unfinished = pool_.unfinished();
  // One read of the fabric serves every composition left composing.
  std::optional<FabricInventory> inventory;
  if (!unfinished.empty()) {
    if (auto inv = fabric_.inventory(); inv) inventory = std::move(inv).value();
  }
  // Settled at once, at most kRecoverAtOnce at a time: each may wait out a fabric operation,
  // and composerd listens only once all are (reconciler_test, RecoverySettlesManyAtOnce).
  std::atomic<int> resolved{0};
  if (!unfinished.empty()) {
    const size_t width = std::min(
        {unfinished.size(), kRecoverAtOnce, std::max<size_t>(1, options_.max_fabric_operations)});
    WorkQueue settle(width, "recover");
    for (int64_t id : unfinished) {
      settle.post([this, id, &resolved, &inventory] {
        if (auto s = resolve_unfinished(id, false, inventory ? &*inventory : nullptr); s) {
          resolved.fetch_add(1);
        } else {
          log::warning("recovery left a composition unsettled",
                       {{"composition", std::to_string(id)}, {"error", s.error().message}});
        }
      });
    }
  }  // the queue runs every task before it goes
  return resolved.load();
}

Status CompositionService::detach_devices(const std::string& node,
                                          const std::vector<std::string>& ids, int64_t timeout_ms) {
  return detach_from_host(pool_.fabric_host(node), ids, timeout_ms);
}

Status CompositionService::detach_from_host(const std::string& host,
                                            const std::vector<std::string>& ids,
                                            int64_t timeout_ms) {
  return counted(
      waiter_->wait(FabricChange{.attach = false, .fabric_host = host, .device_ids = ids},
                    clock_.now_ms() + timeout_ms),
      detach_errors_);
}

void CompositionService::keep_unsettled(const Key& key, std::string_view what, const Error& cause) {
  pool_.unbusy(key);
  log::error(what, {{"job", std::to_string(key.first)},
                    {"node", key.second},
                    {"cause", cause.message},
                    {"next", "kept live; a release or the reconciler settles it"}});
}

Error CompositionService::refuse(const ComposeInput& in, Error why) {
  // The ledger keeps the refusal, so `events --job` and reports show why nothing was composed:
  // once per episode. A prolog asks again every 0.25 s while devices are being freed, and each
  // retry is the same refusal; an episode of a (job, node) ends when it is refused for another
  // reason (code) or asked nothing for kRefusalEpisodeGapMs (service_test,
  // OneRefusedEventPerEpisode).
  const int64_t now = clock_.now_ms();
  {
    std::lock_guard lock(refusals_mu_);
    std::erase_if(refusals_,
                  [now](const auto& kv) { return now - kv.second.last_ms > kRefusalEpisodeGapMs; });
    auto [it, fresh] = refusals_.try_emplace(Key{in.owner.job_id, in.node}, Refusal{why.code, now});
    if (!fresh) {
      const bool same = it->second.code == why.code;
      it->second = Refusal{why.code, now};
      if (same) return why;
    }
  }
  Event e;
  e.ts_ms = now;
  e.kind = "refused";
  e.owner = in.owner;
  e.node = in.node;
  e.detail = why.message;
  if (auto s = store_.add_event(e); !s) {
    log::warning("cannot record a refusal in the ledger", {{"cause", s.error().message}});
  }
  return why;
}

Expected<std::vector<Composition>> CompositionService::compose_job(
    const ComposeInput& input, const std::vector<std::string>& nodes) {
  return wait_for<Expected<std::vector<Composition>>>(
      [&](auto done) { compose_job_async(input, nodes, std::move(done)); });
}

void CompositionService::compose_job_async(
    const ComposeInput& input, const std::vector<std::string>& nodes,
    std::function<void(Expected<std::vector<Composition>>)> done) {
  if (nodes.empty()) {
    return done(Error{ErrorCode::kInvalidArgument,
                      "job " + std::to_string(input.owner.job_id) + ": no node to compose"});
  }
  // Every node's compose is started at once (the fabric's operations wait in the waiter's
  // queue, not in threads); the last answer decides.
  gather<Expected<Composition>>(
      nodes.size(),
      [&](size_t i, std::function<void(Expected<Composition>)> answer) {
        ComposeInput one = input;
        one.node = nodes[i];
        compose_async(one, std::move(answer));
      },
      [this, job_id = input.owner.job_id, nodes,
       done = std::move(done)](std::vector<Expected<Composition>> got) {
        const auto failed = std::find_if(got.begin(), got.end(),
                                         [](const auto& r) { return !static_cast<bool>(r); });
        if (failed == got.end()) {
          std::vector<Composition> out;
          out.reserve(got.size());
          for (auto& r : got) out.push_back(std::move(*r));
          return done(std::move(out));
        }
        // All or nothing: what the other nodes got goes back, every release at once (the
        // detaches wait in the waiter's queue, not in threads); the answer once all have ended.
        std::vector<std::string> composed;
        for (size_t i = 0; i < nodes.size(); ++i) {
          if (got[i]) composed.push_back(nodes[i]);
        }
        if (composed.empty()) return done(failed->error());
        gather<Expected<std::optional<Composition>>>(
            composed.size(),
            [&](size_t i, std::function<void(Expected<std::optional<Composition>>)> answer) {
              release_async(job_id, composed[i], std::move(answer));
            },
            [job_id, composed, why = failed->error(),
             done](std::vector<Expected<std::optional<Composition>>> undone) {
              for (size_t i = 0; i < undone.size(); ++i) {
                if (undone[i]) continue;
                log::warning("a node of a job that could not be composed whole stays composed",
                             {{"job", std::to_string(job_id)},
                              {"node", composed[i]},
                              {"cause", undone[i].error().message}});
              }
              done(why);
            });
      });
}

Expected<std::vector<Composition>> CompositionService::release_job(uint32_t job_id) {
  return wait_for<Expected<std::vector<Composition>>>(
      [&](auto done) { release_job_async(job_id, std::move(done)); });
}

void CompositionService::release_job_async(
    uint32_t job_id, std::function<void(Expected<std::vector<Composition>>)> done) {
  std::vector<std::string> nodes;
  for (const auto& [node, hold] : pool_.job_nodes(job_id)) {
    // A node's hold keeps its composition until the node clears it (DeviceAdmin::set_hold).
    if (hold.empty()) {
      nodes.push_back(node);
    } else {
      log::warning("kept a composition the node holds",
                   {{"job", std::to_string(job_id)}, {"node", node}, {"hold", hold}});
    }
  }
  if (nodes.empty()) return done(std::vector<Composition>{});
  // Every node's release is started at once (the detaches wait in the waiter's queue, not in
  // threads); the last answer decides.
  gather<Expected<std::optional<Composition>>>(
      nodes.size(),
      [&](size_t i, std::function<void(Expected<std::optional<Composition>>)> answer) {
        release_async(job_id, nodes[i], std::move(answer));
      },
      [done = std::move(done)](std::vector<Expected<std::optional<Composition>>> got) {
        std::vector<Composition> out;
        for (auto& released : got) {
          if (!released) return done(released.error());
          if (*released) out.push_back(std::move(**released));
        }
        done(std::move(out));
      });
}

Expected<Composition> CompositionService::compose(const ComposeInput& in) {
  return wait_for<Expected<Composition>>([&](auto done) { compose_async(in, std::move(done)); });
}

void CompositionService::compose_async(const ComposeInput& in,
                                       std::function<void(Expected<Composition>)> done) {
  if (in.request.empty()) {
    return done(
        Error{ErrorCode::kInvalidArgument,
              job_on_node(in.owner.job_id, in.node) + ": the request asks for nothing to compose"});
  }
  const Key key{in.owner.job_id, in.node};
  auto reserved = pool_.reserve(in, options_.compose_timeout_ms);
  if (!reserved) {
    return done(refuse(in, Error{reserved.error().code, job_on_node(in.owner.job_id, in.node) +
                                                            ": " + reserved.error().message}));
  }
  if (const auto& existing = reserved->existing) {
    if (existing->request != in.request) {
      return done(Error{ErrorCode::kConflict,
                        job_on_node(in.owner.job_id, in.node) + " already has a composition (" +
                            existing->request.to_string() + ") that differs from this request (" +
                            in.request.to_string() + ")"});
    }
    if (existing->busy) {
      return done(Error{ErrorCode::kTimeout, job_on_node(in.owner.job_id, in.node) +
                                                 ": the composition is still being composed"});
    }
    if (existing->state == CompositionState::kReady) {
      return done(store_.composition(existing->id));
    }
    return done(Error{ErrorCode::kConflict,
                      job_on_node(in.owner.job_id, in.node) + ": the composition is " +
                          std::string(to_string(existing->state)) + ", not ready"});
  }
  LiveEntry entry = reserved->entry;
  const std::string window = reserved->window;  // the policy window it is composed under
  const std::string mem_policy = reserved->mem_policy;

  // Intent first: the composition and its devices are durable before the fabric is touched.
  // This thread goes on meanwhile; the rest runs on a step thread once the store has it.
  Composition record;
  record.owner = in.owner;
  record.owner.workload = entry.workload;  // the class the admission check counted it against
  record.node = in.node;
  record.window = window;
  record.mem_policy = mem_policy;
  record.request = in.request;
  record.state = CompositionState::kComposing;
  store_.create_composition_async(
      record, entry.devices, clock_.now_ms(),
      then<Composition>(
          [this, key, entry, done = std::move(done)](Expected<Composition> created) mutable {
            if (!created) {
              pool_.forget(key, entry.devices);
              return done(created.error());
            }
            entry.id = created->id;
            pool_.record_id(key, entry.id);
            const std::string host = pool_.fabric_host(entry.node);
            waiter_->submit(
                FabricChange{.attach = true, .fabric_host = host, .device_ids = entry.devices},
                clock_.now_ms() + options_.compose_timeout_ms,
                [this, entry, host, done = std::move(done)](Status attached) {
                  finish_compose(entry, host, std::move(attached), done);
                });
          }));
}

void CompositionService::finish_compose(const LiveEntry& entry, const std::string& host,
                                        Status attached,
                                        std::function<void(Expected<Composition>)> done) {
  attached = counted(std::move(attached), attach_errors_);
  if (!attached) return done(fail_compose(entry, host, attached.error().message));
  store_.transition_async(
      entry.id, CompositionState::kComposing, CompositionState::kReady, "", clock_.now_ms(), true,
      then<Composition>([this, entry, host, done = std::move(done)](Expected<Composition> ready) {
        if (!ready) {
          // The devices are attached but the record could not say so: roll back rather
          // than hand out devices the ledger does not show.
          return done(fail_compose(entry, host, "recording ready: " + ready.error().message));
        }
        pool_.set_state(Key{entry.job_id, entry.node}, CompositionState::kReady, false);
        log::info("composed", {{"job", std::to_string(entry.job_id)},
                               {"node", entry.node},
                               {"composition", std::to_string(entry.id)},
                               {"devices", join(entry.devices)}});
        done(std::move(ready));
      }));
}

Expected<Composition> CompositionService::fail_compose(const LiveEntry& entry,
                                                       const std::string& host,
                                                       const std::string& why) {
  const Key key{entry.job_id, entry.node};
  // Undo whatever the fabric may have attached; a failed composition holds no devices.
  auto undone = detach_devices(entry.node, entry.devices, options_.release_timeout_ms);
  std::vector<std::string> still_held;
  if (!undone) {
    // Only what the fabric still shows on this host may be held by this composition: a
    // device that never got here (held elsewhere, or the attach never happened) is undone.
    auto inventory = fabric_.inventory();
    for (const auto& id : entry.devices) {
      if (!inventory) {
        still_held.push_back(id);
        continue;
      }
      auto it = inventory->attached.find(id);
      if (it != inventory->attached.end() && it->second == host) still_held.push_back(id);
    }
  }
  auto failed = store_.transition(entry.id, CompositionState::kComposing, CompositionState::kFailed,
                                  why, clock_.now_ms(), true);
  if (!failed) {
    // The store still says composing, with its device links: memory must say the same. The
    // entry stays live and holds its devices; a release or the reconciler rolls it back
    // again (the detach is idempotent) once the store takes the write.
    keep_unsettled(key, "compose failed, and recording it failed", failed.error());
    return failed.error();
  }
  std::vector<std::string> undone_ids;
  for (const auto& id : entry.devices) {
    if (std::find(still_held.begin(), still_held.end(), id) == still_held.end()) {
      undone_ids.push_back(id);
    }
  }
  (void)store_.drop_claims(undone_ids, host);
  if (!still_held.empty()) {
    // The fabric may still hold them: keep them out of the pool until an admin looks; the
    // claim stays, so the reconciler takes them back as orphans.
    pool_.drain_devices(still_held, "detach failed while rolling back job " +
                                        std::to_string(entry.job_id) + ": " +
                                        undone.error().message);
  }
  pool_.forget(key, entry.devices);
  log::error("compose failed", {{"job", std::to_string(entry.job_id)},
                                {"node", entry.node},
                                {"host", host},
                                {"cause", why}});
  return Error{ErrorCode::kFabric, job_on_node(entry.job_id, entry.node) + ": " + why};
}

Expected<std::optional<Composition>> CompositionService::release(uint32_t job_id,
                                                                 const std::string& node) {
  return wait_for<Expected<std::optional<Composition>>>(
      [&](auto done) { release_async(job_id, node, std::move(done)); });
}

void CompositionService::release_async(
    uint32_t job_id, const std::string& node,
    std::function<void(Expected<std::optional<Composition>>)> done) {
  const Key key{job_id, node};
  auto taken = pool_.take(key, options_.compose_timeout_ms + options_.release_timeout_ms,
                          [&](const LivePool::LiveEntry& e) -> Status {
                            if (e.hold.empty()) return Status::Ok();
                            return Error{ErrorCode::kConflict,
                                         job_on_node(job_id, node) +
                                             ": the node holds the composition (" + e.hold +
                                             "); the node releases it once nothing holds its "
                                             "devices, or an admin clears the hold (composerctl "
                                             "compositions unhold)"};
                          });
  if (!taken) return done(taken.error());
  if (!*taken) {
    // Nothing live: answer the newest past composition, if any (a repeated release).
    db::CompositionFilter filter;
    filter.job_id = job_id;
    filter.node = node;
    filter.limit = 1;
    auto past = store_.compositions(filter);
    if (!past) return done(past.error());
    if (past->empty()) return done(std::optional<Composition>{});
    return done(std::optional<Composition>{past->front()});
  }
  if ((*taken)->busy) {
    return done(Error{ErrorCode::kTimeout, job_on_node(job_id, node) +
                                               ": another call is still working on this "
                                               "composition"});
  }
  LiveEntry entry = **taken;
  if (entry.state == CompositionState::kReady) {
    // The intent is durable before the fabric is touched; this thread goes on meanwhile.
    store_.transition_async(entry.id, CompositionState::kReady, CompositionState::kReleasing, "",
                            clock_.now_ms(), false,
                            then<Composition>([this, entry, key, done = std::move(done)](
                                                  const Expected<Composition>& releasing) mutable {
                              if (!releasing) {
                                pool_.unbusy(key);
                                return done(releasing.error());
                              }
                              entry.state = CompositionState::kReleasing;
                              pool_.set_state(key, CompositionState::kReleasing, true);
                              detach_released(entry, key, std::move(done));
                            }));
    return;
  }
  if (entry.state != CompositionState::kReleasing) {
    // composing (left by a crash): resolve_unfinished_entry finishes or rolls it back, still
    // marked busy so that neither a retried release nor the reconciler steps in between.
    const Status resolved = resolve_unfinished_entry(entry, key, false, nullptr);
    if (!resolved) return done(resolved.error());
    auto finished = store_.composition(entry.id);
    if (!finished) return done(finished.error());
    return done(std::optional<Composition>{*std::move(finished)});
  }
  detach_released(entry, key, std::move(done));
}

void CompositionService::detach_released(
    const LiveEntry& entry, const Key& key,
    std::function<void(Expected<std::optional<Composition>>)> done) {
  // The detach runs without holding this thread; the rest when it has ended.
  const std::string host = pool_.fabric_host(entry.node);
  waiter_->submit(FabricChange{.attach = false, .fabric_host = host, .device_ids = entry.devices},
                  clock_.now_ms() + options_.release_timeout_ms,
                  [this, entry, key, done = std::move(done)](Status detached) {
                    detached = counted(std::move(detached), detach_errors_);
                    if (!detached) return done(finish_release(entry, key, false, detached));
                    // The composition as the release records it (no read back).
                    store_.transition_async(
                        entry.id, CompositionState::kReleasing, CompositionState::kReleased, "",
                        clock_.now_ms(), true,
                        then<Composition>([this, entry, key, done](Expected<Composition> released) {
                          done(recorded_released(entry, key, std::move(released)));
                        }));
                  });
}

Status CompositionService::resolve_unfinished(int64_t composition_id, bool give_up,
                                              const FabricInventory* inventory) {
  auto taken = pool_.take_id(composition_id);
  if (!taken) return taken.error();
  if (!*taken) return Status::Ok();  // already resolved
  const auto& [key, entry] = **taken;
  return resolve_unfinished_entry(entry, key, give_up, inventory);
}

Status CompositionService::resolve_unfinished_entry(const LiveEntry& entry, const Key& key,
                                                    bool give_up,
                                                    const FabricInventory* inventory) {
  if (entry.state == CompositionState::kReady) {
    pool_.unbusy(key);
    return Status::Ok();
  }
  if (entry.state == CompositionState::kRequested || entry.state == CompositionState::kComposing) {
    // Finish if the fabric already shows every device on the host, else roll back.
    bool all_attached = false;
    if (!give_up) {
      Expected<FabricInventory> read = Error{ErrorCode::kInternal, ""};
      if (inventory == nullptr) {
        read = fabric_.inventory();
        if (read) inventory = &*read;
      }
      if (inventory != nullptr) {
        const std::string host = pool_.fabric_host(entry.node);
        all_attached = std::all_of(entry.devices.begin(), entry.devices.end(), [&](const auto& id) {
          auto it = inventory->attached.find(id);
          return it != inventory->attached.end() && it->second == host;
        });
      }
    }
    if (all_attached && entry.state == CompositionState::kComposing) {
      auto ready =
          store_.transition(entry.id, CompositionState::kComposing, CompositionState::kReady,
                            "finished after restart", clock_.now_ms());
      if (!ready) {
        pool_.unbusy(key);
        return ready.error();
      }
      pool_.set_state(key, CompositionState::kReady, false);
      log::info("composition finished after restart", {{"composition", std::to_string(entry.id)}});
      return Status::Ok();
    }
    auto failed = fail_compose(entry, pool_.fabric_host(entry.node),
                               give_up ? "timed out while composing" : "rolled back after restart");
    if (pool_.contains(key)) return failed.error();  // not recorded: still composing
    return Status::Ok();
  }
  // releasing: detach (idempotent) and record released.
  auto finished = finish_release(
      entry, key, give_up, detach_devices(entry.node, entry.devices, options_.release_timeout_ms));
  if (!finished) return finished.error();
  return Status::Ok();
}

Expected<std::optional<Composition>> CompositionService::finish_release(const LiveEntry& entry,
                                                                        const Key& key,
                                                                        bool give_up,
                                                                        const Status& detached) {
  if (!detached) {
    if (!give_up) {
      pool_.unbusy(key);
      log::warning("release incomplete, will retry", {{"composition", std::to_string(entry.id)},
                                                      {"cause", detached.error().message}});
      return Error{detached.error().code,
                   job_on_node(entry.job_id, entry.node) +
                       ": release incomplete, composerd will retry: " + detached.error().message};
    }
    const std::string why = "timed out while releasing: " + detached.error().message;
    auto failed = store_.transition(entry.id, CompositionState::kReleasing,
                                    CompositionState::kFailed, why, clock_.now_ms());
    if (!failed) {
      // Still releasing in the store: stay releasing here, and try again next round.
      keep_unsettled(key, "release gave up, and recording it failed", failed.error());
      return failed.error();
    }
    pool_.drain_devices(entry.devices, "detach failed: " + detached.error().message);
    pool_.forget(key, entry.devices);
    log::error("release gave up; devices drained",
               {{"composition", std::to_string(entry.id)}, {"cause", why}});
    return std::optional<Composition>{};
  }
  return recorded_released(
      entry, key,
      store_.transition(entry.id, CompositionState::kReleasing, CompositionState::kReleased, "",
                        clock_.now_ms(), true));
}

Expected<std::optional<Composition>> CompositionService::recorded_released(
    const LiveEntry& entry, const Key& key, Expected<Composition>&& released) {
  if (!released) {
    pool_.unbusy(key);
    return released.error();
  }
  pool_.forget(key, entry.devices);
  log::info("released", {{"job", std::to_string(entry.job_id)},
                         {"node", entry.node},
                         {"composition", std::to_string(entry.id)}});
  return std::optional<Composition>{std::move(released).value()};
}

}  // namespace composer
