// The rollup walk of a report (Store::walk_report), whatever the database: the merge of its
// four streams in ledger order, and the hand-over of its steps from the thread that reads
// them to the caller. A store supplies only the reading, as a RollupSource.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/db/store.h"
#include "composer/model/model.h"

namespace composer::db {

// Ledger order of two events by their (ts_ms, id).
using LedgerPlace = std::pair<int64_t, int64_t>;

// For a heap of events with the soonest on top.
bool later_in_ledger(const Event& a, const Event& b);

// What the walk reads, all in one snapshot of the ledger (one read transaction); each call
// throws Failure when the database fails.
class RollupSource {
 public:
  virtual ~RollupSource() = default;
  // How many events of [since_ms, until_ms) name no composition and no device.
  virtual uint64_t unattached(int64_t since_ms, int64_t until_ms) = 0;
  // The compositions whose events a report reads one by one: those still live, and those
  // whose rollup row is not whole.
  virtual std::vector<int64_t> read_alone() = 0;
  // Appends to `out` the events of composition `id` that scan_events streams for
  // [since_ms, until_ms): those before until_ms, and those before since_ms only if the
  // composition was live at since_ms; never a device event.
  virtual void composition_events(int64_t id, int64_t since_ms, int64_t until_ms,
                                  std::vector<Event>& out) = 0;
  // The length (end_ts - first_ts) of the longest composition the rollup holds; 0 for none.
  virtual int64_t longest() = 0;
  // Starts the two cursors the merge reads: every device event before until_ms, in ledger
  // order; the whole rollup rows of compositions that began in [earliest_ms, until_ms) and
  // ended at or after since_ms, in the order they began (first_ts, first_id).
  virtual void start(int64_t earliest_ms, int64_t since_ms, int64_t until_ms) = 0;
  virtual bool next_device_event(Event& e) = 0;
  virtual bool next_row(CompositionRollup& r) = 0;
};

// The walk's steps, handed from the thread that reads them to the caller (see run_walk).
// Its steps go over in batches, a few of which go round between the two threads: the walk
// fills one while the caller empties another, and waits while all are full. A batch holds its
// events; the rollup rows it names stay in the walk's slots, which the walk reuses only once
// the batch naming them for the last time has come back.
class WalkSteps {
 public:
  struct Step {
    enum class Kind : uint8_t { kUnattached, kEvent, kBegan, kEnded };
    Kind kind = Kind::kEvent;
    uint64_t n = 0;  // kUnattached: how many; kEvent: the event's index in the batch
    const CompositionRollup* row = nullptr;  // kBegan, kEnded
  };
  struct Batch {
    std::vector<Step> steps;
    std::vector<Event> events;  // reused: their strings keep their capacity
    size_t events_used = 0;
    std::vector<CompositionRollup*> freed;  // the walk's slots free once this is consumed
  };
  static constexpr size_t kBatchSteps = 512;
  static constexpr size_t kBatches = 4;

  WalkSteps();

  // The walk's side. An empty batch to fill, whose freed slots the walk then reuses; throws
  // once the caller has stopped taking batches.
  std::unique_ptr<Batch> take_empty();
  void hand_over(std::unique_ptr<Batch> batch);
  // The walk is over, with `status`: the caller takes the batches handed over before it if it
  // succeeded, none if it failed.
  void finish(Status status);

  // The caller's side. The next full batch, or nullptr when there is none to take.
  std::unique_ptr<Batch> take_full();
  void give_back(std::unique_ptr<Batch> batch);
  void stop();
  // Once take_full() has returned nullptr.
  Status status();

  // The slots the walk reads rollup rows into (stable in a deque), which steps point at: the
  // walk's thread writes them, and they outlive it, as the caller may still be reading them.
  std::deque<CompositionRollup> slots;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Batch>> empty_, full_;
  bool finished_ = false;
  bool stopped_ = false;
  Status status_ = Status::Ok();
};

// The walk's end of WalkSteps: the batch being filled, and which slots can be reused.
class StepWriter {
 public:
  explicit StepWriter(WalkSteps& steps) : steps_(steps), batch_(steps.take_empty()) {}

  // A slot to read a row into: one the caller is done with, or a new one.
  CompositionRollup& take_slot();
  // The slot of `row` may be reused once the caller has seen the steps written so far.
  void free_slot(CompositionRollup& row) { batch_->freed.push_back(&row); }

  void unattached(uint64_t n) { add({.kind = WalkSteps::Step::Kind::kUnattached, .n = n}); }
  // The event to hand over next, to be written into (its strings keep their capacity).
  Event& event();
  void began(const CompositionRollup& row) {
    add({.kind = WalkSteps::Step::Kind::kBegan, .row = &row});
  }
  void ended(const CompositionRollup& row) {
    add({.kind = WalkSteps::Step::Kind::kEnded, .row = &row});
  }
  // Hands over what is left, once the walk is done.
  void flush() {
    if (!batch_->steps.empty()) steps_.hand_over(std::move(batch_));
  }

 private:
  // A full batch goes over before the next step is written, not after the last one: event()
  // returns a reference into the batch.
  void make_room();
  void add(const WalkSteps::Step& step) {
    make_room();
    batch_->steps.push_back(step);
  }

  WalkSteps& steps_;
  std::unique_ptr<WalkSteps::Batch> batch_;
  std::vector<CompositionRollup*> spare_;
};

// Writes the walk of [since_ms, until_ms) into `out`, in ledger order, from `source`.
void merge_rollup_walk(RollupSource& source, int64_t since_ms, int64_t until_ms, StepWriter& out);

// Store::walk_report on every store: `read` fills `steps` on a thread of its own (it
// returns how the reading ended, and must call steps.finish only through this), while this
// thread calls `walk`'s callbacks (docs/BENCHMARKS.md, "Reports": reading the rows and
// building a report take about as long as each other, so the walk reads ahead while the
// caller works). Returns when both are done, a callback that throws included.
Status run_walk(const Store::ReportWalk& walk, const std::function<Status(WalkSteps&)>& read);

}  // namespace composer::db
