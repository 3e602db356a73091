#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include "composer/common/clock.h"
#include "composer/common/log.h"
#include "composer/db/leadership.h"
#include "composer/db/pg.h"
#include "pg_schema.h"

namespace composer::db {
namespace {

using pg::Params;
using pg::Result;

// The session lock of the active composerd; the migrations take another one.
constexpr Sql kTryLock{"taking the leadership lock",
                       "SELECT pg_try_advisory_lock(7336410271829104642)"};
// The server ends the lock's session once it stays idle this long: a holder that stops loses
// the lock even though its connection lives on.
constexpr Sql kIdleTimeout{"setting the leadership lease",
                           "SELECT set_config('idle_session_timeout', $1, false)"};
constexpr Sql kTakeOver{
    "taking over the leadership",
    "UPDATE leadership l SET epoch = o.epoch + 1, holder = $1, url = $2, since_ms = $3"
    " FROM (SELECT epoch, holder FROM leadership WHERE id = 1 FOR UPDATE) o"
    " WHERE l.id = 1 RETURNING o.epoch, o.holder, l.epoch"};
constexpr Sql kCurrent{"reading the leadership",
                       "SELECT epoch, holder, url, since_ms FROM leadership WHERE id = 1"};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Leadership::Leadership(Options options, std::unique_ptr<pg::Connection> connection)
    : options_(std::move(options)), connection_(std::move(connection)) {}

Leadership::~Leadership() = default;

Expected<std::unique_ptr<Leadership>> Leadership::open(Options options) {
  if (options.lease_ms < 1000) {
    return Error(ErrorCode::kInvalidArgument, "the leadership lease must be at least 1 s");
  }
  std::unique_ptr<Leadership> l(new Leadership(std::move(options), nullptr));
  try {
    l->connect();
    // The leadership row comes with the schema: a first composerd may find none yet.
    pg::migrate(*l->connection_, SystemClock::instance().now_ms());
  } catch (const Failure& f) {
    return f.error();
  }
  return l;
}

void Leadership::connect() { connection_ = pg::Connection::open(options_.conninfo); }

Expected<std::optional<Takeover>> Leadership::try_take(int64_t now_ms) {
  std::lock_guard lock(mu_);
  if (epoch_.load() != 0) {
    return Error(ErrorCode::kInternal,
                 "leadership: already held (epoch " + std::to_string(epoch_.load()) + ")");
  }
  try {
    if (!connection_ || !connection_->usable()) connect();
    const int64_t started = steady_ns();
    std::optional<Result> locked;
    try {
      locked.emplace(connection_->run(kTryLock));
    } catch (const Failure&) {
      // A standby's connection may have been closed while it waited: once more on a new one.
      if (connection_->usable()) throw;
      connect();
      locked.emplace(connection_->run(kTryLock));
    }
    if (!locked->step() || locked->text_view(0) != "t") return std::optional<Takeover>{};
    // Only the holder's session is ended by the server when it stays idle.
    connection_->run(kIdleTimeout, Params().add(std::to_string(options_.lease_ms) + "ms"));
    Takeover t;
    {
      pg::Transaction transaction(*connection_);
      Result r =
          connection_->run(kTakeOver, Params().add(options_.holder).add(options_.url).add(now_ms));
      if (!r.step()) fail(ErrorCode::kInternal, "the leadership row is missing");
      t.old_epoch = r.int64(0);
      t.old_holder = r.text(1);
      t.now = Leader{r.int64(2), options_.holder, options_.url, now_ms};
      transaction.commit();
    }
    valid_until_ns_ = started + options_.lease_ms * 1'000'000;
    epoch_ = t.now.epoch;
    return std::optional<Takeover>{std::move(t)};
  } catch (const Failure& f) {
    // The lock may be ours without the row saying so: end the session, which lets it go.
    connection_.reset();
    return f.error();
  }
}

Expected<Leader> Leadership::current() {
  std::lock_guard lock(mu_);
  return read_row();
}

Expected<Leader> Leadership::read_row() {
  try {
    if (!connection_ || !connection_->usable()) {
      if (epoch_.load() != 0) {
        lose();
        return Error(ErrorCode::kUnavailable, "leadership: the lock's connection is lost");
      }
      connect();
    }
    Result r = connection_->run(kCurrent);
    if (!r.step()) fail(ErrorCode::kInternal, "the leadership row is missing");
    return Leader{r.int64(0), r.text(1), r.text(2), r.int64(3)};
  } catch (const Failure& f) {
    if (epoch_.load() != 0) lose();
    if (connection_ && !connection_->usable()) connection_.reset();
    return f.error();
  }
}

Status Leadership::renew() {
  std::lock_guard lock(mu_);
  const int64_t mine = epoch_.load();
  if (mine == 0) return Error(ErrorCode::kUnavailable, "leadership: not held");
  const int64_t started = steady_ns();
  auto now = read_row();
  if (!now) {
    regain_epoch_ = mine;  // the connection broke: whether another took over is not known
    return now.error();
  }
  if (now->epoch != mine) {
    lose();
    return Error(ErrorCode::kUnavailable, "leadership: taken over by " + now->holder + " (epoch " +
                                              std::to_string(now->epoch) + ", ours was " +
                                              std::to_string(mine) + ")");
  }
  if (steady_ns() >= valid_until_ns_.load()) {
    // The renewal came too late: the server may already have ended the session.
    lose();
    return Error(ErrorCode::kUnavailable, "leadership: the lease ran out before it was renewed");
  }
  valid_until_ns_ = started + options_.lease_ms * 1'000'000;
  return Status::Ok();
}

Expected<bool> Leadership::regain() {
  std::lock_guard lock(mu_);
  const int64_t mine = regain_epoch_.load();
  if (mine == 0 || epoch_.load() != 0) {
    return Error(ErrorCode::kInternal, "leadership: nothing to take again");
  }
  try {
    if (!connection_ || !connection_->usable()) connect();
    const int64_t started = steady_ns();
    Result locked = connection_->run(kTryLock);
    const bool got = locked.step() && locked.text_view(0) == "t";
    Result row = connection_->run(kCurrent);
    if (!row.step()) fail(ErrorCode::kInternal, "the leadership row is missing");
    if (row.int64(0) != mine) {
      regain_epoch_ = 0;
      connection_.reset();  // lets the lock go if this session took it
      log::error("leadership lost: another composerd took over while the database was away",
                 {{"epoch", std::to_string(row.int64(0))}, {"holder", row.text(1)}});
      return false;
    }
    if (!got) {
      // Our old session, not yet ended by the server, may still hold it.
      return Error(ErrorCode::kUnavailable, "leadership: the lock is still held elsewhere");
    }
    connection_->run(kIdleTimeout, Params().add(std::to_string(options_.lease_ms) + "ms"));
    valid_until_ns_ = started + options_.lease_ms * 1'000'000;
    regain_epoch_ = 0;
    epoch_ = mine;
    return true;
  } catch (const Failure& f) {
    if (connection_ && !connection_->usable()) connection_.reset();
    return f.error();
  }
}

bool Leadership::held() const { return epoch_.load() != 0 && steady_ns() < valid_until_ns_.load(); }

void Leadership::lose() {
  if (epoch_.exchange(0) != 0) {
    log::error("leadership lost", {{"holder", options_.holder}});
  }
  valid_until_ns_ = 0;
  // Ending the session lets the lock go, whatever state it was in.
  connection_.reset();
}

}  // namespace composer::db
