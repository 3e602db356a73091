#include "composer/db/sqlite.h"

#include <chrono>
#include <limits>
#include <mutex>
#include <string>
#include <utility>

#include "composer/common/log.h"

namespace composer::db::sqlite {
namespace {
constexpr Sql kBeginDeferred{"beginning a read transaction", "BEGIN DEFERRED"};
constexpr Sql kBeginImmediate{"beginning a write transaction", "BEGIN IMMEDIATE"};
constexpr Sql kCommit{"committing", "COMMIT"};
constexpr Sql kRollback{"rolling back", "ROLLBACK"};
constexpr Sql kSavepoint{"taking a savepoint", "SAVEPOINT call"};
constexpr Sql kReleaseSavepoint{"releasing a savepoint", "RELEASE call"};
constexpr Sql kRollbackToSavepoint{"rolling back to a savepoint", "ROLLBACK TO call"};

std::string describe(std::string_view what, std::string_view detail) {
  std::string message = "store: ";
  message += what;
  message += ": ";
  message += detail;
  return message;
}
}  // namespace

ErrorCode error_code_for(int sqlite_result) {
  switch (sqlite_result & 0xff) {
    case SQLITE_CONSTRAINT:
      return ErrorCode::kConflict;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PROTOCOL:
      return ErrorCode::kUnavailable;
    default:
      return ErrorCode::kInternal;
  }
}

// --- Statement ---------------------------------------------------------------------------

Statement::Statement(Connection& connection, const Sql& sql) : connection_(connection), sql_(sql) {
  sqlite3_stmt* raw = nullptr;
  const int rc =
      sqlite3_prepare_v3(connection.handle(), sql.text.data(), static_cast<int>(sql.text.size()),
                         SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  stmt_.reset(raw);
  if (rc != SQLITE_OK) {
    throw Failure(
        Error(ErrorCode::kInternal, describe(sql.what, "preparing: " + connection.last_error())));
  }
}

void Statement::fail_with(int result) const {
  throw Failure(Error(error_code_for(result), describe(sql_.what, connection_.last_error())));
}

Statement& Statement::bind(int index, int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_.get(), index, value);
  if (rc != SQLITE_OK) fail_with(rc);
  return *this;
}

Statement& Statement::bind(int index, uint64_t value) {
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Failure(Error(
        ErrorCode::kInvalidArgument,
        describe(sql_.what, std::to_string(value) + " is larger than the largest stored integer")));
  }
  return bind(index, static_cast<int64_t>(value));
}

Statement& Statement::bind(int index, std::string_view value) {
  // SQLITE_TRANSIENT: SQLite copies the text, so callers may pass temporaries.
  const int rc = sqlite3_bind_text64(stmt_.get(), index, value.data(), value.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) fail_with(rc);
  return *this;
}

Statement& Statement::bind(int index, std::nullopt_t) {
  const int rc = sqlite3_bind_null(stmt_.get(), index);
  if (rc != SQLITE_OK) fail_with(rc);
  return *this;
}

bool Statement::step() {
  const auto& timer = connection_.statement_timer();
  const auto start =
      timer ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const int rc = sqlite3_step(stmt_.get());
  if (timer) {
    timer(sql_, std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count());
  }
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail_with(rc);
}

void Statement::run() {
  while (step()) {
  }
}

bool Statement::is_null(int column) const {
  return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL;
}

int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_.get(), column); }

uint32_t Statement::uint32(int column) const {
  const int64_t v = int64(column);
  if (v < 0 || v > std::numeric_limits<uint32_t>::max()) {
    throw Failure(Error(ErrorCode::kInternal,
                        describe(sql_.what, "column " + std::to_string(column) + " holds " +
                                                std::to_string(v) + ", outside 0..4294967295")));
  }
  return static_cast<uint32_t>(v);
}

uint64_t Statement::uint64(int column) const {
  const int64_t v = int64(column);
  if (v < 0) {
    throw Failure(Error(ErrorCode::kInternal,
                        describe(sql_.what, "column " + std::to_string(column) + " holds " +
                                                std::to_string(v) + ", a negative size")));
  }
  return static_cast<uint64_t>(v);
}

std::optional<int64_t> Statement::optional_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

