// The composer's durable state: hosts, devices, compositions, and the append-only event ledger.
// One SQLite database in WAL mode; composerd is its only writer.
//
// Writes from many threads are group-committed: each mutating call blocks until its change is
// durable, but concurrent calls share one transaction (and one fsync). Each call runs inside its
// own SAVEPOINT, so a failing call rolls back only itself. Reads never wait for the writer.
// The writes of a compose and a release also come without the wait (the *_async calls): the
// caller's thread goes on, and the answer is handed over once the change is durable.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer::db {

struct StoreOptions {
  // synchronous=FULL: a commit survives power loss. Off only for throw-away test databases.
  bool durable = true;
  int busy_timeout_ms = 5000;
  // For measurements (store_bench --statements): called with each step of each statement the writer
  // runs, by what the statement does ("appending event"), with the nanoseconds it took.
  std::function<void(std::string_view what, int64_t ns)> writer_statement_timer;
};

// Members are value-initialised so callers can name only the filters they use
// (designated initialisers) without -Wmissing-field-initializers.
struct DeviceFilter {
  std::optional<DeviceType> type{};
  std::optional<DeviceState> state{};
  std::optional<std::string> zone{};
  std::optional<std::string> node{};   // attached to this node
  std::optional<std::string> after{};  // only ids after this one (a page's cursor)
  size_t limit = 0;                    // 0: no limit; in id order
};

struct CompositionFilter {
  std::optional<uint32_t> job_id{};
  std::optional<uint32_t> uid{};
  std::optional<std::string> user{};
  std::optional<std::string> node{};
  std::optional<CompositionState> state{};
  bool live_only = false;
  std::optional<int64_t> before_id{};  // only ids below this one (a page's cursor)
  size_t limit = 0;                    // 0: no limit; newest first
};

// Where a page of events ended: its last event's time and id.
struct EventCursor {
  int64_t ts_ms = 0;
  int64_t id = 0;
};

struct EventFilter {
  std::optional<int64_t> since_ms{};  // inclusive
  std::optional<int64_t> until_ms{};  // exclusive
  std::optional<uint32_t> job_id{};
  std::optional<int64_t> composition_id{};
  std::optional<EventCursor> after{};  // only events after this one in (ts_ms, id) order
  size_t limit = 0;                    // 0: no limit; oldest first, by (ts_ms, id)
};

// Counters of the group-committing writer, for benchmarks and metrics.
struct WriteStats {
  uint64_t calls = 0;          // mutating calls finished (committed or refused)
  uint64_t failed_calls = 0;   // of which refused or failed
  uint64_t transactions = 0;   // transactions committed: one fsync each when durable
  uint64_t largest_batch = 0;  // most calls that shared one transaction
  // Times the writer waited for the database's answer (PostgreSQL only: a statement, or a
  // flight of them; 0 on SQLite, which answers in this process).
  uint64_t round_trips = 0;
};

class Store {
 public:
  static Expected<std::unique_ptr<Store>> open(const std::string& path,
                                               const StoreOptions& options = {});
  // The store in a PostgreSQL database (libpq connection string `conninfo`): the same
  // guarantees, enforced by its schema. kUnavailable, naming no part of the string (it may
  // hold a password), when the server cannot be reached.
  static Expected<std::unique_ptr<Store>> open_postgresql(const std::string& conninfo);
  virtual ~Store() = default;

  virtual int schema_version() = 0;

  // Inventory as the fabric reports it. New hosts/devices are added, known ones updated
  // (model, capacity, zone, address, slots); nothing is deleted: the ledger refers to them.
  // Drain state and ownership are never changed by an upsert. A device whose health changed
  // gets a health event at now_ms. A new device is known from now_ms (Device::known_since_ms);
  // one already stored keeps the time it was first known.
  virtual Status upsert_hosts(const std::vector<Host>& hosts) = 0;
  virtual Status upsert_devices(const std::vector<Device>& devices, int64_t now_ms) = 0;
  virtual Expected<std::vector<Host>> hosts() = 0;
  // Devices with their owner (composition_id, node) filled from live compositions.
  virtual Expected<std::vector<Device>> devices(const DeviceFilter& filter = {}) = 0;
  virtual Expected<Device> device(const std::string& id) = 0;

  // How the *_async writes answer: once the change is durable (or refused), on the store's
  // writer thread, or at once on the caller's for a request refused before it is queued. It
  // must only hand the answer on to a thread of the caller's: the writer runs nothing else
  // meanwhile, and a store call from it would never end.
  template <typename T>
  using Answer = std::function<void(Expected<T>)>;

