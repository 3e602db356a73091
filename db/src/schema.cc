#include "schema.h"

#include <string>

#include "sql_terms.h"

namespace composer::db {
namespace {

// Migration 1: everything. The invariants that matter for correctness live in the schema
// itself, not only in the code that writes it:
// - a device sits in at most one live composition (partial unique index on the live links);
// - a (job, node) has at most one live composition (partial unique index);
// - a composition only moves along the state machine, and entering released or failed frees
//   its devices (triggers);
// - the event ledger is append-only (triggers refuse UPDATE and DELETE).
constexpr sqlite::Sql kMigration1{"creating the schema (migration 1)", R"sql(
CREATE TABLE schema_migrations (
  version     INTEGER PRIMARY KEY,
  description TEXT NOT NULL,
  applied_ms  INTEGER NOT NULL
);

CREATE TABLE hosts (
  node       TEXT PRIMARY KEY NOT NULL CHECK (node <> ''),
  fabric_id  TEXT NOT NULL,
  zones      TEXT NOT NULL,  -- comma-separated, nearest first
  gpu_slots  INTEGER NOT NULL CHECK (gpu_slots >= 0),
  mem_slots  INTEGER NOT NULL CHECK (mem_slots >= 0),
  nvme_slots INTEGER NOT NULL CHECK (nvme_slots >= 0)
);

CREATE TABLE devices (
  id             TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  type           TEXT NOT NULL CHECK (type IN ('gpu', 'mem', 'nvme')),
  model          TEXT NOT NULL,
  capacity_bytes INTEGER NOT NULL CHECK (capacity_bytes >= 0),
  zone           TEXT NOT NULL,
  address        TEXT NOT NULL,
  health         TEXT NOT NULL CHECK (health IN ('ok', 'warning', 'critical')),
  drained        INTEGER NOT NULL DEFAULT 0 CHECK (drained IN (0, 1)),
  drain_reason   TEXT NOT NULL DEFAULT ''
);

CREATE TABLE compositions (
  id         INTEGER PRIMARY KEY,
  job_id     INTEGER NOT NULL CHECK (job_id >= 0),
  node       TEXT NOT NULL CHECK (node <> ''),
  uid        INTEGER NOT NULL CHECK (uid >= 0),
  user       TEXT NOT NULL,
  account    TEXT NOT NULL,
  workload   TEXT NOT NULL,
  gpus       INTEGER NOT NULL CHECK (gpus >= 0),
  gpu_model  TEXT NOT NULL,
  mem_bytes  INTEGER NOT NULL CHECK (mem_bytes >= 0),
  nvme       INTEGER NOT NULL CHECK (nvme >= 0),
  state      TEXT NOT NULL CHECK (state IN ('requested', 'composing', 'ready', 'releasing',
                                            'released', 'failed')),
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  attempts   INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  last_error TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX compositions_one_live_per_job_node ON compositions (job_id, node)
  WHERE state IN ('requested', 'composing', 'ready', 'releasing');
CREATE INDEX compositions_by_job ON compositions (job_id);
CREATE INDEX compositions_by_node ON compositions (node);

-- live = 1 while the composition holds the device; entering released/failed clears it.
CREATE TABLE composition_devices (
  composition_id INTEGER NOT NULL REFERENCES compositions (id),
  device_id      TEXT NOT NULL REFERENCES devices (id),
  live           INTEGER NOT NULL DEFAULT 1 CHECK (live IN (0, 1)),
  released_ms    INTEGER,
  PRIMARY KEY (composition_id, device_id)
);
CREATE UNIQUE INDEX composition_devices_one_live_owner ON composition_devices (device_id)
  WHERE live = 1;

CREATE TRIGGER composition_devices_owner_must_be_live
BEFORE INSERT ON composition_devices
WHEN NEW.live = 1 AND (SELECT state FROM compositions WHERE id = NEW.composition_id)
                      NOT IN ('requested', 'composing', 'ready', 'releasing')
BEGIN
  SELECT RAISE(ABORT, 'a device can only be given to a live composition');
END;

CREATE TRIGGER composition_devices_stay_released
BEFORE UPDATE OF live ON composition_devices
WHEN OLD.live = 0 AND NEW.live = 1
BEGIN
  SELECT RAISE(ABORT, 'a released device link cannot become live again');
END;

CREATE TRIGGER compositions_follow_state_machine
BEFORE UPDATE OF state ON compositions
WHEN NEW.state <> OLD.state AND NOT (
     (OLD.state = 'requested' AND NEW.state IN ('composing', 'failed'))
  OR (OLD.state = 'composing' AND NEW.state IN ('ready', 'failed'))
  OR (OLD.state = 'ready'     AND NEW.state IN ('releasing', 'failed'))
  OR (OLD.state = 'releasing' AND NEW.state IN ('released', 'failed')))
BEGIN
  SELECT RAISE(ABORT, 'illegal composition state transition');
END;

CREATE TRIGGER compositions_free_devices_when_done
AFTER UPDATE OF state ON compositions
WHEN NEW.state IN ('released', 'failed') AND OLD.state NOT IN ('released', 'failed')
BEGIN
  UPDATE composition_devices SET live = 0, released_ms = NEW.updated_ms
   WHERE composition_id = NEW.id AND live = 1;
END;

CREATE TABLE events (
  id             INTEGER PRIMARY KEY,
  ts_ms          INTEGER NOT NULL,
  kind           TEXT NOT NULL CHECK (kind <> ''),
  composition_id INTEGER REFERENCES compositions (id),
  job_id         INTEGER NOT NULL DEFAULT 0,
  node           TEXT NOT NULL DEFAULT '',
  uid            INTEGER NOT NULL DEFAULT 0,
  user           TEXT NOT NULL DEFAULT '',
  account        TEXT NOT NULL DEFAULT '',
  workload       TEXT NOT NULL DEFAULT '',
  from_state     TEXT NOT NULL DEFAULT '',
  to_state       TEXT NOT NULL DEFAULT '',
  devices        TEXT NOT NULL DEFAULT '',  -- comma-separated device ids
  detail         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_by_ts ON events (ts_ms);
CREATE INDEX events_by_job ON events (job_id, ts_ms);
CREATE INDEX events_by_composition ON events (composition_id);

CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
BEGIN
  SELECT RAISE(ABORT, 'events are append-only: a recorded event cannot be changed');
END;
CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
BEGIN
  SELECT RAISE(ABORT, 'events are append-only: a recorded event cannot be deleted');
END;
)sql"};

// Migration 2: the time-of-day policy's history, and the policy window of every composition
// and event (the class is already in `workload`). Policy versions are append-only like the
// ledger: history must show what was in force when.
constexpr sqlite::Sql kMigration2{"policy history and policy windows (migration 2)", R"sql(
CREATE TABLE policies (
  id         INTEGER PRIMARY KEY,
  applied_ms INTEGER NOT NULL,
  uid        INTEGER NOT NULL CHECK (uid >= 0),
  user       TEXT NOT NULL,
  file       TEXT NOT NULL,
  sha256     TEXT NOT NULL CHECK (length(sha256) = 64),
  text       TEXT NOT NULL
);
CREATE TRIGGER policies_refuse_update BEFORE UPDATE ON policies
BEGIN
  SELECT RAISE(ABORT, 'policy history is append-only: an applied policy cannot be changed');
END;
CREATE TRIGGER policies_refuse_delete BEFORE DELETE ON policies
BEGIN
  SELECT RAISE(ABORT, 'policy history is append-only: an applied policy cannot be deleted');
END;

ALTER TABLE compositions ADD COLUMN policy_window TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN policy_window TEXT NOT NULL DEFAULT '';
)sql"};

// Migration 3: the device events (drain, resume, health) by time, so that a report over a late
// range finds the state of every device at its start without passing over all earlier events.
constexpr sqlite::Sql kMigration3{"device events by time (migration 3)", R"sql(
CREATE INDEX events_device_by_ts ON events (ts_ms) WHERE kind IN ('drain', 'resume', 'health');
)sql"};

// Migration 4: what composerd itself attached. A fabric always holds devices composed by
// others (other hosts, other tools, a previous installation); only a claim proves that
// composerd attached a device to a host, so only a claimed device that no live composition
// owns is an orphan the reconciler may take back. A claim is made with the composition's
// device link (before the fabric is asked) and dropped when the composition is released (the
// detach succeeded) or when composerd sees the fabric free the device. `holder` names who holds
// a device outside composerd (foreign): such a device is never allocated nor detached.
// Claims are made for what older versions composed and may still hold: live compositions,
// and devices drained because a rollback's detach failed.
constexpr sqlite::Sql kMigration4{"claims on attached devices, foreign holders (migration 4)",
                                  R"sql(
ALTER TABLE devices ADD COLUMN holder TEXT NOT NULL DEFAULT '';

CREATE TABLE fabric_claims (
  device_id   TEXT PRIMARY KEY NOT NULL REFERENCES devices (id),
  fabric_host TEXT NOT NULL CHECK (fabric_host <> ''),
  since_ms    INTEGER NOT NULL
);

CREATE TRIGGER composition_devices_claim AFTER INSERT ON composition_devices
WHEN NEW.live = 1
BEGIN
  INSERT OR REPLACE INTO fabric_claims (device_id, fabric_host, since_ms)
  SELECT NEW.device_id, COALESCE(NULLIF(h.fabric_id, ''), c.node), c.created_ms
  FROM compositions c LEFT JOIN hosts h ON h.node = c.node WHERE c.id = NEW.composition_id;
END;

CREATE TRIGGER compositions_released_unclaim AFTER UPDATE OF state ON compositions
WHEN NEW.state = 'released'
BEGIN
  DELETE FROM fabric_claims WHERE device_id IN
    (SELECT device_id FROM composition_devices WHERE composition_id = NEW.id);
END;

INSERT OR REPLACE INTO fabric_claims (device_id, fabric_host, since_ms)
SELECT cd.device_id, COALESCE(NULLIF(h.fabric_id, ''), c.node), c.updated_ms
FROM composition_devices cd JOIN compositions c ON c.id = cd.composition_id
LEFT JOIN hosts h ON h.node = c.node
WHERE cd.live = 1;

INSERT OR IGNORE INTO fabric_claims (device_id, fabric_host, since_ms)
SELECT d.id, COALESCE(NULLIF(h.fabric_id, ''), c.node), c.updated_ms
FROM devices d
JOIN compositions c ON c.id = (SELECT MAX(composition_id) FROM composition_devices
                               WHERE device_id = d.id)
LEFT JOIN hosts h ON h.node = c.node
WHERE d.drained = 1 AND d.drain_reason LIKE 'detach failed%';
)sql"};

// Migration 5: what the host can recognise a device by (model.h, DeviceIdentity), as the
// fabric's inventory reports it; empty until the next inventory of an upgraded composerd.
constexpr sqlite::Sql kMigration5{"device identities (migration 5)", R"sql(
ALTER TABLE devices ADD COLUMN pci_vendor TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN pci_device TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN serial TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN uuid TEXT NOT NULL DEFAULT '';
)sql"};

// Migration 6: the failure domains a device sits in, "level:name" comma-separated in the order the
// fabric or composer.conf gives them; '' for none. Facts of the inventory, like the zone.
constexpr sqlite::Sql kMigration6{"failure domains of devices (migration 6)", R"sql(
ALTER TABLE devices ADD COLUMN domains TEXT NOT NULL DEFAULT '';
)sql"};

// Migration 7: when composerd first knew each device, so that a report counts a device as
// capacity only from then (not for time before composerd existed or before the device joined
// the pool). The store sets it when it first inserts a device and never changes it.
constexpr sqlite::Sql kMigration7{"when each device was first known (migration 7)", R"sql(
ALTER TABLE devices ADD COLUMN known_since_ms INTEGER NOT NULL DEFAULT 0;
)sql"};
// Earlier files do not say when each device came, only when the ledger began. Every device
// already in the file gets that time: the earliest of the database's creation (migration 1,
// applied when composerd first opened the file, just before its first inventory), the ledger's
// first event (every composition's first event included) and, should neither exist, this
// migration (?1). Reports then stop crediting the time before composerd existed; a device that
// joined later under an older version counts from the ledger's start, as the file cannot say
// better. It is never later than an event naming the device: no recorded use predates it.
constexpr sqlite::Sql kMigration7Fill{
    "dating the devices already known (migration 7)",
    "UPDATE devices SET known_since_ms = (SELECT MIN(t) FROM ("
    "SELECT applied_ms AS t FROM schema_migrations WHERE version = 1"
    " UNION ALL SELECT MIN(ts_ms) FROM events UNION ALL SELECT ?1))"};

// Migration 8: the failure domains a host sits in (its switch, its power feed), as devices'
// (migration 6); '' for none.
constexpr sqlite::Sql kMigration8{"failure domains of hosts (migration 8)", R"sql(
ALTER TABLE hosts ADD COLUMN domains TEXT NOT NULL DEFAULT '';
)sql"};

// Migration 9: the rollup of ended compositions, so that a report over a long range reads one
// row per composition instead of its every event. A row is written by a trigger when the event
// that ends a composition ("released" or "failed") is appended, however it is appended (the
// store, or plain SQL as report_bench does), and says what a report needs: where in ledger
// order (ts_ms, id) the composition began (its first state event, whose devices and owner it
// held) and ended, when it was ready and began releasing, how it ended and why, and how many
// events it stands for (other_events: those of other kinds, failure reactions, which a report
// reads and leaves out). Device events (drain, resume, health) are never part of a row: a
// report reads them all.
//
// `whole` is 0 where the row does not tell the whole composition, and a report then reads the
// composition's events instead: a second end event, an event appended after the end or dated
// after it, more than one ready event, events under more than one uid, an event of another kind
// before the first state event, or a compositions row that disagrees (not ended at the end
// event's time, or created after the first event: the report reads what came before its range
// through that row). The ledger stays append-only; only `whole` of a row ever changes.
//
// The row the end event `e` yields, from `f`, the composition's first state event in ledger
// order (the earliest, the first appended of those), and `x`, every event of the composition
// but device events. The trigger picks `e` as the event just appended; the migration's fill,
// for each composition, its first end event. (Nothing here sorts or materialises: in the
// trigger that would cost a temporary file on every end event.)
// Kinds are compared one by one, not with IN (sql_terms.h).
constexpr Text kRollupColumns(
    "composition_id, first_id, first_ts, first_kind, ready_ts, releasing_ts, end_id, end_ts, "
    "end_kind, end_from, end_detail, job_id, node, uid, user, account, workload, policy_window, "
    "devices, events, other_events, whole");
constexpr auto kRollupSelect = joined<
    "SELECT e.composition_id, f.id, f.ts_ms, f.kind,"
    " MAX(CASE WHEN x.kind = 'ready' THEN x.ts_ms END),"
    " MAX(CASE WHEN x.kind = 'releasing' THEN x.ts_ms END),"
    " e.id, e.ts_ms, e.kind, e.from_state, e.detail, f.job_id, f.node, f.uid, f.user, f.account,"
    " f.workload, f.policy_window, f.devices, COUNT(*), SUM(NOT ",
    is_state_kind<"x.kind">, "), SUM(x.kind = 'ready') <= 1 AND SUM(", is_end_kind<"x.kind">,
    ") = 1"
    " AND MIN(x.uid) = MAX(x.uid) AND MAX(x.ts_ms) <= e.ts_ms AND MAX(x.id) = e.id"
    " AND NOT EXISTS (SELECT 1 FROM events o WHERE o.composition_id = e.composition_id"
    " AND NOT ",
    is_state_kind<"o.kind">, " AND NOT ", is_device_kind<"o.kind">,
    " AND (o.ts_ms < f.ts_ms OR (o.ts_ms = f.ts_ms AND o.id < f.id)))"
    " AND EXISTS (SELECT 1 FROM compositions c WHERE c.id = e.composition_id AND ",
    is_end_kind<"c.state">,
    " AND c.updated_ms = e.ts_ms AND c.created_ms <= f.ts_ms)"
    " FROM events e"
    " JOIN events f ON f.id = (SELECT MIN(id) FROM events WHERE composition_id = e.composition_id"
    " AND ",
    is_state_kind<"kind">,
    " AND ts_ms = (SELECT MIN(ts_ms) FROM events WHERE composition_id = e.composition_id AND ",
    is_state_kind<"kind">,
    "))"
    " JOIN events x ON x.composition_id = e.composition_id AND NOT ",
    is_device_kind<"x.kind">>;
constexpr Sql kMigration9 = statement<
    "the rollup of ended compositions (migration 9)",
    // Stored in the order compositions began (the key), so that a report reads its rows in
    // one pass over the table, not one lookup per row from an index.
    "CREATE TABLE composition_rollup ("
    " composition_id INTEGER NOT NULL UNIQUE,"
    " first_id INTEGER NOT NULL, first_ts INTEGER NOT NULL, first_kind TEXT NOT NULL,"
    " ready_ts INTEGER, releasing_ts INTEGER,"
    " end_id INTEGER NOT NULL, end_ts INTEGER NOT NULL,"
    " end_kind TEXT NOT NULL CHECK (end_kind IN ('released', 'failed')),"
    " end_from TEXT NOT NULL, end_detail TEXT NOT NULL,"
    " job_id INTEGER NOT NULL, node TEXT NOT NULL, uid INTEGER NOT NULL, user TEXT NOT NULL,"
    " account TEXT NOT NULL, workload TEXT NOT NULL, policy_window TEXT NOT NULL,"
    " devices TEXT NOT NULL,"
    " events INTEGER NOT NULL, other_events INTEGER NOT NULL,"
    " whole INTEGER NOT NULL CHECK (whole IN (0, 1)),"
    " PRIMARY KEY (first_ts, first_id)) WITHOUT ROWID;"
    // The longest composition bounds how far before a range's start a composition still
    // inside it can have begun; the rows that are not whole are those whose events a report
    // reads.
    "CREATE INDEX composition_rollup_by_length ON composition_rollup (end_ts - first_ts);"
    "CREATE INDEX composition_rollup_not_whole ON composition_rollup (composition_id)"
    " WHERE whole = 0;"
    // Events of no composition and no device (refused composes, foreign holders): a report
    // counts them in its range without reading them.
    "CREATE INDEX events_unattached_by_ts ON events (ts_ms)"
    " WHERE composition_id IS NULL AND NOT ",
    is_device_kind<"kind">,
    ";"
    "CREATE TRIGGER events_roll_up_ended_composition AFTER INSERT ON events"
    " WHEN NEW.composition_id IS NOT NULL AND ",
    is_end_kind<"NEW.kind">, " BEGIN INSERT INTO composition_rollup (", kRollupColumns, ") ",
    kRollupSelect,
    " WHERE e.id = NEW.id ON CONFLICT (composition_id) DO UPDATE SET whole = 0; END;"
    "CREATE TRIGGER events_roll_up_late_event AFTER INSERT ON events"
    " WHEN NEW.composition_id IS NOT NULL"
    " AND NOT ",
    is_end_kind<"NEW.kind">, " AND NOT ", is_device_kind<"NEW.kind">,
    " BEGIN UPDATE composition_rollup SET whole = 0"
    " WHERE composition_id = NEW.composition_id AND whole = 1; END;"
    // The ledger so far: one row per composition with an end event, from its first one.
    "INSERT INTO composition_rollup (",
    kRollupColumns, ") ", kRollupSelect, " WHERE e.composition_id IS NOT NULL AND ",
    is_end_kind<"e.kind">,
    " AND e.id = (SELECT MIN(id) FROM events WHERE composition_id = e.composition_id"
    " AND ",
    is_end_kind<"kind">, ") GROUP BY e.id;">;

// Migration 10: a node's hold on a composition whose devices a process on the host still holds
// after the job ended (the node's epilog found them in use). '' for none; while set, nothing
// releases the composition until the node (or an admin) clears the hold.
constexpr sqlite::Sql kMigration10{"host holds on compositions (migration 10)", R"sql(
ALTER TABLE compositions ADD COLUMN host_hold TEXT NOT NULL DEFAULT '';
)sql"};

// Migration 11: the live-composition index, the device-event index and the live-owner
// trigger test their lists one by one (sql_terms.h), as migration 9 does: with `IN (...)` of
// more than two constants SQLite built a temporary b-tree for every composition written (the
// index's WHERE, before and after each state change), every event appended and every device
// given to a composition. The same rows, the same refusals; a missing composition still
// passes the trigger (its NULL), as before.
constexpr Sql kMigration11 = statement<
    "live and device-event lists tested one by one (migration 11)",
    "DROP INDEX compositions_one_live_per_job_node;"
    "CREATE UNIQUE INDEX compositions_one_live_per_job_node ON compositions (job_id, node)"
    " WHERE ",
    is_live_state<"state">,
    ";"
    "DROP INDEX events_device_by_ts;"
    "CREATE INDEX events_device_by_ts ON events (ts_ms) WHERE ",
    is_device_kind<"kind">,
    ";"
    "DROP TRIGGER composition_devices_owner_must_be_live;"
    "CREATE TRIGGER composition_devices_owner_must_be_live"
    " BEFORE INSERT ON composition_devices"
    " WHEN NEW.live = 1 AND (SELECT NOT ",
    is_live_state<"state">,
    " FROM compositions WHERE id = NEW.composition_id)"
    " BEGIN SELECT RAISE(ABORT, 'a device can only be given to a live composition'); END;">;

// Migration 12: the memory policy a composition's tasks run under (the job's
// --compose-mem-policy or its workload class's default); '' for one without memory and for
// those composed before.
constexpr sqlite::Sql kMigration12{"memory policies of compositions (migration 12)", R"sql(
ALTER TABLE compositions ADD COLUMN mem_policy TEXT NOT NULL DEFAULT '';
)sql"};

struct Migration {
  int version;
  const sqlite::Sql* sql;
  // Run after `sql` with ?1 bound to the migration's time, for data the schema change needs.
  const sqlite::Sql* fill = nullptr;
};
constexpr Migration kMigrations[] = {{1, &kMigration1},
                                     {2, &kMigration2},
                                     {3, &kMigration3},
                                     {4, &kMigration4},
                                     {5, &kMigration5},
                                     {6, &kMigration6},
                                     {7, &kMigration7, &kMigration7Fill},
                                     {8, &kMigration8},
                                     {9, &kMigration9},
                                     {10, &kMigration10},
                                     {11, &kMigration11},
                                     {12, &kMigration12}};

constexpr sqlite::Sql kRecordMigration{
    "recording a migration",
    "INSERT INTO schema_migrations (version, description, applied_ms) VALUES (?1, ?2, ?3)"};

}  // namespace

int latest_schema_version() { return kMigrations[std::size(kMigrations) - 1].version; }

int schema_version(sqlite::Connection& connection) {
  return std::stoi(connection.pragma("reading the schema version", "user_version"));
}

int migrate(sqlite::Connection& connection, int64_t now_ms) {
  for (const Migration& m : kMigrations) {
    sqlite::Transaction transaction(connection);
    // Read inside the write transaction: another process may have migrated meanwhile.
    const int current = schema_version(connection);
    if (current > latest_schema_version()) {
      sqlite::fail(ErrorCode::kUnavailable,
                   connection.path() + " has schema version " + std::to_string(current) +
                       ", newer than this build understands (" +
                       std::to_string(latest_schema_version()) + "); upgrade composerd");
    }
    if (current >= m.version) continue;
    connection.exec(*m.sql);
    if (m.fill != nullptr) connection.statement(*m.fill)->bind(1, now_ms).run();
    connection.statement(kRecordMigration)
        ->bind(1, m.version)
        .bind(2, m.sql->what)
        .bind(3, now_ms)
        .run();
    connection.exec(
        {"setting the schema version", "PRAGMA user_version = " + std::to_string(m.version)});
    transaction.commit();
  }
  return schema_version(connection);
}

}  // namespace composer::db
