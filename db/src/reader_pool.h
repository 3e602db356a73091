// Read-only connections for the Store's queries. WAL lets them read a consistent snapshot
// while the writer commits, so a read never waits for the writer. Any number of threads may
// read at once: a thread takes an idle connection or opens one, and gives it back after.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "composer/db/sqlite.h"

namespace composer::db {

class ReaderPool {
 public:
  ReaderPool(std::string path, int busy_timeout_ms, size_t max_idle = 64);

  class Lease {
   public:
    Lease(ReaderPool& pool, std::unique_ptr<sqlite::Connection> connection)
        : pool_(&pool), connection_(std::move(connection)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { pool_->give_back(std::move(connection_)); }
    sqlite::Connection& operator*() const { return *connection_; }
    sqlite::Connection* operator->() const { return connection_.get(); }

   private:
    ReaderPool* pool_;
    std::unique_ptr<sqlite::Connection> connection_;
  };

  Lease acquire();

 private:
  void give_back(std::unique_ptr<sqlite::Connection> connection);

  const std::string path_;
  const int busy_timeout_ms_;
  const size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<sqlite::Connection>> idle_;
};

}  // namespace composer::db
