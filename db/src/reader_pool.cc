#include "reader_pool.h"

#include <utility>

namespace composer::db {

ReaderPool::ReaderPool(std::string path, int busy_timeout_ms, size_t max_idle)
    : path_(std::move(path)), busy_timeout_ms_(busy_timeout_ms), max_idle_(max_idle) {}

ReaderPool::Lease ReaderPool::acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto connection = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(connection));
    }
  }
  // Opened outside the lock: other readers keep going meanwhile.
  auto connection =
      sqlite::Connection::open(path_, sqlite::Connection::Mode::kReadOnly, busy_timeout_ms_);
  return Lease(*this, std::move(connection));
}

void ReaderPool::give_back(std::unique_ptr<sqlite::Connection> connection) {
  if (!connection) return;
  std::unique_ptr<sqlite::Connection> surplus;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < max_idle_) {
      idle_.push_back(std::move(connection));
    } else {
      surplus = std::move(connection);  // closed outside the lock
    }
  }
}

}  // namespace composer::db
