// Fabric operations in flight, waited for without a thread each. An attach or detach is
// started (Fabric::attach/detach answer at once with an Operation that may still run: a Redfish
// task monitor, a sim latency), and one poller thread asks the fabric how every running one
// stands each poll interval, so a thousand operations of two seconds each take two seconds and
// one thread, not a thousand threads or a thousand turns of a worker pool.
//
// At most `max_in_flight` operations run at once on each lane (one fabric: Fabric::lane()); the
// rest wait in a queue, first come first served, and start as running ones end. A deadline
// bounds the whole, queue included: an operation that has not ended by then is reported as a
// timeout (the fabric may still finish it; the caller's recovery deals with that, as it does
// for a crash).
//
// What to do when an operation ends runs on one of a few completion threads, never on the
// poller, so a completion may itself wait for another operation (a failed attach is undone by a
// detach) without stopping the polling; so does the start of a queued operation (a request to
// the fabric manager). wait() is the blocking form for callers that hold a thread anyway.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/error.h"
#include "composer/core/fabric.h"

namespace composer {

struct OperationWaiterOptions {
  int64_t poll_interval_ms = 20;
  size_t max_in_flight = 256;  // per lane
  size_t completion_threads = 4;
};

class OperationWaiter {
 public:
  // Starts the operation (an attach or a detach) when its lane has room.
  using Start = std::function<Expected<Operation>()>;
  // Told once how it ended: ok, the fabric's failure (fabric_error), the deadline (timeout), or
  // composerd stopping (unavailable).
  using Done = std::function<void(Status)>;

  OperationWaiter(Fabric& fabric, const Clock& clock, OperationWaiterOptions options = {});
  // Ends every operation still waited for with "composerd is stopping" and joins the threads.
  ~OperationWaiter();
  OperationWaiter(const OperationWaiter&) = delete;
  OperationWaiter& operator=(const OperationWaiter&) = delete;

  // `what` names the operation in errors ("attach"). `lane` is Fabric::lane() of its host.
  // `done` runs on a completion thread (or on the caller's, when the operation ends before
  // submit returns).
  void submit(std::string lane, Start start, int64_t deadline_ms, std::string what, Done done);
  // The same, waiting for the end on the caller's thread.
  Status wait(std::string lane, Start start, int64_t deadline_ms, std::string what);

  // Operations running on the fabric now, and waiting for room, over all lanes.
  size_t in_flight() const;
  size_t queued() const;

 private:
  struct Pending {
    std::string lane;
    Start start;
    int64_t deadline_ms = 0;
    std::string what;
    Done done;
    Operation op{};
    bool inline_done = false;  // tell `done` on the thread that saw the end (wait())
  };

  void enqueue(Pending p);
  // Starts `p` (outside the lock): true when it runs on; else its lane's slot is given back
  // and `how` says how it ended.
  bool begin(Pending& p, Status* how);
  void release(const std::string& lane);
  // Tells `p.done` how it ended: on a completion thread, or at once when inline_done.
  void complete(Pending p, Status how);
  void post(std::function<void()> task);
  // On a completion thread: starts a queued operation and follows it, or tells how it ended.
  void start_queued(Pending p);
  void poll_loop();
  void completion_loop();

  Fabric& fabric_;
  const Clock& clock_;
  OperationWaiterOptions options_;

  mutable std::mutex mu_;
  std::condition_variable wake_;       // the poller: new work, or stopping
  std::condition_variable completed_;  // completion threads
  bool stopping_ = false;              // no new operation; the poller ends
  bool completers_stop_ = false;       // every completion told: the completion threads end
  std::map<std::string, size_t> running_per_lane_;
  std::vector<Pending> running_;
  std::map<std::string, std::deque<Pending>> queued_;
  std::deque<std::function<void()>> tasks_;  // for the completion threads
  std::thread poller_;
  std::vector<std::thread> completers_;
};

}  // namespace composer
