// The Store on SQLite: one group-committing writer connection, a pool of read-only ones.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "composer/common/clock.h"
#include "composer/common/log.h"
#include "composer/common/strings.h"
#include "composer/db/group_writer.h"
#include "composer/db/sqlite.h"
#include "composer/db/store.h"
#include "reader_pool.h"
#include "schema.h"
#include "sqlite_statements.h"

namespace composer::db {
namespace {

using sqlite::Connection;
using sqlite::fail;
using sqlite::Sql;
using sqlite::Statement;
// The statements (sqlite_statements.h).
using namespace sqlite;  // NOLINT(google-build-using-namespace)

constexpr int kCompositionDeviceColumn = 18;

// --- Text helpers ---------------------------------------------------------------------------

// Device ids and zones are stored comma-separated (events, hosts), so neither may hold one.
constexpr std::string_view kListSeparator = ",";

// Into `out`, reusing the strings it already holds.
void split_into(std::string_view text, std::vector<std::string>& out) {
  size_t n = 0;
  while (!text.empty()) {
    const size_t at = text.find(kListSeparator);
    if (n == out.size()) out.emplace_back();
    out[n++].assign(text.substr(0, at));
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + kListSeparator.size());
  }
  out.resize(n);
}

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  split_into(text, out);
  return out;
}

// "level:name,level:name" (see migration 6).
std::string domain_list(const std::vector<FailureDomain>& domains) {
  std::vector<std::string> items;
  for (const FailureDomain& d : domains) items.push_back(to_string(d));
  return join(items, kListSeparator);
}

// A name stored in a comma-separated list: not empty, no comma, no whitespace or control.
bool valid_list_item(std::string_view s) {
  if (s.empty()) return false;
  return std::none_of(s.begin(), s.end(), [](char ch) {
    return ch == ',' || static_cast<unsigned char>(ch) <= ' ' || ch == 0x7f;
  });
}

std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// Inside a transaction, a refusal of what the caller named ("no device 'x'"): unlike
// sqlite::fail, no "store: " prefix, since the sentence reaches the user who typed the name.
[[noreturn]] void refuse(ErrorCode code, std::string message) {
  throw sqlite::Failure(Error(code, std::move(message)));
}

// The SQLite part of a failure's message, without the "store: " prefix, to quote it inside a
// more specific sentence.
std::string sqlite_reason(const sqlite::Failure& f) {
  std::string_view message = f.error().message;
  constexpr std::string_view kPrefix = "store: ";
  if (message.substr(0, kPrefix.size()) == kPrefix) message.remove_prefix(kPrefix.size());
  return std::string(message);
}

int64_t limit_value(size_t limit) {
  if (limit == 0) return -1;  // SQLite: no limit
  return static_cast<int64_t>(std::min<size_t>(limit, std::numeric_limits<int64_t>::max()));
}

// --- Row readers ----------------------------------------------------------------------------

template <typename E>
E parse_column(const Statement& s, int column, std::optional<E> (*parse)(std::string_view),
               std::string_view what) {
  auto value = parse(s.text_view(column));
  if (!value) {
    fail(ErrorCode::kInternal,
         "unknown " + std::string(what) + " " + quoted(s.text_view(column)) + " in the database");
  }
  return *value;
}

// A domains column ("level:name" comma-separated); `what` names the row in the error.
std::vector<FailureDomain> read_domains(std::string_view column, const std::string& what) {
  std::vector<FailureDomain> out;
  for (const std::string& item : split(column)) {
    auto domain = parse_failure_domain(item);
    if (!domain) {
      fail(ErrorCode::kInternal,
           what + ": malformed failure domain " + quoted(item) + " in the database");
    }
    out.push_back(std::move(*domain));
  }
  return out;
}

// A domain the domains column can hold: kInvalidArgument naming `what` otherwise.
Status storable_domains(const std::vector<FailureDomain>& domains, const std::string& what) {
  for (const FailureDomain& domain : domains) {
    if (!valid_list_item(to_string(domain)) || !parse_failure_domain(to_string(domain))) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: " + what + ": failure domain " + quoted(to_string(domain)) +
                       " is not valid: level and name must be non-empty, without commas or "
                       "spaces, and the level without ':'");
    }
  }
  return Status::Ok();
}

Device read_device(const Statement& s, int first) {
  Device d;
  d.id = s.text(first);
  d.type = parse_column(s, first + 1, &parse_device_type, "device type");
  d.model = s.text(first + 2);
  d.capacity_bytes = s.uint64(first + 3);
  d.zone = s.text(first + 4);
  d.address = s.text(first + 5);
  d.health = parse_column(s, first + 6, &parse_health, "health");
  d.drained = s.int64(first + 7) != 0;
  d.drain_reason = s.text(first + 8);
  d.composition_id = s.optional_int64(first + 9);
  if (d.composition_id) d.node = s.text(first + 10);
  d.holder = s.text(first + 11);
  d.domains = read_domains(s.text_view(first + 12), "device " + d.id);
  d.identity.pci_vendor = s.text(first + 13);
  d.identity.pci_device = s.text(first + 14);
  d.identity.serial = s.text(first + 15);
  d.identity.uuid = s.text(first + 16);
  d.known_since_ms = s.int64(first + 17);
  return d;
}

Composition read_composition(const Statement& s) {
  Composition c;
  c.id = s.int64(0);
  c.job_id = s.uint32(1);
  c.node = s.text(2);
  c.uid = s.uint32(3);
  c.user = s.text(4);
  c.account = s.text(5);
  c.workload = s.text(6);
  c.request.gpus = s.uint32(7);
  c.request.gpu_model = s.text(8);
  c.request.mem_bytes = s.uint64(9);
  c.request.nvme = s.uint32(10);
  c.state = parse_column(s, 11, &parse_composition_state, "composition state");
  c.created_ms = s.int64(12);
  c.updated_ms = s.int64(13);
  c.attempts = s.uint32(14);
  c.last_error = s.text(15);
  c.window = s.text(16);
  c.hold = s.text(17);
  return c;
}

