// composerctl state copy-to-postgresql: a site's SQLite file into an empty PostgreSQL store.
//
// Rows are copied table by table as each database's own catalog describes them (column names
// from SQLite's table_info and PostgreSQL's information_schema), so neither schema is written
// down a second time here. What this file knows is the order: parents before the tables that
// refer to them, and the derived tables (claims, the rollup) after what they derive from.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "composer/db/pg.h"
#include "composer/db/sqlite.h"
#include "composer/db/store.h"
#include "pg_schema.h"
#include "schema.h"
#include "sql_terms.h"

namespace composer::db {
namespace {

// Every table of both schemas but schema_migrations (each backend's own), in copy order.
constexpr std::array<std::string_view, 8> kTables = {
    "hosts",         "devices", "compositions",       "composition_devices",
    "fabric_claims", "events",  "composition_rollup", "policies"};

// Statements whose text is made here: kept as long as the connections that cached them.
class Texts {
 public:
  Sql make(std::string what, std::string text) {
    texts_.push_back(std::move(what));
    const std::string& w = texts_.back();
    texts_.push_back(std::move(text));
    return Sql{w, texts_.back()};
  }

 private:
  std::deque<std::string> texts_;
};

// Parameters in one INSERT of many rows: far below PostgreSQL's 65535.
constexpr size_t kParametersPerStatement = 4000;

std::string sql_identifier(std::string_view name) { return "\"" + std::string(name) + "\""; }

constexpr Sql kTakeFile{"taking the database for the copy alone",
                        "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE"};
constexpr Sql kSqliteTables{
    "listing the file's tables",
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    " ORDER BY name"};
constexpr Sql kSqliteColumns{"listing a table's columns",
                             "SELECT name FROM pragma_table_info(?1) ORDER BY cid"};
constexpr Sql kSqliteHasRowid{
    "asking whether a table has rowids",
    "SELECT sql NOT LIKE '%WITHOUT ROWID%' FROM sqlite_master WHERE type = 'table' AND name = ?1"};
constexpr Sql kPgColumns{
    "listing a table's columns",
    "SELECT column_name, identity_generation FROM information_schema.columns"
    " WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position"};
constexpr Sql kPgIdentities{"listing identity columns",
                            "SELECT table_name, column_name FROM information_schema.columns"
                            " WHERE table_schema = current_schema() AND is_identity = 'YES'"};

// The checks after the copy: the same statement on both sides, compared row by row.
constexpr Sql kLiveCompositions =
    statement<"listing live compositions and their devices",
              "SELECT c.id, c.job_id, c.node, c.state, d.device_id FROM compositions c"
              " JOIN composition_devices d ON d.composition_id = c.id AND d.live = 1 WHERE ",
              is_live_state<"c.state">, " ORDER BY c.id, d.device_id">;
constexpr Sql kClaims{"listing device claims",
                      "SELECT device_id, fabric_host, since_ms FROM fabric_claims"
                      " ORDER BY device_id"};

template <typename Row>
std::string row_text(const Row& row, int columns) {
  std::string out;
  for (int i = 0; i < columns; ++i) {
    out += i == 0 ? "" : "|";
    out += row.is_null(i) ? std::string("NULL") : std::string(row.text_view(i));
  }
  return out;
}

std::vector<std::string> sqlite_rows(sqlite::Connection& c, const Sql& sql, int columns) {
  std::vector<std::string> out;
  auto s = c.statement(sql);
  while (s->step()) out.push_back(row_text(*s, columns));
  return out;
}

std::vector<std::string> pg_rows(pg::Connection& c, const Sql& sql, int columns) {
  std::vector<std::string> out;
  pg::Result r = c.run(sql);
  while (r.step()) out.push_back(row_text(r, columns));
  return out;
}

int64_t sqlite_count(sqlite::Connection& c, Texts& texts, std::string_view table) {
  auto s = c.statement(texts.make("counting " + std::string(table),
                                  "SELECT COUNT(*) FROM " + sql_identifier(table)));
  return s->step() ? s->int64(0) : 0;
}

int64_t pg_count(pg::Connection& c, Texts& texts, std::string_view table) {
  pg::Result r = c.run(texts.make("counting " + std::string(table),
                                  "SELECT COUNT(*) FROM " + sql_identifier(table)));
  return r.step() ? r.int64(0) : 0;
}

[[noreturn]] void refuse(ErrorCode code, const std::string& why) {
  throw Failure(Error{code, why});
}

// Copies one table's rows; returns how many.
int64_t copy_table(sqlite::Connection& from, pg::Connection& to, Texts& texts,
                   std::string_view table, const std::string& database) {
  std::vector<std::string> source;
  {
    auto s = from.statement(kSqliteColumns);
    s->bind(1, table);
    while (s->step()) source.push_back(s->text(0));
  }
  std::vector<std::pair<std::string, bool>> target;  // name, an identity GENERATED ALWAYS
  {
    pg::Result r = to.run(kPgColumns, pg::Params().add(table));
    while (r.step()) target.emplace_back(r.text(0), r.text(1) == "ALWAYS");
  }
  bool overriding = false;
  for (const std::string& name : source) {
    bool found = false;
    for (const auto& [t, always] : target) {
      if (t == name) {
        found = true;
        overriding = overriding || always;
      }
    }
    if (!found) {
      refuse(ErrorCode::kInvalidArgument,
             database + ": column " + std::string(table) + "." + name +
                 " has no place in the PostgreSQL schema of this build; nothing was copied");
    }
  }
  std::string columns;
  for (size_t i = 0; i < source.size(); ++i)
    columns += (i == 0 ? "" : ", ") + sql_identifier(source[i]);
  bool has_rowid = true;
  {
    auto s = from.statement(kSqliteHasRowid);
    s->bind(1, table);
    has_rowid = s->step() && s->int64(0) != 0;
  }
  // Many rows a statement: one round trip per row made a ledger of a million events take
  // most of an hour.
  auto insert = [&](size_t rows) {
    std::string values;
    size_t n = 0;
    for (size_t r = 0; r < rows; ++r) {
      values += r == 0 ? "(" : ", (";
      for (size_t i = 0; i < source.size(); ++i) {
        values += (i == 0 ? "$" : ", $") + std::to_string(++n);
      }
      values += ")";
    }
    return texts.make("copying " + std::string(table),
                      "INSERT INTO " + sql_identifier(table) + " (" + columns + ")" +
                          (overriding ? " OVERRIDING SYSTEM VALUE" : "") + " VALUES " + values);
  };
  const size_t batch =
      std::max<size_t>(1, kParametersPerStatement / std::max<size_t>(1, source.size()));
  const Sql full = insert(batch);
  const Sql select = texts.make("reading " + std::string(table),
                                "SELECT " + columns + " FROM " + sql_identifier(table) +
                                    (has_rowid ? " ORDER BY rowid" : ""));
  int64_t rows = 0;
  pg::Params p;
  size_t pending = 0;
  auto s = from.statement(select);
  while (s->step()) {
    for (int i = 0; i < static_cast<int>(source.size()); ++i) {
      if (s->is_null(i)) {
        p.add(std::nullopt);
      } else {
        p.add(s->text_view(i));
      }
    }
    ++rows;
    if (++pending == batch) {
      to.run(full, p);
      p = pg::Params();
      pending = 0;
    }
  }
  if (pending > 0) to.run(insert(pending), p);
  return rows;
}

void compare(const std::vector<std::string>& file, const std::vector<std::string>& store,
             const std::string& what) {
  if (file == store) return;
  refuse(ErrorCode::kInternal, "after the copy the " + what + " differ (" +
                                   std::to_string(file.size()) + " in the file, " +
                                   std::to_string(store.size()) +
                                   " in PostgreSQL); nothing was committed");
}

}  // namespace

Expected<CopyCounts> copy_to_postgresql(const std::string& database, const std::string& conninfo) {
  struct stat st {};
  if (::stat(database.c_str(), &st) != 0) {
    return Error{ErrorCode::kNotFound,
                 "cannot read the database " + database + ": " + std::strerror(errno)};
  }
  if (!S_ISREG(st.st_mode)) {
    return Error{ErrorCode::kInvalidArgument, database + " is not a file"};
  }
  Texts texts;  // outlives both connections, which cache statements by its texts
  CopyCounts counts;
  try {
    auto from = sqlite::Connection::open(database, sqlite::Connection::Mode::kReadWrite, 200);
    // composerd holds its database open from start to stop: while it does, no other
    // connection gets an exclusive lock. Taken here, the lock also keeps composerd from
    // starting on the file until the copy is done.
    try {
      from->exec(kTakeFile);
    } catch (const Failure& f) {
      return Error{ErrorCode::kConflict,
                   database +
                       " is in use (is composerd running? stop it first: systemctl "
                       "stop composerd): " +
                       f.error().message};
    }
    const int version = schema_version(*from);
    if (version <= 0) {
      return Error{ErrorCode::kInvalidArgument,
                   database + " is not a composerd database (no schema)"};
    }
    if (version != latest_schema_version()) {
      return Error{ErrorCode::kInvalidArgument,
                   database + " has schema version " + std::to_string(version) +
                       "; this build copies version " + std::to_string(latest_schema_version()) +
                       " (start composerd of this version on it once: it migrates the file)"};
    }
    for (const std::string& table : sqlite_rows(*from, kSqliteTables, 1)) {
      bool known = table == "schema_migrations";
      for (std::string_view t : kTables) known = known || t == table;
      if (!known) {
        return Error{ErrorCode::kInvalidArgument,
                     database + ": table " + table + " is not one this build copies"};
      }
    }

    // Creates the schema in a new database, or migrates an older one forward.
    {
      auto store = Store::open_postgresql(conninfo);
      if (!store) return store.error();
    }
    auto to = pg::Connection::open(conninfo);
    pg::Transaction tx(*to);
    for (std::string_view table : kTables) {
      if (const int64_t n = pg_count(*to, texts, table); n > 0) {
        return Error{ErrorCode::kConflict,
                     "the PostgreSQL store is not empty (" + std::string(table) + " has " +
                         std::to_string(n) +
                         " rows): copy into a new database (createdb -O composer composer)"};
      }
    }
    // The schema's triggers check and derive each row as composerd writes it, which for a
    // whole ledger at once costs more than the copy itself (the rollup is recomputed for every
    // end event). The rows come from a file where the same rules held, the derived tables come
    // along, and the checks below compare the result; the triggers are back before the commit,
    // and a rollback takes this back too.
    for (std::string_view table : kTables) {
      to->exec(texts.make("pausing the triggers of " + std::string(table),
                          "ALTER TABLE " + sql_identifier(table) + " DISABLE TRIGGER USER"));
    }
    for (std::string_view table : kTables) {
      counts.rows.emplace_back(std::string(table), copy_table(*from, *to, texts, table, database));
    }
    for (std::string_view table : kTables) {
      to->exec(texts.make("resuming the triggers of " + std::string(table),
                          "ALTER TABLE " + sql_identifier(table) + " ENABLE TRIGGER USER"));
    }
    // The next id each identity hands out comes after the copied ones.
    std::vector<std::pair<std::string, std::string>> identities;
    {
      pg::Result r = to->run(kPgIdentities);
      while (r.step()) identities.emplace_back(r.text(0), r.text(1));
    }
    for (const auto& [table, column] : identities) {
      to->run(texts.make("moving the identity of " + table + "." + column,
                         "SELECT setval(pg_get_serial_sequence('" + sql_identifier(table) + "', '" +
                             column + "'), COALESCE((SELECT MAX(" + sql_identifier(column) +
                             ") FROM " + sql_identifier(table) + "), 0) + 1, false)"));
    }
    for (const auto& [table, rows] : counts.rows) {
      const int64_t file = sqlite_count(*from, texts, table);
      const int64_t store = pg_count(*to, texts, table);
      if (file != rows || store != rows) {
        return Error{ErrorCode::kInternal, "after the copy " + table + " has " +
                                               std::to_string(store) + " rows in PostgreSQL and " +
                                               std::to_string(file) +
                                               " in the file; nothing was committed"};
      }
    }
    const auto live = sqlite_rows(*from, kLiveCompositions, 5);
    compare(live, pg_rows(*to, kLiveCompositions, 5), "live compositions and their devices");
    const auto claims = sqlite_rows(*from, kClaims, 3);
    compare(claims, pg_rows(*to, kClaims, 3), "device claims");
    tx.commit();

    // What composerd will read: the store's own answers.
    auto store = Store::open_postgresql(conninfo);
    if (!store) return store.error();
    auto live_now = (*store)->compositions({.live_only = true});
    if (!live_now) return live_now.error();
    auto claims_now = (*store)->claims();
    if (!claims_now) return claims_now.error();
    std::vector<int64_t> ids;
    for (const std::string& row : live) {
      const int64_t id = std::stoll(row.substr(0, row.find('|')));
      if (ids.empty() || ids.back() != id) ids.push_back(id);
    }
    if (live_now->size() != ids.size() || claims_now->size() != claims.size()) {
      return Error{ErrorCode::kInternal,
                   "the PostgreSQL store answers " + std::to_string(live_now->size()) +
                       " live compositions and " + std::to_string(claims_now->size()) +
                       " claims after the copy; the file holds " + std::to_string(ids.size()) +
                       " and " + std::to_string(claims.size())};
    }
    counts.live_compositions = static_cast<int64_t>(ids.size());
    counts.claims = static_cast<int64_t>(claims.size());
  } catch (const Failure& f) {
    return f.error();
  }
  return counts;
}

}  // namespace composer::db
