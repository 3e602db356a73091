// The database schema, created and upgraded by numbered migrations.
#pragma once

#include "composer/db/sqlite.h"

namespace composer::db {

// The schema version this build creates and understands.
int latest_schema_version();

// Applies every migration newer than the file's PRAGMA user_version, each in its own
// BEGIN IMMEDIATE transaction, and records it in schema_migrations. Refuses (kUnavailable) a
// file written by a newer build. Returns the version the file is at afterwards.
int migrate(sqlite::Connection& connection, int64_t now_ms);

// PRAGMA user_version of the file.
int schema_version(sqlite::Connection& connection);

}  // namespace composer::db
