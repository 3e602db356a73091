#include <cctype>

#include "composer/common/strings.h"
#include "redfish_driver.h"

namespace composer::drivers {
namespace redfish {

Json::Value memory_connection(const std::string& initiator, const std::string& target,
                              const std::string& chunk) {
  Json::Value body;
  body["ConnectionType"] = "Memory";
  Json::Value info;
  info["AccessCapabilities"].append("Read");
  info["AccessCapabilities"].append("Write");
  info["MemoryChunk"]["@odata.id"] = chunk;
  body["MemoryChunkInfo"].append(info);
  Json::Value i;
  i["@odata.id"] = initiator;
  body["Links"]["InitiatorEndpoints"].append(i);
  if (!target.empty()) {
    Json::Value t;
    t["@odata.id"] = target;
    body["Links"]["TargetEndpoints"].append(t);
  }
  return body;
}

}  // namespace redfish

Status RedfishFabric::Impl::discover_cxl(const Json::Value& root) {
  const std::string fabrics = trim_slash(odata_id(root["Fabrics"]));
  if (fabrics.empty()) return Status::Ok();
  auto coll = collection(fabrics);
  if (!coll) return coll.error();
  for (const std::string& uri : *coll) {
    auto f = get(uri);
    if (!f) return f.error();
    if ((*f)["FabricType"].asString() != "CXL") continue;
    cxl_endpoints_uri = trim_slash(odata_id((*f)["Endpoints"]));
    cxl_connections_uri = trim_slash(odata_id((*f)["Connections"]));
    if (cxl_endpoints_uri.empty() || cxl_connections_uri.empty()) {
      return fabric_error("the CXL fabric at " + uri +
                          " lacks Endpoints or Connections; its memory cannot be composed");
    }
    cxl_fabric_id = (*f)["Id"].asString();
    if (cxl_fabric_id.empty()) cxl_fabric_id = last_segment(uri);
    return Status::Ok();
  }
  return Status::Ok();
}

std::string RedfishFabric::Impl::cxl_zone(const std::string& zone_uri) const {
  return lower(cxl_fabric_id) + "-" + last_segment(zone_uri);
}

Expected<std::vector<CxlConnection>> RedfishFabric::Impl::cxl_connections(
    const std::set<std::string>& linked) {
  auto coll = collection(cxl_connections_uri);
  if (!coll) return coll.error();
  std::vector<CxlConnection> out;
  // The collection, and the connections endpoints link that it does not list.
  std::vector<std::string> uris = *coll;
  for (const std::string& l : linked) {
    if (std::find(uris.begin(), uris.end(), l) == uris.end()) uris.push_back(l);
  }
  for (const std::string& uri : uris) {
    auto c = get(uri);
    if (!c) {
      if (c.error().code == ErrorCode::kNotFound) continue;  // deleted meanwhile
      return c.error();
    }
    if ((*c)["ConnectionType"].asString() != "Memory") continue;
    CxlConnection conn;
    conn.uri = uri;
    for (const Json::Value& info : (*c)["MemoryChunkInfo"]) {
      for (const std::string& m : links(info["MemoryChunk"])) conn.chunks.push_back(m);
    }
    conn.initiators = links((*c)["Links"]["InitiatorEndpoints"]);
    out.push_back(std::move(conn));
  }
  return out;
}

DeviceIdentity RedfishFabric::Impl::cxl_identity(const Json::Value& entity,
                                                 const std::string& logical_device) {
  DeviceIdentity id;
  // The logical device .../PCIeDevices/<d>/CXLLogicalDevices/<ld> sits on a PCIe device whose
  // functions name the vendor and device ids (and the device perhaps its serial).
  if (const size_t at = logical_device.find("/CXLLogicalDevices/"); at != std::string::npos) {
    Json::Value links_to(Json::objectValue);
    links_to["Links"]["PCIeDevice"].append(Json::Value(Json::objectValue));
    links_to["Links"]["PCIeDevice"][0]["@odata.id"] = logical_device.substr(0, at);
    read_identity(links_to, &id);
  }
  // Else, the Global CXL ID (GCXLID) "<device serial as 8 hex bytes>:<logical device>": the
  // serial as the host's CXL memory device shows it (/sys/bus/cxl/devices/memN/serial).
  if (id.serial.empty()) {
    for (const Json::Value& name : entity["Identifiers"]) {
      if (!name.isObject() || !name["DurableName"].isString() ||
          name["DurableNameFormat"] != "GCXLID") {
        continue;
      }
      std::string hex;
      const std::string durable = name["DurableName"].asString();
      for (char ch : durable.substr(0, durable.find(':'))) {
        if (std::isxdigit(static_cast<unsigned char>(ch)) != 0) {
          hex += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        } else if (ch != '-') {
          hex.clear();
          break;
        }
      }
      if (hex.size() == 16) id.serial = "0x" + hex;
      break;
    }
  }
  return id;
}

Status RedfishFabric::Impl::cxl_inventory(
    FabricInventory* inv, std::map<std::string, CxlChunk>* chunks,
    std::map<std::string, std::vector<CxlInitiator>>* initiators,
    std::map<std::string, std::string>* endpoint_host) {
  auto coll = collection(cxl_endpoints_uri);
  if (!coll) return coll.error();
  const std::string systems_prefix = systems_uri.empty() ? "" : systems_uri + "/";
  std::map<std::string, std::string> host_system;   // host id -> system URI, if any
  std::map<std::string, std::string> chunk_device;  // chunk URI -> device id
  std::set<std::string> linked;                     // connections the endpoints link
  for (const std::string& uri : *coll) {
    auto e = get(uri);
    if (!e) return e.error();
    for (const std::string& c : links((*e)["Links"]["Connections"])) linked.insert(path_of(c));
    std::vector<std::string> zones;
    for (const std::string& z : links((*e)["Links"]["Zones"])) zones.push_back(cxl_zone(z));
    if (zones.empty()) zones.push_back(cxl_zone("default"));
    std::string endpoint_id = (*e)["Id"].asString();
    if (endpoint_id.empty()) endpoint_id = last_segment(uri);
    bool initiator = false;
    std::string system;
    std::vector<std::string> memory;
    DeviceIdentity identity;  // of the CXL device behind the endpoint, for its memory chunks
    for (const Json::Value& ent : (*e)["ConnectedEntities"]) {
      const std::string role = ent["EntityRole"].asString();
      const std::string target = trim_slash(odata_id(ent["EntityLink"]));
      if (ent["EntityType"].asString() == "CXLDevice" && role != "Initiator") {
        identity = cxl_identity(ent, target);
      }
      if (role == "Initiator" || role == "Both") {
        initiator = true;
        if (!systems_prefix.empty() && target.starts_with(systems_prefix) && system.empty()) {
          const std::string rest = target.substr(systems_prefix.size());
          system = systems_prefix + rest.substr(0, rest.find('/'));
        }
      }
      if ((role == "Target" || role == "Both") && ent["EntityType"].asString() == "MemoryChunk" &&
          !target.empty()) {
        memory.push_back(target);
      }
    }
    if (initiator) {
      const std::string host = system.empty() ? endpoint_id : last_segment(system);
      (*initiators)[host].push_back(CxlInitiator{uri, zones});
      (*endpoint_host)[uri] = host;
      if (!system.empty()) host_system[host] = system;
    }
    for (const std::string& m : memory) {
      auto chunk = get(m);
      if (!chunk) return chunk.error();
      Device d;
      d.id = "cxl-" + endpoint_id;
      if (memory.size() > 1) {
        // .../MemoryDomains/<domain>/MemoryChunks/<chunk>
        const std::string parent = m.substr(0, m.rfind('/'));
        d.id += "-" + last_segment(parent.substr(0, parent.rfind('/'))) + "-" + last_segment(m);
      }
      d.type = DeviceType::kMem;
      d.identity = identity;
      d.capacity_bytes = (*chunk)["MemoryChunkSizeMiB"].asUInt64() * kMiB;
      if (d.capacity_bytes == 0) continue;  // nothing to hand out
      const std::string range = (*chunk)["AddressRangeType"].asString();
      d.model = range.empty() ? "CXL" : "CXL " + range;
      d.zone = zones.front();
      // .../Chassis/<chassis>/MemoryDomains/...: the chassis is the memory's appliance.
      if (const size_t at = m.find("/Chassis/"); at != std::string::npos) {
        const size_t end = m.find('/', at + 9);
        d.domains = chassis_domains({m.substr(0, end)});
      }
      d.health = worst(health_of((*chunk)["Status"]), health_of((*e)["Status"]));
      chunk_device[m] = d.id;
      (*chunks)[d.id] = CxlChunk{m, uri, zones};
      inv->devices.push_back(std::move(d));
    }
  }
  auto conns = cxl_connections(linked);
  if (!conns) return conns.error();
  // Attached: in one connection whose initiators are all one host's, holding that chunk only
  // (the connections this driver makes). Any other connection holds the chunk outside
  // composerd: several hosts, several chunks, or no initiator at all.
  std::map<std::string, std::set<std::string>> chunk_hosts;  // device id -> hosts
  std::map<std::string, int> chunk_connections;
  std::set<std::string> in_wider;  // devices in a connection that holds more
  for (const CxlConnection& c : *conns) {
    std::set<std::string> hosts;
    for (const std::string& i : c.initiators) {
      auto it = endpoint_host->find(i);
      hosts.insert(it != endpoint_host->end() ? it->second : last_segment(i));
    }
    for (const std::string& m : c.chunks) {
      auto it = chunk_device.find(m);
      if (it == chunk_device.end()) continue;
      chunk_hosts[it->second].insert(hosts.begin(), hosts.end());
      ++chunk_connections[it->second];
      if (hosts.size() != 1 || c.chunks.size() != 1) in_wider.insert(it->second);
    }
  }
  for (const auto& [device, hosts] : chunk_hosts) {
    if (hosts.size() == 1 && chunk_connections[device] == 1 && !in_wider.contains(device)) {
      inv->attached[device] = *hosts.begin();
      continue;
    }
    std::vector<std::string> names(hosts.begin(), hosts.end());
    inv->held[device] = names.empty()
                            ? "in a memory connection with no initiator endpoint"
                            : "connected to " + join(names, ", ") +
                                  " by a memory connection that composerd does not make (several "
                                  "hosts, several chunks or several connections)";
  }
  // Hosts: merged with the composed system of the same Id, if the inventory has one.
  for (auto it = initiators->begin(); it != initiators->end();) {
    const std::string& host = it->first;
    Json::Value system;
    system["Id"] = host;
    if (o.use_host_name && o.host_map.empty() && host_system.contains(host)) {
      auto s = get(host_system[host]);
      if (!s) return s.error();
      system = *s;
      system["Id"] = host;
    }
    auto node = node_name(system);
    if (!node) {
      it = initiators->erase(it);
      continue;
    }
    Host* h = nullptr;
    for (Host& existing : inv->hosts) {
      if (existing.fabric_id == host) h = &existing;
    }
    if (h == nullptr) {
      inv->hosts.emplace_back();
      h = &inv->hosts.back();
      h->node = *node;
      h->fabric_id = host;
    }
    h->mem_slots = std::max(h->mem_slots, mem_slots);
    for (const CxlInitiator& i : it->second) {
      for (const std::string& z : i.zones) {
        if (std::find(h->zones.begin(), h->zones.end(), z) == h->zones.end()) {
          h->zones.push_back(z);
        }
      }
    }
    ++it;
  }
  return Status::Ok();
}

Expected<Operation> RedfishFabric::Impl::cxl_change(const std::string& host, const Resolved& r,
                                                    bool adding) {
  // The connections the chunks' target endpoints link count as well as the collection's.
  std::set<std::string> linked;
  for (const auto& [id, chunk] : r.chunks) {
    auto e = get(chunk.target);
    if (!e) return e.error();
    for (const std::string& c : links((*e)["Links"]["Connections"])) linked.insert(path_of(c));
  }
  auto conns = cxl_connections(linked);
  if (!conns) return conns.error();
  std::set<std::string> mine;
  for (const CxlInitiator& i : r.initiators) mine.insert(i.uri);
  struct Todo {
    std::string id;
    CxlChunk chunk;
    std::string connection;  // detaching: the connection to delete
    std::string initiator;
  };
  std::vector<Todo> todo;
  for (const auto& [id, chunk] : r.chunks) {
    // own: the one connection of exactly this host and this chunk; anything else that holds
    // the chunk is not composerd's to take over or delete.
    std::string own, other, wider;
    std::string own_initiator;
    for (const CxlConnection& c : *conns) {
      if (std::find(c.chunks.begin(), c.chunks.end(), chunk.uri) == c.chunks.end()) continue;
      bool ours = !c.initiators.empty();
      for (const std::string& i : c.initiators) ours = ours && mine.contains(i);
      if (ours && c.chunks.size() == 1 && own.empty()) {
        own = c.uri;
        own_initiator = c.initiators.front();
      } else if (ours || c.initiators.empty()) {
        wider = c.uri;
      } else {
        std::lock_guard<std::mutex> lock(index_mu);
        for (const std::string& i : c.initiators) {
          if (mine.contains(i)) continue;
          auto it = cxl_endpoint_host.find(i);
          other = it != cxl_endpoint_host.end() ? it->second : last_segment(i);
        }
      }
    }
    if (!adding && own.empty()) {
      if (!other.empty() || !wider.empty()) {
        log::info("redfish: CXL memory held outside this host left alone by a detach",
                  {{"host", host}, {"memory", id}, {"held_by", other.empty() ? wider : other}});
      }
      continue;  // not attached to this host: nothing to detach
    }
    if (adding && !other.empty()) {
      return Error{ErrorCode::kConflict, "redfish: CXL memory " + id + " is connected to host " +
                                             other + ", cannot attach it to " + host};
    }
    if (adding && own.empty() && !wider.empty()) {
      return Error{ErrorCode::kConflict,
                   "redfish: CXL memory " + id + " is held by connection " + wider +
                       ", which holds more than this host and this chunk; composerd neither "
                       "takes it over nor deletes it, so cannot attach it to " +
                       host};
    }
    if (adding && own.empty()) {
      std::string initiator;
      for (const CxlInitiator& i : r.initiators) {
        for (const std::string& z : i.zones) {
          if (initiator.empty() &&
              std::find(chunk.zones.begin(), chunk.zones.end(), z) != chunk.zones.end()) {
            initiator = i.uri;
          }
        }
      }
      if (initiator.empty()) {
        return Error{ErrorCode::kInvalidArgument,
                     "redfish: host " + host + " has no CXL initiator endpoint in zone " +
                         chunk.zones.front() + " of memory " + id + ", so cannot reach it"};
      }
      todo.push_back(Todo{id, chunk, "", initiator});
    }
    if (!adding) todo.push_back(Todo{id, chunk, own, own_initiator});
  }
  std::vector<Step> steps;
  for (const Todo& t : todo) {
    Expected<Reply> reply = Reply{};
    std::string undo_target;
    if (adding) {
      Json::Value body = memory_connection(t.initiator, t.chunk.target, t.chunk.uri);
      reply = request("POST", cxl_connections_uri, &body);
      undo_target = std::string(kCxlDisconnect) + t.initiator;
    } else {
      reply = request("DELETE", t.connection);
      undo_target = std::string(kCxlConnect) + t.initiator + "," + t.chunk.target;
    }
    const std::string what = adding ? "POST " + cxl_connections_uri : "DELETE " + t.connection;
    if (auto stop = take_step(host, what, std::move(reply), undo_target, t.chunk.uri, &steps)) {
      return *stop;
    }
  }
  return settle(std::move(steps), o.task_wait_ms);
}

}  // namespace composer::drivers