// Reads rows of a COMPOSITIONS_WITH_DEVICES statement: one row per (composition, device).
std::vector<Composition> read_compositions(Statement& s) {
  std::vector<Composition> out;
  while (s.step()) {
    const int64_t id = s.int64(0);
    if (out.empty() || out.back().id != id) out.push_back(read_composition(s));
    if (!s.is_null(kCompositionDeviceColumn)) {
      out.back().devices.push_back(read_device(s, kCompositionDeviceColumn));
    }
  }
  return out;
}

// One event row into an Event that may be reused row after row: its strings keep their
// capacity, so a scan over millions of rows does not allocate for each one.
void read_event_into(const Statement& s, Event& e) {
  e.id = s.int64(0);
  e.ts_ms = s.int64(1);
  e.kind.assign(s.text_view(2));
  e.composition_id = s.optional_int64(3);
  e.job_id = s.uint32(4);
  e.node.assign(s.text_view(5));
  e.uid = s.uint32(6);
  e.user.assign(s.text_view(7));
  e.account.assign(s.text_view(8));
  e.workload.assign(s.text_view(9));
  e.from_state.assign(s.text_view(10));
  e.to_state.assign(s.text_view(11));
  split_into(s.text_view(12), e.devices);
  e.detail.assign(s.text_view(13));
  e.window.assign(s.text_view(14));
}

Event read_event(const Statement& s) {
  Event e;
  read_event_into(s, e);
  return e;
}

// --- Queries shared by readers and the writer ----------------------------------------------

std::optional<Device> find_device(Connection& db, std::string_view id) {
  auto s = db.statement(kSelectDevice);
  s->bind(1, id);
  if (!s->step()) return std::nullopt;
  return read_device(*s, 0);
}

std::optional<Composition> find_composition(Connection& db, int64_t id) {
  auto s = db.statement(kSelectComposition);
  s->bind(1, id);
  auto found = read_compositions(*s);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::optional<Composition> find_live_composition(Connection& db, uint32_t job_id,
                                                 std::string_view node) {
  auto s = db.statement(kSelectLiveComposition);
  s->bind(1, job_id).bind(2, node);
  auto found = read_compositions(*s);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<std::string> device_ids(const Composition& c) {
  std::vector<std::string> ids;
  ids.reserve(c.devices.size());
  for (const auto& d : c.devices) ids.push_back(d.id);
  return ids;
}

// An event about composition `c`.
Event composition_event(const Composition& c, std::string_view kind, std::string_view from,
                        std::string_view to, std::string_view detail, int64_t now_ms) {
  Event e;
  e.ts_ms = now_ms;
  e.kind = kind;
  e.composition_id = c.id;
  e.job_id = c.job_id;
  e.node = c.node;
  e.uid = c.uid;
  e.user = c.user;
  e.account = c.account;
  e.workload = c.workload;
  e.window = c.window;
  e.from_state = from;
  e.to_state = to;
  e.devices = device_ids(c);
  e.detail = detail;
  return e;
}

void append_event(Connection& db, const Event& e) {
  db.statement(kInsertEvent)
      ->bind(1, e.ts_ms)
      .bind(2, e.kind)
      .bind(3, e.composition_id)
      .bind(4, e.job_id)
      .bind(5, e.node)
      .bind(6, e.uid)
      .bind(7, e.user)
      .bind(8, e.account)
      .bind(9, e.workload)
      .bind(10, e.from_state)
      .bind(11, e.to_state)
      .bind(12, join(e.devices, kListSeparator))
      .bind(13, e.detail)
      .bind(14, e.window)
      .run();
}

// An event about device `d` (drain, resume, health); it names the composition holding the
// device, if any, so accounting sees whose job was affected.
Event device_event(Connection& db, const Device& d, std::string_view kind, std::string_view from,
                   std::string_view to, std::string_view user, std::string_view detail,
                   int64_t now_ms) {
  Event e;
  if (d.composition_id) {
    if (auto owner = find_composition(db, *d.composition_id)) {
      e = composition_event(*owner, kind, from, to, detail, now_ms);
    }
  }
  e.ts_ms = now_ms;
  e.kind = kind;
  e.from_state = from;
  e.to_state = to;
  e.devices = {d.id};
  e.detail = detail;
  if (!user.empty()) e.user = user;
  return e;
}

// --- The store ------------------------------------------------------------------------------

class WalkSteps;

class SqliteStore final : public Store {
 public:
  SqliteStore(const std::string& path, const StoreOptions& options,
              std::unique_ptr<Connection> writer, int version)
      : version_(version),
        readers_(path, options.busy_timeout_ms),
        writer_(std::make_unique<GroupWriter>(std::move(writer))) {}

  ~SqliteStore() override {
    // Commits whatever is queued before the connections close.
    writer_.reset();
  }

  int schema_version() override { return version_; }

  Status upsert_hosts(const std::vector<Host>& hosts) override;
  Status upsert_devices(const std::vector<Device>& devices, int64_t now_ms) override;
  Expected<std::vector<Host>> hosts() override;
  Expected<std::vector<Device>> devices(const DeviceFilter& filter) override;
  Expected<Device> device(const std::string& id) override;
  void create_composition_async(const Composition& c, const std::vector<std::string>& device_ids,
                                int64_t now_ms, Answer<Composition> done) override;
  Expected<Composition> set_hold(int64_t id, std::string_view cause, std::string_view actor,
                                 int64_t now_ms) override;
  void transition_async(int64_t id, CompositionState from, CompositionState to,
                        std::string_view detail, int64_t now_ms, bool attempt,
                        Answer<Composition> done) override;
  Expected<Composition> composition(int64_t id) override;
  Expected<std::optional<Composition>> live_composition(uint32_t job_id,
                                                        std::string_view node) override;
  Expected<std::vector<Composition>> compositions(const CompositionFilter& filter) override;
  using Store::set_drained;
  Status set_drained(const std::vector<std::string>& device_ids, bool drained,
                     std::string_view reason, std::string_view actor, int64_t now_ms) override;
  Status set_health(const std::string& device_id, Health health, std::string_view detail,
                    int64_t now_ms) override;
  Status set_holders(const std::vector<std::pair<std::string, std::string>>& holders,
                     std::string_view kind, std::string_view actor, std::string_view detail,
                     int64_t now_ms) override;
  Expected<std::map<std::string, std::string>> claims() override;
  Status drop_claims(const std::vector<std::string>& device_ids,
                     const std::string& fabric_host) override;
  Status add_event(const Event& event) override;
  Expected<std::vector<Event>> events(const EventFilter& filter) override;
  Status scan_events(int64_t since_ms, int64_t until_ms,
                     const std::function<bool(const Event&)>& visit) override;
  Status walk_report(int64_t since_ms, int64_t until_ms, const ReportWalk& walk) override;
  Expected<PolicyVersion> add_policy(const PolicyVersion& version, int64_t now_ms) override;
  Expected<std::optional<PolicyVersion>> current_policy() override;
  Expected<std::vector<PolicyVersion>> policy_history(size_t limit) override;
  WriteStats write_stats() const override { return writer_->stats(); }

 private:
  // walk_report's reading, on a thread of its own: its steps go to the caller through `steps`.
  Status walk_rollup(int64_t since_ms, int64_t until_ms, WalkSteps& steps);

  // Runs `query` on a read-only connection; failures become an Error.
  template <typename T, typename Query>
  Expected<T> read(Query&& query) {
    try {
      auto lease = readers_.acquire();
      return T(query(*lease));
    } catch (const sqlite::Failure& f) {
      return f.error();
    } catch (const std::exception& e) {
      return Error(ErrorCode::kInternal, std::string("store: ") + e.what());
    }
  }

  // Runs `body` in the writer's next batch; `done` is told its result once it is committed
  // (Store::Answer: on the writer's thread).
  template <typename T>
  void write_async(std::function<T(Connection&)> body, Answer<T> done) {
    auto result = std::make_shared<std::optional<T>>();
    writer_->submit([body = std::move(body), result](Connection& db) { *result = body(db); },
                    [result, done = std::move(done)](const Status& status) {
                      if (!status.ok()) return done(status.error());
                      done(std::move(**result));
                    });
  }
  // The same, waiting until it is committed.
  template <typename T>
  Expected<T> write(std::function<T(Connection&)> body) {
    return wait<T>([&](Answer<T> done) { write_async<T>(std::move(body), std::move(done)); });
  }
  Status write_status(std::function<void(Connection&)> body) {
    return writer_->run(std::move(body));
  }

  const int version_;
  ReaderPool readers_;
  std::unique_ptr<GroupWriter> writer_;
};

Status SqliteStore::upsert_hosts(const std::vector<Host>& hosts) {
  for (const Host& h : hosts) {
    if (!valid_list_item(h.node)) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: host node name " + quoted(h.node) +
                       " is not valid: it must be non-empty, without commas or spaces");
    }
    for (const auto& zone : h.zones) {
      if (!valid_list_item(zone)) {
        return Error(ErrorCode::kInvalidArgument,
                     "store: host " + h.node + ": zone " + quoted(zone) +
                         " is not valid: it must be non-empty, without commas or spaces");
      }
    }
    if (Status s = storable_domains(h.domains, "host " + h.node); !s) return s;
  }
  return write_status([&hosts](Connection& db) {
    for (const Host& h : hosts) {
      db.statement(kUpsertHost)
          ->bind(1, h.node)
          .bind(2, h.fabric_id)
          .bind(3, join(h.zones, kListSeparator))
          .bind(4, h.gpu_slots)
          .bind(5, h.mem_slots)
          .bind(6, h.nvme_slots)
          .bind(7, domain_list(h.domains))
          .run();
    }
  });
}

