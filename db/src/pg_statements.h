// The statements of the PostgreSQL store, each a named constant, in the same order and with
// the same columns as SQLite's (sqlite_statements.h), so rows.h decodes both. PostgreSQL's
// dialect: $N parameters with a type where only IS NULL would name it, "user" quoted,
// RETURNING for the new id, LIMIT NULL for none.
#pragma once

#include "composer/db/sql_text.h"
#include "sql_terms.h"

namespace composer::db::pg {

// A device and its owner, if a live composition holds it (rows.h, read_device).
inline constexpr Text kDeviceColumns(
    "d.id, d.type, d.model, d.capacity_bytes, d.zone, d.address, d.health, d.drained, "
    "d.drain_reason, owner.composition_id, owner_c.node, d.holder, d.domains, "
    "d.pci_vendor, d.pci_device, d.serial, d.uuid, d.known_since_ms");
inline constexpr Text kDeviceOwnerJoin(
    " LEFT JOIN composition_devices owner ON owner.device_id = d.id AND owner.live = 1"
    " LEFT JOIN compositions owner_c ON owner_c.id = owner.composition_id");
inline constexpr Text kDeviceFilter(
    " ($1::text IS NULL OR d.type = $1) AND ($2::text IS NULL OR d.zone = $2)"
    " AND ($3::text IS NULL OR owner_c.node = $3)"
    " AND ($4::text IS NULL OR $4 = CASE WHEN d.health = 'critical' THEN 'failed'"
    " WHEN d.drained = 1 THEN 'drained' WHEN owner.composition_id IS NOT NULL THEN 'attached'"
    " WHEN d.holder <> '' THEN 'foreign' ELSE 'free' END)"
    " AND d.id > $5::text");

inline constexpr Text kCompositionColumns(
    "c.id, c.job_id, c.node, c.uid, c.\"user\", c.account, c.workload, c.gpus, c.gpu_model, "
    "c.mem_bytes, c.nvme, c.state, c.created_ms, c.updated_ms, c.attempts, c.last_error, "
    "c.policy_window, c.host_hold, c.mem_policy");
// kDeviceOwnerJoin for a write's few devices: each device and its owner looked up by key, in
// subqueries the planner cannot turn into joins (OFFSET 0). A write is a prepared statement
// whose plan is made once, often while the tables are small and have no statistics yet: the
// joins there became a scan of every device and every composition, hashed, run again by each
// write as the tables grew (a third of the server's time for a burst of composes;
// docs/BENCHMARKS.md, "High availability").
inline constexpr Text kDeviceOwnerLookup(
    " LEFT JOIN LATERAL (SELECT composition_id FROM composition_devices"
    " WHERE device_id = d.id AND live = 1 OFFSET 0) owner ON true"
    " LEFT JOIN LATERAL (SELECT node FROM compositions WHERE id = owner.composition_id"
    " OFFSET 0) owner_c ON true");
template <Text selection>
inline constexpr auto compositions_with_devices =
    joined<"WITH c AS (", selection, ") SELECT ", kCompositionColumns, ", ", kDeviceColumns,
           " FROM c LEFT JOIN composition_devices cd ON cd.composition_id = c.id"
           " LEFT JOIN devices d ON d.id = cd.device_id",
           kDeviceOwnerJoin, " ORDER BY c.id DESC, cd.seq">;
inline constexpr auto kCompositionFilter = joined<
    " ($1::bigint IS NULL OR job_id = $1) AND ($2::bigint IS NULL OR uid = $2)"
    " AND ($3::text IS NULL OR \"user\" = $3)"
    " AND ($4::text IS NULL OR node = $4) AND ($5::text IS NULL OR state = $5)"
    " AND (NOT $6::boolean OR ",
    is_live_state<"state">,
    ")"
    " AND ($8::bigint IS NULL OR id < $8)"
    " ORDER BY id DESC LIMIT $7::bigint">;

inline constexpr Text kEventColumns(
    "id, ts_ms, kind, composition_id, job_id, node, uid, \"user\", account, workload, "
    "from_state, to_state, devices, detail, policy_window");
inline constexpr Text kEventFilter(
    " ts_ms >= $1::bigint AND ts_ms < $2::bigint AND ($3::bigint IS NULL OR job_id = $3)"
    " AND ($4::bigint IS NULL OR composition_id = $4)"
    " AND ($6::bigint IS NULL OR (ts_ms, id) > ($6, $7::bigint)) ORDER BY ts_ms, id"
    " LIMIT $5::bigint");

inline constexpr Sql kUpsertHost{
    "saving host",
    "INSERT INTO hosts (node, fabric_id, zones, gpu_slots, mem_slots, nvme_slots, domains) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7) "
    "ON CONFLICT (node) DO UPDATE SET fabric_id = excluded.fabric_id, zones = excluded.zones, "
    "gpu_slots = excluded.gpu_slots, mem_slots = excluded.mem_slots, "
    "nvme_slots = excluded.nvme_slots, domains = excluded.domains"};
inline constexpr Sql kSelectHosts{"listing hosts",
                                  "SELECT node, fabric_id, zones, gpu_slots, mem_slots, "
                                  "nvme_slots, domains FROM hosts ORDER BY node"};
inline constexpr Sql kUpsertDevice{
    "saving device",
    "INSERT INTO devices (id, type, model, capacity_bytes, zone, address, health, domains, "
    "pci_vendor, pci_device, serial, uuid, known_since_ms) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) "
    "ON CONFLICT (id) DO UPDATE SET type = excluded.type, model = excluded.model, "
    "capacity_bytes = excluded.capacity_bytes, zone = excluded.zone, "
    "address = excluded.address, health = excluded.health, domains = excluded.domains, "
    "pci_vendor = excluded.pci_vendor, pci_device = excluded.pci_device, "
    "serial = excluded.serial, uuid = excluded.uuid"};
inline constexpr Sql kSelectDevice =
    statement<"reading device", "SELECT ", kDeviceColumns, " FROM devices d", kDeviceOwnerJoin,
              " WHERE d.id = $1">;
inline constexpr Sql kSelectDevices =
    statement<"listing devices", "SELECT ", kDeviceColumns, " FROM devices d", kDeviceOwnerJoin,
              " WHERE", kDeviceFilter, " ORDER BY d.id LIMIT $6::bigint">;
inline constexpr Sql kSetDrained{
    "changing drain state", "UPDATE devices SET drained = $2, drain_reason = $3 WHERE id = $1"};
inline constexpr Sql kSetHealth{"changing health", "UPDATE devices SET health = $2 WHERE id = $1"};
inline constexpr Sql kSetHolder{"changing a device's foreign holder",
                                "UPDATE devices SET holder = $2 WHERE id = $1"};
inline constexpr Sql kSelectClaims{
    "listing composerd's claims on attached devices",
    "SELECT device_id, fabric_host FROM fabric_claims ORDER BY device_id"};
inline constexpr Sql kDeleteClaim{
    "dropping a claim on a detached device",
    "DELETE FROM fabric_claims WHERE device_id = $1 AND fabric_host = $2"};

inline constexpr Sql kInsertComposition{
    "inserting composition",
    "INSERT INTO compositions (job_id, node, uid, \"user\", account, workload, gpus, gpu_model, "
    "mem_bytes, nvme, state, created_ms, updated_ms, policy_window, mem_policy) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14) RETURNING id"};
inline constexpr Sql kLinkDevice{
    "giving a device to a composition",
    "INSERT INTO composition_devices (composition_id, device_id) VALUES ($1, $2)"};
inline constexpr Sql kUpdateCompositionState{
    "changing composition state",
    "UPDATE compositions SET state = $2, updated_ms = $3, attempts = attempts + $4, "
    "last_error = CASE WHEN $2 = 'failed' THEN $6 ELSE last_error END "
    "WHERE id = $1 AND state = $5"};
inline constexpr Sql kSetHostHold =
    statement<"setting a node's hold on a composition",
              "UPDATE compositions SET host_hold = $2, updated_ms = $3 WHERE id = $1 AND ",
              is_live_state<"state">>;
inline constexpr Sql kSelectComposition =
    statement<"reading composition",
              compositions_with_devices<"SELECT * FROM compositions WHERE id = $1">>;
inline constexpr Sql kSelectLiveComposition = statement<
    "reading live composition",
    compositions_with_devices<joined<"SELECT * FROM compositions WHERE job_id = $1 AND node = $2 "
                                     "AND ",
                                     is_live_state<"state">>>>;
inline constexpr Sql kSelectCompositions = statement<
    "listing compositions",
    compositions_with_devices<joined<"SELECT * FROM compositions WHERE", kCompositionFilter>>>;

// A new composition, its device links and its events in one statement, for a write sent in
// one flight with others (pg_pool.h, Writer::Flight): the parameters of kInsertComposition,
// then $14 the device ids (text[], in order), $15 them joined as the events list them. Its
// rows are the composition's id and each device as it was before (kSelectDevice's columns).
// What the store refuses the database refuses here too (the schema's indexes, keys and
// triggers), and the write then runs again as insert_composition to say why.
inline constexpr Sql kCreateComposition = statement<
    "inserting composition",
    "WITH c AS (INSERT INTO compositions (job_id, node, uid, \"user\", account, workload, gpus,"
    " gpu_model, mem_bytes, nvme, state, created_ms, updated_ms, policy_window, mem_policy)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14) RETURNING id),"
    " given AS (SELECT id, n FROM unnest($15::text[]) WITH ORDINALITY AS g(id, n)),"
    " links AS (INSERT INTO composition_devices (composition_id, device_id)"
    " SELECT c.id, given.id FROM c, given ORDER BY given.n),"
    " logged AS (INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, \"user\","
    " account, workload, from_state, to_state, devices, detail, policy_window)"
    " SELECT $12, k.kind, c.id, $1, $2, $3, $4, $5, $6, k.from_state, k.kind, $16,"
    // The first event records the memory policy as requested_detail (records.h) writes it.
    " CASE WHEN k.n = 1 AND $14 <> '' THEN 'mem_policy=' || $14 ELSE '' END, $13"
    " FROM c, (VALUES (1, 'requested', ''), (2, 'composing', 'requested')) AS k(n, kind,"
    " from_state) WHERE k.n = 1 OR $11 = 'composing' ORDER BY k.n)"
    " SELECT c.id, ",
    kDeviceColumns,
    " FROM c LEFT JOIN given ON true"
    " LEFT JOIN LATERAL (SELECT * FROM devices WHERE id = given.id OFFSET 0) d ON true",
    kDeviceOwnerLookup, " ORDER BY given.n">;
// kCreateComposition for several calls at once (pg_pool.h, Flight::together): each
// parameter is the array of the calls' values of kCreateComposition's, $15 an array of the
// calls' device arrays (each in its text form). The new ids are taken from the identity's
// sequence in the calls' order before anything is inserted, so each call's rows are found by
// its id; the rows are kCreateComposition's, each call's in turn, with the call's number
// last. Device and owner lookups are by key, as in kCreateComposition.
inline constexpr Sql kCreateCompositions = statement<
    "inserting compositions",
    "WITH i AS (SELECT nextval(pg_get_serial_sequence('compositions', 'id')) AS id, u.*"
    " FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[],"
    " $7::bigint[], $8::text[], $9::bigint[], $10::bigint[], $11::text[], $12::bigint[],"
    " $13::text[], $14::text[], $15::text[], $16::text[]) WITH ORDINALITY AS u(job_id, node,"
    " uid, \"user\", account, workload, gpus, gpu_model, mem_bytes, nvme, state, now_ms,"
    " policy_window, mem_policy, given, devices, n)),"
    " c AS (INSERT INTO compositions (id, job_id, node, uid, \"user\", account, workload, gpus,"
    " gpu_model, mem_bytes, nvme, state, created_ms, updated_ms, policy_window, mem_policy)"
    " SELECT id, job_id, node, uid, \"user\", account, workload, gpus, gpu_model, mem_bytes,"
    " nvme, state, now_ms, now_ms, policy_window, mem_policy FROM i ORDER BY n RETURNING id),"
    " given AS (SELECT i.id AS composition_id, i.n AS call, g.id, g.n FROM i,"
    " unnest(i.given::text[]) WITH ORDINALITY AS g(id, n)),"
    // Each link is made from its composition's inserted row, as in kCreateComposition.
    " links AS (INSERT INTO composition_devices (composition_id, device_id)"
    " SELECT given.composition_id, given.id FROM c JOIN given ON given.composition_id = c.id"
    " ORDER BY given.call, given.n),"
    " logged AS (INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, \"user\","
    " account, workload, from_state, to_state, devices, detail, policy_window)"
    " SELECT i.now_ms, k.kind, c.id, i.job_id, i.node, i.uid, i.\"user\", i.account,"
    " i.workload, k.from_state, k.kind, i.devices,"
    " CASE WHEN k.n = 1 AND i.mem_policy <> '' THEN 'mem_policy=' || i.mem_policy ELSE '' END,"
    " i.policy_window"
    " FROM c JOIN i ON i.id = c.id, (VALUES (1, 'requested', ''), (2, 'composing', 'requested'))"
    " AS k(n, kind, from_state) WHERE k.n = 1 OR i.state = 'composing' ORDER BY i.n, k.n)"
    " SELECT i.id, ",
    kDeviceColumns,
    ", i.n FROM i LEFT JOIN given ON given.call = i.n"
    " LEFT JOIN LATERAL (SELECT * FROM devices WHERE id = given.id OFFSET 0) d ON true",
    kDeviceOwnerLookup, " ORDER BY i.n, given.n">;
// A state change and its event in one statement, for a write sent in one flight with others:
// kUpdateCompositionState's parameters; its rows are kSelectComposition's, as the composition
// was before. The database refuses the statement (composer_refuse_unless, migration 4) unless
// it changed the state, and the write then runs again on its own to say why.
inline constexpr Sql kTransitionComposition = statement<
    "changing composition state",
    "WITH u AS (UPDATE compositions SET state = $2, updated_ms = $3, attempts = attempts + $4,"
    " last_error = CASE WHEN $2 = 'failed' THEN $6 ELSE last_error END"
    " WHERE id = $1 AND state = $5"
    " RETURNING id, job_id, node, uid, \"user\", account, workload, policy_window),"
    " logged AS (INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, \"user\","
    " account, workload, from_state, to_state, devices, detail, policy_window)"
    " SELECT $3, $2, u.id, u.job_id, u.node, u.uid, u.\"user\", u.account, u.workload, $5, $2,"
    " COALESCE((SELECT string_agg(l.device_id, ',' ORDER BY l.seq) FROM composition_devices l"
    " WHERE l.composition_id = u.id), ''), $6, u.policy_window FROM u),"
    " c AS (SELECT * FROM compositions WHERE id = $1)"
    // The refusal's row is on the kept side of a LEFT JOIN, so it is always evaluated.
    " SELECT ",
    kCompositionColumns, ", ", kDeviceColumns,
    " FROM (SELECT composer_refuse_unless((SELECT COUNT(*) FROM u) = 1)) AS changed"
    " LEFT JOIN c ON true"
    " LEFT JOIN composition_devices cd ON cd.composition_id = c.id"
    " LEFT JOIN LATERAL (SELECT * FROM devices WHERE id = cd.device_id OFFSET 0) d ON true",
    kDeviceOwnerLookup, " ORDER BY c.id DESC, cd.seq">;
// kTransitionComposition for several calls at once (pg_pool.h, Flight::together): each
// parameter is the array of the calls' values of kTransitionComposition's; its rows are
// kTransitionComposition's, each call's in turn, with the call's number last. It is refused
// unless it changed every call's composition (so also where two calls name one).
inline constexpr Sql kTransitionCompositions = statement<
    "changing composition states",
    "WITH i AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[],"
    " $5::text[], $6::text[]) WITH ORDINALITY AS u(id, to_state, now_ms, attempt, from_state,"
    " detail, n)),"
    // Each row is found by key, then updated by its place (ctid): a plan made while the table
    // is small would join the calls with every row of the table instead, and keep doing so.
    " found AS (SELECT i.*, x.ctid AS place FROM i, LATERAL (SELECT ctid FROM compositions"
    " WHERE id = i.id AND state = i.from_state OFFSET 0) x),"
    " u AS (UPDATE compositions SET state = found.to_state, updated_ms = found.now_ms,"
    " attempts = attempts + found.attempt,"
    " last_error = CASE WHEN found.to_state = 'failed' THEN found.detail ELSE last_error END"
    " FROM found WHERE compositions.ctid = found.place"
    " RETURNING compositions.id, compositions.job_id, compositions.node, compositions.uid,"
    " compositions.\"user\", compositions.account, compositions.workload,"
    " compositions.policy_window, found.n, found.to_state, found.from_state, found.now_ms,"
    " found.detail),"
    " logged AS (INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, \"user\","
    " account, workload, from_state, to_state, devices, detail, policy_window)"
    " SELECT u.now_ms, u.to_state, u.id, u.job_id, u.node, u.uid, u.\"user\", u.account,"
    " u.workload, u.from_state, u.to_state,"
    " COALESCE((SELECT string_agg(l.device_id, ',' ORDER BY l.seq) FROM composition_devices l"
    " WHERE l.composition_id = u.id), ''), u.detail, u.policy_window FROM u ORDER BY u.n),"
    " c AS (SELECT x.*, i.n FROM i,"
    " LATERAL (SELECT * FROM compositions WHERE id = i.id OFFSET 0) x)"
    " SELECT ",
    kCompositionColumns, ", ", kDeviceColumns,
    ", c.n FROM (SELECT composer_refuse_unless((SELECT COUNT(*) FROM u) = (SELECT COUNT(*)"
    " FROM i))) AS changed"
    " LEFT JOIN c ON true"
    " LEFT JOIN LATERAL (SELECT * FROM composition_devices WHERE composition_id = c.id OFFSET 0)"
    " cd ON true"
    " LEFT JOIN LATERAL (SELECT * FROM devices WHERE id = cd.device_id OFFSET 0) d ON true",
    kDeviceOwnerLookup, " ORDER BY c.n, cd.seq">;
inline constexpr Sql kInsertEvent{
    "appending event",
    "INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, \"user\", account, "
    "workload, from_state, to_state, devices, detail, policy_window) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"};
inline constexpr Sql kSelectEvents =
    statement<"listing events", "SELECT ", kEventColumns, " FROM events WHERE", kEventFilter>;
// What a report needs from before its range (sqlite_statements.h, kScanStateEvents), then the
// range itself.
inline constexpr Sql kScanStateEvents =
    statement<"reading the state in force at a report's start", "SELECT ", kEventColumns,
              " FROM events WHERE ", is_device_kind<"kind">,
              " AND ts_ms < $1"
              " UNION ALL SELECT ",
              kEventColumns,
              " FROM events WHERE composition_id IN"
              " (SELECT id FROM compositions WHERE created_ms < $1 AND (",
              is_live_state<"state">, " OR updated_ms >= $1)) AND ts_ms < $1 AND NOT ",
              is_device_kind<"kind">, " ORDER BY ts_ms, id">;
inline constexpr Sql kScanRange =
    statement<"reading the events of a report's range", "SELECT ", kEventColumns,
              " FROM events WHERE ts_ms >= $1 AND ts_ms < $2 ORDER BY ts_ms, id">;
// The rollup walk (ledger_walk.h, RollupSource).
inline constexpr Sql kWalkDeviceEvents =
    statement<"reading the device events up to a report's end", "SELECT ", kEventColumns,
              " FROM events WHERE ", is_device_kind<"kind">, " AND ts_ms < $1 ORDER BY ts_ms, id">;
inline constexpr Sql kWalkLongest{"reading the longest ended composition",
                                  "SELECT MAX(end_ts - first_ts) FROM composition_rollup"};
inline constexpr Sql kWalkRollup{
    "reading the rollup of ended compositions",
    "SELECT composition_id, first_id, first_ts, first_kind, ready_ts, releasing_ts, end_id, "
    "end_ts, end_kind, end_from, end_detail, job_id, uid, \"user\", account, workload, "
    "policy_window, devices, events, other_events FROM composition_rollup"
    " WHERE first_ts >= $1 AND first_ts < $2 AND end_ts >= $3 AND whole = 1"
    " ORDER BY first_ts, first_id"};
inline constexpr Sql kWalkReadAlone =
    statement<"listing the compositions a report reads event by event",
              "SELECT id FROM compositions WHERE ", is_live_state<"state">,
              " UNION SELECT composition_id FROM composition_rollup WHERE whole = 0">;
inline constexpr Sql kWalkLiveAtStart =
    statement<"reading whether a composition was live at a report's start",
              "SELECT created_ms < $2 AND (", is_live_state<"state">,
              " OR updated_ms >= $2) FROM compositions WHERE id = $1">;
inline constexpr Sql kWalkCompositionEvents =
    statement<"reading the events of a composition for a report", "SELECT ", kEventColumns,
              " FROM events WHERE composition_id = $1 AND ts_ms < $2"
              " AND (ts_ms >= $3 OR $4::boolean) AND NOT ",
              is_device_kind<"kind">, " ORDER BY ts_ms, id">;
inline constexpr Sql kWalkUnattached =
    statement<"counting a report's events of no composition",
              "SELECT COUNT(*) FROM events WHERE composition_id IS NULL AND NOT ",
              is_device_kind<"kind">, " AND ts_ms >= $1 AND ts_ms < $2">;

inline constexpr Sql kInsertPolicy{
    "recording a policy version",
    "INSERT INTO policies (applied_ms, uid, \"user\", file, sha256, text) "
    "VALUES ($1, $2, $3, $4, $5, $6) RETURNING id"};
inline constexpr Sql kSelectPolicies{"listing policy versions",
                                     "SELECT id, applied_ms, uid, \"user\", file, sha256, text "
                                     "FROM policies ORDER BY id DESC LIMIT $1::bigint"};

// Each writer's row (pg_pool.h): the number of its last committed batch.
inline constexpr Sql kMarkBatch{
    "recording the batch's number",
    "INSERT INTO store_writers (writer, batch, updated_ms) VALUES ($1, $2, $3)"
    " ON CONFLICT (writer) DO UPDATE SET batch = EXCLUDED.batch, updated_ms = EXCLUDED.updated_ms"};
inline constexpr Sql kResolveBatch{
    "finding out whether a commit took effect",
    "INSERT INTO store_writers (writer, batch, updated_ms) VALUES ($1, 0, $2)"
    " ON CONFLICT (writer) DO UPDATE SET updated_ms = EXCLUDED.updated_ms RETURNING batch"};
// Rows of writers gone a week: no batch of theirs can still be waiting for an answer.
inline constexpr Sql kForgetWriters{"forgetting old writers",
                                    "DELETE FROM store_writers WHERE updated_ms < $1"};

}  // namespace composer::db::pg
