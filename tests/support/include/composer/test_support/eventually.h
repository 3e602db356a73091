// Waiting in a test for what another thread or process does in its own time (a fake kernel's
// thread, a daemon): the condition is looked at every 5 ms until it holds or the limit passes.
// The limit is generous because a test level may run beside compiles on a loaded machine; a
// test that passes waits only as long as the condition takes.
#pragma once

#include <chrono>
#include <thread>

namespace composer::test_support {

template <typename Condition>
bool eventually(Condition done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace composer::test_support