Status SqliteStore::upsert_devices(const std::vector<Device>& devices, int64_t now_ms) {
  for (const Device& d : devices) {
    if (!valid_list_item(d.id)) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: device id " + quoted(d.id) +
                       " is not valid: it must be non-empty, without commas or spaces");
    }
    if (Status s = storable_domains(d.domains, "device " + d.id); !s) return s;
    if (d.capacity_bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: device " + d.id + ": capacity " + std::to_string(d.capacity_bytes) +
                       " bytes is larger than the largest storable size (2^63-1)");
    }
  }
  return write_status([&devices, now_ms](Connection& db) {
    for (const Device& d : devices) {
      // A health change the inventory reports is a ledger event like any other.
      const std::optional<Device> known = find_device(db, d.id);
      db.statement(kUpsertDevice)
          ->bind(1, d.id)
          .bind(2, to_string(d.type))
          .bind(3, d.model)
          .bind(4, d.capacity_bytes)
          .bind(5, d.zone)
          .bind(6, d.address)
          .bind(7, to_string(d.health))
          .bind(8, domain_list(d.domains))
          .bind(9, d.identity.pci_vendor)
          .bind(10, d.identity.pci_device)
          .bind(11, d.identity.serial)
          .bind(12, d.identity.uuid)
          .bind(13, now_ms)
          .run();
      if (known && known->health != d.health) {
        append_event(
            db, device_event(db, *known, "health", to_string(known->health), to_string(d.health),
                             "", "reported by the fabric inventory", now_ms));
      }
    }
  });
}

Expected<std::vector<Host>> SqliteStore::hosts() {
  return read<std::vector<Host>>([](Connection& db) {
    std::vector<Host> out;
    auto s = db.statement(kSelectHosts);
    while (s->step()) {
      Host h;
      h.node = s->text(0);
      h.fabric_id = s->text(1);
      h.zones = split(s->text_view(2));
      h.gpu_slots = s->uint32(3);
      h.mem_slots = s->uint32(4);
      h.nvme_slots = s->uint32(5);
      h.domains = read_domains(s->text_view(6), "host " + h.node);
      out.push_back(std::move(h));
    }
    return out;
  });
}

Expected<std::vector<Device>> SqliteStore::devices(const DeviceFilter& filter) {
  return read<std::vector<Device>>([&filter](Connection& db) {
    auto s = db.statement(filter.node ? kSelectDevicesOnNode : kSelectDevices);
    std::optional<std::string_view> type, state;
    if (filter.type) type = to_string(*filter.type);
    if (filter.state) state = to_string(*filter.state);
    s->bind(1, type)
        .bind(2, filter.zone)
        .bind(3, filter.node)
        .bind(4, state)
        .bind(5, filter.after.value_or(""));
    // SQLite reads a negative LIMIT as none.
    s->bind(6, filter.limit == 0 ? int64_t{-1} : static_cast<int64_t>(filter.limit));
    std::vector<Device> out;
    while (s->step()) out.push_back(read_device(*s, 0));
    return out;
  });
}

