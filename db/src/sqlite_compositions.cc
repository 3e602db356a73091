// The SQLite store's compositions: creating one with its devices, moving it along the state
// machine, a node's hold on it, and reading them back with their devices.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "records.h"
#include "rows.h"
#include "sqlite_statements.h"
#include "sqlite_store.h"

namespace composer::db {
namespace {

using sqlite::append_event;
using sqlite::Connection;
using sqlite::find_composition;

// create_composition's writing, on the writer's connection.
Composition insert_composition(Connection& db, const Composition& c,
                               const std::vector<std::string>& ids, int64_t now_ms) {
  Composition created = c;
  created.devices.clear();
  for (const auto& id : ids) {
    auto d = sqlite::find_device(db, id);
    if (!d) {
      refuse(ErrorCode::kNotFound, "creating composition for job " +
                                       std::to_string(c.owner.job_id) + " on " + c.node +
                                       ": no device " + db::quoted(id));
    }
    created.devices.push_back(std::move(*d));
  }
  try {
    db.statement(sqlite::kInsertComposition)
        ->bind(1, c.owner.job_id)
        .bind(2, c.node)
        .bind(3, c.owner.uid)
        .bind(4, c.owner.user)
        .bind(5, c.owner.account)
        .bind(6, c.owner.workload)
        .bind(7, c.request.gpus)
        .bind(8, c.request.gpu_model)
        .bind(9, c.request.mem_bytes)
        .bind(10, c.request.nvme)
        .bind(11, to_string(c.state))
        .bind(12, now_ms)
        .bind(13, c.window)
        .bind(14, c.mem_policy)
        .run();
  } catch (const Failure& f) {
    if (f.error().code != ErrorCode::kConflict) throw;
    fail(ErrorCode::kConflict,
         live_job_conflict(c, sqlite::find_live_composition(db, c.owner.job_id, c.node)) + "; " +
             failure_reason(f));
  }
  created.id = db.last_insert_rowid();
  created.created_ms = now_ms;
  created.updated_ms = now_ms;
  created.attempts = 0;
  created.last_error.clear();

  for (auto& d : created.devices) {
    try {
      db.statement(sqlite::kLinkDevice)->bind(1, created.id).bind(2, d.id).run();
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

// The composition `id`, read in the writing transaction; kNotFound if there is none.
Composition existing_composition(Connection& db, int64_t id) {
  auto found = find_composition(db, id);
  if (!found) refuse(ErrorCode::kNotFound, "no composition " + std::to_string(id));
  return std::move(*found);
}

}  // namespace

void SqliteStore::create_composition_async(const Composition& c,
                                           const std::vector<std::string>& ids, int64_t now_ms,
                                           Answer<Composition> done) {
  if (auto refused = creatable(c, ids); !refused) return done(refused.error());
  write_async<Composition>(
      [c, ids, now_ms](Connection& db) { return insert_composition(db, c, ids, now_ms); },
      std::move(done));
}

void SqliteStore::transition_async(int64_t id, CompositionState from, CompositionState to,
                                   std::string_view detail, int64_t now_ms, bool attempt,
                                   Answer<Composition> done) {
  if (auto refused = transitionable(id, from, to); !refused) return done(refused.error());
  write_async<Composition>(
      [id, from, to, detail = std::string(detail), now_ms, attempt](Connection& db) {
        Composition c = existing_composition(db, id);
        check_state(c, from);
        auto update = db.statement(sqlite::kUpdateCompositionState);
        update->bind(1, id)
            .bind(2, to_string(to))
            .bind(3, now_ms)
            .bind(4, attempt ? 1 : 0)
            .bind(5, to_string(from))
            .bind(6, detail)
            .run();
        if (db.changes() != 1) {
          refuse(ErrorCode::kConflict, "composition " + std::to_string(id) + " changed meanwhile");
        }
        append_event(db, composition_event(c, to_string(to), to_string(from), to_string(to), detail,
                                           now_ms));
        apply_transition(c, to, detail, now_ms, attempt);
        return c;
      },
      std::move(done));
}

Expected<Composition> SqliteStore::set_hold(int64_t id, std::string_view cause,
                                            std::string_view actor, int64_t now_ms) {
  return write<Composition>([&](Connection& db) {
    Composition c = existing_composition(db, id);
    check_holdable(c);
    if (c.hold == cause) return c;
    db.statement(sqlite::kSetHostHold)->bind(1, id).bind(2, cause).bind(3, now_ms).run();
    Event e = composition_event(c, cause.empty() ? "unhold" : "hold", to_string(c.state),
                                to_string(c.state), cause.empty() ? c.hold : cause, now_ms);
    if (!actor.empty()) e.owner.user = actor;
    append_event(db, e);
    c.hold = std::string(cause);
    c.updated_ms = now_ms;
    return c;
  });
}

Expected<Composition> SqliteStore::composition(int64_t id) {
  auto found =
      read<std::optional<Composition>>([id](Connection& db) { return find_composition(db, id); });
  if (!found.ok()) return found.error();
  if (!*found) return Error(ErrorCode::kNotFound, "no composition " + std::to_string(id));
  return std::move(**found);
}

Expected<std::optional<Composition>> SqliteStore::live_composition(uint32_t job_id,
                                                                   std::string_view node) {
  return read<std::optional<Composition>>(
      [&](Connection& db) { return sqlite::find_live_composition(db, job_id, node); });
}

Expected<std::vector<Composition>> SqliteStore::compositions(const CompositionFilter& filter) {
  return read<std::vector<Composition>>([&filter](Connection& db) {
    // One variant per indexed filter, so each can use its index.
    const Sql* sql = &sqlite::kSelectCompositions;
    if (filter.job_id) {
      sql = &sqlite::kSelectCompositionsByJob;
    } else if (filter.node) {
      sql = &sqlite::kSelectCompositionsByNode;
    } else if (filter.live_only) {
      sql = &sqlite::kSelectLiveCompositions;
    }
    std::optional<std::string_view> state;
    if (filter.state) state = to_string(*filter.state);
    auto s = db.statement(*sql);
    s->bind(1, filter.job_id)
        .bind(2, filter.uid)
        .bind(3, filter.user)
        .bind(4, filter.node)
        .bind(5, state)
        .bind(6, filter.live_only ? 1 : 0)
        .bind(7, sqlite::limit_value(filter.limit))
        .bind(8, filter.before_id);
    return read_compositions(*s);
  });
}

}  // namespace composer::db
