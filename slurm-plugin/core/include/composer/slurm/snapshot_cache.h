// The job_submit plugin's view of composerd's pool snapshot: read once, kept in memory, read
// again only when the file changes (mtime, size or inode). A submission costs one stat().
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include "composer/api/snapshot.h"

namespace composer::slurm {

class SnapshotCache {
 public:
  // `now_ms` is injected so tests can age a snapshot.
  SnapshotCache(std::string path, uint32_t max_age_s, std::function<int64_t()> now_ms);

  struct View {
    std::shared_ptr<const api::PoolSnapshot> snapshot;  // null: no usable snapshot
    std::string problem;  // why there is none: missing, unreadable or stale
  };
  View get();

  uint64_t reads() const { return reads_; }  // how often the file was parsed

 private:
  std::string path_;
  uint32_t max_age_s_;
  std::function<int64_t()> now_ms_;
  std::shared_ptr<const api::PoolSnapshot> cached_;
  std::string cached_problem_;
  bool have_stat_ = false;
  struct timespec mtime_ {};
  int64_t size_ = -1;
  uint64_t inode_ = 0;
  uint64_t reads_ = 0;
};

}  // namespace composer::slurm
