// The statements of the SQLite store, each a named constant; the parts several share are
// named too (sql_text.h). SQLite's dialect: ?N parameters, `+column` to keep a term off an
// index, INDEXED BY, a negative LIMIT for none.
#pragma once

#include "composer/db/sql_text.h"
#include "sql_terms.h"

namespace composer::db::sqlite {

// A device and its owner, if a live composition holds it. Columns 0..17 (see read_device).
inline constexpr Text kDeviceColumns(
    "d.id, d.type, d.model, d.capacity_bytes, d.zone, d.address, d.health, d.drained, "
    "d.drain_reason, owner.composition_id, owner_c.node, d.holder, d.domains, "
    "d.pci_vendor, d.pci_device, d.serial, d.uuid, d.known_since_ms");
inline constexpr Text kDeviceOwnerJoin(
    " LEFT JOIN composition_devices owner ON owner.device_id = d.id AND owner.live = 1"
    " LEFT JOIN compositions owner_c ON owner_c.id = owner.composition_id");
// ?5 is '' for the first page: a range on the key, not a scan.
inline constexpr Text kDeviceFilter(
    " (?1 IS NULL OR d.type = ?1) AND (?2 IS NULL OR d.zone = ?2)"
    " AND (?3 IS NULL OR owner_c.node = ?3)"
    " AND (?4 IS NULL OR ?4 = CASE WHEN d.health = 'critical' THEN 'failed'"
    " WHEN d.drained = 1 THEN 'drained' WHEN owner.composition_id IS NOT NULL THEN 'attached'"
    " WHEN d.holder <> '' THEN 'foreign' ELSE 'free' END)"
    " AND d.id > ?5");

// Columns 0..18 (see read_composition), then the device columns from 19 (NULL when the
// composition never held a device).
inline constexpr Text kCompositionColumns(
    "c.id, c.job_id, c.node, c.uid, c.user, c.account, c.workload, c.gpus, c.gpu_model, "
    "c.mem_bytes, c.nvme, c.state, c.created_ms, c.updated_ms, c.attempts, c.last_error, "
    "c.policy_window, c.host_hold, c.mem_policy");
// `selection` picks composition rows; every composition comes back with all its devices in
// one query (a join, never one query per composition).
template <Text selection>
inline constexpr auto compositions_with_devices =
    joined<"WITH c AS (", selection, ") SELECT ", kCompositionColumns, ", ", kDeviceColumns,
           " FROM c LEFT JOIN composition_devices cd ON cd.composition_id = c.id"
           " LEFT JOIN devices d ON d.id = cd.device_id",
           kDeviceOwnerJoin, " ORDER BY c.id DESC, cd.rowid">;
inline constexpr auto kCompositionFilter = joined<
    " (?1 IS NULL OR job_id = ?1) AND (?2 IS NULL OR uid = ?2) AND (?3 IS NULL OR user = ?3)"
    " AND (?4 IS NULL OR node = ?4) AND (?5 IS NULL OR state = ?5)"
    " AND (?6 = 0 OR ",
    is_live_state<"state">,
    ")"
    " AND (?8 IS NULL OR id < ?8)"
    " ORDER BY id DESC LIMIT ?7">;

inline constexpr Text kEventColumns(
    "id, ts_ms, kind, composition_id, job_id, node, uid, user, account, workload, from_state, "
    "to_state, devices, detail, policy_window");
// After a page's cursor (?6, ?7): ?1 is then at least ?6, so "ts_ms > ?6 OR id > ?7" is
// (ts_ms, id) > (?6, ?7) and the time index still bounds the walk.
inline constexpr Text kEventFilter(
    " ts_ms >= ?1 AND ts_ms < ?2 AND (?3 IS NULL OR job_id = ?3)"
    " AND (?4 IS NULL OR composition_id = ?4)"
    " AND (?6 IS NULL OR ts_ms > ?6 OR id > ?7) ORDER BY ts_ms, id LIMIT ?5");

inline constexpr Sql kUpsertHost{
    "saving host",
    "INSERT INTO hosts (node, fabric_id, zones, gpu_slots, mem_slots, "
    "nvme_slots, domains) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
    "ON CONFLICT (node) DO UPDATE SET fabric_id = excluded.fabric_id, "
    "zones = excluded.zones, gpu_slots = excluded.gpu_slots, "
    "mem_slots = excluded.mem_slots, nvme_slots = excluded.nvme_slots, "
    "domains = excluded.domains"};
inline constexpr Sql kSelectHosts{
    "listing hosts",
    "SELECT node, fabric_id, zones, gpu_slots, mem_slots, nvme_slots, "
    "domains FROM hosts ORDER BY node"};

// Drain state is not in the upsert: the inventory never changes it. Nor is known_since_ms
// (?13) once the device is in: a device the fabric reports again keeps the time it was first
// known, which is where reports start counting it.
inline constexpr Sql kUpsertDevice{
    "saving device",
    "INSERT INTO devices (id, type, model, capacity_bytes, zone, address, health, domains, "
    "pci_vendor, pci_device, serial, uuid, known_since_ms) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) "
    "ON CONFLICT (id) DO UPDATE SET type = excluded.type, model = excluded.model, "
    "capacity_bytes = excluded.capacity_bytes, zone = excluded.zone, "
    "address = excluded.address, health = excluded.health, domains = excluded.domains, "
    "pci_vendor = excluded.pci_vendor, pci_device = excluded.pci_device, "
    "serial = excluded.serial, uuid = excluded.uuid"};
inline constexpr Sql kSelectDevice =
    statement<"reading device", "SELECT ", kDeviceColumns, " FROM devices d", kDeviceOwnerJoin,
              " WHERE d.id = ?1">;
inline constexpr Sql kSelectDevices =
    statement<"listing devices", "SELECT ", kDeviceColumns, " FROM devices d", kDeviceOwnerJoin,
              " WHERE", kDeviceFilter, " ORDER BY d.id LIMIT ?6">;
// Starts from the node's live compositions instead of scanning every device.
inline constexpr Sql kSelectDevicesOnNode = statement<
    "listing devices on a node", "SELECT ", kDeviceColumns,
    " FROM compositions owner_c"
    " JOIN composition_devices owner ON owner.composition_id = owner_c.id AND owner.live = 1"
    " JOIN devices d ON d.id = owner.device_id"
    " WHERE owner_c.node = ?3"
    " AND ",
    is_live_state<"owner_c.state">, " AND", kDeviceFilter, " ORDER BY d.id LIMIT ?6">;
inline constexpr Sql kSetDrained{
    "changing drain state", "UPDATE devices SET drained = ?2, drain_reason = ?3 WHERE id = ?1"};
inline constexpr Sql kSetHealth{"changing health", "UPDATE devices SET health = ?2 WHERE id = ?1"};
inline constexpr Sql kSetHolder{"changing a device's foreign holder",
                                "UPDATE devices SET holder = ?2 WHERE id = ?1"};
inline constexpr Sql kSelectClaims{
    "listing composerd's claims on attached devices",
    "SELECT device_id, fabric_host FROM fabric_claims ORDER BY device_id"};
inline constexpr Sql kDeleteClaim{
    "dropping a claim on a detached device",
    "DELETE FROM fabric_claims WHERE device_id = ?1 AND fabric_host = ?2"};

inline constexpr Sql kInsertComposition{
    "inserting composition",
    "INSERT INTO compositions (job_id, node, uid, user, account, workload, gpus, gpu_model, "
    "mem_bytes, nvme, state, created_ms, updated_ms, policy_window, mem_policy) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13, ?14)"};
inline constexpr Sql kLinkDevice{"giving a device to a composition",
                                 "INSERT INTO composition_devices (composition_id, device_id) "
                                 "VALUES (?1, ?2)"};
// Only if it is still in `from` (?5): the check and the change are one statement.
inline constexpr Sql kUpdateCompositionState{
    "changing composition state",
    "UPDATE compositions SET state = ?2, updated_ms = ?3, attempts = attempts + ?4, "
    "last_error = CASE WHEN ?2 = 'failed' THEN ?6 ELSE last_error END "
    "WHERE id = ?1 AND state = ?5"};
// Only while it is live (?3 lists no state: the live ones are spelled out here).
inline constexpr Sql kSetHostHold =
    statement<"setting a node's hold on a composition",
              "UPDATE compositions SET host_hold = ?2, updated_ms = ?3 "
              "WHERE id = ?1 AND ",
              is_live_state<"state">>;
inline constexpr Sql kSelectComposition =
    statement<"reading composition",
              compositions_with_devices<"SELECT * FROM compositions WHERE id = ?1">>;
inline constexpr Sql kSelectLiveComposition = statement<
    "reading live composition",
    compositions_with_devices<joined<"SELECT * FROM compositions WHERE job_id = ?1 AND node = ?2 "
                                     "AND ",
                                     is_live_state<"state">>>>;
// One variant per indexed filter, so each can use its index; the rest filter in place.
inline constexpr Sql kSelectCompositionsByJob =
    statement<"listing compositions of a job",
              compositions_with_devices<
                  joined<"SELECT * FROM compositions WHERE job_id = ?1 AND", kCompositionFilter>>>;
inline constexpr Sql kSelectCompositionsByNode =
    statement<"listing compositions on a node",
              compositions_with_devices<
                  joined<"SELECT * FROM compositions WHERE node = ?4 AND", kCompositionFilter>>>;
inline constexpr Sql kSelectLiveCompositions = statement<
    "listing live compositions",
    compositions_with_devices<joined<"SELECT * FROM compositions WHERE ", is_live_state<"state">,
                                     " AND", kCompositionFilter>>>;
inline constexpr Sql kSelectCompositions = statement<
    "listing compositions",
    compositions_with_devices<joined<"SELECT * FROM compositions WHERE", kCompositionFilter>>>;

inline constexpr Sql kInsertEvent{
    "appending event",
    "INSERT INTO events (ts_ms, kind, composition_id, job_id, node, uid, user, account, "
    "workload, from_state, to_state, devices, detail, policy_window) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"};
inline constexpr Sql kSelectEventsByComposition =
    statement<"listing events of a composition", "SELECT ", kEventColumns,
              " FROM events WHERE composition_id = ?4 AND", kEventFilter>;
inline constexpr Sql kSelectEventsByJob =
    statement<"listing events of a job", "SELECT ", kEventColumns,
              " FROM events WHERE job_id = ?3 AND", kEventFilter>;
inline constexpr Sql kSelectEvents =
    statement<"listing events", "SELECT ", kEventColumns, " FROM events WHERE", kEventFilter>;
// What a report needs from before its range: device events (through the partial index of
// migration 3, so a late range does not pass over every earlier event), and every other event
// of a composition live at ?1 (created before it, and live now or ended at or after it). The
// two arms are disjoint, and together exactly the rows of "device event OR live composition".
inline constexpr Sql kScanStateEvents =
    statement<"reading the state in force at a report's start", "SELECT ", kEventColumns,
              " FROM events WHERE ", is_device_kind<"kind">,
              " AND ts_ms < ?1"
              " UNION ALL SELECT ",
              kEventColumns,
              " FROM events WHERE composition_id IN"
              " (SELECT id FROM compositions WHERE created_ms < ?1 AND (",
              is_live_state<"state">, " OR updated_ms >= ?1)) AND +ts_ms < ?1 AND NOT ",
              is_device_kind<"kind">, " ORDER BY ts_ms, id">;
// The range in ledger order, read in two cursors (scan_events): the ids from the ts index
// alone (it holds ts_ms and the rowid, so no row is looked up), and the rows in rowid order
// from the first of those ids, filtered by the same range. Events are appended, so ids follow
// time and the rowid cursor walks the table once instead of looking each row up.
inline constexpr Sql kScanRangeIds{"listing the events of a report's range",
                                   "SELECT id FROM events WHERE ts_ms >= ?1 AND ts_ms < ?2"
                                   " ORDER BY ts_ms, id"};
inline constexpr Sql kScanRangeRows =
    statement<"reading the events of a report's range", "SELECT ", kEventColumns,
              " FROM events WHERE id >= ?1"
              " AND +ts_ms >= ?2 AND +ts_ms < ?3 ORDER BY id">;
inline constexpr Sql kSelectEventById =
    statement<"reading one event of a report's range", "SELECT ", kEventColumns,
              " FROM events WHERE id = ?1">;
// The rollup walk (walk_report, schema migration 9). Every device event before the range's
// end, through the partial index of migration 3.
inline constexpr Sql kWalkDeviceEvents =
    statement<"reading the device events up to a report's end", "SELECT ", kEventColumns,
              " FROM events"
              " WHERE ",
              is_device_kind<"kind">, " AND ts_ms < ?1 ORDER BY ts_ms, id">;
// The longest composition the rollup holds (through its index on the length): none that
// began before a range's start less this can have ended inside it.
inline constexpr Sql kWalkLongest{"reading the longest ended composition",
                                  "SELECT MAX(end_ts - first_ts) FROM composition_rollup"};
// The whole rows of compositions that began in [?1, ?2) and ended at or after ?3, in the order
// they began.
inline constexpr Sql kWalkRollup{
    "reading the rollup of ended compositions",
    "SELECT composition_id, first_id, first_ts, first_kind, ready_ts, releasing_ts, end_id, "
    "end_ts, end_kind, end_from, end_detail, job_id, uid, user, account, workload, "
    "policy_window, devices, events, other_events FROM composition_rollup"
    " WHERE first_ts >= ?1 AND first_ts < ?2 AND end_ts >= ?3 AND whole = 1"
    " ORDER BY first_ts, first_id"};
// The compositions whose events a report reads one by one: those still live, and those whose
// rollup row is not whole.
inline constexpr Sql kWalkReadAlone =
    statement<"listing the compositions a report reads event by event",
              "SELECT id FROM compositions"
              " WHERE ",
              is_live_state<"state">,
              " UNION"
              " SELECT composition_id FROM composition_rollup WHERE whole = 0">;
// Whether scan_events reads the events of composition ?1 from before ?2 (kScanStateEvents'
// condition): created before it, and live or ended at or after it.
inline constexpr Sql kWalkLiveAtStart =
    statement<"reading whether a composition was live at a report's start",
              "SELECT created_ms < ?2"
              " AND (",
              is_live_state<"state">,
              " OR updated_ms >= ?2)"
              " FROM compositions WHERE id = ?1">;
// Composition ?1's events before ?2, those before ?3 only where ?4: what scan_events streams.
inline constexpr Sql kWalkCompositionEvents =
    statement<"reading the events of a composition for a report", "SELECT ", kEventColumns,
              " FROM events WHERE composition_id = ?1 AND ts_ms < ?2"
              " AND (ts_ms >= ?3 OR ?4) AND NOT ",
              is_device_kind<"kind">, " ORDER BY ts_ms, id">;
inline constexpr Sql kWalkUnattached =
    statement<"counting a report's events of no composition",
              "SELECT COUNT(*) FROM events INDEXED BY events_unattached_by_ts"
              " WHERE composition_id IS NULL"
              // the partial index's own terms (migration 9)
              " AND NOT ",
              is_device_kind<"kind">, " AND ts_ms >= ?1 AND ts_ms < ?2">;

inline constexpr Sql kInsertPolicy{
    "recording a policy version",
    "INSERT INTO policies (applied_ms, uid, user, file, sha256, text) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"};
inline constexpr Sql kSelectPolicies{"listing policy versions",
                                     "SELECT id, applied_ms, uid, user, file, sha256, text "
                                     "FROM policies ORDER BY id DESC LIMIT ?1"};

}  // namespace composer::db::sqlite