Expected<Device> SqliteStore::device(const std::string& id) {
  auto found = read<std::optional<Device>>([&id](Connection& db) { return find_device(db, id); });
  if (!found.ok()) return found.error();
  if (!*found) return Error(ErrorCode::kNotFound, "no device " + quoted(id));
  return std::move(**found);
}

namespace {

// What create_composition refuses before anything is written.
Status creatable(const Composition& c, const std::vector<std::string>& ids) {
  if (c.state != CompositionState::kRequested && c.state != CompositionState::kComposing) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: a new composition starts in state requested or composing, not " +
                     std::string(to_string(c.state)));
  }
  if (!valid_list_item(c.node)) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: composition node name " + quoted(c.node) +
                     " is not valid: it must be non-empty, without commas or spaces");
  }
  if (c.request.mem_bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: mem_bytes " + std::to_string(c.request.mem_bytes) +
                     " is larger than the largest storable size (2^63-1)");
  }
  std::set<std::string_view> seen;
  for (const auto& id : ids) {
    if (!seen.insert(id).second) {
      return Error(ErrorCode::kInvalidArgument,
                   "store: device " + quoted(id) + " is listed twice for one composition");
    }
  }
  return Status::Ok();
}

// create_composition's writing, on the writer's connection.
Composition insert_composition(Connection& db, const Composition& c,
                               const std::vector<std::string>& ids, int64_t now_ms) {
  const std::string who = "job " + std::to_string(c.job_id) + " on " + c.node;

  Composition created = c;
  created.devices.clear();
  for (const auto& id : ids) {
    auto d = find_device(db, id);
    if (!d)
      refuse(ErrorCode::kNotFound, "creating composition for " + who + ": no device " + quoted(id));
    created.devices.push_back(std::move(*d));
  }
  try {
    db.statement(kInsertComposition)
        ->bind(1, c.job_id)
        .bind(2, c.node)
        .bind(3, c.uid)
        .bind(4, c.user)
        .bind(5, c.account)
        .bind(6, c.workload)
        .bind(7, c.request.gpus)
        .bind(8, c.request.gpu_model)
        .bind(9, c.request.mem_bytes)
        .bind(10, c.request.nvme)
        .bind(11, to_string(c.state))
        .bind(12, now_ms)
        .bind(13, c.window)
        .run();
  } catch (const sqlite::Failure& f) {
    if (f.error().code != ErrorCode::kConflict) throw;
    std::string why = who + " already has a live composition";
    if (auto live = find_live_composition(db, c.job_id, c.node)) {
      why += " (" + std::to_string(live->id) + ", " + std::string(to_string(live->state)) + ")";
    }
    fail(ErrorCode::kConflict, why + "; " + sqlite_reason(f));
  }
  created.id = db.last_insert_rowid();
  created.created_ms = now_ms;
  created.updated_ms = now_ms;
  created.attempts = 0;
  created.last_error.clear();

  for (auto& d : created.devices) {
    try {
      db.statement(kLinkDevice)->bind(1, created.id).bind(2, d.id).run();
    } catch (const sqlite::Failure& f) {
      if (f.error().code != ErrorCode::kConflict) throw;
      std::string why = "device " + d.id + " already belongs to a live composition";
      if (d.composition_id) {
        why += " (" + std::to_string(*d.composition_id) + " on " + d.node + ")";
      }
      fail(ErrorCode::kConflict, why + "; " + sqlite_reason(f));
    }
    d.composition_id = created.id;
    d.node = created.node;
  }

  created.state = CompositionState::kRequested;
  append_event(db, composition_event(created, "requested", "", "requested", "", now_ms));
  if (c.state == CompositionState::kComposing) {
    created.state = CompositionState::kComposing;
    append_event(db, composition_event(created, "composing", "requested", "composing", "", now_ms));
  }
  return created;
}

}  // namespace

void SqliteStore::create_composition_async(const Composition& c,
                                           const std::vector<std::string>& ids, int64_t now_ms,
                                           Answer<Composition> done) {
  if (auto refused = creatable(c, ids); !refused) return done(refused.error());
  write_async<Composition>(
      [c, ids, now_ms](Connection& db) { return insert_composition(db, c, ids, now_ms); },
      std::move(done));
}

void SqliteStore::transition_async(int64_t id, CompositionState from, CompositionState to,
                                   std::string_view detail, int64_t now_ms, bool attempt,
                                   Answer<Composition> done) {
  if (!can_transition(from, to)) {
    return done(Error(ErrorCode::kConflict, "composition " + std::to_string(id) +
                                                ": a composition cannot go from " +
                                                std::string(to_string(from)) + " to " +
                                                std::string(to_string(to)) + "; nothing changed"));
  }
  write_async<Composition>(
      [id, from, to, detail = std::string(detail), now_ms, attempt](Connection& db) {
        auto found = find_composition(db, id);
        if (!found) refuse(ErrorCode::kNotFound, "no composition " + std::to_string(id));
        Composition c = std::move(*found);
        if (c.state != from) {
          refuse(ErrorCode::kConflict, "composition " + std::to_string(id) + " is " +
                                           std::string(to_string(c.state)) + ", not " +
                                           std::string(to_string(from)) + "; nothing changed");
        }
        auto update = db.statement(kUpdateCompositionState);
        update->bind(1, id)
            .bind(2, to_string(to))
            .bind(3, now_ms)
            .bind(4, attempt ? 1 : 0)
            .bind(5, to_string(from))
            .bind(6, detail)
            .run();
        if (db.changes() != 1) {
          refuse(ErrorCode::kConflict, "composition " + std::to_string(id) + " changed meanwhile");
        }
        append_event(db, composition_event(c, to_string(to), to_string(from), to_string(to), detail,
                                           now_ms));
        c.state = to;
        c.updated_ms = now_ms;
        if (attempt) ++c.attempts;
        if (to == CompositionState::kFailed) c.last_error = std::string(detail);
        if (!is_live(to)) {
          for (auto& d : c.devices) {
            d.composition_id.reset();
            d.node.clear();
          }
        }
        return c;
      },
      std::move(done));
}