  // Inserts `c` (state requested or composing; id, timestamps and attempts are assigned) as
  // the owner of `device_ids` and appends one event per state it passed through. Fails with
  // kConflict, changing nothing, if (job, node) already has a live composition or a device is
  // owned by another live composition: the schema enforces both.
  virtual void create_composition_async(const Composition& c,
                                        const std::vector<std::string>& device_ids, int64_t now_ms,
                                        Answer<Composition> done) = 0;
  Expected<Composition> create_composition(const Composition& c,
                                           const std::vector<std::string>& device_ids,
                                           int64_t now_ms) {
    return wait<Composition>([&](Answer<Composition> done) {
      create_composition_async(c, device_ids, now_ms, std::move(done));
    });
  }
  // Moves composition `id` from `from` to `to` and appends an event (detail is its text; for
  // kFailed it also becomes last_error). kConflict, changing nothing, if the composition is
  // not in `from` or the transition is illegal. Entering released or failed frees its devices.
  // `attempt` counts one more fabric attempt.
  virtual void transition_async(int64_t id, CompositionState from, CompositionState to,
                                std::string_view detail, int64_t now_ms, bool attempt,
                                Answer<Composition> done) = 0;
  Expected<Composition> transition(int64_t id, CompositionState from, CompositionState to,
                                   std::string_view detail, int64_t now_ms, bool attempt = false) {
    return wait<Composition>([&](Answer<Composition> done) {
      transition_async(id, from, to, detail, now_ms, attempt, std::move(done));
    });
  }
  // A node's hold on live composition `id` (Composition::hold): `cause` sets it, "" clears it.
  // Appends an event "hold" (detail: the cause) or "unhold" (detail: the cause it had), with
  // `actor` as its user when given; nothing when the hold is already so. kConflict, changing
  // nothing, for a composition that is not live.
  virtual Expected<Composition> set_hold(int64_t id, std::string_view cause, std::string_view actor,
                                         int64_t now_ms) = 0;
  virtual Expected<Composition> composition(int64_t id) = 0;
  virtual Expected<std::optional<Composition>> live_composition(uint32_t job_id,
                                                                std::string_view node) = 0;
  // With devices filled.
  virtual Expected<std::vector<Composition>> compositions(const CompositionFilter& filter) = 0;

  // Drain/resume (event "drain"/"resume" with actor and reason, one per device that changes)
  // and health changes (event "health"). Several devices change in one transaction, all or
  // none: kNotFound for an unknown device, and nothing changed.
  virtual Status set_drained(const std::vector<std::string>& device_ids, bool drained,
                             std::string_view reason, std::string_view actor, int64_t now_ms) = 0;
  Status set_drained(const std::string& device_id, bool drained, std::string_view reason,
                     std::string_view actor, int64_t now_ms) {
    return set_drained(std::vector<std::string>{device_id}, drained, reason, actor, now_ms);
  }
  virtual Status set_health(const std::string& device_id, Health health, std::string_view detail,
                            int64_t now_ms) = 0;

  // Who holds each listed device outside composerd (id -> holder; empty: nobody). Each change
  // appends an event of `kind` ("foreign" when the reconciler read it from the fabric,
  // "adopt" and "release-foreign" for an admin's decision) with the actor and the detail (an
  // empty detail says "held by HOLDER" or "the fabric freed it"). All or nothing.
  virtual Status set_holders(const std::vector<std::pair<std::string, std::string>>& holders,
                             std::string_view kind, std::string_view actor, std::string_view detail,
                             int64_t now_ms) = 0;
  // composerd's claims: device id -> the fabric host composerd attached it to. A claim is made
  // with a composition's device link, before the fabric is asked, and dropped when the
  // composition is released; drop_claims drops those on `fabric_host` after another detach
  // succeeded or the fabric freed them. Only a claimed device is composerd's to take back.
  virtual Expected<std::map<std::string, std::string>> claims() = 0;
  virtual Status drop_claims(const std::vector<std::string>& device_ids,
                             const std::string& fabric_host) = 0;

  // Appends an event that changes no state (a refused compose: kind "refused"); id is ignored.
  virtual Status add_event(const Event& event) = 0;
  virtual Expected<std::vector<Event>> events(const EventFilter& filter) = 0;

  // Streams, in ledger order (ts_ms, id), the events a report over [since_ms, until_ms) needs,
  // without holding them in memory: first the events before since_ms that still shape the
  // state at since_ms (every drain, resume and health event, and every event of a composition
  // that was live at since_ms), then every event in the range. `visit` returns false to stop.
  virtual Status scan_events(int64_t since_ms, int64_t until_ms,
                             const std::function<bool(const Event&)>& visit) = 0;

