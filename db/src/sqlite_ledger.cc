// The SQLite store's ledger: appending and listing events, and the two ways a report reads
// them (scan_events, every event; walk_report, the rollup of ended compositions).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "ledger_walk.h"
#include "records.h"
#include "rows.h"
#include "sqlite_statements.h"
#include "sqlite_store.h"

namespace composer::db {
namespace {

using sqlite::Connection;

// The events with since_ms <= ts_ms < until_ms in ledger order (ts_ms, id), each exactly once.
// The ids come in that order from the ts index; the rows come in id order from one table walk
// starting at the first id. A row read before its turn (its ts_ms is later than that of a row
// with a higher id) waits in `early` until the ids reach it, and an id below the first one
// (an earlier ts_ms recorded later) is read on its own. Returns false when `visit` stopped.
bool scan_range(Connection& db, int64_t since_ms, int64_t until_ms, Event& e,
                const std::function<bool(const Event&)>& visit) {
  auto ids = db.statement(sqlite::kScanRangeIds);
  ids->bind(1, since_ms).bind(2, until_ms);
  if (!ids->step()) return true;
  const int64_t first = ids->int64(0);
  auto rows = db.statement(sqlite::kScanRangeRows);
  rows->bind(1, first).bind(2, since_ms).bind(3, until_ms);
  // Rows waiting for their turn. Their map nodes are recycled through `spare`, so that after
  // the first few a row read early costs no allocation (its strings keep their capacity).
  std::map<int64_t, Event> early;
  std::vector<std::map<int64_t, Event>::node_type> spare;
  bool going = true;
  do {
    const int64_t id = ids->int64(0);
    if (id < first) {
      auto one = db.statement(sqlite::kSelectEventById);
      one->bind(1, id);
      if (!one->step()) {
        fail(ErrorCode::kInternal,
             "store: event " + std::to_string(id) + " vanished during a report scan");
      }
      read_event_into(*one, e);
      going = visit(e);
      continue;
    }
    if (auto it = early.find(id); it != early.end()) {
      auto node = early.extract(it);
      going = visit(node.mapped());
      spare.push_back(std::move(node));
      continue;
    }
    while (true) {
      if (!rows->step()) {
        fail(ErrorCode::kInternal,
             "store: event " + std::to_string(id) +
                 " is in the ts index of a report's range but not in its rows");
      }
      const int64_t row = rows->int64(0);
      if (row == id) {
        read_event_into(*rows, e);
        going = visit(e);
        break;
      }
      if (spare.empty()) {
        read_event_into(*rows, early[row]);
      } else {
        auto node = std::move(spare.back());
        spare.pop_back();
        node.key() = row;
        read_event_into(*rows, node.mapped());
        early.insert(std::move(node));
      }
    }
  } while (going && ids->step());
  return going;
}

// The rollup walk's reading on one connection, inside the read transaction its caller holds;
// `devices` and `rows` are its kWalkDeviceEvents and kWalkRollup, taken by the caller.
class SqliteRollupSource final : public RollupSource {
 public:
  SqliteRollupSource(Connection& db, sqlite::Statement& devices, sqlite::Statement& rows)
      : db_(db), devices_(devices), rows_(rows) {}

  uint64_t unattached(int64_t since_ms, int64_t until_ms) override {
    auto count = db_.statement(sqlite::kWalkUnattached);
    count->bind(1, since_ms).bind(2, until_ms);
    return count->step() ? count->uint64(0) : 0;
  }
  std::vector<int64_t> read_alone() override {
    std::vector<int64_t> alone;
    auto ids = db_.statement(sqlite::kWalkReadAlone);
    while (ids->step()) alone.push_back(ids->int64(0));
    return alone;
  }
  void composition_events(int64_t id, int64_t since_ms, int64_t until_ms,
                          std::vector<Event>& out) override {
    bool before = false;
    {
      auto live = db_.statement(sqlite::kWalkLiveAtStart);
      live->bind(1, id).bind(2, since_ms);
      before = live->step() && live->int64(0) != 0;
    }
    auto s = db_.statement(sqlite::kWalkCompositionEvents);
    s->bind(1, id).bind(2, until_ms).bind(3, since_ms).bind(4, before ? 1 : 0);
    while (s->step()) out.push_back(read_event(*s));
  }
  int64_t longest() override {
    auto s = db_.statement(sqlite::kWalkLongest);
    if (s->step() && !s->is_null(0)) return std::max<int64_t>(0, s->int64(0));
    return 0;
  }
  void start(int64_t earliest_ms, int64_t since_ms, int64_t until_ms) override {
    devices_.bind(1, until_ms);
    rows_.bind(1, earliest_ms).bind(2, until_ms).bind(3, since_ms);
  }
  bool next_device_event(Event& e) override {
    if (!devices_.step()) return false;
    read_event_into(devices_, e);
    return true;
  }
  bool next_row(CompositionRollup& r) override {
    if (!rows_.step()) return false;
    read_rollup_into(rows_, r);
    return true;
  }

