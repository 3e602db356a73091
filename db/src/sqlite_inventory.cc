// The SQLite store's inventory: hosts and devices as the fabric reports them, drain and health,
// foreign holders, and composerd's claims.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/strings.h"
#include "records.h"
#include "rows.h"
#include "sqlite_statements.h"
#include "sqlite_store.h"

namespace composer::db {

using sqlite::append_event;
using sqlite::Connection;
using sqlite::find_device;

Status SqliteStore::upsert_hosts(const std::vector<Host>& hosts) {
  if (Status s = storable(hosts); !s) return s;
  return write_status([&hosts](Connection& db) {
    for (const Host& h : hosts) {
      db.statement(sqlite::kUpsertHost)
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
  if (Status s = storable(devices); !s) return s;
  return write_status([&devices, now_ms](Connection& db) {
    for (const Device& d : devices) {
      // A health change the inventory reports is a ledger event like any other.
      const std::optional<Device> known = find_device(db, d.id);
      db.statement(sqlite::kUpsertDevice)
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
        append_event(db, sqlite::device_event(db, *known, "health", to_string(known->health),
                                              to_string(d.health), "",
                                              "reported by the fabric inventory", now_ms));
      }
    }
  });
}

Expected<std::vector<Host>> SqliteStore::hosts() {
  return read<std::vector<Host>>([](Connection& db) {
    std::vector<Host> out;
    auto s = db.statement(sqlite::kSelectHosts);
    while (s->step()) out.push_back(read_host(*s));
    return out;
  });
}

Expected<std::vector<Device>> SqliteStore::devices(const DeviceFilter& filter) {
  return read<std::vector<Device>>([&filter](Connection& db) {
    auto s = db.statement(filter.node ? sqlite::kSelectDevicesOnNode : sqlite::kSelectDevices);
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
  if (!*found) return Error(ErrorCode::kNotFound, "no device " + db::quoted(id));
  return std::move(**found);
}

Status SqliteStore::set_drained(const std::vector<std::string>& device_ids, bool drained,
                                std::string_view reason, std::string_view actor, int64_t now_ms) {
  return write_status([&](Connection& db) {
    for (const std::string& device_id : device_ids) {
      auto found = find_device(db, device_id);
      if (!found) refuse(ErrorCode::kNotFound, "no device " + db::quoted(device_id));
      const Device before = *found;
      Device after = before;
      after.drained = drained;
      after.drain_reason = drained ? std::string(reason) : std::string();
      if (after.drained == before.drained && after.drain_reason == before.drain_reason) continue;
      db.statement(sqlite::kSetDrained)
          ->bind(1, device_id)
          .bind(2, drained ? 1 : 0)
          .bind(3, after.drain_reason)
          .run();
      append_event(db, sqlite::device_event(db, before, drained ? "drain" : "resume",
                                            to_string(before.state()), to_string(after.state()),
                                            actor, reason, now_ms));
    }
  });
}

Status SqliteStore::set_health(const std::string& device_id, Health health, std::string_view detail,
                               int64_t now_ms) {
  return write_status([&](Connection& db) {
    auto found = find_device(db, device_id);
    if (!found) refuse(ErrorCode::kNotFound, "no device " + db::quoted(device_id));
    if (found->health == health) return;
    db.statement(sqlite::kSetHealth)->bind(1, device_id).bind(2, to_string(health)).run();
    append_event(db, sqlite::device_event(db, *found, "health", to_string(found->health),
                                          to_string(health), "", detail, now_ms));
  });
}

Status SqliteStore::set_holders(const std::vector<std::pair<std::string, std::string>>& holders,
                                std::string_view kind, std::string_view actor,
                                std::string_view detail, int64_t now_ms) {
  if (holders.empty()) return Status::Ok();
  return write_status([&](Connection& db) {
    for (const auto& [id, holder] : holders) {
      auto found = find_device(db, id);
      if (!found) refuse(ErrorCode::kNotFound, "no device " + db::quoted(id));
      if (found->holder == holder) continue;
      const Device before = *found;
      Device after = before;
      after.holder = holder;
      db.statement(sqlite::kSetHolder)->bind(1, id).bind(2, holder).run();
      append_event(db, sqlite::device_event(db, before, kind, to_string(before.state()),
                                            to_string(after.state()), actor,
                                            holder_detail(detail, holder), now_ms));
    }
  });
}

Expected<std::map<std::string, std::string>> SqliteStore::claims() {
  return read<std::map<std::string, std::string>>([](Connection& db) {
    std::map<std::string, std::string> out;
    auto s = db.statement(sqlite::kSelectClaims);
    while (s->step()) out.emplace(s->text(0), s->text(1));
    return out;
  });
}

Status SqliteStore::drop_claims(const std::vector<std::string>& device_ids,
                                const std::string& fabric_host) {
  if (device_ids.empty()) return Status::Ok();
  return write_status([&](Connection& db) {
    for (const auto& id : device_ids) {
      db.statement(sqlite::kDeleteClaim)->bind(1, id).bind(2, fabric_host).run();
    }
  });
}

}  // namespace composer::db
