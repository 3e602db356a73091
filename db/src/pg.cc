#include "composer/db/pg.h"

#include <algorithm>
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

constexpr Sql kBeginReadOnly{"beginning a read-only transaction",
                             "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"};
constexpr Sql kCommit{"committing", "COMMIT"};

}  // namespace

Params& Params::add(uint64_t v) {
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(ErrorCode::kInvalidArgument,
         "value " + std::to_string(v) + " is larger than the largest storable integer (2^63-1)");
  }
  return add(static_cast<int64_t>(v));
}

namespace {

// An item of an array literal: quoted, its quotes and backslashes escaped.
void append_item(std::string& literal, std::string_view item) {
  if (literal.size() > 1) literal += ',';
  literal += '"';
  for (const char ch : item) {
    if (ch == '"' || ch == '\\') literal += '\\';
    literal += ch;
  }
  literal += '"';
}

}  // namespace

Params& Params::add(const std::vector<std::string>& items) {
  std::string literal = "{";
  for (const std::string& item : items) append_item(literal, item);
  literal += '}';
  return text(std::move(literal));
}

Params Params::columns_of(const std::vector<const Params*>& calls) {
  Params out;
  if (calls.empty()) return out;
  const size_t n = calls.front()->values().size();
  for (const Params* call : calls) {
    if (call->values().size() != n) {
      fail(ErrorCode::kInternal, "store: calls sent as one statement differ in their parameters");
    }
  }
  for (size_t k = 0; k < n; ++k) {
    std::string literal = "{";
    for (const Params* call : calls) {
      const std::optional<std::string>& v = call->values()[k];
      if (v) {
        append_item(literal, *v);
      } else {
        if (literal.size() > 1) literal += ',';
        literal += "NULL";
      }
    }
    literal += '}';
    out.text(std::move(literal));
  }
  return out;
}

Result Result::slice(int first, int end) const {
  Result out = *this;
  out.first_ = std::clamp(first, 0, end_);
  out.end_ = std::clamp(end, out.first_, end_);
  out.row_ = out.first_ - 1;
  return out;
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

const std::string& Connection::prepared(const Sql& sql) {
  auto it = prepared_.find(sql.text);
  if (it != prepared_.end()) return it->second;
  const std::string name = "s" + std::to_string(names_++);
  const std::string text(sql.text);
  if (in_pipeline()) {
    if (PQsendPrepare(connection_.get(), name.c_str(), text.c_str(), 0, nullptr) == 0) {
      fail_with(sql, nullptr);
    }
    pending_.push_back({Pending::kPreparation, sql.text});
  } else {
    round_trip();
    PGresult* r = PQprepare(connection_.get(), name.c_str(), text.c_str(), 0, nullptr);
    if (r == nullptr || PQresultStatus(r) != PGRES_COMMAND_OK) fail_with(sql, r);
    PQclear(r);
  }
  return prepared_.emplace(sql.text, name).first->second;
}

namespace {

std::vector<const char*> values_of(const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.values().size());
  for (const auto& v : params.values()) values.push_back(v ? v->c_str() : nullptr);
  return values;
}

bool succeeded(PGresult* r) {
  const ExecStatusType status = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

constexpr Sql kSync{"ending a group of statements", ""};
constexpr Sql kReceiving{"reading the answers to a group of statements", ""};

}  // namespace

Result Connection::run(const Sql& sql, const Params& params) {
  const std::string& name = prepared(sql);
  const std::vector<const char*> values = values_of(params);
  round_trip();
  PGresult* r = PQexecPrepared(connection_.get(), name.c_str(), static_cast<int>(values.size()),
                               values.data(), nullptr, nullptr, 0);
  if (!succeeded(r)) fail_with(sql, r);
  return Result(sql, r);
}

void Connection::enter_pipeline() {
  if (PQenterPipelineMode(connection_.get()) == 0) fail_with(kSync, nullptr);
}

void Connection::send(const Sql& sql, const Params& params) {
  const std::string& name = prepared(sql);
  const std::vector<const char*> values = values_of(params);
  if (PQsendQueryPrepared(connection_.get(), name.c_str(), static_cast<int>(values.size()),
                          values.data(), nullptr, nullptr, 0) == 0) {
    fail_with(sql, nullptr);
  }
  pending_.push_back({Pending::kStatement, {}});
}

void Connection::send_plain(const Sql& sql) {
  const std::string text(sql.text);
  if (PQsendQueryParams(connection_.get(), text.c_str(), 0, nullptr, nullptr, nullptr, nullptr,
                        0) == 0) {
    fail_with(sql, nullptr);
  }
  pending_.push_back({Pending::kStatement, {}});
}

void Connection::sync() {
  round_trip();
  if (PQpipelineSync(connection_.get()) == 0) fail_with(kSync, nullptr);
  pending_.push_back({Pending::kSync, {}});
}

PGresult* Connection::next_answer() {
  PGresult* r = PQgetResult(connection_.get());
  if (r == nullptr) fail_with(kReceiving, nullptr);
  if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) return r;
  // Each statement's answer ends with a NULL; a sync's does not.
  if (PGresult* more = PQgetResult(connection_.get()); more != nullptr) {
    PQclear(more);
    if (succeeded(r)) {
      PQclear(r);
      fail(ErrorCode::kInternal, "store: a statement of a group gave more than one answer");
    }
  }
  return r;
}

Result Connection::receive(const Sql& sql) {
  for (;;) {
    if (pending_.empty() || pending_.front().kind == Pending::kSync) {
      fail(ErrorCode::kInternal, "store: " + std::string(sql.what) + ": no answer is due");
    }
    const Pending next = pending_.front();
    pending_.pop_front();
    PGresult* r = next_answer();
    if (next.kind == Pending::kPreparation) {
      if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        prepared_.erase(next.text);
        fail_with(sql, r);
      }
      PQclear(r);
      continue;
    }
    if (!succeeded(r)) fail_with(sql, r);
    return Result(sql, r);
  }
}

void Connection::skip_to_sync() {
  while (!pending_.empty()) {
    const Pending next = pending_.front();
    pending_.pop_front();
    PGresult* r = next_answer();
    const ExecStatusType status = PQresultStatus(r);
    PQclear(r);
    if (next.kind == Pending::kSync) {
      if (status != PGRES_PIPELINE_SYNC) {
        fail(ErrorCode::kInternal, "store: a group of statements ended out of step");
      }
      return;
    }
    // A preparation the server skipped or refused names nothing there.
    if (next.kind == Pending::kPreparation && status != PGRES_COMMAND_OK) {
      prepared_.erase(next.text);
    }
  }
  fail(ErrorCode::kInternal, "store: no group of statements was ended");
}

void Connection::leave_pipeline() {
  if (PQexitPipelineMode(connection_.get()) == 0) fail_with(kSync, nullptr);
}

void Connection::exec(const Sql& sql) {
  const std::string text(sql.text);
  round_trip();
  PGresult* r = PQexec(connection_.get(), text.c_str());
  const ExecStatusType status = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail_with(sql, r);
  PQclear(r);
}

Transaction::Transaction(Connection& connection, bool read_only) : connection_(connection) {
  connection_.exec(read_only ? kBeginReadOnly : kBegin);
}

Transaction::Transaction(Connection& connection, Queued) : connection_(connection) {
  connection_.send_plain(kBegin);
}

void Transaction::received() { connection_.receive(kBegin); }

Transaction::~Transaction() {
  if (done_ || connection_.in_pipeline()) return;
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
