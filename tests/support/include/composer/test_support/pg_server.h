// A real PostgreSQL for the tests of the store and of composerd on it: initdb into a temporary
// directory, then postgres listening only on a socket in that directory (no TCP), as a user that is
// not root (postgres refuses root: `nobody` when the tests run as root). Stopped by its PID when
// destroyed. The binaries are found under /usr/lib/postgresql/*/bin, or in $COMPOSER_PG_BINDIR.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "composer/test_support/temp_dir.h"

namespace composer::test_support {

class PgServer {
 public:
  // The server shared by this test process, started on first use; nullptr with `why` set when
  // PostgreSQL is not installed here (the caller skips), or it could not start (the caller
  // fails).
  static PgServer* shared(std::string& why, bool& installed);

  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  // A libpq connection string for database `name`.
  std::string conninfo(const std::string& name) const;
  // A new, empty database; returns its connection string.
  std::string fresh_database();

  // Stops the shared server, if started (at the end of the test process).
  static void stop_shared();

 private:
  PgServer() = default;
  std::unique_ptr<TempDir> dir_;
  std::string socket_dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  int databases_ = 0;
};

}  // namespace composer::test_support
