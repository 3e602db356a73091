// The Store on PostgreSQL: the same records, checks, events and report walk as the SQLite
// store (records.h, rows.h, ledger_walk.h), through libpq (pg.h), with the guarantees in the
// schema (pg_schema.h).
#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "composer/db/pg.h"
#include "composer/db/store.h"
#include "ledger_walk.h"
#include "pg_pool.h"
#include "pg_schema.h"
#include "pg_statements.h"
#include "records.h"
#include "rows.h"

namespace composer::db {
namespace {

using pg::Connection;
using pg::Params;
using pg::Result;

std::optional<int64_t> pg_limit(size_t limit) {
  if (limit == 0) return std::nullopt;  // LIMIT NULL: none
  return static_cast<int64_t>(std::min<size_t>(limit, std::numeric_limits<int64_t>::max()));
}

std::optional<Device> find_device(Connection& db, std::string_view id) {
  Result r = db.run(pg::kSelectDevice, Params().add(id));
  if (!r.step()) return std::nullopt;
  return read_device(r, 0);
}

std::optional<Composition> first_of(Result r) {
  auto found = read_compositions(r);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::optional<Composition> find_composition(Connection& db, int64_t id) {
  return first_of(db.run(pg::kSelectComposition, Params().add(id)));
}

std::optional<Composition> find_live_composition(Connection& db, uint32_t job_id,
                                                 std::string_view node) {
  return first_of(db.run(pg::kSelectLiveComposition, Params().add(job_id).add(node)));
}

Composition existing_composition(Connection& db, int64_t id) {
  auto found = find_composition(db, id);
  if (!found) refuse(ErrorCode::kNotFound, "no composition " + std::to_string(id));
  return std::move(*found);
}

void append_event(Connection& db, const Event& e) {
  db.run(pg::kInsertEvent, Params()
                               .add(e.ts_ms)
                               .add(e.kind)
                               .add(e.composition_id)
                               .add(e.owner.job_id)
                               .add(e.node)
                               .add(e.owner.uid)
                               .add(e.owner.user)
                               .add(e.owner.account)
                               .add(e.owner.workload)
                               .add(e.from_state)
                               .add(e.to_state)
                               .add(join(e.devices, kListSeparator))
                               .add(e.detail)
                               .add(e.window));
}

Event owned_device_event(Connection& db, const Device& d, std::string_view kind,
                         std::string_view from, std::string_view to, std::string_view user,
                         std::string_view detail, int64_t now_ms) {
  std::optional<Composition> owner;
  if (d.composition_id) owner = find_composition(db, *d.composition_id);
  return device_event(owner, d, kind, from, to, user, detail, now_ms);
}

// kInsertComposition's parameters (and the first of kCreateComposition's).
Params composition_params(const Composition& c, int64_t now_ms) {
  return Params()
      .add(c.owner.job_id)
      .add(c.node)
      .add(c.owner.uid)
      .add(c.owner.user)
      .add(c.owner.account)
      .add(c.owner.workload)
      .add(c.request.gpus)
      .add(c.request.gpu_model)
      .add(c.request.mem_bytes)
      .add(c.request.nvme)
      .add(to_string(c.state))
      .add(now_ms)
      .add(c.window)
      .add(c.mem_policy);
}

// The composition kCreateComposition inserted, from its rows: what insert_composition returns.
Composition created_composition(Result r, const Composition& c, int64_t now_ms) {
  Composition created = c;
  created.devices.clear();
  created.id = 0;
  while (r.step()) {
    created.id = r.int64(0);
    if (!r.is_null(1)) created.devices.push_back(read_device(r, 1));
  }
  if (created.id == 0) fail(ErrorCode::kInternal, "store: inserting composition: no id came back");
  created.created_ms = now_ms;
  created.updated_ms = now_ms;
  created.attempts = 0;
  created.last_error.clear();
  for (auto& d : created.devices) {
    d.composition_id = created.id;
    d.node = created.node;
  }
  created.state = c.state == CompositionState::kComposing ? CompositionState::kComposing
                                                          : CompositionState::kRequested;
  return created;
}

Composition insert_composition(Connection& db, const Composition& c,
                               const std::vector<std::string>& ids, int64_t now_ms) {
  Composition created = c;
  created.devices.clear();
  for (const auto& id : ids) {
    auto d = find_device(db, id);
    if (!d) {
      refuse(ErrorCode::kNotFound, "creating composition for job " +
                                       std::to_string(c.owner.job_id) + " on " + c.node +
                                       ": no device " + db::quoted(id));
    }
    created.devices.push_back(std::move(*d));
  }
  // A refused statement aborts PostgreSQL's transaction: each that may be refused runs in a
  // savepoint of its own, so the message can still be completed by a read.
  try {
    pg::Savepoint step(db);
    Result r = db.run(pg::kInsertComposition, composition_params(c, now_ms));
    r.step();
    created.id = r.int64(0);
    step.release();
  } catch (const Failure& f) {
    if (f.error().code != ErrorCode::kConflict) throw;
    fail(ErrorCode::kConflict,
         live_job_conflict(c, find_live_composition(db, c.owner.job_id, c.node)) + "; " +
             failure_reason(f));
  }
  created.created_ms = now_ms;
  created.updated_ms = now_ms;
  created.attempts = 0;
  created.last_error.clear();
  for (auto& d : created.devices) {
    try {
      db.run(pg::kLinkDevice, Params().add(created.id).add(d.id));
    } catch (const Failure& f) {
      if (f.error().code != ErrorCode::kConflict) throw;
      fail(ErrorCode::kConflict, live_device_conflict(d) + "; " + failure_reason(f));
    }
    d.composition_id = created.id;
    d.node = created.node;
  }
  created.state = CompositionState::kRequested;
  append_event(db, composition_event(created, "requested", "", "requested",
                                     requested_detail(created), now_ms));
  if (c.state == CompositionState::kComposing) {
    created.state = CompositionState::kComposing;
    append_event(db, composition_event(created, "composing", "requested", "composing", "", now_ms));
  }
  return created;
}

class PgRollupSource final : public RollupSource {
 public:
  explicit PgRollupSource(Connection& db) : db_(db) {}

  uint64_t unattached(int64_t since_ms, int64_t until_ms) override {
    Result r = db_.run(pg::kWalkUnattached, Params().add(since_ms).add(until_ms));
    return r.step() ? r.uint64(0) : 0;
  }
  std::vector<int64_t> read_alone() override {
    std::vector<int64_t> alone;
    Result r = db_.run(pg::kWalkReadAlone);
    while (r.step()) alone.push_back(r.int64(0));
    return alone;
  }
  void composition_events(int64_t id, int64_t since_ms, int64_t until_ms,
                          std::vector<Event>& out) override {
    Result live = db_.run(pg::kWalkLiveAtStart, Params().add(id).add(since_ms));
    const bool before = live.step() && live.text_view(0) == "t";
    Result r = db_.run(pg::kWalkCompositionEvents,
                       Params().add(id).add(until_ms).add(since_ms).add(before));
    while (r.step()) out.push_back(read_event(r));
  }
  int64_t longest() override {
    Result r = db_.run(pg::kWalkLongest);
    if (r.step() && !r.is_null(0)) return std::max<int64_t>(0, r.int64(0));
    return 0;
  }
  void start(int64_t earliest_ms, int64_t since_ms, int64_t until_ms) override {
    devices_.emplace(db_.run(pg::kWalkDeviceEvents, Params().add(until_ms)));
    rows_.emplace(db_.run(pg::kWalkRollup, Params().add(earliest_ms).add(until_ms).add(since_ms)));
  }
  bool next_device_event(Event& e) override {
    if (!devices_->step()) return false;
    read_event_into(*devices_, e);
    return true;
  }
  bool next_row(CompositionRollup& r) override {
    if (!rows_->step()) return false;
    read_rollup_into(*rows_, r);
    return true;
  }

 private:
  Connection& db_;
  std::optional<Result> devices_;
  std::optional<Result> rows_;
};

class PgStore final : public Store {
 public:
  PgStore(const std::string& conninfo, std::unique_ptr<Connection> writer, int version)
      : version_(version),
        readers_(conninfo),
        writer_(std::make_unique<pg::Writer>(conninfo, std::move(writer))) {}
  ~PgStore() override { writer_.reset(); }

  int schema_version() override { return version_; }

  Status upsert_hosts(const std::vector<Host>& hosts) override {
    if (Status s = storable(hosts); !s) return s;
    return writer_->run([&hosts](Connection& db) {
      for (const Host& h : hosts) {
        db.run(pg::kUpsertHost, Params()
                                    .add(h.node)
                                    .add(h.fabric_id)
                                    .add(join(h.zones, kListSeparator))
                                    .add(h.gpu_slots)
                                    .add(h.mem_slots)
                                    .add(h.nvme_slots)
                                    .add(domain_list(h.domains)));
      }
    });
  }

  Status upsert_devices(const std::vector<Device>& devices, int64_t now_ms) override {
    if (Status s = storable(devices); !s) return s;
    return writer_->run([&devices, now_ms](Connection& db) {
      for (const Device& d : devices) {
        const std::optional<Device> known = find_device(db, d.id);
        db.run(pg::kUpsertDevice, Params()
                                      .add(d.id)
                                      .add(to_string(d.type))
                                      .add(d.model)
                                      .add(d.capacity_bytes)
                                      .add(d.zone)
                                      .add(d.address)
                                      .add(to_string(d.health))
                                      .add(domain_list(d.domains))
                                      .add(d.identity.pci_vendor)
                                      .add(d.identity.pci_device)
                                      .add(d.identity.serial)
                                      .add(d.identity.uuid)
                                      .add(now_ms));
        if (known && known->health != d.health) {
          append_event(db, owned_device_event(db, *known, "health", to_string(known->health),
                                              to_string(d.health), "",
                                              "reported by the fabric inventory", now_ms));
        }
      }
    });
  }

  Expected<std::vector<Host>> hosts() override {
    return read<std::vector<Host>>([](Connection& db) {
      std::vector<Host> out;
      Result r = db.run(pg::kSelectHosts);
      while (r.step()) out.push_back(read_host(r));
      return out;
    });
  }

  Expected<std::vector<Device>> devices(const DeviceFilter& filter) override {
    return read<std::vector<Device>>([&filter](Connection& db) {
      std::optional<std::string_view> type, state;
      if (filter.type) type = to_string(*filter.type);
      if (filter.state) state = to_string(*filter.state);
      Result r = db.run(pg::kSelectDevices, Params()
                                                .add(type)
                                                .add(filter.zone)
                                                .add(filter.node)
                                                .add(state)
                                                .add(filter.after.value_or(""))
                                                .add(pg_limit(filter.limit)));
      std::vector<Device> out;
      while (r.step()) out.push_back(read_device(r, 0));
      return out;
    });
  }

  Expected<Device> device(const std::string& id) override {
    auto found = read<std::optional<Device>>([&id](Connection& db) { return find_device(db, id); });
    if (!found.ok()) return found.error();
    if (!*found) return Error(ErrorCode::kNotFound, "no device " + db::quoted(id));
    return std::move(**found);
  }

  void create_composition_async(const Composition& c, const std::vector<std::string>& ids,
                                int64_t now_ms, Answer<Composition> done) override {
    if (auto refused = creatable(c, ids); !refused) return done(refused.error());
    write_async<Composition>(
        [c, ids, now_ms](Connection& db) { return insert_composition(db, c, ids, now_ms); },
        std::move(done),
        Flying<Composition>{&pg::kCreateComposition,
                            composition_params(c, now_ms).add(ids).add(join(ids, kListSeparator)),
                            &pg::kCreateCompositions, [c, now_ms](Result r) {
                              return created_composition(std::move(r), c, now_ms);
                            }});
  }

  void transition_async(int64_t id, CompositionState from, CompositionState to,
                        std::string_view detail, int64_t now_ms, bool attempt,
                        Answer<Composition> done) override {
    if (auto refused = transitionable(id, from, to); !refused) return done(refused.error());
    Params params = Params()
                        .add(id)
                        .add(to_string(to))
                        .add(now_ms)
                        .add(attempt ? 1 : 0)
                        .add(to_string(from))
                        .add(detail);
    write_async<Composition>(
        [id, from, to, detail = std::string(detail), now_ms, attempt, params](Connection& db) {
          Composition c = existing_composition(db, id);
          check_state(c, from);
          Result r = db.run(pg::kUpdateCompositionState, params);
          if (r.changes() != 1) {
            refuse(ErrorCode::kConflict,
                   "composition " + std::to_string(id) + " changed meanwhile");
          }
          append_event(db, composition_event(c, to_string(to), to_string(from), to_string(to),
                                             detail, now_ms));
          apply_transition(c, to, detail, now_ms, attempt);
          return c;
        },
        std::move(done),
        Flying<Composition>{&pg::kTransitionComposition, params, &pg::kTransitionCompositions,
                            [id, to, detail = std::string(detail), now_ms, attempt](Result r) {
                              auto found = first_of(std::move(r));
                              if (!found || found->id != id) {
                                fail(ErrorCode::kInternal,
                                     "store: changing composition state: composition " +
                                         std::to_string(id) + " did not come back");
                              }
                              apply_transition(*found, to, detail, now_ms, attempt);
                              return std::move(*found);
                            }});
  }

  Expected<Composition> set_hold(int64_t id, std::string_view cause, std::string_view actor,
                                 int64_t now_ms) override {
    return write<Composition>([&](Connection& db) {
      Composition c = existing_composition(db, id);
      check_holdable(c);
      if (c.hold == cause) return c;
      db.run(pg::kSetHostHold, Params().add(id).add(cause).add(now_ms));
      Event e = composition_event(c, cause.empty() ? "unhold" : "hold", to_string(c.state),
                                  to_string(c.state), cause.empty() ? c.hold : cause, now_ms);
      if (!actor.empty()) e.owner.user = actor;
      append_event(db, e);
      c.hold = std::string(cause);
      c.updated_ms = now_ms;
      return c;
    });
  }

  Expected<Composition> composition(int64_t id) override {
    auto found =
        read<std::optional<Composition>>([id](Connection& db) { return find_composition(db, id); });
    if (!found.ok()) return found.error();
    if (!*found) return Error(ErrorCode::kNotFound, "no composition " + std::to_string(id));
    return std::move(**found);
  }

  Expected<std::optional<Composition>> live_composition(uint32_t job_id,
                                                        std::string_view node) override {
    return read<std::optional<Composition>>(
        [&](Connection& db) { return find_live_composition(db, job_id, node); });
  }

  Expected<std::vector<Composition>> compositions(const CompositionFilter& filter) override {
    return read<std::vector<Composition>>([&filter](Connection& db) {
      std::optional<std::string_view> state;
      if (filter.state) state = to_string(*filter.state);
      Result r = db.run(pg::kSelectCompositions, Params()
                                                     .add(filter.job_id)
                                                     .add(filter.uid)
                                                     .add(filter.user)
                                                     .add(filter.node)
                                                     .add(state)
                                                     .add(filter.live_only)
                                                     .add(pg_limit(filter.limit))
                                                     .add(filter.before_id));
      return read_compositions(r);
    });
  }

  using Store::set_drained;
  Status set_drained(const std::vector<std::string>& device_ids, bool drained,
                     std::string_view reason, std::string_view actor, int64_t now_ms) override {
    return writer_->run([&](Connection& db) {
      for (const std::string& device_id : device_ids) {
        auto found = find_device(db, device_id);
        if (!found) refuse(ErrorCode::kNotFound, "no device " + db::quoted(device_id));
        const Device before = *found;
        Device after = before;
        after.drained = drained;
        after.drain_reason = drained ? std::string(reason) : std::string();
        if (after.drained == before.drained && after.drain_reason == before.drain_reason) {
          continue;
        }
        db.run(pg::kSetDrained,
               Params().add(device_id).add(drained ? 1 : 0).add(after.drain_reason));
        append_event(db, owned_device_event(db, before, drained ? "drain" : "resume",
                                            to_string(before.state()), to_string(after.state()),
                                            actor, reason, now_ms));
      }
    });
  }

  Status set_health(const std::string& device_id, Health health, std::string_view detail,
                    int64_t now_ms) override {
    return writer_->run([&](Connection& db) {
      auto found = find_device(db, device_id);
      if (!found) refuse(ErrorCode::kNotFound, "no device " + db::quoted(device_id));
      if (found->health == health) return;
      db.run(pg::kSetHealth, Params().add(device_id).add(to_string(health)));
      append_event(db, owned_device_event(db, *found, "health", to_string(found->health),
                                          to_string(health), "", detail, now_ms));
    });
  }

  Status set_holders(const std::vector<std::pair<std::string, std::string>>& holders,
                     std::string_view kind, std::string_view actor, std::string_view detail,
                     int64_t now_ms) override {
    if (holders.empty()) return Status::Ok();
    return writer_->run([&](Connection& db) {
      for (const auto& [id, holder] : holders) {
        auto found = find_device(db, id);
        if (!found) refuse(ErrorCode::kNotFound, "no device " + db::quoted(id));
        if (found->holder == holder) continue;
        const Device before = *found;
        Device after = before;
        after.holder = holder;
        db.run(pg::kSetHolder, Params().add(id).add(holder));
        append_event(db, owned_device_event(db, before, kind, to_string(before.state()),
                                            to_string(after.state()), actor,
                                            holder_detail(detail, holder), now_ms));
      }
    });
  }

  Expected<std::map<std::string, std::string>> claims() override {
    return read<std::map<std::string, std::string>>([](Connection& db) {
      std::map<std::string, std::string> out;
      Result r = db.run(pg::kSelectClaims);
      while (r.step()) out.emplace(r.text(0), r.text(1));
      return out;
    });
  }

  Status drop_claims(const std::vector<std::string>& device_ids,
                     const std::string& fabric_host) override {
    if (device_ids.empty()) return Status::Ok();
    return writer_->run([&](Connection& db) {
      for (const auto& id : device_ids) db.run(pg::kDeleteClaim, Params().add(id).add(fabric_host));
    });
  }

  Status add_event(const Event& event) override {
    return writer_->run([&](Connection& db) { append_event(db, event); });
  }

  Expected<std::vector<Event>> events(const EventFilter& filter) override {
    if (filter.since_ms && filter.until_ms) {
      if (Status s = check_range(*filter.since_ms, *filter.until_ms); !s) return s.error();
    }
    return read<std::vector<Event>>([&filter](Connection& db) {
      int64_t since = filter.since_ms.value_or(std::numeric_limits<int64_t>::min());
      if (filter.after) since = std::max(since, filter.after->ts_ms);
      Result r =
          db.run(pg::kSelectEvents,
                 Params()
                     .add(since)
                     .add(filter.until_ms.value_or(std::numeric_limits<int64_t>::max()))
                     .add(filter.job_id)
                     .add(filter.composition_id)
                     .add(pg_limit(filter.limit))
                     .add(filter.after ? std::optional<int64_t>(filter.after->ts_ms) : std::nullopt)
                     .add(filter.after ? filter.after->id : 0));
      std::vector<Event> out;
      while (r.step()) out.push_back(read_event(r));
      return out;
    });
  }

  Status scan_events(int64_t since_ms, int64_t until_ms,
                     const std::function<bool(const Event&)>& visit) override {
    if (Status s = check_range(since_ms, until_ms); !s) return s;
    auto done = read<bool>(
        [&](Connection& db) {
          Event e;
          Result before = db.run(pg::kScanStateEvents, Params().add(since_ms));
          while (before.step()) {
            read_event_into(before, e);
            if (!visit(e)) return true;
          }
          Result range = db.run(pg::kScanRange, Params().add(since_ms).add(until_ms));
          while (range.step()) {
            read_event_into(range, e);
            if (!visit(e)) return true;
          }
          return true;
        },
        /*snapshot=*/true, /*retry=*/false);
    if (!done) return done.error();
    return Status::Ok();
  }

  Status walk_report(int64_t since_ms, int64_t until_ms, const ReportWalk& walk) override {
    if (Status s = check_range(since_ms, until_ms); !s) return s;
    return run_walk(walk, [&](WalkSteps& steps) {
      auto done = read<bool>(
          [&](Connection& db) {
            StepWriter out(steps);
            PgRollupSource source(db);
            merge_rollup_walk(source, since_ms, until_ms, out);
            out.flush();
            return true;
          },
          /*snapshot=*/true, /*retry=*/false);
      return done ? Status::Ok() : Status(done.error());
    });
  }

  Expected<PolicyVersion> add_policy(const PolicyVersion& version, int64_t now_ms) override {
    if (Status s = storable(version); !s) return s.error();
    return write<PolicyVersion>([&](Connection& db) {
      Result r = db.run(pg::kInsertPolicy, Params()
                                               .add(now_ms)
                                               .add(version.uid)
                                               .add(version.user)
                                               .add(version.file)
                                               .add(version.sha256)
                                               .add(version.text));
      r.step();
      PolicyVersion added = version;
      added.id = r.int64(0);
      added.applied_ms = now_ms;
      return added;
    });
  }

  Expected<std::optional<PolicyVersion>> current_policy() override {
    auto newest = policy_history(1);
    if (!newest) return newest.error();
    if (newest->empty()) return std::optional<PolicyVersion>{};
    return std::optional<PolicyVersion>{std::move(newest->front())};
  }

  Expected<std::vector<PolicyVersion>> policy_history(size_t limit) override {
    return read<std::vector<PolicyVersion>>([limit](Connection& db) {
      Result r = db.run(pg::kSelectPolicies, Params().add(pg_limit(limit)));
      std::vector<PolicyVersion> out;
      while (r.step()) out.push_back(read_policy(r));
      return out;
    });
  }

  WriteStats write_stats() const override { return writer_->stats(); }

  void fence(int64_t epoch, int64_t lease_ms) override { writer_->fence(epoch, lease_ms); }

 private:
  // Runs `query` on a reading connection, its statements in one read-only snapshot where
  // `snapshot` says so; failures become an Error. A query that hands rows to a visitor as it
  // reads them gives `retry` false: run again after a lost connection, it would hand them twice.
  template <typename T, typename Query>
  Expected<T> read(Query&& query, bool snapshot = false, bool retry = true) {
    try {
      std::optional<T> out;
      readers_.with_connection([&](Connection& db) { out.emplace(query(db)); }, snapshot, retry);
      return std::move(*out);
    } catch (const Failure& f) {
      return f.error();
    } catch (const std::exception& e) {
      return Error(ErrorCode::kInternal, std::string("store: ") + e.what());
    }
  }
  // A write as one statement in a flight (pg::Writer::Flight), its answer read by `receive`.
  template <typename T>
  struct Flying {
    const Sql* sql = nullptr;
    Params params;
    const Sql* together = nullptr;
    std::function<T(Result)> receive;
  };
  // With `flying`, the write goes in one flight with others, and `body`, which does the same,
  // runs only to say why the database refused it.
  template <typename T>
  void write_async(std::function<T(Connection&)> body, Answer<T> done, Flying<T> flying = {}) {
    auto result = std::make_shared<std::optional<T>>();
    pg::Writer::Flight flight;
    if (flying.sql != nullptr) {
      flight.sql = flying.sql;
      flight.params = std::move(flying.params);
      flight.together = flying.together;
      flight.receive = [receive = std::move(flying.receive), result](Result r) {
        *result = receive(std::move(r));
      };
    }
    writer_->submit([body = std::move(body), result](Connection& db) { *result = body(db); },
                    [result, done = std::move(done)](const Status& status) {
                      if (!status.ok()) return done(status.error());
                      done(std::move(**result));
                    },
                    std::move(flight));
  }
  template <typename T>
  Expected<T> write(std::function<T(Connection&)> body) {
    return wait<T>([&](Answer<T> done) { write_async<T>(std::move(body), std::move(done)); });
  }

  const int version_;
  pg::ReaderPool readers_;
  std::unique_ptr<pg::Writer> writer_;
};

}  // namespace

Expected<std::unique_ptr<Store>> Store::open_postgresql(const std::string& conninfo) {
  if (conninfo.empty()) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: the PostgreSQL connection string is empty; give one such as "
                 "'host=db1,db2 dbname=composer target_session_attrs=read-write'");
  }
  try {
    auto writer = pg::Connection::open(conninfo);
    const int version = pg::migrate(*writer, SystemClock::instance().now_ms());
    log::info("store: opened PostgreSQL", {{"schema_version", std::to_string(version)}});
    return std::unique_ptr<Store>(std::make_unique<PgStore>(conninfo, std::move(writer), version));
  } catch (const Failure& f) {
    return f.error();
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal, std::string("store: opening PostgreSQL: ") + e.what());
  }
}

}  // namespace composer::db