Expected<Composition> SqliteStore::set_hold(int64_t id, std::string_view cause,
                                            std::string_view actor, int64_t now_ms) {
  return write<Composition>([&](Connection& db) {
    auto found = find_composition(db, id);
    if (!found) refuse(ErrorCode::kNotFound, "no composition " + std::to_string(id));
    Composition c = std::move(*found);
    if (!is_live(c.state)) {
      refuse(ErrorCode::kConflict, "composition " + std::to_string(id) + " is " +
                                       std::string(to_string(c.state)) +
                                       ": only a live composition can be held; nothing changed");
    }
    if (c.hold == cause) return c;
    db.statement(kSetHostHold)->bind(1, id).bind(2, cause).bind(3, now_ms).run();
    Event e = composition_event(c, cause.empty() ? "unhold" : "hold", to_string(c.state),
                                to_string(c.state), cause.empty() ? c.hold : cause, now_ms);
    if (!actor.empty()) e.user = actor;
    append_event(db, e);
    c.hold = std::string(cause);
    c.updated_ms = now_ms;
    return c;
  });
}

Expected<Composition> SqliteStore::composition(int64_t id) {
  auto found =
      read<std::optional<Composition>>([id](Connection& db) { return find_composition(db, id); });
  if (!found.ok()) return found.error();
  if (!*found) return Error(ErrorCode::kNotFound, "no composition " + std::to_string(id));
  return std::move(**found);
}

Expected<std::optional<Composition>> SqliteStore::live_composition(uint32_t job_id,
                                                                   std::string_view node) {
  return read<std::optional<Composition>>(
      [&](Connection& db) { return find_live_composition(db, job_id, node); });
}

Expected<std::vector<Composition>> SqliteStore::compositions(const CompositionFilter& filter) {
  return read<std::vector<Composition>>([&filter](Connection& db) {
    const Sql* sql = &kSelectCompositions;
    if (filter.job_id) {
      sql = &kSelectCompositionsByJob;
    } else if (filter.node) {
      sql = &kSelectCompositionsByNode;
    } else if (filter.live_only) {
      sql = &kSelectLiveCompositions;
    }
    std::optional<std::string_view> state;
    if (filter.state) state = to_string(*filter.state);
    auto s = db.statement(*sql);
    s->bind(1, filter.job_id)
        .bind(2, filter.uid)
        .bind(3, filter.user)
        .bind(4, filter.node)
        .bind(5, state)
        .bind(6, filter.live_only ? 1 : 0)
        .bind(7, limit_value(filter.limit))
        .bind(8, filter.before_id);
    return read_compositions(*s);
  });
}

Status SqliteStore::set_drained(const std::vector<std::string>& device_ids, bool drained,
                                std::string_view reason, std::string_view actor, int64_t now_ms) {
  return write_status([&](Connection& db) {
    for (const std::string& device_id : device_ids) {
      auto found = find_device(db, device_id);
      if (!found) refuse(ErrorCode::kNotFound, "no device " + quoted(device_id));
      const Device before = *found;
      Device after = before;
      after.drained = drained;
      after.drain_reason = drained ? std::string(reason) : std::string();
      if (after.drained == before.drained && after.drain_reason == before.drain_reason) continue;
      db.statement(kSetDrained)
          ->bind(1, device_id)
          .bind(2, drained ? 1 : 0)
          .bind(3, after.drain_reason)
          .run();
      append_event(db,
                   device_event(db, before, drained ? "drain" : "resume", to_string(before.state()),
                                to_string(after.state()), actor, reason, now_ms));
    }
  });
}

Status SqliteStore::add_event(const Event& event) {
  return write_status([&](Connection& db) { append_event(db, event); });
}

Status SqliteStore::set_health(const std::string& device_id, Health health, std::string_view detail,
                               int64_t now_ms) {
  return write_status([&](Connection& db) {
    auto found = find_device(db, device_id);
    if (!found) refuse(ErrorCode::kNotFound, "no device " + quoted(device_id));
    if (found->health == health) return;
    db.statement(kSetHealth)->bind(1, device_id).bind(2, to_string(health)).run();
    append_event(db, device_event(db, *found, "health", to_string(found->health), to_string(health),
                                  "", detail, now_ms));
  });
}

Status SqliteStore::set_holders(const std::vector<std::pair<std::string, std::string>>& holders,
                                std::string_view kind, std::string_view actor,
                                std::string_view detail, int64_t now_ms) {
  if (holders.empty()) return Status::Ok();
  return write_status([&](Connection& db) {
    for (const auto& [id, holder] : holders) {
      auto found = find_device(db, id);
      if (!found) refuse(ErrorCode::kNotFound, "no device " + quoted(id));
      if (found->holder == holder) continue;
      const Device before = *found;
      Device after = before;
      after.holder = holder;
      db.statement(kSetHolder)->bind(1, id).bind(2, holder).run();
      std::string why(detail);
      if (why.empty()) why = holder.empty() ? "the fabric freed it" : "held by " + holder;
      append_event(db, device_event(db, before, kind, to_string(before.state()),
                                    to_string(after.state()), actor, why, now_ms));
    }
  });
}

Expected<std::map<std::string, std::string>> SqliteStore::claims() {
  return read<std::map<std::string, std::string>>([](Connection& db) {
    std::map<std::string, std::string> out;
    auto s = db.statement(kSelectClaims);
    while (s->step()) out.emplace(s->text(0), s->text(1));
    return out;
  });
}

Status SqliteStore::drop_claims(const std::vector<std::string>& device_ids,
                                const std::string& fabric_host) {
  if (device_ids.empty()) return Status::Ok();
  return write_status([&](Connection& db) {
    for (const auto& id : device_ids) {
      db.statement(kDeleteClaim)->bind(1, id).bind(2, fabric_host).run();
    }
  });
}

