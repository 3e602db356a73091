// The SQLite store's policy history (schema migration 2): versions appended, never changed.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "records.h"
#include "rows.h"
#include "sqlite_statements.h"
#include "sqlite_store.h"

namespace composer::db {

using sqlite::Connection;

Expected<PolicyVersion> SqliteStore::add_policy(const PolicyVersion& version, int64_t now_ms) {
  if (Status s = storable(version); !s) return s.error();
  return write<PolicyVersion>([&](Connection& db) {
    db.statement(sqlite::kInsertPolicy)
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
    auto s = db.statement(sqlite::kSelectPolicies);
    s->bind(1, sqlite::limit_value(limit));
    std::vector<PolicyVersion> out;
    while (s->step()) out.push_back(read_policy(*s));
    return out;
  });
}

Expected<std::optional<PolicyVersion>> SqliteStore::current_policy() {
  auto newest = policy_history(1);
  if (!newest) return newest.error();
  if (newest->empty()) return std::optional<PolicyVersion>{};
  return std::optional<PolicyVersion>{std::move(newest->front())};
}

}  // namespace composer::db
