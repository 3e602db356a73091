#include "composer/db/pg.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace composer::db::pg {
namespace {

ErrorCode error_code_for(std::string_view sqlstate) {
  if (sqlstate.substr(0, 2) == "23") return ErrorCode::kConflict;
  if (sqlstate.substr(0, 2) == "08" || sqlstate == "40001" || sqlstate == "40P01" ||
      sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03" ||
      // A read-only transaction: the server is a standby now (a primary switch).
      sqlstate == "25006") {
    return ErrorCode::kUnavailable;
  }
  return ErrorCode::kInternal;
}

// libpq's messages end with a newline.
std::string trimmed(const char* message) {
  std::string s = message != nullptr ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

constexpr Sql kBegin{"beginning a transaction", "BEGIN"};
constexpr Sql kBeginReadOnly{"beginning a read-only transaction",
                             "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"};
constexpr Sql kCommit{"committing", "COMMIT"};
constexpr Sql kRollback{"rolling back", "ROLLBACK"};
constexpr Sql kSavepoint{"taking a savepoint", "SAVEPOINT call"};
constexpr Sql kRelease{"releasing a savepoint", "RELEASE SAVEPOINT call"};
constexpr Sql kRollbackTo{"rolling back to a savepoint",
                          "ROLLBACK TO SAVEPOINT call; RELEASE SAVEPOINT call"};

}  // namespace

Params& Params::add(uint64_t v) {
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(ErrorCode::kInvalidArgument,
         "value " + std::to_string(v) + " is larger than the largest storable integer (2^63-1)");
  }
  return add(static_cast<int64_t>(v));
}

int64_t Result::changes() const {
  const char* n = PQcmdTuples(result_.get());
  int64_t v = 0;
  std::from_chars(n, n + std::char_traits<char>::length(n), v);
  return v;
}

void Result::corrupt(int column, std::string_view why) const {
  fail(ErrorCode::kInternal,
       std::string(sql_.what) + ": column " + std::to_string(column) + " " + std::string(why));
}

int64_t Result::int64(int column) const {
  const std::string_view s = text_view(column);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    corrupt(column, "holds '" + std::string(s) + "', not an integer");
  }
  return v;
}

uint32_t Result::uint32(int column) const {
  const int64_t v = int64(column);
  if (v < 0 || v > std::numeric_limits<uint32_t>::max()) {
    corrupt(column, "holds " + std::to_string(v) + ", outside 0..2^32-1");
  }
  return static_cast<uint32_t>(v);
}

uint64_t Result::uint64(int column) const {
  const int64_t v = int64(column);
  if (v < 0) corrupt(column, "holds " + std::to_string(v) + ", a negative size");
  return static_cast<uint64_t>(v);
}

std::optional<int64_t> Result::optional_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

std::unique_ptr<Connection> Connection::open(const std::string& conninfo) {
  PGconn* raw = PQconnectdb(conninfo.c_str());
  std::unique_ptr<Connection> c(new Connection(raw));
  if (raw == nullptr || PQstatus(raw) != CONNECTION_OK) {
    throw Failure(Error(ErrorCode::kUnavailable,
                        "store: connecting to PostgreSQL: " + trimmed(PQerrorMessage(raw))));
  }
  // Notices (a NOTICE from a migration) are not for composerd's log; WARNINGs are counted.
  PQsetNoticeReceiver(
      raw,
      [](void* arg, const PGresult* notice) {
        const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
        if (severity != nullptr && std::string_view(severity) == "WARNING") {
          ++*static_cast<uint64_t*>(arg);
        }
      },
      &c->warnings_);
  return c;
}

Connection::~Connection() = default;

void Connection::fail_with(const Sql& sql, PGresult* result) {
  std::string sqlstate;
  std::string message;
  if (result != nullptr) {
    const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
    if (state != nullptr) sqlstate = state;
    message = trimmed(PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY));
    if (const char* detail = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL)) {
      message += " (" + trimmed(detail) + ")";
    }
    PQclear(result);
  }
  if (message.empty()) message = trimmed(PQerrorMessage(connection_.get()));
  ErrorCode code = error_code_for(sqlstate);
  if (PQstatus(connection_.get()) != CONNECTION_OK) code = ErrorCode::kUnavailable;
  throw Failure(Error(code, "store: " + std::string(sql.what) + ": " + message));
}

Result Connection::run(const Sql& sql, const Params& params) {
  auto it = prepared_.find(sql.text);
  if (it == prepared_.end()) {
    const std::string name = "s" + std::to_string(prepared_.size());
    const std::string text(sql.text);
    PGresult* r = PQprepare(connection_.get(), name.c_str(), text.c_str(), 0, nullptr);
    if (r == nullptr || PQresultStatus(r) != PGRES_COMMAND_OK) fail_with(sql, r);
    PQclear(r);
    it = prepared_.emplace(sql.text, name).first;
  }
  std::vector<const char*> values;
  values.reserve(params.values().size());
  for (const auto& v : params.values()) values.push_back(v ? v->c_str() : nullptr);
  PGresult* r = PQexecPrepared(connection_.get(), it->second.c_str(),
                               static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0);
  const ExecStatusType status = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail_with(sql, r);
  return Result(sql, r);
}

void Connection::exec(const Sql& sql) {
  const std::string text(sql.text);
  PGresult* r = PQexec(connection_.get(), text.c_str());
  const ExecStatusType status = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail_with(sql, r);
  PQclear(r);
}

Transaction::Transaction(Connection& connection, bool read_only) : connection_(connection) {
  connection_.exec(read_only ? kBeginReadOnly : kBegin);
}

Transaction::~Transaction() {
  if (done_) return;
  try {
    connection_.exec(kRollback);
  } catch (const Failure&) {  // NOLINT(bugprone-empty-catch): a lost connection rolls back
  }
}

void Transaction::commit() {
  connection_.exec(kCommit);
  done_ = true;
}

Savepoint::Savepoint(Connection& connection) : connection_(connection) {
  connection_.exec(kSavepoint);
}

Savepoint::~Savepoint() {
  if (done_) return;
  try {
    connection_.exec(kRollbackTo);
  } catch (const Failure&) {  // NOLINT(bugprone-empty-catch): the batch's ROLLBACK follows
  }
}

void Savepoint::release() {
  connection_.exec(kRelease);
  done_ = true;
}

}  // namespace composer::db::pg