Expected<std::vector<Event>> SqliteStore::events(const EventFilter& filter) {
  if (filter.since_ms && filter.until_ms && *filter.since_ms > *filter.until_ms) {
    return Error(ErrorCode::kInvalidArgument,
                 "since_ms " + std::to_string(*filter.since_ms) + " is after until_ms " +
                     std::to_string(*filter.until_ms) + "; the range must start before it ends");
  }
  return read<std::vector<Event>>([&filter](Connection& db) {
    const Sql* sql = &kSelectEvents;
    if (filter.composition_id) {
      sql = &kSelectEventsByComposition;
    } else if (filter.job_id) {
      sql = &kSelectEventsByJob;
    }
    auto s = db.statement(*sql);
    int64_t since = filter.since_ms.value_or(std::numeric_limits<int64_t>::min());
    if (filter.after) since = std::max(since, filter.after->ts_ms);
    s->bind(1, since)
        .bind(2, filter.until_ms.value_or(std::numeric_limits<int64_t>::max()))
        .bind(3, filter.job_id)
        .bind(4, filter.composition_id)
        .bind(5, limit_value(filter.limit))
        .bind(6, filter.after ? std::optional<int64_t>(filter.after->ts_ms) : std::nullopt)
        .bind(7, filter.after ? filter.after->id : 0);
    std::vector<Event> out;
    while (s->step()) out.push_back(read_event(*s));
    return out;
  });
}

Expected<PolicyVersion> SqliteStore::add_policy(const PolicyVersion& version, int64_t now_ms) {
  if (version.sha256.size() != 64) {
    return Error(ErrorCode::kInvalidArgument, "store: policy sha256 " + quoted(version.sha256) +
                                                  " is not a SHA-256 in hex (64 characters)");
  }
  return write<PolicyVersion>([&](Connection& db) {
    db.statement(kInsertPolicy)
        ->bind(1, now_ms)
        .bind(2, version.uid)
        .bind(3, version.user)
        .bind(4, version.file)
        .bind(5, version.sha256)
        .bind(6, version.text)
        .run();
    PolicyVersion added = version;
    added.id = db.last_insert_rowid();
    added.applied_ms = now_ms;
    return added;
  });
}

Expected<std::vector<PolicyVersion>> SqliteStore::policy_history(size_t limit) {
  return read<std::vector<PolicyVersion>>([limit](Connection& db) {
    auto s = db.statement(kSelectPolicies);
    s->bind(1, limit_value(limit));
    std::vector<PolicyVersion> out;
    while (s->step()) {
      PolicyVersion p;
      p.id = s->int64(0);
      p.applied_ms = s->int64(1);
      p.uid = s->uint32(2);
      p.user = s->text(3);
      p.file = s->text(4);
      p.sha256 = s->text(5);
      p.text = s->text(6);
      out.push_back(std::move(p));
    }
    return out;
  });
}

Expected<std::optional<PolicyVersion>> SqliteStore::current_policy() {
  auto newest = policy_history(1);
  if (!newest) return newest.error();
  if (newest->empty()) return std::optional<PolicyVersion>{};
  return std::optional<PolicyVersion>{std::move(newest->front())};
}

namespace {

// The events with since_ms <= ts_ms < until_ms in ledger order (ts_ms, id), each exactly once.
// The ids come in that order from the ts index; the rows come in id order from one table walk
// starting at the first id. A row read before its turn (its ts_ms is later than that of a row
// with a higher id) waits in `early` until the ids reach it, and an id below the first one
// (an earlier ts_ms recorded later) is read on its own. Returns false when `visit` stopped.
bool scan_range(Connection& db, int64_t since_ms, int64_t until_ms, Event& e,
                const std::function<bool(const Event&)>& visit) {
  auto ids = db.statement(kScanRangeIds);
  ids->bind(1, since_ms).bind(2, until_ms);
  if (!ids->step()) return true;
  const int64_t first = ids->int64(0);
  auto rows = db.statement(kScanRangeRows);
  rows->bind(1, first).bind(2, since_ms).bind(3, until_ms);
  // Rows waiting for their turn. Their map nodes are recycled through `spare`, so that after
  // the first few a row read early costs no allocation (its strings keep their capacity).
  std::map<int64_t, Event> early;
  std::vector<std::map<int64_t, Event>::node_type> spare;
  bool going = true;
  do {
    const int64_t id = ids->int64(0);
    if (id < first) {
      auto one = db.statement(kSelectEventById);
      one->bind(1, id);
      if (!one->step()) {
        fail(ErrorCode::kInternal,
             "store: event " + std::to_string(id) + " vanished during a report scan");
      }
      read_event_into(*one, e);
      going = visit(e);
      continue;
    }
    if (auto it = early.find(id); it != early.end()) {
      auto node = early.extract(it);
      going = visit(node.mapped());
      spare.push_back(std::move(node));
      continue;
    }
    while (true) {
      if (!rows->step()) {
        fail(ErrorCode::kInternal,
             "store: event " + std::to_string(id) +
                 " is in the ts index of a report's range but not in its rows");
      }
      const int64_t row = rows->int64(0);
      if (row == id) {
        read_event_into(*rows, e);
        going = visit(e);
        break;
      }
      if (spare.empty()) {
        read_event_into(*rows, early[row]);
      } else {
        auto node = std::move(spare.back());
        spare.pop_back();
        node.key() = row;
        read_event_into(*rows, node.mapped());
        early.insert(std::move(node));
      }
    }
  } while (going && ids->step());
  return going;
}

// A ledger range [since_ms, until_ms] must not end before it starts.
Status check_range(int64_t since_ms, int64_t until_ms) {
  if (since_ms > until_ms) {
    return Error(ErrorCode::kInvalidArgument, "since_ms " + std::to_string(since_ms) +
                                                  " is after until_ms " + std::to_string(until_ms) +
                                                  "; the range must start before it ends");
  }
  return Status::Ok();
}

}  // namespace

Status SqliteStore::scan_events(int64_t since_ms, int64_t until_ms,
                                const std::function<bool(const Event&)>& visit) {
  if (Status s = check_range(since_ms, until_ms); !s) return s;
  // One read transaction for both statements, so the range continues exactly where the state
  // before it was read.
  auto done = read<bool>([&](Connection& db) {
    sqlite::Transaction snapshot(db, sqlite::Transaction::Kind::kDeferred);
    bool going = true;
    Event e;
    auto before = db.statement(kScanStateEvents);
    before->bind(1, since_ms);
    while (going && before->step()) {
      read_event_into(*before, e);
      going = visit(e);
    }
    before->reset();
    if (going) going = scan_range(db, since_ms, until_ms, e, visit);
    snapshot.commit();
    return true;
  });
  if (!done) return done.error();
  return Status::Ok();
}

