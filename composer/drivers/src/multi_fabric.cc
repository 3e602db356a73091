#include "composer/drivers/multi_fabric.h"

#include <map>
#include <set>

#include "composer/common/names.h"

namespace composer {
namespace {

Error in_member(const std::string& member, const Error& e) {
  return Error{e.code, "fabric " + member + ": " + e.message};
}

}  // namespace

std::string MultiFabric::qualify(std::string_view member, std::string_view id) {
  std::string out;
  out.reserve(member.size() + 1 + id.size());
  out.append(member).append(":").append(id);
  return out;
}

Expected<std::unique_ptr<MultiFabric>> MultiFabric::create(std::vector<Member> members) {
  if (members.empty()) {
    return Error{ErrorCode::kInvalidArgument, "a multi-fabric needs at least one fabric"};
  }
  std::set<std::string> names;
  for (const Member& m : members) {
    if (!valid_name(m.name)) {
      return Error{
          ErrorCode::kInvalidArgument,
          "fabric name '" + m.name + "': names may hold only letters, digits, '-', '_' and '.'"};
    }
    if (!names.insert(m.name).second) {
      return Error{ErrorCode::kInvalidArgument, "fabric " + m.name + " is declared twice"};
    }
    if (!m.fabric) {
      return Error{ErrorCode::kInvalidArgument, "fabric " + m.name + " has no driver"};
    }
  }
  return std::unique_ptr<MultiFabric>(new MultiFabric(std::move(members)));
}

MultiFabric::MultiFabric(std::vector<Member> members) : members_(std::move(members)) {
  for (const Member& m : members_) {
    if (!driver_.empty()) driver_ += ",";
    driver_ += m.name + "=" + std::string(m.fabric->driver());
  }
}

Expected<std::pair<MultiFabric::Member*, std::string>> MultiFabric::split(
    const std::string& qualified, std::string_view what) {
  const auto colon = qualified.find(':');
  if (colon != std::string::npos) {
    const std::string_view name(qualified.data(), colon);
    for (Member& m : members_) {
      if (m.name == name) return std::make_pair(&m, qualified.substr(colon + 1));
    }
  }
  std::string known;
  for (const Member& m : members_) known += (known.empty() ? "" : ", ") + m.name;
  return Error{ErrorCode::kNotFound, std::string(what) + " '" + qualified +
                                         "' names no fabric of this composerd (fabrics: " + known +
                                         ")"};
}

Expected<FabricInventory> MultiFabric::inventory() {
  FabricInventory out;
  std::map<std::string, std::string> node_fabric;  // Slurm node -> member that serves it
  for (Member& m : members_) {
    auto inv = m.fabric->inventory();
    if (!inv) return in_member(m.name, inv.error());
    for (Host& h : inv->hosts) {
      auto [it, fresh] = node_fabric.emplace(h.node, m.name);
      if (!fresh) {
        return Error{ErrorCode::kConflict, "node " + h.node + " is served by both fabric " +
                                               it->second + " and fabric " + m.name +
                                               "; map each node to one fabric"};
      }
      h.fabric_id = qualify(m.name, h.fabric_id);
      for (std::string& z : h.zones) z = qualify(m.name, z);
      out.hosts.push_back(std::move(h));
    }
    for (Device& d : inv->devices) {
      d.id = qualify(m.name, d.id);
      d.zone = qualify(m.name, d.zone);
      // Two fabrics are two sets of hardware: their domains never coincide by name.
      for (FailureDomain& dom : d.domains) dom.name = qualify(m.name, dom.name);
      out.devices.push_back(std::move(d));
    }
    for (const auto& [device, host] : inv->attached) {
      out.attached.emplace(qualify(m.name, device), qualify(m.name, host));
    }
    for (const auto& [device, holder] : inv->held) {
      out.held.emplace(qualify(m.name, device), holder);
    }
    for (const std::string& why : inv->skipped) out.skipped.push_back(m.name + ": " + why);
  }
  return out;
}

Expected<Operation> MultiFabric::change(bool attach, const std::string& fabric_host,
                                        const std::vector<std::string>& device_ids) {
  auto host = split(fabric_host, "fabric host");
  if (!host) return host.error();
  Member* member = host->first;
  std::vector<std::string> ids;
  ids.reserve(device_ids.size());
  for (const std::string& d : device_ids) {
    auto device = split(d, "device");
    if (!device) return device.error();
    if (device->first != member) {
      return Error{ErrorCode::kConflict, "device " + d + " is on fabric " + device->first->name +
                                             ", host " + fabric_host + " on fabric " +
                                             member->name + ": a host reaches its own fabric only"};
    }
    ids.push_back(std::move(device->second));
  }
  auto op = attach ? member->fabric->attach(host->second, ids)
                   : member->fabric->detach(host->second, ids);
  if (!op) return in_member(member->name, op.error());
  op->id = qualify(member->name, op->id);
  return op;
}

Expected<Operation> MultiFabric::attach(const std::string& fabric_host,
                                        const std::vector<std::string>& device_ids) {
  return change(true, fabric_host, device_ids);
}

Expected<Operation> MultiFabric::detach(const std::string& fabric_host,
                                        const std::vector<std::string>& device_ids) {
  return change(false, fabric_host, device_ids);
}

Expected<Operation> MultiFabric::operation_status(const std::string& operation_id) {
  auto target = split(operation_id, "operation");
  if (!target) return target.error();
  auto op = target->first->fabric->operation_status(target->second);
  if (!op) return in_member(target->first->name, op.error());
  op->id = operation_id;
  return op;
}

std::string MultiFabric::lane(const std::string& fabric_host) const {
  // The member's name the host id starts with ("pod-a:host-1"); what no member claims shares
  // the "" lane, and attach() refuses it.
  return fabric_host.substr(0, fabric_host.find(':'));
}

bool MultiFabric::serialises_changes(const std::string& lane) const {
  for (const Member& m : members_) {
    if (m.name == lane) return m.fabric->serialises_changes("");
  }
  return false;
}

Expected<BatchStarted> MultiFabric::apply_batch(const std::vector<FabricChange>& changes) {
  BatchStarted out;
  Member* member = nullptr;
  std::vector<FabricChange> inner;
  std::vector<size_t> index;  // inner's position -> the caller's
  for (size_t i = 0; i < changes.size(); ++i) {
    auto host = split(changes[i].fabric_host, "fabric host");
    if (!host) {
      out.refused.emplace(i, host.error());
      continue;
    }
    if (member != nullptr && host->first != member) {
      out.refused.emplace(
          i, Error{ErrorCode::kInternal, "a batch of changes spans fabrics " + member->name +
                                             " and " + host->first->name});
      continue;
    }
    member = host->first;
    FabricChange c{changes[i].attach, host->second, {}};
    bool foreign = false;
    for (const std::string& d : changes[i].device_ids) {
      auto device = split(d, "device");
      if (!device || device->first != member) {
        out.refused.emplace(
            i, device ? Error{ErrorCode::kConflict,
                              "device " + d + " is on fabric " + device->first->name + ", host " +
                                  changes[i].fabric_host + " on fabric " + member->name}
                      : device.error());
        foreign = true;
        break;
      }
      c.device_ids.push_back(std::move(device->second));
    }
    if (foreign) continue;
    inner.push_back(std::move(c));
    index.push_back(i);
  }
  if (member == nullptr || inner.empty()) {
    out.operation = Operation{"", OperationState::kDone, ""};
    return out;
  }
  auto started = member->fabric->apply_batch(inner);
  if (!started) return in_member(member->name, started.error());
  for (auto& [i, why] : started->refused)
    out.refused.emplace(index[i], in_member(member->name, why));
  out.operation = std::move(started->operation);
  if (!out.operation.id.empty()) out.operation.id = qualify(member->name, out.operation.id);
  return out;
}

Expected<std::vector<std::pair<std::string, Health>>> MultiFabric::health() {
  std::vector<std::pair<std::string, Health>> out;
  for (Member& m : members_) {
    auto h = m.fabric->health();
    if (!h) return in_member(m.name, h.error());
    for (auto& [device, health] : *h) out.emplace_back(qualify(m.name, device), health);
  }
  return out;
}

}  // namespace composer
