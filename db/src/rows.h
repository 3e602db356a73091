// Rows into records, whatever the database: every store reads its rows through these.
//
// `Row` is a statement positioned on a row, as sqlite::Statement is: int64, uint32, uint64,
// optional_int64, is_null, text and text_view by column index from 0 (uint32 and uint64
// checked), and, for the functions that read several rows, step(). Each reader names the
// columns it expects in order; a store's statements select them so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/db/failure.h"
#include "composer/model/model.h"
#include "records.h"

namespace composer::db {

// A text column that must parse as one of the model's enumerations.
template <typename E, typename Row>
E parse_column(const Row& s, int column, std::optional<E> (*parse)(std::string_view),
               std::string_view what) {
  auto value = parse(s.text_view(column));
  if (!value) {
    fail(ErrorCode::kInternal, "unknown " + std::string(what) + " " +
                                   db::quoted(s.text_view(column)) + " in the database");
  }
  return *value;
}

// A device and its owner: id, type, model, capacity_bytes, zone, address, health, drained,
// drain_reason, the owning composition's id (NULL: none) and node, holder, domains,
// pci_vendor, pci_device, serial, uuid, known_since_ms; from column `first`.
template <typename Row>
Device read_device(const Row& s, int first) {
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

// Where the devices begin in a row of a composition with its devices: after the
// composition's own columns (read_composition).
inline constexpr int kCompositionDeviceColumn = 19;

// id, job_id, node, uid, user, account, workload, gpus, gpu_model, mem_bytes, nvme, state,
// created_ms, updated_ms, attempts, last_error, policy_window, host_hold, mem_policy.
template <typename Row>
Composition read_composition(const Row& s) {
  Composition c;
  c.id = s.int64(0);
  c.owner.job_id = s.uint32(1);
  c.node = s.text(2);
  c.owner.uid = s.uint32(3);
  c.owner.user = s.text(4);
  c.owner.account = s.text(5);
  c.owner.workload = s.text(6);
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
  c.mem_policy = s.text(18);
  return c;
}

// Compositions with their devices, one row per (composition, device): the composition's
// columns, then a device's from kCompositionDeviceColumn (NULL when it never held one), the
// rows of one composition next to each other.
template <typename Row>
std::vector<Composition> read_compositions(Row& s) {
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

// id, ts_ms, kind, composition_id, job_id, node, uid, user, account, workload, from_state,
// to_state, devices, detail, policy_window; into an Event that may be reused row after row:
// its strings keep their capacity, so a scan over millions of rows does not allocate for each.
template <typename Row>
void read_event_into(const Row& s, Event& e) {
  e.id = s.int64(0);
  e.ts_ms = s.int64(1);
  e.kind.assign(s.text_view(2));
  e.composition_id = s.optional_int64(3);
  e.owner.job_id = s.uint32(4);
  e.node.assign(s.text_view(5));
  e.owner.uid = s.uint32(6);
  e.owner.user.assign(s.text_view(7));
  e.owner.account.assign(s.text_view(8));
  e.owner.workload.assign(s.text_view(9));
  e.from_state.assign(s.text_view(10));
  e.to_state.assign(s.text_view(11));
  split_into(s.text_view(12), e.devices);
  e.detail.assign(s.text_view(13));
  e.window.assign(s.text_view(14));
}

template <typename Row>
Event read_event(const Row& s) {
  Event e;
  read_event_into(s, e);
  return e;
}

// node, fabric_id, zones, gpu_slots, mem_slots, nvme_slots, domains.
template <typename Row>
Host read_host(const Row& s) {
  Host h;
  h.node = s.text(0);
  h.fabric_id = s.text(1);
  h.zones = split(s.text_view(2));
  h.gpu_slots = s.uint32(3);
  h.mem_slots = s.uint32(4);
  h.nvme_slots = s.uint32(5);
  h.domains = read_domains(s.text_view(6), "host " + h.node);
  return h;
}

// id, applied_ms, uid, user, file, sha256, text.
template <typename Row>
PolicyVersion read_policy(const Row& s) {
  PolicyVersion p;
  p.id = s.int64(0);
  p.applied_ms = s.int64(1);
  p.uid = s.uint32(2);
  p.user = s.text(3);
  p.file = s.text(4);
  p.sha256 = s.text(5);
  p.text = s.text(6);
  return p;
}

// A rollup row (schema migration 9): composition_id, first_id, first_ts, first_kind,
// ready_ts, releasing_ts, end_id, end_ts, end_kind, end_from, end_detail, job_id, uid, user,
// account, workload, policy_window, devices, events, other_events; into a reused record.
template <typename Row>
void read_rollup_into(const Row& s, CompositionRollup& r) {
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
  r.first.owner.job_id = r.end.owner.job_id = s.uint32(11);
  r.first.owner.uid = r.end.owner.uid = s.uint32(12);
  r.first.owner.user.assign(s.text_view(13));
  r.first.owner.account.assign(s.text_view(14));
  r.first.owner.workload.assign(s.text_view(15));
  r.first.window.assign(s.text_view(16));
  split_into(s.text_view(17), r.first.devices);
  r.events = s.uint64(18);
  r.other_events = s.uint64(19);
}

}  // namespace composer::db
