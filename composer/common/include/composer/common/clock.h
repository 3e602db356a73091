// The one clock. Components take a Clock& so tests can fix or advance time.
#pragma once

#include <atomic>
#include <cstdint>

namespace composer {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t now_ms() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t now_ms() const override;
  static SystemClock& instance();
};

// SystemClock's time, for code that is handed no Clock (command-line tools, plugin glue).
int64_t now_ms();

// For tests: time moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms) : now_(start_ms) {}
  int64_t now_ms() const override { return now_.load(); }
  void advance_ms(int64_t delta) { now_ += delta; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace composer