namespace {

// Ledger order of two events by their (ts_ms, id).
using LedgerPlace = std::pair<int64_t, int64_t>;

// For a heap of events with the soonest on top.
bool later_in_ledger(const Event& a, const Event& b) {
  return LedgerPlace{a.ts_ms, a.id} > LedgerPlace{b.ts_ms, b.id};
}

void read_rollup_into(const Statement& s, CompositionRollup& r) {
  r.first.composition_id = s.int64(0);
  r.first.id = s.int64(1);
  r.first.ts_ms = s.int64(2);
  r.first.kind.assign(s.text_view(3));
  r.ready_ms = s.optional_int64(4);
  r.releasing_ms = s.optional_int64(5);
  r.end.composition_id = r.first.composition_id;
  r.end.id = s.int64(6);
  r.end.ts_ms = s.int64(7);
  r.end.kind.assign(s.text_view(8));
  // How it ended and why matter only to a failure.
  if (r.end.kind == "failed") {
    r.end.from_state.assign(s.text_view(9));
    r.end.detail.assign(s.text_view(10));
  } else {
    r.end.from_state.clear();
    r.end.detail.clear();
  }
  r.first.job_id = r.end.job_id = s.uint32(11);
  r.first.uid = r.end.uid = s.uint32(12);
  r.first.user.assign(s.text_view(13));
  r.first.account.assign(s.text_view(14));
  r.first.workload.assign(s.text_view(15));
  r.first.window.assign(s.text_view(16));
  split_into(s.text_view(17), r.first.devices);
  r.events = s.uint64(18);
  r.other_events = s.uint64(19);
}

// The events of composition `id` that scan_events streams for [since_ms, until_ms), added to
// `pending` (a heap, soonest on top).
void read_composition_events(Connection& db, int64_t id, int64_t since_ms, int64_t until_ms,
                             std::vector<Event>& pending) {
  bool before = false;
  {
    auto live = db.statement(kWalkLiveAtStart);
    live->bind(1, id).bind(2, since_ms);
    before = live->step() && live->int64(0) != 0;
  }
  auto s = db.statement(kWalkCompositionEvents);
  s->bind(1, id).bind(2, until_ms).bind(3, since_ms).bind(4, before ? 1 : 0);
  while (s->step()) {
    pending.push_back(read_event(*s));
    std::push_heap(pending.begin(), pending.end(), later_in_ledger);
  }
}

}  // namespace

// The rollup walk on a thread of its own (docs/BENCHMARKS.md, "Reports"): reading the rows
// and what the caller does with them (building a report) take about as long as each other, so
// the walk reads ahead while the caller works. Its steps go over in batches, a few of which go
// round between the two threads: the walk fills one while the caller empties another, and
// waits while all are full. A batch holds its events; the rollup rows it names stay in the
// walk's slots, which the walk reuses only once the batch naming them for the last time has
// come back.
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

  WalkSteps() {
    for (size_t i = 0; i < kBatches; ++i) empty_.push_back(std::make_unique<Batch>());
  }

  // The walk's side. An empty batch to fill, whose freed slots the walk then reuses; throws
  // once the caller has stopped taking batches.
  std::unique_ptr<Batch> take_empty() {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [this] { return stopped_ || !empty_.empty(); });
    if (stopped_) fail(ErrorCode::kInternal, "the report stopped reading the walk");
    auto batch = std::move(empty_.front());
    empty_.pop_front();
    return batch;
  }
  void hand_over(std::unique_ptr<Batch> batch) {
    {
      std::lock_guard lock(mu_);
      full_.push_back(std::move(batch));
    }
    changed_.notify_all();
  }
  // The walk is over, with `status`: the caller takes the batches handed over before it if it
  // succeeded, none if it failed.
  void finish(Status status) {
    {
      std::lock_guard lock(mu_);
      status_ = std::move(status);
      finished_ = true;
    }
    changed_.notify_all();
  }

  // The caller's side. The next full batch, or nullptr when there is none to take.
  std::unique_ptr<Batch> take_full() {
    std::unique_lock lock(mu_);
    changed_.wait(lock, [this] { return finished_ || !full_.empty(); });
    if (full_.empty() || !status_) return nullptr;
    auto batch = std::move(full_.front());
    full_.pop_front();
    return batch;
  }
  void give_back(std::unique_ptr<Batch> batch) {
    batch->steps.clear();
    batch->events_used = 0;
    {
      std::lock_guard lock(mu_);
      empty_.push_back(std::move(batch));
    }
    changed_.notify_all();
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    changed_.notify_all();
  }
  // Once take_full() has returned nullptr.
  Status status() {
    std::lock_guard lock(mu_);
    return status_;
  }

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
  CompositionRollup& take_slot() {
    if (spare_.empty()) return steps_.slots.emplace_back();
    CompositionRollup& slot = *spare_.back();
    spare_.pop_back();
    return slot;
  }
  // The slot of `row` may be reused once the caller has seen the steps written so far.
  void free_slot(CompositionRollup& row) { batch_->freed.push_back(&row); }

  void unattached(uint64_t n) { add({.kind = WalkSteps::Step::Kind::kUnattached, .n = n}); }
  // The event to hand over next, to be written into (its strings keep their capacity).
  Event& event() {
    make_room();
    if (batch_->events_used == batch_->events.size()) batch_->events.emplace_back();
    const size_t at = batch_->events_used++;
    batch_->steps.push_back({.kind = WalkSteps::Step::Kind::kEvent, .n = at});
    return batch_->events[at];
  }
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
  void make_room() {
    if (batch_->steps.size() < WalkSteps::kBatchSteps) return;
    steps_.hand_over(std::move(batch_));
    batch_ = steps_.take_empty();
    spare_.insert(spare_.end(), batch_->freed.begin(), batch_->freed.end());
    batch_->freed.clear();
  }
  void add(const WalkSteps::Step& step) {
    make_room();
    batch_->steps.push_back(step);
  }

  WalkSteps& steps_;
  std::unique_ptr<WalkSteps::Batch> batch_;
  std::vector<CompositionRollup*> spare_;
};

