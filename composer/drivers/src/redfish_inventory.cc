#include "composer/common/strings.h"
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

std::string zone_of(const std::vector<std::string>& zones) {
  if (zones.empty()) return "default";
  return join(zones, "+");
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

Expected<std::vector<std::string>> RedfishFabric::Impl::collection(const std::string& uri) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::string page = uri;
  for (int n = 0; !page.empty(); ++n) {
    if (n == kMaxPages) {
      return fabric_error("the collection " + uri + " has more than " + std::to_string(kMaxPages) +
                          " pages of Members@odata.nextLink");
    }
    if (!seen.insert(page).second) {
      return fabric_error("the collection " + uri + " links its page " + page +
                          " again through Members@odata.nextLink");
    }
    auto c = get(page);
    if (!c) return c.error();
    for (std::string& m : members(*c)) out.push_back(std::move(m));
    page = path_of((*c)["Members@odata.nextLink"].asString());
  }
  return out;
}

Status RedfishFabric::Impl::discover() {
  // The service root as DSP0266 spells it, else with the trailing slash some services insist
  // on (both are the service root).
  auto root = get(std::string(kServiceRoot));
  if (!root && root.error().code == ErrorCode::kNotFound) {
    root = get(std::string(kServiceRoot) + "/");
  }
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
  auto zones = collection(zones_uri);
  if (!zones) return zones.error();
  for (const std::string& z : *zones) {
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
      if (!cap) {
        // Only the slot limits come from it: the defaults do as well as a start-up failure.
        log::warning(
            "redfish: the composition capabilities object does not load; the default "
            "attach slots apply",
            {{"url", o.base_url},
             {"object", object},
             {"error", cap.error().message},
             {"slots", std::to_string(o.default_slots)}});
        continue;
      }
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

void RedfishFabric::Impl::read_identity(const Json::Value& r, DeviceIdentity* id) {
  auto take = [](std::string* field, const Json::Value& v) {
    if (field->empty() && v.isString()) *field = v.asString();
  };
  auto pci = [](std::string* field, const Json::Value& v) {
    if (!field->empty() || !v.isString()) return;
    if (std::optional<std::string> n = normal_pci_id(v.asString())) *field = *n;
  };
  // A linked resource that does not load costs only what it would have told.
  auto load = [this](const std::string& uri) -> std::optional<Json::Value> {
    auto v = get(uri);
    if (v) return std::move(*v);
    std::lock_guard<std::mutex> lock(index_mu);
    if (reported_skips.insert("identity:" + uri).second) {
      log::warning("redfish: a resource that identifies a device does not load",
                   {{"uri", uri}, {"error", v.error().message}});
    }
    return std::nullopt;
  };
  take(&id->serial, r["SerialNumber"]);
  take(&id->uuid, r["UUID"]);
  std::vector<std::string> functions = links(r["Links"]["PCIeFunctions"]);
  for (const std::string& dev : links(r["Links"]["PCIeDevice"])) {
    std::optional<Json::Value> d = load(dev);
    if (!d) continue;
    take(&id->serial, (*d)["SerialNumber"]);
    take(&id->uuid, (*d)["UUID"]);
    if (functions.empty()) {
      if (const std::string c = odata_id((*d)["PCIeFunctions"]); !c.empty()) {
        if (auto m = collection(trim_slash(c))) functions = std::move(*m);
      }
    }
  }
  // The first function that names its ids: a GPU or drive is function 0 of its device.
  for (const std::string& f : functions) {
    if (!id->pci_vendor.empty()) break;
    std::optional<Json::Value> fn = load(f);
    if (!fn) continue;
    pci(&id->pci_vendor, (*fn)["VendorId"]);
    pci(&id->pci_device, (*fn)["DeviceId"]);
  }
}

Expected<std::optional<Device>> RedfishFabric::Impl::read_block(const Json::Value& b, bool* compute,
                                                                std::string* skip) {
  std::set<std::string> types;
  std::vector<std::string> type_list;
  for (const Json::Value& t : b["ResourceBlockType"]) {
    types.insert(t.asString());
    type_list.push_back(t.asString());
  }
  *compute = types.contains("Compute") || types.contains("ComputerSystem");
  if (*compute) return std::optional<Device>{};
  Device d;
  d.id = b["Id"].asString();
  if (d.id.empty()) d.id = last_segment(odata_id(b));
  std::vector<std::string> zones;
  for (const std::string& z : links(b["Links"]["Zones"])) zones.push_back(last_segment(z));
  d.zone = zone_of(zones);
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
      read_identity(*proc, &d.identity);
      return std::optional<Device>(d);
    }
    *skip = "a Processor block with no processor of ProcessorType GPU; only GPUs are pooled";
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
      if (d.identity.serial.empty()) d.identity.serial = (*mem)["SerialNumber"].asString();
    }
    if (d.capacity_bytes == 0) {
      *skip = "a Memory block with no CapacityMiB; nothing to pool";
      return std::optional<Device>{};
    }
    if (d.model.empty()) d.model = "memory";
    return std::optional<Device>(d);
  }
  if (types.contains("Storage")) {
    d.type = DeviceType::kNvme;
    const std::vector<std::string> drives = links(b["Drives"]);
    if (drives.empty()) {
      *skip = std::string("a Storage block with no Drives") +
              (b["SimpleStorage"].empty() ? "" : " (its SimpleStorage devices name no protocol)") +
              "; only NVMe drives are pooled";
      return std::optional<Device>{};
    }
    for (const std::string& m : drives) {
      auto drive = get(m);
      if (!drive) return drive.error();
      // Drive.Protocol says what the host sees; a SAS or SATA drive is no NVMe device.
      const std::string protocol = (*drive)["Protocol"].asString();
      if (protocol != "NVMe") {
        *skip = (protocol.empty() ? std::string("a drive with no Protocol")
                                  : "a " + protocol + " drive") +
                " (" + m + "); only NVMe drives are pooled";
        return std::optional<Device>{};
      }
      d.capacity_bytes += (*drive)["CapacityBytes"].asUInt64();
      if (d.model.empty()) d.model = (*drive)["Model"].asString();
      if (d.model.empty()) d.model = protocol;
      d.health = worst(d.health, health_of((*drive)["Status"]));
      if (d.identity.empty()) read_identity(*drive, &d.identity);
    }
    if (d.capacity_bytes == 0) {
      *skip = "a Storage block whose drives give no CapacityBytes; nothing to pool";
      return std::optional<Device>{};
    }
    return std::optional<Device>(d);
  }
  // "an untyped block", "an IO block", "a Network block": the article follows the word.
  std::string kind = join(type_list, "+");
  if (kind.empty()) kind = "untyped";
  const bool vowel = std::string_view("AEIOUaeiou").find(kind.front()) != std::string_view::npos;
  *skip =
      (vowel ? "an " : "a ") + kind + " block; only GPU, memory and NVMe drive blocks are pooled";
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

