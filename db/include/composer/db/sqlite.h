// A small RAII layer over the SQLite C API, used only inside the db component.
//
// Failures throw db::Failure (failure.h), whose message says what was being done ("store:
// inserting composition: UNIQUE constraint failed: ...").
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "composer/common/error.h"
#include "composer/db/failure.h"
#include "composer/db/sql_text.h"

namespace composer::db::sqlite {

// Statements are named constants (sql_text.h), shared in form with any other backend.
using db::Sql;

using db::fail;
using db::Failure;

// Maps an SQLite result code to the project's error codes: constraint violations are
// kConflict, a busy or unreachable database kUnavailable, anything else kInternal.
ErrorCode error_code_for(int sqlite_result);

class Connection;

// A prepared statement, prepared once per connection and reused. Bind indexes start at 1,
// column indexes at 0. Use it through Connection::statement(), which resets it after use.
class Statement {
 public:
  Statement(Connection& connection, const Sql& sql);
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, uint32_t value) { return bind(index, static_cast<int64_t>(value)); }
  // Refuses values above INT64_MAX: SQLite integers are signed.
  Statement& bind(int index, uint64_t value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, std::nullopt_t);
  template <typename T>
  Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind(index, std::nullopt);
  }

  // True while there is a row to read; false when done.
  bool step();
  // Steps a statement that returns no rows.
  void run();

  bool is_null(int column) const;
  int64_t int64(int column) const;
  // Checked: a value outside the type's range is a corrupt record, reported as kInternal.
  uint32_t uint32(int column) const;
  uint64_t uint64(int column) const;
  std::optional<int64_t> optional_int64(int column) const;
  std::string text(int column) const;
  std::string_view text_view(int column) const;  // valid until the next step or reset

  // Ends the current execution and clears the bindings.
  void reset();
  const Sql& sql() const { return sql_; }

 private:
  [[noreturn]] void fail_with(int result) const;

  struct Finalizer {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  Connection& connection_;
  Sql sql_;
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
};

// A statement in use: resets it when the scope ends, so no statement keeps a read snapshot
// or a half-finished execution alive after its caller returned or threw.
class [[nodiscard]] ScopedStatement {
 public:
  explicit ScopedStatement(Statement& statement) : statement_(&statement) {}
  ScopedStatement(const ScopedStatement&) = delete;
  ScopedStatement& operator=(const ScopedStatement&) = delete;
  ~ScopedStatement() { statement_->reset(); }
  Statement* operator->() const { return statement_; }
  Statement& operator*() const { return *statement_; }

 private:
  Statement* statement_;
};

class Connection {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // Opens (read-write: creating) the database file. Each connection is used by one thread at
  // a time. kUnavailable if the file cannot be opened.
  static std::unique_ptr<Connection> open(const std::string& path, Mode mode, int busy_timeout_ms);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // The cached prepared statement for `sql` (prepared on first use). `sql.text` must have
  // static storage, as the named constants do.
  ScopedStatement statement(const Sql& sql);
  // Runs one or more statements that return no rows (pragmas, migrations, BEGIN/COMMIT).
  void exec(const Sql& sql);
  // Runs a pragma and returns the first column of its first row as text ("" if no row).
  std::string pragma(std::string_view what, std::string_view pragma);

  // For measurements (store_bench --statements): `timer` is called with each step of each statement
  // this connection runs, with the nanoseconds it took (a statement's triggers included).
  using StatementTimer = std::function<void(const Sql& sql, int64_t ns)>;
  void time_statements(StatementTimer timer) { timer_ = std::move(timer); }
  const StatementTimer& statement_timer() const { return timer_; }

  bool in_transaction() const { return sqlite3_get_autocommit(db_.get()) == 0; }
  int64_t changes() const { return sqlite3_changes64(db_.get()); }
  int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }
  sqlite3* handle() const { return db_.get(); }
  const std::string& path() const { return path_; }
  // The latest error message of this connection.
  std::string last_error() const { return sqlite3_errmsg(db_.get()); }

 private:
  struct Closer {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  Connection(std::string path, sqlite3* db);

  std::string path_;
  std::unique_ptr<sqlite3, Closer> db_;
  StatementTimer timer_;
  // Finalized before db_ is closed (members are destroyed in reverse order).
  std::map<std::string_view, std::unique_ptr<Statement>, std::less<>> statements_;
};

// BEGIN [IMMEDIATE] ... COMMIT once; rolls back in its destructor if not committed.
class Transaction {
 public:
  enum class Kind { kDeferred, kImmediate };
  explicit Transaction(Connection& connection, Kind kind = Kind::kImmediate);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Connection& connection_;
  bool done_ = false;
};

// SAVEPOINT inside a transaction: release() keeps its changes; otherwise the destructor rolls
// back to it, undoing only what happened since it was taken.
class Savepoint {
 public:
  explicit Savepoint(Connection& connection);
  Savepoint(const Savepoint&) = delete;
  Savepoint& operator=(const Savepoint&) = delete;
  ~Savepoint();
  void release();

 private:
  Connection& connection_;
  bool done_ = false;
};

}  // namespace composer::db::sqlite