std::string_view Statement::text_view(int column) const {
  const auto* data = sqlite3_column_text(stmt_.get(), column);
  if (data == nullptr) return {};
  const int size = sqlite3_column_bytes(stmt_.get(), column);
  return {reinterpret_cast<const char*>(data), static_cast<size_t>(size)};
}

std::string Statement::text(int column) const { return std::string(text_view(column)); }

void Statement::reset() {
  // The result of reset repeats the last step's error, which was already reported.
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

// --- Connection ----------------------------------------------------------------------------

Connection::Connection(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

Connection::~Connection() {
  // Statements must be finalized before the handle is closed.
  statements_.clear();
}

std::unique_ptr<Connection> Connection::open(const std::string& path, Mode mode,
                                             int busy_timeout_ms) {
  // SQLite counts every allocation under one process-wide mutex unless told not to; nothing
  // here reads those counts (sqlite3_memory_used, sqlite3_status), and the writer allocates on
  // every statement. Only possible before SQLite initialises: the first open in the process
  // does it, and a process that used SQLite before keeps its counting (SQLITE_MISUSE).
  static std::once_flag configured;
  std::call_once(configured, [] { (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  const int flags =
      SQLITE_OPEN_NOMUTEX |
      (mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  std::unique_ptr<Connection> connection(new Connection(path, raw));
  if (rc != SQLITE_OK) {
    std::string why = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    throw Failure(Error(ErrorCode::kUnavailable, describe("opening " + path, why)));
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  return connection;
}

ScopedStatement Connection::statement(const Sql& sql) {
  auto it = statements_.find(sql.text);
  if (it == statements_.end()) {
    it = statements_.emplace(sql.text, std::make_unique<Statement>(*this, sql)).first;
  }
  return ScopedStatement(*it->second);
}

void Connection::exec(const Sql& sql) {
  const std::string text(sql.text);
  char* message = nullptr;
  const int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    std::string why = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    throw Failure(Error(error_code_for(rc), describe(sql.what, why)));
  }
}

std::string Connection::pragma(std::string_view what, std::string_view pragma) {
  const std::string text = "PRAGMA " + std::string(pragma);
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db_.get(), text.c_str(), -1, &raw, nullptr);
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> stmt(raw, &sqlite3_finalize);
  if (rc != SQLITE_OK) {
    throw Failure(Error(error_code_for(rc), describe(what, last_error())));
  }
  rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_DONE) return {};
  if (rc != SQLITE_ROW) throw Failure(Error(error_code_for(rc), describe(what, last_error())));
  const auto* data = sqlite3_column_text(stmt.get(), 0);
  return data != nullptr ? reinterpret_cast<const char*>(data) : "";
}

// --- Transaction and Savepoint -------------------------------------------------------------

// Transaction control runs as cached prepared statements too: the writer issues several per
// batch, and re-parsing them each time would be measurable at thousands of calls per second.
Transaction::Transaction(Connection& connection, Kind kind) : connection_(connection) {
  connection_.statement(kind == Kind::kImmediate ? kBeginImmediate : kBeginDeferred)->run();
}

Transaction::~Transaction() {
  // SQLite may already have rolled the transaction back itself (disk full, I/O error).
  if (done_ || !connection_.in_transaction()) return;
  try {
    connection_.statement(kRollback)->run();
  } catch (const Failure& f) {
    log::error("store: rollback failed", {{"error", f.error().message}});
  }
}

void Transaction::commit() {
  if (done_) fail(ErrorCode::kInternal, "committing: the transaction was already committed");
  connection_.statement(kCommit)->run();
  done_ = true;
}

Savepoint::Savepoint(Connection& connection) : connection_(connection) {
  connection_.statement(kSavepoint)->run();
}

Savepoint::~Savepoint() {
  if (done_ || !connection_.in_transaction()) return;
  try {
    connection_.statement(kRollbackToSavepoint)->run();
    connection_.statement(kReleaseSavepoint)->run();
  } catch (const Failure& f) {
    log::error("store: rollback to savepoint failed", {{"error", f.error().message}});
  }
}

void Savepoint::release() {
  connection_.statement(kReleaseSavepoint)->run();
  done_ = true;
}

}  // namespace composer::db::sqlite