std::vector<FailureDomain> RedfishFabric::Impl::chassis_domains(
    const std::vector<std::string>& chassis) {
  std::vector<FailureDomain> out;
  for (const std::string& first : chassis) {
    std::string uri = first;
    for (int depth = 0; depth < 8 && !uri.empty(); ++depth) {
      auto seen = chassis_seen.find(uri);
      if (seen == chassis_seen.end()) {
        ChassisInfo info;
        if (auto c = get(uri)) {
          info.level = lower((*c)["ChassisType"].asString());
          info.name = (*c)["Id"].asString();
          if (info.name.empty()) info.name = last_segment(uri);
          info.contained_by = trim_slash(odata_id((*c)["Links"]["ContainedBy"]));
        } else {
          log::warning("redfish: chassis unreadable; its failure domains are left out",
                       {{"chassis", uri}, {"error", c.error().message}});
        }
        seen = chassis_seen.emplace(uri, std::move(info)).first;
      }
      const ChassisInfo& info = seen->second;
      if (info.level.empty()) break;
      const bool known = std::any_of(out.begin(), out.end(), [&info](const FailureDomain& d) {
        return d.level == info.level;
      });
      if (!known) out.push_back(FailureDomain{info.level, info.name});
      uri = info.contained_by;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Expected<FabricInventory> RedfishFabric::Impl::inventory() {
  FabricInventory inv;
  chassis_seen.clear();
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
  refuse_shared_names(&inv, &new_system_uris, &new_host_blocks, &new_initiators);
  // What sits in a system or behind an initiator that is no host served here is held by it.
  std::set<std::string> served;
  for (const Host& h : inv.hosts) served.insert(h.fabric_id);
  for (auto it = inv.attached.begin(); it != inv.attached.end();) {
    if (served.contains(it->second)) {
      ++it;
      continue;
    }
    inv.held[it->first] =
        "in use by " + it->second + " on the fabric, which is no host served here";
    it = inv.attached.erase(it);
  }
  std::lock_guard<std::mutex> lock(index_mu);
  for (const std::string& why : inv.skipped) {
    if (reported_skips.insert(why).second) log::info("redfish: not pooled", {{"reason", why}});
  }
  block_uris = std::move(new_block_uris);
  system_uris = std::move(new_system_uris);
  cxl_chunks = std::move(new_chunks);
  cxl_initiators = std::move(new_initiators);
  cxl_endpoint_host = std::move(new_endpoint_host);
  host_blocks = std::move(new_host_blocks);
  system_hosts = std::move(new_system_hosts);
  return inv;
}

void RedfishFabric::Impl::refuse_shared_names(
    FabricInventory* inv, std::map<std::string, std::string>* system_index,
    std::map<std::string, HostBlock>* host_block_index,
    std::map<std::string, std::vector<CxlInitiator>>* initiators) const {
  if (!o.use_host_name || !o.host_map.empty()) return;
  std::map<std::string, std::vector<std::string>> by_node;  // node -> fabric host ids
  for (const Host& h : inv->hosts) by_node[h.node].push_back(h.fabric_id);
  std::set<std::string> refused;
  for (const auto& [node, ids] : by_node) {
    if (ids.size() < 2) continue;
    std::vector<std::string> quoted;
    for (const std::string& id : ids) quoted.push_back("'" + id + "'");
    inv->skipped.push_back("hosts " + join(quoted, " and ") + " all have HostName '" + node +
                           "' under FabricNodeNames=hostname; none of them is served, as one "
                           "Slurm node cannot be several hosts: give them distinct HostNames or "
                           "name them with FabricHostMap");
    refused.insert(ids.begin(), ids.end());
  }
  if (refused.empty()) return;
  std::erase_if(inv->hosts, [&refused](const Host& h) { return refused.contains(h.fabric_id); });
  for (const std::string& id : refused) {
    system_index->erase(id);
    host_block_index->erase(id);
    initiators->erase(id);
  }
}

Status RedfishFabric::Impl::block_inventory(FabricInventory* out,
                                            std::map<std::string, std::string>* block_index,
                                            std::map<std::string, std::string>* system_index,
                                            std::map<std::string, HostBlock>* host_block_index,
                                            std::map<std::string, std::string>* system_host_index) {
  FabricInventory& inv = *out;
  auto coll = collection(blocks_uri);
  if (!coll) return coll.error();
  std::map<std::string, BlockInfo> blocks;  // block URI -> what it is
  std::vector<std::string> host_block_order;
  // Pooled devices: id -> the systems they are composed into, and whether reserved.
  std::vector<std::pair<std::string, std::vector<std::string>>> device_systems;
  std::map<std::string, std::vector<std::string>> device_zones;  // of multi-zone devices
  std::map<std::string, std::string>& new_block_uris = *block_index;
  std::map<std::string, std::string>& system_host = *system_host_index;
  for (const std::string& uri : *coll) {
    auto b = get(uri);
    if (!b) return b.error();
    bool compute = false;
    std::string skip;
    auto dev = read_block(*b, &compute, &skip);
    if (!dev) return dev.error();
    if (!skip.empty()) inv.skipped.push_back(uri + ": " + skip);
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
    d.domains = chassis_domains(links((*b)["Links"]["Chassis"]));
    new_block_uris[d.id] = uri;
    if ((*b)["CompositionStatus"]["Reserved"].asBool()) {
      inv.held[d.id] = "reserved on the fabric (CompositionStatus.Reserved)";
    } else if (!info.composed_into.empty()) {
      device_systems.emplace_back(d.id, info.composed_into);
    }
    if (info.zones.size() > 1) device_zones[d.id] = info.zones;
    inv.devices.push_back(std::move(d));
  }
  auto systems = collection(systems_uri);
  if (!systems) return systems.error();
  std::map<std::string, std::string>& new_system_uris = *system_index;
  std::map<std::string, Json::Value> composed_from;  // ComputerSystem block URI -> its system
  for (const std::string& uri : *systems) {
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
    // The zones of its compute blocks: a composed system reaches what its compute block
    // reaches, not every zone the service composes in.
    for (const std::string& b : links((*s)["Links"]["ResourceBlocks"])) {
      auto it = blocks.find(b);
      if (it == blocks.end() || !it->second.compute) continue;
      for (const std::string& z : it->second.zones) {
        if (std::find(h.zones.begin(), h.zones.end(), z) == h.zones.end()) h.zones.push_back(z);
      }
    }
    // A system that lists no compute block: the zones the service says it composes in.
    if (h.zones.empty()) h.zones = composition_zones;
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
  // A device in several zones is in all of them: its zone is their union ("1+2"), which
  // every host reaching one of them reaches as well, after its own zones.
  for (const auto& [device, zones] : device_zones) {
    const std::string name = zone_of(zones);
    for (Host& h : inv.hosts) {
      bool reaches = false;
      for (const std::string& z : zones) {
        reaches = reaches || std::find(h.zones.begin(), h.zones.end(), z) != h.zones.end();
      }
      if (reaches && std::find(h.zones.begin(), h.zones.end(), name) == h.zones.end()) {
        h.zones.push_back(name);
      }
    }
  }
  auto host_of = [&system_host](const std::string& system) {
    auto it = system_host.find(system);
    return it != system_host.end() ? it->second : last_segment(system);
  };
  for (const auto& [device, in] : device_systems) {
    if (in.size() == 1) {
      inv.attached[device] = host_of(in.front());
      continue;
    }
    // Shared (CompositionStatus.SharingEnabled): held by all of them, attached to none.
    std::vector<std::string> holders;
    for (const std::string& system : in) holders.push_back(host_of(system));
    inv.held[device] = "shared by systems " + join(holders, ", ");
  }
  return Status::Ok();
}

}  // namespace composer::drivers