// The walk itself, on the walk's thread: writes its steps in ledger order.
Status SqliteStore::walk_rollup(int64_t since_ms, int64_t until_ms, WalkSteps& steps) {
  auto done = read<bool>([&](Connection& db) {
    StepWriter out(steps);
    // One read transaction: every statement sees the same ledger.
    sqlite::Transaction snapshot(db, sqlite::Transaction::Kind::kDeferred);
    {
      auto count = db.statement(kWalkUnattached);
      count->bind(1, since_ms).bind(2, until_ms);
      out.unattached(count->step() ? count->uint64(0) : 0);
    }
    // Four streams merged in ledger order: device events, events read one by one (`pending`,
    // a heap), compositions in the order they began (`rows`), and those begun and not yet
    // ended in the order they end (`open`, a heap). No two share a place: each stands at one
    // event's.
    std::vector<Event> pending;
    {
      std::vector<int64_t> alone;
      {
        auto ids = db.statement(kWalkReadAlone);
        while (ids->step()) alone.push_back(ids->int64(0));
      }
      for (int64_t id : alone) read_composition_events(db, id, since_ms, until_ms, pending);
    }
    int64_t longest = 0;
    {
      auto s = db.statement(kWalkLongest);
      if (s->step() && !s->is_null(0)) longest = std::max<int64_t>(0, s->int64(0));
    }
    auto devices = db.statement(kWalkDeviceEvents);
    devices->bind(1, until_ms);
    auto rows = db.statement(kWalkRollup);
    int64_t earliest = 0;
    if (__builtin_sub_overflow(since_ms, longest, &earliest)) {
      earliest = std::numeric_limits<int64_t>::min();
    }
    rows->bind(1, earliest).bind(2, until_ms).bind(3, since_ms);
    Event device;
    bool device_ok = devices->step();
    if (device_ok) read_event_into(*devices, device);
    // Rows are read into the writer's slots, never copied; `open` orders the begun ones by
    // where they end.
    using Ending = std::pair<LedgerPlace, CompositionRollup*>;
    std::priority_queue<Ending, std::vector<Ending>, std::greater<>> open;
    CompositionRollup* row = &out.take_slot();
    bool row_ok = rows->step();
    if (row_ok) read_rollup_into(*rows, *row);
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
        device_ok = devices->step();
        if (device_ok) read_event_into(*devices, device);
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
          read_composition_events(db, *r.first.composition_id, since_ms, until_ms, pending);
        } else {
          out.began(r);
          if (r.end.id != r.first.id) {
            open.emplace(LedgerPlace{r.end.ts_ms, r.end.id}, &r);
          } else {
            out.free_slot(r);
          }
          row = &out.take_slot();
        }
        row_ok = rows->step();
        if (row_ok) read_rollup_into(*rows, *row);
      }
    }
    snapshot.commit();
    out.flush();
    return true;
  });
  if (!done) return done.error();
  return Status::Ok();
}

Status SqliteStore::walk_report(int64_t since_ms, int64_t until_ms, const ReportWalk& walk) {
  if (Status s = check_range(since_ms, until_ms); !s) return s;
  WalkSteps steps;
  std::thread walker;
  try {
    walker = std::thread([&] { steps.finish(walk_rollup(since_ms, until_ms, steps)); });
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

// --- Opening --------------------------------------------------------------------------------

std::unique_ptr<Connection> open_writer(const std::string& path, const StoreOptions& options) {
  auto db = Connection::open(path, Connection::Mode::kReadWrite, options.busy_timeout_ms);
  const std::string mode = db->pragma("switching to WAL", "journal_mode = WAL");
  if (mode != "wal") {
    fail(ErrorCode::kUnavailable,
         path + ": the database could not switch to WAL journaling (it reports '" + mode + "')");
  }
  db->pragma("enabling foreign keys", "foreign_keys = ON");
  if (db->pragma("checking foreign keys", "foreign_keys") != "1") {
    fail(ErrorCode::kUnavailable, path + ": this SQLite cannot enforce foreign keys");
  }
  db->pragma("setting synchronous",
             options.durable ? "synchronous = FULL" : "synchronous = NORMAL");
  db->pragma("setting busy timeout", "busy_timeout = " + std::to_string(options.busy_timeout_ms));
  if (options.writer_statement_timer) {
    db->time_statements([timer = options.writer_statement_timer](const Sql& sql, int64_t ns) {
      timer(sql.what, ns);
    });
  }
  return db;
}

}  // namespace

Expected<std::unique_ptr<Store>> Store::open(const std::string& path, const StoreOptions& options) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) {
    return Error(ErrorCode::kInvalidArgument,
                 "store: database path " + quoted(path) +
                     " is not valid: give the path of a file (readers and the writer open it "
                     "separately, so an in-memory database or URI cannot work)");
  }
  if (options.busy_timeout_ms < 0) {
    return Error(ErrorCode::kInvalidArgument, "store: busy_timeout_ms " +
                                                  std::to_string(options.busy_timeout_ms) +
                                                  " is negative; give 0 or more milliseconds");
  }
  try {
    auto writer = open_writer(path, options);
    const int version = migrate(*writer, SystemClock::instance().now_ms());
    // Each call of a batch runs in its own savepoint (GroupWriter), whose statement journal
    // SQLite otherwise spills past 64 KiB into a new file under /var/tmp per batch: a batch of
    // a few dozen calls created, wrote and removed one, as many writes as the WAL itself. In
    // memory it is a copy; durability is the WAL's and does not change. Set after the
    // migrations, whose index builds may sort a whole ledger and should spill to disk.
    writer->pragma("keeping statement journals in memory", "temp_store = MEMORY");
    // Fail now, not at the first read, if the file cannot be read by a second connection.
    {
      auto probe = Connection::open(path, Connection::Mode::kReadOnly, options.busy_timeout_ms);
      probe->pragma("checking read access", "user_version");
    }
    log::info("store: opened", {{"path", path},
                                {"schema_version", std::to_string(version)},
                                {"durable", options.durable ? "true" : "false"}});
    return std::unique_ptr<Store>(
        std::make_unique<SqliteStore>(path, options, std::move(writer), version));
  } catch (const sqlite::Failure& f) {
    return f.error();
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal, "store: opening " + path + ": " + e.what());
  }
}

}  // namespace composer::db
