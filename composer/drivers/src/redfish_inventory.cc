#include "redfish_driver.h"

namespace composer::drivers {
namespace redfish {

std::string odata_id(const Json::Value& v) {
  if (v.isString()) return v.asString();  // sloppy services list bare URIs
  if (v.isObject() && v["@odata.id"].isString()) return v["@odata.id"].asString();
  return "";
}

std::string last_segment(std::string uri) {
  while (!uri.empty() && uri.back() == '/') uri.pop_back();
  const size_t slash = uri.rfind('/');
  return slash == std::string::npos ? uri : uri.substr(slash + 1);
}

std::string trim_slash(std::string uri) {
  while (uri.size() > 1 && uri.back() == '/') uri.pop_back();
  return uri;
}

std::vector<std::string> links(const Json::Value& v) {
  std::vector<std::string> out;
  if (v.isArray()) {
    for (const Json::Value& m : v) {
      if (std::string id = odata_id(m); !id.empty()) out.push_back(trim_slash(id));
    }
  } else if (std::string id = odata_id(v); !id.empty()) {
    out.push_back(trim_slash(id));
  }
  return out;
}

std::vector<std::string> members(const Json::Value& collection) {
  for (const char* key : {"Members", "members"}) {
    if (collection.isMember(key)) return links(collection[key]);
  }
  if (collection["Links"].isMember("Members")) return links(collection["Links"]["Members"]);
  return {};
}

Health health_of(const Json::Value& status) {
  const std::string h = status["Health"].asString();
  const std::string state = status["State"].asString();
  if (h == "Critical" || state == "UnavailableOffline") return Health::kCritical;
  if (h == "Warning") return Health::kWarning;
  return Health::kOk;
}

Health worst(Health a, Health b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

std::string path_of(const std::string& uri) {
  for (const char* scheme : {"http://", "https://"}) {
    if (!uri.starts_with(scheme)) continue;
    const size_t slash = uri.find('/', std::string_view(scheme).size());
    return slash == std::string::npos ? "/" : uri.substr(slash);
  }
  return uri;
}

}  // namespace redfish

Status RedfishFabric::Impl::discover() {
  auto root = get(std::string(kServiceRoot));
  if (!root) return root.error();
  sessions_uri = trim_slash(odata_id((*root)["Links"]["Sessions"]));
  if (sessions_uri.empty()) sessions_uri = std::string(kServiceRoot) + "/SessionService/Sessions";
  if (o.auth == RedfishOptions::Auth::kSession) {
    if (Status s = login(); !s) return s;
  }
  systems_uri = trim_slash(odata_id((*root)["Systems"]));
  if (Status s = discover_cxl(*root); !s) return s;
  const std::string composition = odata_id((*root)["CompositionService"]);
  if (composition.empty()) {
    if (!cxl_fabric_id.empty()) {
      if (mem_slots == 0) mem_slots = o.default_slots;
      log::info("redfish: service discovered (CXL fabric only)",
                {{"url", o.base_url}, {"fabric", cxl_fabric_id}});
      return Status::Ok();
    }
    return fabric_error("the service root at " + o.base_url +
                        " has neither a CompositionService nor a CXL fabric under Fabrics; "
                        "this service cannot compose systems");
  }
  auto service = get(composition);
  if (!service) return service.error();
  blocks_uri = trim_slash(odata_id((*service)["ResourceBlocks"]));
  zones_uri = trim_slash(odata_id((*service)["ResourceZones"]));
  if (blocks_uri.empty() || zones_uri.empty() || systems_uri.empty()) {
    return fabric_error("the CompositionService at " + composition +
                        " lacks ResourceBlocks or ResourceZones, or the root lacks Systems");
  }
  // Composition capabilities: on the Systems collection (current services) or on each
  // resource zone (older ones).
  std::vector<Json::Value> capability_sets;
  auto systems = get(systems_uri);
  if (!systems) return systems.error();
  capability_sets.push_back((*systems)["@Redfish.CollectionCapabilities"]);
  auto zones = get(zones_uri);
  if (!zones) return zones.error();
  for (const std::string& z : members(*zones)) {
    auto zone = get(z);
    if (!zone) return zone.error();
    if (zone->isMember("@Redfish.CollectionCapabilities")) {
      Json::Value caps = (*zone)["@Redfish.CollectionCapabilities"];
      for (Json::Value& c : caps["Capabilities"]) {
        if (c["Links"]["RelatedItem"].empty()) c["Links"]["RelatedItem"].append(Json::Value(z));
      }
      capability_sets.push_back(caps);
    }
  }
  for (const Json::Value& caps : capability_sets) {
    for (const Json::Value& c : caps["Capabilities"]) {
      if (c["UseCase"].asString() != "ComputerSystemComposition") continue;
      if (compose_target.empty()) {
        compose_target = trim_slash(path_of(odata_id(c["Links"]["TargetCollection"])));
      }
      for (const std::string& z : links(c["Links"]["RelatedItem"])) {
        const std::string name = last_segment(z);
        if (std::find(composition_zones.begin(), composition_zones.end(), name) ==
            composition_zones.end()) {
          composition_zones.push_back(name);
        }
      }
      const std::string object = odata_id(c["CapabilitiesObject"]);
      if (object.empty()) continue;
      auto cap = get(object);
      if (!cap) return cap.error();
      const Json::Value& limits = (*cap)["@Redfish.ResourceBlockLimits"];
      auto limit = [&limits](const char* key, uint32_t* slot) {
        if (limits[key].isUInt() && *slot == 0) *slot = limits[key].asUInt();
      };
      limit("MaxProcessor", &gpu_slots);
      limit("MaxMemory", &mem_slots);
      limit("MaxStorage", &nvme_slots);
    }
  }
  if (gpu_slots == 0) gpu_slots = o.default_slots;
  if (mem_slots == 0) mem_slots = o.default_slots;
  if (nvme_slots == 0) nvme_slots = o.default_slots;
  log::info("redfish: service discovered",
            {{"url", o.base_url}, {"zones", std::to_string(composition_zones.size())}});
  return Status::Ok();
}

Expected<std::optional<Device>> RedfishFabric::Impl::read_block(const Json::Value& b,
                                                                bool* compute) {
  std::set<std::string> types;
  for (const Json::Value& t : b["ResourceBlockType"]) types.insert(t.asString());
  *compute = types.contains("Compute") || types.contains("ComputerSystem");
  if (*compute) return std::optional<Device>{};
  Device d;
  d.id = b["Id"].asString();
  if (d.id.empty()) d.id = last_segment(odata_id(b));
  const std::vector<std::string> zones = links(b["Links"]["Zones"]);
  d.zone = zones.empty() ? "default" : last_segment(zones.front());
  d.health = health_of(b["Status"]);
  const std::string composition = b["CompositionStatus"]["CompositionState"].asString();
  if (composition == "Failed" || composition == "Unavailable") d.health = Health::kCritical;
  if (types.contains("Processor")) {
    for (const std::string& p : links(b["Processors"])) {
      auto proc = get(p);
      if (!proc) return proc.error();
      if ((*proc)["ProcessorType"].asString() != "GPU") continue;
      d.type = DeviceType::kGpu;
      d.model = (*proc)["Model"].asString();
      if (d.model.empty()) d.model = (*proc)["Name"].asString();
      d.health = worst(d.health, health_of((*proc)["Status"]));
      return std::optional<Device>(d);
    }
    return std::optional<Device>{};
  }
  if (types.contains("Memory")) {
    d.type = DeviceType::kMem;
    for (const std::string& m : links(b["Memory"])) {
      auto mem = get(m);
      if (!mem) return mem.error();
      d.capacity_bytes += (*mem)["CapacityMiB"].asUInt64() * kMiB;
      if (d.model.empty()) d.model = (*mem)["Model"].asString();
      if (d.model.empty()) d.model = (*mem)["MemoryDeviceType"].asString();
      d.health = worst(d.health, health_of((*mem)["Status"]));
    }
    if (d.capacity_bytes == 0) return std::optional<Device>{};
    if (d.model.empty()) d.model = "memory";
    return std::optional<Device>(d);
  }
  if (types.contains("Storage")) {
    d.type = DeviceType::kNvme;
    for (const std::string& m : links(b["Drives"])) {
      auto drive = get(m);
      if (!drive) return drive.error();
      d.capacity_bytes += (*drive)["CapacityBytes"].asUInt64();
      if (d.model.empty()) d.model = (*drive)["Model"].asString();
      if (d.model.empty()) d.model = (*drive)["Protocol"].asString();
      d.health = worst(d.health, health_of((*drive)["Status"]));
    }
    if (d.capacity_bytes == 0) return std::optional<Device>{};
    return std::optional<Device>(d);
  }
  return std::optional<Device>{};
}

std::string RedfishFabric::Impl::action_target(const Json::Value& system, const char* action) {
  return system["Actions"][std::string("#ComputerSystem.") + action]["target"].asString();
}

std::optional<std::string> RedfishFabric::Impl::node_name(const Json::Value& system) const {
  const std::string id = system["Id"].asString();
  if (!o.host_map.empty()) {
    auto it = o.host_map.find(id);
    if (it == o.host_map.end()) return std::nullopt;
    return it->second;
  }
  if (o.use_host_name) {
    const std::string h = system["HostName"].asString();
    if (h.empty()) return std::nullopt;
    return h;
  }
  return id;
}

Expected<FabricInventory> RedfishFabric::Impl::inventory() {
  FabricInventory inv;
  std::map<std::string, std::string> new_block_uris;
  std::map<std::string, std::string> new_system_uris;
  std::map<std::string, HostBlock> new_host_blocks;
  std::map<std::string, std::string> new_system_hosts;
  if (!blocks_uri.empty()) {
    if (Status s = block_inventory(&inv, &new_block_uris, &new_system_uris, &new_host_blocks,
                                   &new_system_hosts);
        !s) {
      return s.error();
    }
  }
  std::map<std::string, CxlChunk> new_chunks;
  std::map<std::string, std::vector<CxlInitiator>> new_initiators;
  std::map<std::string, std::string> new_endpoint_host;
  if (!cxl_fabric_id.empty()) {
    if (Status s = cxl_inventory(&inv, &new_chunks, &new_initiators, &new_endpoint_host); !s) {
      return s.error();
    }
  }
  std::lock_guard<std::mutex> lock(index_mu);
  block_uris = std::move(new_block_uris);
  system_uris = std::move(new_system_uris);
  cxl_chunks = std::move(new_chunks);
  cxl_initiators = std::move(new_initiators);
  cxl_endpoint_host = std::move(new_endpoint_host);
  host_blocks = std::move(new_host_blocks);
  system_hosts = std::move(new_system_hosts);
  return inv;
}

Status RedfishFabric::Impl::block_inventory(FabricInventory* out,
                                            std::map<std::string, std::string>* block_index,
                                            std::map<std::string, std::string>* system_index,
                                            std::map<std::string, HostBlock>* host_block_index,
                                            std::map<std::string, std::string>* system_host_index) {
  FabricInventory& inv = *out;
  auto coll = get(blocks_uri);
  if (!coll) return coll.error();
  std::map<std::string, BlockInfo> blocks;  // block URI -> what it is
  std::vector<std::string> host_block_order;
  std::vector<std::pair<std::string, std::string>> device_system;  // device id, system URI
  std::map<std::string, std::string>& new_block_uris = *block_index;
  std::map<std::string, std::string>& system_host = *system_host_index;
  for (const std::string& uri : members(*coll)) {
    auto b = get(uri);
    if (!b) return b.error();
    bool compute = false;
    auto dev = read_block(*b, &compute);
    if (!dev) return dev.error();
    BlockInfo info;
    info.uri = uri;
    info.id = (*b)["Id"].asString();
    if (info.id.empty()) info.id = last_segment(uri);
    info.compute = compute;
    for (const Json::Value& t : (*b)["ResourceBlockType"]) {
      info.system_block = info.system_block || t.asString() == "ComputerSystem";
    }
    info.own_systems = links((*b)["ComputerSystems"]);
    info.composed_into = links((*b)["Links"]["ComputerSystems"]);
    for (const std::string& z : links((*b)["Links"]["Zones"]))
      info.zones.push_back(last_segment(z));
    if (info.system_block) host_block_order.push_back(uri);
    blocks[uri] = info;
    if (!dev->has_value()) continue;
    Device d = std::move(**dev);
    new_block_uris[d.id] = uri;
    if (!info.composed_into.empty()) device_system.emplace_back(d.id, info.composed_into.front());
    inv.devices.push_back(std::move(d));
  }
  auto systems = get(systems_uri);
  if (!systems) return systems.error();
  std::map<std::string, std::string>& new_system_uris = *system_index;
  std::map<std::string, Json::Value> composed_from;  // ComputerSystem block URI -> its system
  for (const std::string& uri : members(*systems)) {
    auto s = get(uri);
    if (!s) return s.error();
    std::string from;
    const Json::Value& system = *s;  // const: reading must not add the members it asks for
    for (const std::string& b : links(system["Links"]["ResourceBlocks"])) {
      if (auto it = blocks.find(b); it != blocks.end() && it->second.system_block) from = b;
    }
    if (!from.empty()) {
      (*s)["@odata.id"] = uri;
      composed_from[from] = std::move(*s);
      continue;
    }
    const bool composable =
        !action_target(*s, "AddResourceBlock").empty() || (*s)["Links"].isMember("ResourceBlocks");
    if (!composable) continue;
    auto node = node_name(*s);
    if (!node) continue;
    Host h;
    h.node = *node;
    h.fabric_id = (*s)["Id"].asString();
    for (const std::string& b : links((*s)["Links"]["ResourceBlocks"])) {
      auto it = blocks.find(b);
      if (it == blocks.end() || !it->second.compute) continue;
      for (const std::string& z : it->second.zones) {
        if (std::find(h.zones.begin(), h.zones.end(), z) == h.zones.end()) h.zones.push_back(z);
      }
    }
    for (const std::string& z : composition_zones) {
      if (std::find(h.zones.begin(), h.zones.end(), z) == h.zones.end()) h.zones.push_back(z);
    }
    h.gpu_slots = gpu_slots;
    h.mem_slots = mem_slots;
    h.nvme_slots = nvme_slots;
    new_system_uris[h.fabric_id] = uri;
    system_host[uri] = h.fabric_id;
    inv.hosts.push_back(std::move(h));
  }
  for (const std::string& uri : host_block_order) {
    const BlockInfo& info = blocks[uri];
    std::string system;
    Json::Value composed;
    if (auto it = composed_from.find(uri); it != composed_from.end()) {
      composed = it->second;
      system = odata_id(composed);
    } else if (!info.composed_into.empty()) {
      system = info.composed_into.front();
    }
    if (!system.empty()) system_host[system] = info.id;
    // Named by the block's Id (host_map), or by the HostName of the system the block holds,
    // else of the system composed from it: the first does not change when one is composed.
    Json::Value naming;
    naming["Id"] = info.id;
    if (o.use_host_name && o.host_map.empty()) {
      std::string host_name;
      for (const std::string& own : info.own_systems) {
        auto s = get(own);
        if (!s) return s.error();
        if (host_name.empty()) host_name = (*s)["HostName"].asString();
      }
      if (host_name.empty()) host_name = composed["HostName"].asString();
      if (!host_name.empty()) naming["HostName"] = host_name;
    }
    auto node = node_name(naming);
    if (!node) continue;
    Host h;
    h.node = *node;
    h.fabric_id = info.id;
    h.zones = info.zones;
    if (h.zones.empty()) h.zones.push_back("default");
    h.gpu_slots = gpu_slots;
    h.mem_slots = mem_slots;
    h.nvme_slots = nvme_slots;
    (*host_block_index)[info.id] = HostBlock{uri, system, *node};
    inv.hosts.push_back(std::move(h));
  }
  for (const auto& [device, system] : device_system) {
    auto it = system_host.find(system);
    inv.attached[device] = it != system_host.end() ? it->second : last_segment(system);
  }
  return Status::Ok();
}

}  // namespace composer::drivers
