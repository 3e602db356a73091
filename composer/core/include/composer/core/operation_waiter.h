// Fabric operations in flight, waited for without a thread each. An attach or detach is
// started (Fabric::attach/detach answer at once with an Operation that may still run: a Redfish
// task monitor, a sim latency), and one poller thread asks the fabric how every running one
// stands each poll interval, so a thousand operations of two seconds each take two seconds and
// one thread, not a thousand threads or a thousand turns of a worker pool.
//
// At most `max_in_flight` operations run at once on each lane (one fabric: Fabric::lane()); the
// rest wait in a queue, first come first served, and start as running ones end. On a lane whose
// fabric applies changes one at a time (Fabric::serialises_changes(), a Liqid Director), one
// batch runs at a time and carries every change waiting when it starts (Fabric::apply_batch()):
// a thousand attaches cost two edits, not a thousand in a row. A deadline bounds each change,
// queue included: one that has not ended by then ends with a timeout (the fabric may still
// finish it; the caller's recovery deals with that, as it does for a crash).
//
// What to do when a change ends runs on one of a few completion threads, never on the poller,
// so a completion may itself wait for another change (a failed attach is undone by a detach)
// without stopping the polling. A queued change is started (a request to the fabric manager)
// by one of a few starter threads that run nothing else, so that neither a slow fabric manager
// nor completions that wait can hold up the queue. wait() is the blocking form for callers that
// hold a thread anyway.
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
#include "composer/common/work_queue.h"
#include "composer/core/fabric.h"

namespace composer {

struct OperationWaiterOptions {
  int64_t poll_interval_ms = 20;
  size_t max_in_flight = 256;  // per lane
  size_t completion_threads = 4;
};

class OperationWaiter {
 public:
  // Told once how a change ended: ok, the fabric's failure or refusal, the deadline (timeout),
  // or composerd stopping (unavailable).
  using Done = std::function<void(Status)>;

  OperationWaiter(Fabric& fabric, const Clock& clock, OperationWaiterOptions options = {});
  // Ends every change still waited for with "composerd is stopping" and joins the threads
  // (stop()).
  ~OperationWaiter();
  // The same, leaving the waiter in place: a change submitted from now on is refused at once,
  // on the caller's thread. Once is enough; again does nothing.
  void stop();
  OperationWaiter(const OperationWaiter&) = delete;
  OperationWaiter& operator=(const OperationWaiter&) = delete;

  // `done` runs on a completion thread, or on the caller's when the change ends before submit
  // returns.
  void submit(FabricChange change, int64_t deadline_ms, Done done);
  // The same, waiting for the end on the caller's thread.
  Status wait(FabricChange change, int64_t deadline_ms);

  // Fabric operations running now (a batch counts once), changes waiting for room, and the
  // batches started so far.
  size_t in_flight() const;
  size_t queued() const;
  uint64_t batches() const;

 private:
  struct Waiting {
    FabricChange change;
    int64_t deadline_ms = 0;
    Done done;
    bool inline_done = false;  // tell `done` on the thread that saw the end (wait())
  };
  struct Running {
    std::string lane;
    std::vector<Waiting> waiting;
    Operation op{};
  };

  void enqueue(Waiting w);
  // Starts a group of one lane (one change, or a batch) whose slot is taken, outside the lock;
  // what ends at once gets its answer, the rest is followed by the poller.
  // `queued`: a starter thread starts it, and what ends at once gets its answer on completion
  // threads; else the caller's thread starts it and gets the answer at once.
  void start(std::string lane, std::vector<Waiting> group, bool queued);
  void release(const std::string& lane);
  // Tells `w.done` how it ended: on a completion thread, or at once when inline_done.
  void complete(Waiting w, Status how);
  // A task for the completion threads (`start` false) or the starter threads.
  void post(std::function<void()> task, bool start = false);
  void poll_loop();

  Fabric& fabric_;
  const Clock& clock_;
  OperationWaiterOptions options_;

  mutable std::mutex mu_;
  std::condition_variable wake_;  // the poller: room on a lane, or stopping
  bool stopping_ = false;         // no new change; the poller ends
  uint64_t batches_ = 0;
  std::map<std::string, size_t> running_per_lane_;
  std::vector<Running> running_;
  std::map<std::string, std::deque<Waiting>> queued_;
  // The waiter's threads besides the poller, each set a WorkQueue: completions, starts, and
  // the status readers of a poll round (started by the first round with enough operations to
  // share out, used only by the poller).
  std::unique_ptr<WorkQueue> completers_;
  std::unique_ptr<WorkQueue> starters_;
  std::unique_ptr<WorkQueue> readers_;
  std::thread poller_;
};

}  // namespace composer
