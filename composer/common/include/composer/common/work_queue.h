// A fixed set of named threads that run tasks in the order they were posted.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace composer {

class WorkQueue {
 public:
  // `threads` threads (at least one), each named `name` (at most 15 characters show).
  WorkQueue(size_t threads, std::string name);
  // Runs every task posted, also those a task posts meanwhile, then joins the threads. A task
  // posted after that is dropped: whoever posts must have stopped before.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void post(std::function<void()> task);

 private:
  void loop();

  const std::string name_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace composer
