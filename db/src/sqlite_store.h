// The Store on SQLite: one group-committing writer connection, a pool of read-only ones.
// Its methods live by concern: sqlite_inventory.cc (hosts, devices, holders, claims),
// sqlite_compositions.cc, sqlite_ledger.cc (events and the report walks), sqlite_policy.cc;
// opening it here and in sqlite_store.cc.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/db/group_writer.h"
#include "composer/db/sqlite.h"
#include "composer/db/store.h"
#include "reader_pool.h"

namespace composer::db {

class WalkSteps;

class SqliteStore final : public Store {
 public:
  SqliteStore(const std::string& path, const StoreOptions& options,
              std::unique_ptr<sqlite::Connection> writer, int version)
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
    } catch (const Failure& f) {
      return f.error();
    } catch (const std::exception& e) {
      return Error(ErrorCode::kInternal, std::string("store: ") + e.what());
    }
  }

  // Runs `body` in the writer's next batch; `done` is handed its result once it is committed
  // (Store::Answer: on the writer's thread).
  template <typename T>
  void write_async(std::function<T(sqlite::Connection&)> body, Answer<T> done) {
    auto result = std::make_shared<std::optional<T>>();
    writer_->submit(
        [body = std::move(body), result](sqlite::Connection& db) { *result = body(db); },
        [result, done = std::move(done)](const Status& status) {
          if (!status.ok()) return done(status.error());
          done(std::move(**result));
        });
  }
  // The same, waiting until it is committed.
  template <typename T>
  Expected<T> write(std::function<T(sqlite::Connection&)> body) {
    return wait<T>([&](Answer<T> done) { write_async<T>(std::move(body), std::move(done)); });
  }
  Status write_status(std::function<void(sqlite::Connection&)> body) {
    return writer_->run(std::move(body));
  }

  const int version_;
  ReaderPool readers_;
  std::unique_ptr<GroupWriter> writer_;
};

// Queries the readers and the writer share, on any connection of the database.
namespace sqlite {

std::optional<Device> find_device(Connection& db, std::string_view id);
std::optional<Composition> find_composition(Connection& db, int64_t id);
std::optional<Composition> find_live_composition(Connection& db, uint32_t job_id,
                                                 std::string_view node);
void append_event(Connection& db, const Event& e);
// An event about device `d` (records.h, device_event), naming the composition holding it.
Event device_event(Connection& db, const Device& d, std::string_view kind, std::string_view from,
                   std::string_view to, std::string_view user, std::string_view detail,
                   int64_t now_ms);
// A LIMIT's value: SQLite reads a negative one as none, which a limit of 0 means.
int64_t limit_value(size_t limit);

}  // namespace sqlite
}  // namespace composer::db
