#include "ledger_walk.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <queue>
#include <string>
#include <system_error>
#include <thread>

#include "composer/db/failure.h"

namespace composer::db {

bool later_in_ledger(const Event& a, const Event& b) {
  return LedgerPlace{a.ts_ms, a.id} > LedgerPlace{b.ts_ms, b.id};
}

WalkSteps::WalkSteps() {
  for (size_t i = 0; i < kBatches; ++i) empty_.push_back(std::make_unique<Batch>());
}

std::unique_ptr<WalkSteps::Batch> WalkSteps::take_empty() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [this] { return stopped_ || !empty_.empty(); });
  if (stopped_) fail(ErrorCode::kInternal, "the report stopped reading the walk");
  auto batch = std::move(empty_.front());
  empty_.pop_front();
  return batch;
}

void WalkSteps::hand_over(std::unique_ptr<Batch> batch) {
  {
    std::lock_guard lock(mu_);
    full_.push_back(std::move(batch));
  }
  changed_.notify_all();
}

void WalkSteps::finish(Status status) {
  {
    std::lock_guard lock(mu_);
    status_ = std::move(status);
    finished_ = true;
  }
  changed_.notify_all();
}

std::unique_ptr<WalkSteps::Batch> WalkSteps::take_full() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [this] { return finished_ || !full_.empty(); });
  if (full_.empty() || !status_) return nullptr;
  auto batch = std::move(full_.front());
  full_.pop_front();
  return batch;
}

void WalkSteps::give_back(std::unique_ptr<Batch> batch) {
  batch->steps.clear();
  batch->events_used = 0;
  {
    std::lock_guard lock(mu_);
    empty_.push_back(std::move(batch));
  }
  changed_.notify_all();
}

void WalkSteps::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  changed_.notify_all();
}

Status WalkSteps::status() {
  std::lock_guard lock(mu_);
  return status_;
}

CompositionRollup& StepWriter::take_slot() {
  if (spare_.empty()) return steps_.slots.emplace_back();
  CompositionRollup& slot = *spare_.back();
  spare_.pop_back();
  return slot;
}

Event& StepWriter::event() {
  make_room();
  if (batch_->events_used == batch_->events.size()) batch_->events.emplace_back();
  const size_t at = batch_->events_used++;
  batch_->steps.push_back({.kind = WalkSteps::Step::Kind::kEvent, .n = at});
  return batch_->events[at];
}

void StepWriter::make_room() {
  if (batch_->steps.size() < WalkSteps::kBatchSteps) return;
  steps_.hand_over(std::move(batch_));
  batch_ = steps_.take_empty();
  spare_.insert(spare_.end(), batch_->freed.begin(), batch_->freed.end());
  batch_->freed.clear();
}

namespace {

// The events of composition `id` the walk reads one by one, added to `pending` (a heap,
// soonest on top).
void read_composition_events(RollupSource& source, int64_t id, int64_t since_ms, int64_t until_ms,
                             std::vector<Event>& pending) {
  const size_t had = pending.size();
  source.composition_events(id, since_ms, until_ms, pending);
  for (size_t i = had; i < pending.size(); ++i) {
    std::push_heap(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                   later_in_ledger);
  }
}

}  // namespace

void merge_rollup_walk(RollupSource& source, int64_t since_ms, int64_t until_ms, StepWriter& out) {
  out.unattached(source.unattached(since_ms, until_ms));
  // Four streams merged in ledger order: device events, events read one by one (`pending`,
  // a heap), compositions in the order they began (`rows`), and those begun and not yet
  // ended in the order they end (`open`, a heap). No two share a place: each stands at one
  // event's.
  std::vector<Event> pending;
  for (int64_t id : source.read_alone()) {
    read_composition_events(source, id, since_ms, until_ms, pending);
  }
  const int64_t longest = source.longest();
  int64_t earliest = 0;
  if (__builtin_sub_overflow(since_ms, longest, &earliest)) {
    earliest = std::numeric_limits<int64_t>::min();
  }
  source.start(earliest, since_ms, until_ms);
  Event device;
  bool device_ok = source.next_device_event(device);
  // Rows are read into the writer's slots, never copied; `open` orders the begun ones by
  // where they end.
  using Ending = std::pair<LedgerPlace, CompositionRollup*>;
  std::priority_queue<Ending, std::vector<Ending>, std::greater<>> open;
  CompositionRollup* row = &out.take_slot();
  bool row_ok = source.next_row(*row);
  constexpr LedgerPlace kNone{std::numeric_limits<int64_t>::max(),
                              std::numeric_limits<int64_t>::max()};
  while (true) {
    const LedgerPlace at_device = device_ok ? LedgerPlace{device.ts_ms, device.id} : kNone;
    const LedgerPlace at_row = row_ok ? LedgerPlace{row->first.ts_ms, row->first.id} : kNone;
    const LedgerPlace at_end = open.empty() ? kNone : open.top().first;
    const LedgerPlace at_pending =
        pending.empty() ? kNone : LedgerPlace{pending.front().ts_ms, pending.front().id};
    const LedgerPlace next = std::min({at_device, at_row, at_end, at_pending});
    if (next == kNone) break;
    if (next == at_device) {
      std::swap(out.event(), device);
      device_ok = source.next_device_event(device);
    } else if (next == at_pending) {
      std::pop_heap(pending.begin(), pending.end(), later_in_ledger);
      out.event() = std::move(pending.back());
      pending.pop_back();
    } else if (next == at_end) {
      CompositionRollup& ended = *open.top().second;
      open.pop();
      out.ended(ended);
      out.free_slot(ended);
    } else {
      CompositionRollup& r = *row;
      if (r.end.ts_ms >= until_ms) {
        // Still live at the range's end: its events before it, read one by one. None comes
        // before its first (the row is whole), so they join the walk from here.
        read_composition_events(source, *r.first.composition_id, since_ms, until_ms, pending);
      } else {
        out.began(r);
        if (r.end.id != r.first.id) {
          open.emplace(LedgerPlace{r.end.ts_ms, r.end.id}, &r);
        } else {
          out.free_slot(r);
        }
        row = &out.take_slot();
      }
      row_ok = source.next_row(*row);
    }
  }
}

Status run_walk(const Store::ReportWalk& walk, const std::function<Status(WalkSteps&)>& read) {
  WalkSteps steps;
  std::thread walker;
  try {
    walker = std::thread([&] { steps.finish(read(steps)); });
  } catch (const std::system_error& e) {
    return Error(ErrorCode::kUnavailable,
                 std::string("store: starting the thread that walks the rollup: ") + e.what());
  }
  // Stops and waits for the walk however this ends, a callback that throws included.
  struct Join {
    WalkSteps& steps;
    std::thread& walker;
    ~Join() {
      steps.stop();
      walker.join();
    }
  } join{steps, walker};
  using Kind = WalkSteps::Step::Kind;
  while (auto batch = steps.take_full()) {
    for (const WalkSteps::Step& step : batch->steps) {
      switch (step.kind) {
        case Kind::kUnattached:
          walk.unattached(step.n);
          break;
        case Kind::kEvent:
          walk.event(batch->events[static_cast<size_t>(step.n)]);
          break;
        case Kind::kBegan:
          walk.began(*step.row);
          break;
        case Kind::kEnded:
          walk.ended(*step.row);
          break;
      }
    }
    steps.give_back(std::move(batch));
  }
  return steps.status();
}

}  // namespace composer::db
