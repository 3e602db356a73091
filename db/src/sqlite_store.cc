// The Store on SQLite: opening it, and the queries its concerns share.
#include "sqlite_store.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "composer/common/clock.h"
#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "records.h"
#include "rows.h"
#include "schema.h"
#include "sqlite_statements.h"

namespace composer::db {
namespace sqlite {

std::optional<Device> find_device(Connection& db, std::string_view id) {
  auto s = db.statement(kSelectDevice);
  s->bind(1, id);
  if (!s->step()) return std::nullopt;
  return read_device(*s, 0);
}

std::optional<Composition> find_composition(Connection& db, int64_t id) {
  auto s = db.statement(kSelectComposition);
  s->bind(1, id);
  auto found = read_compositions(*s);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::optional<Composition> find_live_composition(Connection& db, uint32_t job_id,
                                                 std::string_view node) {
  auto s = db.statement(kSelectLiveComposition);
  s->bind(1, job_id).bind(2, node);
  auto found = read_compositions(*s);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

void append_event(Connection& db, const Event& e) {
  db.statement(kInsertEvent)
      ->bind(1, e.ts_ms)
      .bind(2, e.kind)
      .bind(3, e.composition_id)
      .bind(4, e.owner.job_id)
      .bind(5, e.node)
      .bind(6, e.owner.uid)
      .bind(7, e.owner.user)
      .bind(8, e.owner.account)
      .bind(9, e.owner.workload)
      .bind(10, e.from_state)
      .bind(11, e.to_state)
      .bind(12, join(e.devices, kListSeparator))
      .bind(13, e.detail)
      .bind(14, e.window)
      .run();
}

Event device_event(Connection& db, const Device& d, std::string_view kind, std::string_view from,
                   std::string_view to, std::string_view user, std::string_view detail,
                   int64_t now_ms) {
  std::optional<Composition> owner;
  if (d.composition_id) owner = find_composition(db, *d.composition_id);
  return db::device_event(owner, d, kind, from, to, user, detail, now_ms);
}

int64_t limit_value(size_t limit) {
  if (limit == 0) return -1;  // SQLite: no limit
  return static_cast<int64_t>(std::min<size_t>(limit, std::numeric_limits<int64_t>::max()));
}

}  // namespace sqlite

namespace {

using sqlite::Connection;

std::unique_ptr<Connection> open_writer(const std::string& path, const StoreOptions& options) {
  auto db = Connection::open(path, Connection::Mode::kReadWrite, options.busy_timeout_ms);
  const std::string mode = db->pragma("switching to WAL", "journal_mode = WAL");
  if (mode != "wal") {
    fail(ErrorCode::kUnavailable,
         path + ": the database could not switch to WAL journaling (it reports '" + mode + "')");
  }
  db->pragma("enabling foreign keys", "foreign_keys = ON");
  if (db->pragma("checking foreign keys", "foreign_keys") != "1") {
    fail(ErrorCode::kUnavailable, path + ": this SQLite cannot enforce foreign keys");
  }
  db->pragma("setting synchronous",
             options.durable ? "synchronous = FULL" : "synchronous = NORMAL");
  db->pragma("setting busy timeout", "busy_timeout = " + std::to_string(options.busy_timeout_ms));
  if (options.writer_statement_timer) {
    db->time_statements([timer = options.writer_statement_timer](const Sql& sql, int64_t ns) {
      timer(sql.what, ns);
    });
  }
  return db;
}

}  // namespace

Expected<std::unique_ptr<Store>> Store::open(const std::string& path, const StoreOptions& options) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: database path " + db::quoted(path) +
                     " is not valid: give the path of a file (readers and the writer open it "
                     "separately, so an in-memory database or URI cannot work)");
  }
  if (options.busy_timeout_ms < 0) {
    return Error(ErrorCode::kInvalidArgument, "store: busy_timeout_ms " +
                                                  std::to_string(options.busy_timeout_ms) +
                                                  " is negative; give 0 or more milliseconds");
  }
  try {
    auto writer = open_writer(path, options);
    const int version = migrate(*writer, SystemClock::instance().now_ms());
    // Each call of a batch runs in its own savepoint (GroupWriter), whose statement journal
    // SQLite otherwise spills past 64 KiB into a new file under /var/tmp per batch: a batch of
    // a few dozen calls created, wrote and removed one, as many writes as the WAL itself. In
    // memory it is a copy; durability is the WAL's and does not change. Set after the
    // migrations, whose index builds may sort a whole ledger and should spill to disk.
    writer->pragma("keeping statement journals in memory", "temp_store = MEMORY");
    // Fail now, not at the first read, if the file cannot be read by a second connection.
    {
      auto probe = Connection::open(path, Connection::Mode::kReadOnly, options.busy_timeout_ms);
      probe->pragma("checking read access", "user_version");
    }
    log::info("store: opened", {{"path", path},
                                {"schema_version", std::to_string(version)},
                                {"durable", options.durable ? "true" : "false"}});
    return std::unique_ptr<Store>(
        std::make_unique<SqliteStore>(path, options, std::move(writer), version));
  } catch (const Failure& f) {
    return f.error();
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal, "store: opening " + path + ": " + e.what());
  }
}

}  // namespace composer::db
