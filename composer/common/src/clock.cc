#include "composer/common/clock.h"

#include <chrono>

namespace composer {

int64_t SystemClock::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t now_ms() { return SystemClock::instance().now_ms(); }

SystemClock& SystemClock::instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace composer
