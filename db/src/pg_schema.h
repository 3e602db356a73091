// The PostgreSQL store's schema, created and upgraded by numbered migrations as SQLite's is
// (schema.h). The same invariants live in the database itself: a device in at most one live
// composition and a (job, node) with at most one (partial unique indexes), compositions only
// along the state machine, released and failed ones freeing their devices, a claim made with
// each device link, the ledger and the policy history append-only, and the rollup of ended
// compositions kept by a trigger (triggers).
#pragma once

#include <cstdint>

#include "composer/db/pg.h"

namespace composer::db::pg {

// The PostgreSQL schema version this build creates and understands.
int latest_schema_version();

// Applies every migration newer than the database's, each in its own transaction under an
// advisory lock (several composerd may start at once), and records it in schema_migrations.
// Refuses (kUnavailable) a database written by a newer build. Returns the version after.
int migrate(Connection& connection, int64_t now_ms);

}  // namespace composer::db::pg
