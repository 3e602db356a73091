// A small layer over libpq, used only inside the db component, as sqlite.h is over SQLite.
//
// Statements are named constants (sql_text.h) with $N parameters, prepared once per
// connection. Parameters go as text, results come back as text and are read through the same
// column accessors as sqlite::Statement, so rows.h decodes both. Failures throw db::Failure
// (failure.h): a refused constraint (SQLSTATE class 23) is kConflict, a lost or unreachable
// server (class 08, or one that shut down or became a standby), a serialization failure or a
// deadlock kUnavailable, anything else kInternal.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"
#include "composer/db/failure.h"
#include "composer/db/sql_text.h"

namespace composer::db::pg {

// One statement's parameters, as text (nullopt: NULL).
class Params {
 public:
  Params& add(int64_t v) { return text(std::to_string(v)); }
  Params& add(int v) { return add(static_cast<int64_t>(v)); }
  Params& add(uint32_t v) { return add(static_cast<int64_t>(v)); }
  // Refuses values above INT64_MAX: the schema's integers are signed.
  Params& add(uint64_t v);
  Params& add(bool v) { return text(v ? "true" : "false"); }
  Params& add(std::string_view v) { return text(std::string(v)); }
  Params& add(const std::string& v) { return text(v); }
  Params& add(const char* v) { return text(v); }
  Params& add(std::nullopt_t) {
    values_.emplace_back();
    return *this;
  }
  template <typename T>
  Params& add(const std::optional<T>& v) {
    return v ? add(*v) : add(std::nullopt);
  }

  const std::vector<std::optional<std::string>>& values() const { return values_; }

 private:
  Params& text(std::string v) {
    values_.emplace_back(std::move(v));
    return *this;
  }
  std::vector<std::optional<std::string>> values_;
};

// A statement's rows: step() moves to the next one, then the columns are read as from
// sqlite::Statement.
class Result {
 public:
  Result(const Sql& sql, PGresult* result) : sql_(sql), result_(result) {}

  bool step() { return ++row_ < PQntuples(result_.get()); }
  int rows() const { return PQntuples(result_.get()); }
  // Rows changed by an INSERT, UPDATE or DELETE.
  int64_t changes() const;

  bool is_null(int column) const { return PQgetisnull(result_.get(), row_, column) != 0; }
  int64_t int64(int column) const;
  uint32_t uint32(int column) const;
  uint64_t uint64(int column) const;
  std::optional<int64_t> optional_int64(int column) const;
  std::string text(int column) const { return std::string(text_view(column)); }
  std::string_view text_view(int column) const {
    return {PQgetvalue(result_.get(), row_, column),
            static_cast<size_t>(PQgetlength(result_.get(), row_, column))};
  }

 private:
  [[noreturn]] void corrupt(int column, std::string_view why) const;
  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  Sql sql_;
  std::unique_ptr<PGresult, Clear> result_;
  int row_ = -1;
};

class Connection {
 public:
  // Connects with a libpq connection string. kUnavailable, naming no part of the string (it
  // may hold a password), if the server cannot be reached.
  static std::unique_ptr<Connection> open(const std::string& conninfo);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // Runs `sql` (prepared on first use on this connection) with `params`.
  Result run(const Sql& sql, const Params& params = {});
  // Runs one or more statements without parameters (migrations, BEGIN/COMMIT).
  void exec(const Sql& sql);
  // False once the connection to the server is lost.
  bool usable() const { return PQstatus(connection_.get()) == CONNECTION_OK; }
  // WARNINGs the server has sent on this connection so far. A COMMIT answered with one may
  // not be what it says: a primary whose wait for its synchronous standby is cancelled
  // reports the commit done although no standby may have it (Writer checks it).
  uint64_t warnings() const { return warnings_; }

 private:
  struct Finish {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  explicit Connection(PGconn* connection) : connection_(connection) {}
  [[noreturn]] void fail_with(const Sql& sql, PGresult* result);

  std::unique_ptr<PGconn, Finish> connection_;
  std::map<std::string_view, std::string, std::less<>> prepared_;  // text -> name
  uint64_t warnings_ = 0;
};

// BEGIN ... COMMIT once; rolls back in its destructor if not committed.
class Transaction {
 public:
  explicit Transaction(Connection& connection, bool read_only = false);
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();
  void commit();

 private:
  Connection& connection_;
  bool done_ = false;
};

// SAVEPOINT inside a transaction: release() keeps its changes; otherwise the destructor rolls
// back to it.
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

}  // namespace composer::db::pg
