#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "composer/db/sqlite.h"
#include "composer/db/store.h"
#include "schema.h"

namespace composer::db {

Status backup(const std::string& database, const std::string& file) {
  if (::access(database.c_str(), R_OK) != 0) {
    return Error{ErrorCode::kUnavailable,
                 "cannot read the database " + database + ": " + std::strerror(errno)};
  }
  // Created here, so an existing file is never overwritten and the copy is private at once.
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    return Error{e == EEXIST ? ErrorCode::kConflict : ErrorCode::kUnavailable,
                 e == EEXIST ? file + " exists; composerctl backup writes a new file only"
                             : "cannot create " + file + ": " + std::strerror(e)};
  }
  ::close(fd);
  Status result = Status::Ok();
  try {
    auto source = sqlite::Connection::open(database, sqlite::Connection::Mode::kReadOnly, 5000);
    if (schema_version(*source) <= 0) {
      throw sqlite::Failure(Error{ErrorCode::kInvalidArgument,
                                  database + " is not a composerd database (no schema)"});
    }
    auto copy = sqlite::Connection::open(file, sqlite::Connection::Mode::kReadWrite, 5000);
    sqlite3_backup* b = sqlite3_backup_init(copy->handle(), "main", source->handle(), "main");
    if (b == nullptr) {
      throw sqlite::Failure(
          Error{ErrorCode::kInternal, "backup of " + database + ": " + copy->last_error()});
    }
    int rc = SQLITE_OK;
    // A few pages at a time, so composerd's writer waits at most one step; a write between
    // steps makes SQLite start the copy again, which it does by itself.
    while ((rc = sqlite3_backup_step(b, 256)) == SQLITE_OK || rc == SQLITE_BUSY ||
           rc == SQLITE_LOCKED) {
      if (rc != SQLITE_OK) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
      throw sqlite::Failure(Error{ErrorCode::kInternal, "backup of " + database + " into " + file +
                                                            ": " + sqlite3_errstr(rc)});
    }
    // The copy answers like the original: same schema, readable.
    if (schema_version(*copy) != schema_version(*source)) {
      throw sqlite::Failure(
          Error{ErrorCode::kInternal, "backup of " + database + ": the copy's schema differs"});
    }
  } catch (const sqlite::Failure& f) {
    result = f.error();
  }
  if (!result) ::unlink(file.c_str());
  return result;
}

}  // namespace composer::db
