#include "composer/common/work_queue.h"

#include <algorithm>
#include <utility>

#include "composer/common/thread_name.h"

namespace composer {

WorkQueue::WorkQueue(size_t threads, std::string name) : name_(std::move(name)) {
  threads_.reserve(std::max<size_t>(1, threads));
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) {
    threads_.emplace_back([this] {
      name_this_thread(name_);
      loop();
    });
  }
}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkQueue::post(std::function<void()> task) {
  // Told under the lock: once the task has run, whoever waited for it may destroy the queue,
  // and this thread must be done with it by then.
  std::lock_guard lock(mu_);
  tasks_.push_back(std::move(task));
  ready_.notify_one();
}

void WorkQueue::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace composer