 private:
  Connection& db_;
  sqlite::Statement& devices_;
  sqlite::Statement& rows_;
};

}  // namespace

Status SqliteStore::add_event(const Event& event) {
  return write_status([&](Connection& db) { sqlite::append_event(db, event); });
}

Expected<std::vector<Event>> SqliteStore::events(const EventFilter& filter) {
  if (filter.since_ms && filter.until_ms) {
    if (Status s = check_range(*filter.since_ms, *filter.until_ms); !s) return s.error();
  }
  return read<std::vector<Event>>([&filter](Connection& db) {
    const Sql* sql = &sqlite::kSelectEvents;
    if (filter.composition_id) {
      sql = &sqlite::kSelectEventsByComposition;
    } else if (filter.job_id) {
      sql = &sqlite::kSelectEventsByJob;
    }
    auto s = db.statement(*sql);
    int64_t since = filter.since_ms.value_or(std::numeric_limits<int64_t>::min());
    if (filter.after) since = std::max(since, filter.after->ts_ms);
    s->bind(1, since)
        .bind(2, filter.until_ms.value_or(std::numeric_limits<int64_t>::max()))
        .bind(3, filter.job_id)
        .bind(4, filter.composition_id)
        .bind(5, sqlite::limit_value(filter.limit))
        .bind(6, filter.after ? std::optional<int64_t>(filter.after->ts_ms) : std::nullopt)
        .bind(7, filter.after ? filter.after->id : 0);
    std::vector<Event> out;
    while (s->step()) out.push_back(read_event(*s));
    return out;
  });
}

Status SqliteStore::scan_events(int64_t since_ms, int64_t until_ms,
                                const std::function<bool(const Event&)>& visit) {
  if (Status s = check_range(since_ms, until_ms); !s) return s;
  // One read transaction for both statements, so the range continues exactly where the state
  // before it was read.
  auto done = read<bool>([&](Connection& db) {
    sqlite::Transaction snapshot(db, sqlite::Transaction::Kind::kDeferred);
    bool going = true;
    Event e;
    auto before = db.statement(sqlite::kScanStateEvents);
    before->bind(1, since_ms);
    while (going && before->step()) {
      read_event_into(*before, e);
      going = visit(e);
    }
    before->reset();
    if (going) going = scan_range(db, since_ms, until_ms, e, visit);
    snapshot.commit();
    return true;
  });
  if (!done) return done.error();
  return Status::Ok();
}

// The walk itself, on the walk's thread.
Status SqliteStore::walk_rollup(int64_t since_ms, int64_t until_ms, WalkSteps& steps) {
  auto done = read<bool>([&](Connection& db) {
    StepWriter out(steps);
    // One read transaction: every statement sees the same ledger.
    sqlite::Transaction snapshot(db, sqlite::Transaction::Kind::kDeferred);
    auto devices = db.statement(sqlite::kWalkDeviceEvents);
    auto rows = db.statement(sqlite::kWalkRollup);
    SqliteRollupSource source(db, *devices, *rows);
    merge_rollup_walk(source, since_ms, until_ms, out);
    snapshot.commit();
    out.flush();
    return true;
  });
  if (!done) return done.error();
  return Status::Ok();
}

Status SqliteStore::walk_report(int64_t since_ms, int64_t until_ms, const ReportWalk& walk) {
  if (Status s = check_range(since_ms, until_ms); !s) return s;
  return run_walk(walk, [&](WalkSteps& steps) { return walk_rollup(since_ms, until_ms, steps); });
}

}  // namespace composer::db
