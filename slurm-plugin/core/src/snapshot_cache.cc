#include "composer/slurm/snapshot_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace composer::slurm {

SnapshotCache::SnapshotCache(std::string path, uint32_t max_age_s, std::function<int64_t()> now_ms)
    : path_(std::move(path)), max_age_s_(max_age_s), now_ms_(std::move(now_ms)) {}

SnapshotCache::View SnapshotCache::get() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    const int err = errno;
    cached_.reset();
    have_stat_ = false;
    return View{nullptr, "no pool snapshot at " + path_ + " (" + std::strerror(err) +
                             "): is composerd running?"};
  }
  const bool changed = !have_stat_ || st.st_mtim.tv_sec != mtime_.tv_sec ||
                       st.st_mtim.tv_nsec != mtime_.tv_nsec || st.st_size != size_ ||
                       st.st_ino != inode_;
  if (changed) {
    have_stat_ = true;
    mtime_ = st.st_mtim;
    size_ = st.st_size;
    inode_ = st.st_ino;
    ++reads_;
    Expected<api::PoolSnapshot> read = api::read_snapshot(path_);
    if (read) {
      cached_ = std::make_shared<const api::PoolSnapshot>(std::move(*read));
      cached_problem_.clear();
    } else {
      cached_.reset();
      cached_problem_ = read.error().message;
    }
  }
  if (!cached_) return View{nullptr, cached_problem_};
  if (max_age_s_ > 0) {
    const int64_t age_ms = now_ms_() - cached_->generated_ms;
    if (age_ms > int64_t{max_age_s_} * 1000) {
      return View{nullptr, "the pool snapshot " + path_ + " is " + std::to_string(age_ms / 1000) +
                               " s old (JobSubmitSnapshotMaxAge=" + std::to_string(max_age_s_) +
                               "): is composerd running?"};
    }
  }
  return View{cached_, ""};
}

}  // namespace composer::slurm
