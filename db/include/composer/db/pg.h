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

#include <atomic>
#include <cstdint>
#include <deque>
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
  // A text[] parameter.
  Params& add(const std::vector<std::string>& items);
  // The parameters of one statement that does the work of several `calls` at once: the k-th
  // is an array (its text form) of each call's k-th parameter, in the calls' order, NULL
  // where that was NULL. Every call has the same number of parameters.
  static Params columns_of(const std::vector<const Params*>& calls);
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
  Result(const Sql& sql, PGresult* result)
      : sql_(sql), result_(result, Clear()), end_(PQntuples(result)) {}

  bool step() { return ++row_ < end_; }
  int rows() const { return end_ - first_; }
  // The row step() reached, counted from the first row of the whole answer.
  int row() const { return row_; }
  int columns() const { return PQnfields(result_.get()); }
  // Rows `first` to `end` (not included) of the whole answer, as an answer of their own that
  // step() goes through from the first (what one call of a statement done for several calls
  // reads).
  Result slice(int first, int end) const;
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
  std::shared_ptr<PGresult> result_;  // shared by the slices of one answer
  int first_ = 0;
  int end_;
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

  // libpq's pipeline mode: statements are sent without waiting for each answer, and the server
  // answers them in order, so a group of them costs one round trip. Between enter_pipeline()
  // and leave_pipeline() only send(), send_plain(), sync() and the receiving calls may be used.
  void enter_pipeline();
  // Queues `sql` (prepared on first use) with `params`.
  void send(const Sql& sql, const Params& params = {});
  // Queues one statement without parameters, not prepared (BEGIN, SAVEPOINT).
  void send_plain(const Sql& sql);
  // Ends a group: the server answers everything queued so far. After a statement fails, the
  // server skips the rest up to the next sync (and the transaction is aborted).
  void sync();
  // The answer to the next statement queued, `sql`; throws Failure as run() does.
  Result receive(const Sql& sql);
  // Reads every answer up to the next sync's, skipped or not, and drops them.
  void skip_to_sync();
  // Leaves pipeline mode; every sync must have been received.
  void leave_pipeline();
  bool in_pipeline() const { return PQpipelineStatus(connection_.get()) != PQ_PIPELINE_OFF; }
  // Whether the open transaction failed (only a ROLLBACK, or ROLLBACK TO a savepoint, is
  // taken until then).
  bool transaction_failed() const {
    return PQtransactionStatus(connection_.get()) == PQTRANS_INERROR;
  }
  // False once the connection to the server is lost.
  bool usable() const { return PQstatus(connection_.get()) == CONNECTION_OK; }
  // WARNINGs the server has sent on this connection so far. A COMMIT answered with one may
  // not be what it says: a primary whose wait for its synchronous standby is cancelled
  // reports the commit done although no standby may have it (Writer checks it).
  uint64_t warnings() const { return warnings_; }
  // Adds one to `*counter` each time this connection waits for the server's answer: a
  // statement run, or a group of them synced (`counter` outlives the connection).
  void count_round_trips_in(std::atomic<uint64_t>* counter) { round_trips_ = counter; }

 private:
  struct Finish {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  explicit Connection(PGconn* connection) : connection_(connection) {}
  [[noreturn]] void fail_with(const Sql& sql, PGresult* result);
  // The name `sql` is prepared under, preparing it first (in the pipeline, when in one).
  const std::string& prepared(const Sql& sql);
  // The next answer's first result, and the end of that answer (its NULL) read.
  PGresult* next_answer();

  std::unique_ptr<PGconn, Finish> connection_;
  std::map<std::string_view, std::string, std::less<>> prepared_;  // text -> name
  uint64_t names_ = 0;  // statements named so far (a name is never used twice)
  // In pipeline mode, the answers still to come, in order: a preparation's (the statement's
  // text: forgotten if it fails), a statement's (empty), or a sync's.
  struct Pending {
    enum Kind { kPreparation, kStatement, kSync } kind;
    std::string_view text;
  };
  std::deque<Pending> pending_;
  uint64_t warnings_ = 0;
  std::atomic<uint64_t>* round_trips_ = nullptr;
  void round_trip() {
    if (round_trips_ != nullptr) round_trips_->fetch_add(1, std::memory_order_relaxed);
  }
};

// The statements of a transaction and its savepoints, also for sending them in a pipeline.
inline constexpr Sql kBegin{"beginning a transaction", "BEGIN"};
inline constexpr Sql kRollback{"rolling back", "ROLLBACK"};
inline constexpr Sql kSavepoint{"taking a savepoint", "SAVEPOINT call"};
inline constexpr Sql kRelease{"releasing a savepoint", "RELEASE SAVEPOINT call"};
inline constexpr Sql kRollbackTo{"rolling back to a savepoint",
                                 "ROLLBACK TO SAVEPOINT call; RELEASE SAVEPOINT call"};

// BEGIN ... COMMIT once; rolls back in its destructor if not committed.
class Transaction {
 public:
  explicit Transaction(Connection& connection, bool read_only = false);
  // A transaction whose BEGIN is queued in the connection's pipeline; received() reads its
  // answer. Left in pipeline mode it is not rolled back here: the connection's owner drops
  // the connection, which rolls it back.
  struct Queued {};
  Transaction(Connection& connection, Queued);
  void received();
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