  // What a report over [since_ms, until_ms) reads when it walks the rollup of ended
  // compositions (schema migration 9) instead of every event; the same report as what
  // scan_events streams, in far fewer rows. In ledger order (ts_ms, id), each callback at the
  // place of the event it stands for:
  //  - `event`: every drain, resume and health event before until_ms, and the events that
  //    scan_events would stream of each composition the rollup does not tell whole: those still
  //    live, those that ended at or after until_ms, and those whose row is not whole;
  //  - `began`: an ended composition, at its first event's place, if it ended inside the range
  //    (a composition that ended before since_ms shapes nothing in it);
  //  - `ended`: the same, at its end event's place, unless its first event is its end;
  //  - `unattached`: once, how many events of the range name no composition and no device.
  // All four must be set. They are called on the calling thread while the walk reads ahead on
  // a thread of its own; when the walk fails part-way, what they were given so far is not a
  // report and the error says why. An exception from one of them stops the walk and reaches
  // the caller.
  // It relies on what the store keeps: a composition is in a released or failed state exactly
  // when the ledger holds its end event (one transaction writes both).
  struct ReportWalk {
    std::function<void(const Event&)> event;
    std::function<void(const CompositionRollup&)> began;
    std::function<void(const CompositionRollup&)> ended;
    std::function<void(uint64_t)> unattached;
  };
  virtual Status walk_report(int64_t since_ms, int64_t until_ms, const ReportWalk& walk) = 0;

  // Policy history (schema migration 2). add_policy appends a version (id and applied_ms are
  // assigned; sha256 must be the hash of text) and returns it; versions are never changed.
  // current_policy is the newest one, nullopt before the first. policy_history lists the
  // newest first, at most `limit` (0: all).
  virtual Expected<PolicyVersion> add_policy(const PolicyVersion& version, int64_t now_ms) = 0;
  virtual Expected<std::optional<PolicyVersion>> current_policy() = 0;
  virtual Expected<std::vector<PolicyVersion>> policy_history(size_t limit) = 0;

  // How the writes were batched so far.
  virtual WriteStats write_stats() const = 0;

  // Several composerd on one PostgreSQL store (leadership.h): from now on every write
  // transaction commits only while the leadership row holds `epoch`, and is refused
  // (kUnavailable, nothing of it kept) once another composerd took over; epoch 0 refuses every
  // write (a standby). A transaction left open longer than `lease_ms` (a stopped process) is
  // ended by the server, so it cannot hold back the one that takes over. The SQLite store has
  // one composerd, always active: nothing to fence, and it ignores this.
  virtual void fence(int64_t /*epoch*/, int64_t /*lease_ms*/) {}

 protected:
  // An *_async call's answer, waited for on this thread.
  template <typename T>
  static Expected<T> wait(const std::function<void(Answer<T>)>& call) {
    auto answered = std::make_shared<std::promise<Expected<T>>>();
    auto answer = answered->get_future();
    call([answered](Expected<T> r) { answered->set_value(std::move(r)); });
    return answer.get();
  }
};

// A consistent copy of the composerd database at `database` into the new file `file`
// (SQLite's online backup API: composerd may keep writing meanwhile; the copy is one moment
// of it), mode 0600. Refuses an existing `file` (kConflict), a `database` that cannot be
// opened (kUnavailable) or holds no composerd schema (kInvalidArgument); a failed copy
// leaves no file behind. composerctl backup; restore in docs/ADMIN.md.
Status backup(const std::string& database, const std::string& file);

// What copy_to_postgresql copied: each table's rows in the order copied, and what the checks
// found equal on both sides.
struct CopyCounts {
  std::vector<std::pair<std::string, int64_t>> rows;
  int64_t live_compositions = 0;
  int64_t claims = 0;
};

// Moving a site to PostgreSQL: copies composerd's SQLite database at `database` into the
// PostgreSQL database `conninfo` (its schema made, or migrated, first), in one transaction that
// commits only when every table's row count, the live compositions with their devices and the
// device claims are equal on both sides. Refuses (kConflict) while something holds the file
// open (composerd runs), which it learns from SQLite's lock: the copy takes the file's
// exclusive lock and keeps it to the end, so composerd cannot start meanwhile; refuses
// (kConflict) a store that holds any row, and a file of another schema version
// (kInvalidArgument). The target is left as it was on every refusal or failure. No sentence
// names any part of `conninfo` (it may hold a password). composerctl state copy-to-postgresql;
// copy_test pins each of these.
Expected<CopyCounts> copy_to_postgresql(const std::string& database, const std::string& conninfo);

}  // namespace composer::db
