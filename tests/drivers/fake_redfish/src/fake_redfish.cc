#include "composer/testing/fake_redfish.h"

#include <httplib.h>
#include <json/json.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "composer/test_support/basic_auth.h"
#include "http10_front.h"

namespace composer::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRoot = "/redfish/v1";
constexpr const char* kBlocks = "/redfish/v1/CompositionService/ResourceBlocks";
constexpr const char* kZones = "/redfish/v1/CompositionService/ResourceZones";
constexpr const char* kSystems = "/redfish/v1/Systems";
constexpr const char* kSessions = "/redfish/v1/SessionService/Sessions";
constexpr const char* kMonitors = "/redfish/v1/TaskService/TaskMonitors";
constexpr const char* kFabrics = "/redfish/v1/Fabrics";
constexpr const char* kCxlEndpoints = "/redfish/v1/Fabrics/CXL/Endpoints";
constexpr const char* kCxlConnections = "/redfish/v1/Fabrics/CXL/Connections";
constexpr const char* kCxlZones = "/redfish/v1/Fabrics/CXL/Zones";
constexpr const char* kChassis = "/redfish/v1/Chassis";
constexpr uint64_t kMiB = uint64_t{1} << 20;

std::string text(const Json::Value& v) {
  Json::StreamWriterBuilder w;
  w["indentation"] = "";
  return Json::writeString(w, v);
}

bool parse(const std::string& body, Json::Value* out) {
  Json::CharReaderBuilder b;
  std::unique_ptr<Json::CharReader> r(b.newCharReader());
  std::string why;
  return r->parse(body.data(), body.data() + body.size(), out, &why);
}

Json::Value link(const std::string& uri) {
  Json::Value v;
  v["@odata.id"] = uri;
  return v;
}

std::string normalise(std::string path) {
  if (const size_t q = path.find('?'); q != std::string::npos) path.resize(q);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

std::string last_segment(const std::string& uri) { return uri.substr(uri.rfind('/') + 1); }

Json::Value error_body(const std::string& id, const std::string& message, int status,
                       bool old_style) {
  Json::Value e;
  if (old_style) {
    e["Status"] = status;
    e["Message"] = message;
    return e;
  }
  e["error"]["code"] = "Base.1.16." + id;
  e["error"]["message"] = "See @Message.ExtendedInfo for more information.";
  Json::Value info;
  info["MessageId"] = "Base.1.16." + id;
  info["Message"] = message;
  info["Severity"] = "Critical";
  e["error"]["@Message.ExtendedInfo"].append(info);
  return e;
}

std::string default_mockups() {
  if (const char* env = std::getenv("COMPOSER_REDFISH_MOCKUPS"); env != nullptr && *env != '\0') {
    return env;
  }
  return COMPOSER_REDFISH_MOCKUPS;
}

struct Task {
  std::string uri;
  std::chrono::steady_clock::time_point due;
  std::string system;
  std::vector<std::string> add, remove;
  Json::Value connection;  // a memory connection to create (null: none)
  Json::Value compose;     // a system to compose (null: none)
  std::string disconnect;  // a connection to delete
  bool fails = false;
  std::string message;
  bool finished = false;
  bool failed = false;
};

}  // namespace

struct FakeRedfish::Impl {
  FakeRedfishOptions o;
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::unique_ptr<Http10Front> front;  // sloppy mode: what clients talk to

  mutable std::mutex mu;
  std::condition_variable stopping_cv;
  bool stopping = false;
  std::map<std::string, Json::Value> res;       // URI -> resource
  std::map<std::string, uint64_t> version;      // URI -> ETag counter
  std::map<std::string, std::string> sessions;  // token -> session URI
  uint64_t next_session = 1;
  std::map<std::string, Task> tasks;  // monitor URI -> task
  uint64_t next_task = 1;
  std::deque<FakeRedfishFault> faults;
  std::map<std::string, uint64_t> counts;
  std::vector<std::string> log;              // "METHOD /path" of every request but the control ones
  std::vector<FakeRedfish::Change> changes;  // the requests that change the service
  std::map<std::string, std::vector<std::string>> generated;
  std::map<std::string, std::string> drive_serial;  // generated drive block URI -> its serial
  uint64_t next_connection = 100;
  uint64_t next_system = 1;

  // ---- building the inventory ----

  Status load(const std::string& dir) {
    const fs::path base = fs::path(dir) / "public-composability";
    std::error_code ec;
    if (!fs::is_directory(base, ec)) {
      return Error{ErrorCode::kNotFound,
                   "fake redfish: mockup folder " + base.string() +
                       " does not exist; the source tree keeps it in "
                       "tests/drivers/fake_redfish/mockups, or set COMPOSER_REDFISH_MOCKUPS"};
    }
    for (const auto& entry : fs::recursive_directory_iterator(base, ec)) {
      if (!entry.is_regular_file() || entry.path().filename() != "index.json") continue;
      const std::string rel = fs::relative(entry.path().parent_path(), base).generic_string();
      if (rel.starts_with("$") || rel.starts_with("JsonSchemas") || rel.starts_with("Registries")) {
        continue;
      }
      std::ifstream in(entry.path());
      std::stringstream ss;
      ss << in.rdbuf();
      Json::Value v;
      if (!parse(ss.str(), &v)) {
        return Error{ErrorCode::kInternal,
                     "fake redfish: " + entry.path().string() + " is not valid JSON"};
      }
      v.removeMember("@Redfish.Copyright");
      res[normalise(std::string(kRoot) + (rel == "." ? "" : "/" + rel))] = v;
    }
    if (!res.contains(kBlocks) || !res.contains(kSystems)) {
      return Error{ErrorCode::kNotFound, "fake redfish: " + base.string() +
                                             " lacks the ResourceBlocks or Systems collection"};
    }
    return Status::Ok();
  }

  // The CXL fabric of the public-cxl mockup, next to the composition service.
  Status load_cxl(const std::string& dir) {
    const fs::path base = fs::path(dir) / "public-cxl";
    std::error_code ec;
    if (!fs::is_directory(base, ec)) {
      return Error{ErrorCode::kNotFound, "fake redfish: mockup folder " + base.string() +
                                             " does not exist; the CXL fabric comes from it"};
    }
    for (const auto& entry : fs::recursive_directory_iterator(base, ec)) {
      if (!entry.is_regular_file() || entry.path().filename() != "index.json") continue;
      const std::string rel = fs::relative(entry.path().parent_path(), base).generic_string();
      if (!rel.starts_with("Fabrics") && !rel.starts_with("Chassis/") &&
          !rel.starts_with("Systems/CXL-System")) {
        continue;
      }
      std::ifstream in(entry.path());
      std::stringstream ss;
      ss << in.rdbuf();
      Json::Value v;
      if (!parse(ss.str(), &v)) {
        return Error{ErrorCode::kInternal,
                     "fake redfish: " + entry.path().string() + " is not valid JSON"};
      }
      v.removeMember("@Redfish.Copyright");
      const std::string uri = normalise(std::string(kRoot) + "/" + rel);
      res[uri] = v;
      if (rel.find('/') == rel.rfind('/') && rel.starts_with("Chassis/")) {
        add_member(kChassis, uri);
      }
    }
    if (!res.contains(kCxlConnections) || !res.contains(kCxlEndpoints)) {
      return Error{ErrorCode::kNotFound, "fake redfish: " + base.string() +
                                             " lacks the CXL fabric's Endpoints or Connections"};
    }
    add_member(kSystems, std::string(kSystems) + "/CXL-System");
    res[kRoot]["Fabrics"] = link(kFabrics);
    // Served as the mockup has it: connection 14 is linked from its endpoints only, not
    // listed in the Connections collection.
    return Status::Ok();
  }

  void add_endpoint(const std::string& id, const std::string& role, const std::string& type,
                    const std::string& entity, int zone) {
    const std::string uri = std::string(kCxlEndpoints) + "/" + id;
    Json::Value e;
    e["@odata.id"] = uri;
    e["@odata.type"] = "#Endpoint.v1_8_2.Endpoint";
    e["Id"] = id;
    e["Name"] = id;
    e["EndpointProtocol"] = "CXL";
    Json::Value ent;
    ent["EntityType"] = type;
    ent["EntityRole"] = role;
    ent["EntityLink"] = link(entity);
    e["ConnectedEntities"].append(ent);
    const std::string zuri = std::string(kCxlZones) + "/" + std::to_string(zone);
    e["Links"]["Zones"].append(link(zuri));
    e["Links"]["Connections"] = Json::Value(Json::arrayValue);
    res[zuri]["Links"]["Endpoints"].append(link(uri));
    res[uri] = e;
    add_member(kCxlEndpoints, uri);
  }

  void generate_cxl() {
    const std::string pool = std::string(kChassis) + "/CXLPool";
    Json::Value c;
    c["@odata.id"] = pool;
    c["Id"] = "CXLPool";
    c["Name"] = "Pooled CXL memory";
    c["ChassisType"] = "Enclosure";
    c["MemoryDomains"] = link(pool + "/MemoryDomains");
    res[pool] = c;
    add_member(kChassis, pool);
    const std::string domain = pool + "/MemoryDomains/1";
    res[pool + "/MemoryDomains"]["@odata.id"] = pool + "/MemoryDomains";
    res[pool + "/MemoryDomains"]["Members"] = Json::Value(Json::arrayValue);
    add_member(pool + "/MemoryDomains", domain);
    res[domain]["@odata.id"] = domain;
    res[domain]["Id"] = "1";
    res[domain]["MemoryChunks"] = link(domain + "/MemoryChunks");
    res[domain + "/MemoryChunks"]["@odata.id"] = domain + "/MemoryChunks";
    res[domain + "/MemoryChunks"]["Members"] = Json::Value(Json::arrayValue);
    for (uint32_t i = 1; i <= o.cxl_chunks; ++i) {
      const std::string n = std::to_string(i);
      const std::string uri = domain + "/MemoryChunks/" + n;
      const std::string ep = "TP" + n;
      Json::Value m;
      m["@odata.id"] = uri;
      m["@odata.type"] = "#MemoryChunks.v1_6_2.MemoryChunks";
      m["Id"] = n;
      m["Name"] = "Memory Chunk " + n;
      m["Status"]["State"] = "Enabled";
      m["Status"]["Health"] = "OK";
      m["MemoryChunkSizeMiB"] = Json::UInt64(64 * 1024);
      m["AddressRangeType"] = "Volatile";
      m["Links"]["Endpoints"].append(link(std::string(kCxlEndpoints) + "/" + ep));
      res[uri] = m;
      add_member(domain + "/MemoryChunks", uri);
      add_endpoint(ep, "Target", "MemoryChunk", uri, 3);
      generated["cxl"].push_back(ep);
    }
    for (const std::string& host : generated["host"]) {
      add_endpoint("I-" + host, "Initiator", "Processor",
                   std::string(kSystems) + "/" + host + "/Processors/CPU", 3);
    }
  }

  // Checks a memory connection to create; "" if it may go ahead.
  std::string check_connection(const Json::Value& body) const {
    if (body["ConnectionType"].asString() != "Memory") {
      return "ConnectionType '" + body["ConnectionType"].asString() +
             "' is not supported here; only Memory";
    }
    if (!body["MemoryChunkInfo"].isArray() || body["MemoryChunkInfo"].empty()) {
      return "a memory connection needs MemoryChunkInfo with at least one MemoryChunk";
    }
    const Json::Value& initiators = body["Links"]["InitiatorEndpoints"];
    if (!initiators.isArray() || initiators.empty()) {
      return "a memory connection needs Links.InitiatorEndpoints";
    }
    for (const Json::Value& l : initiators) {
      if (!res.contains(normalise(l["@odata.id"].asString()))) {
        return "the initiator endpoint " + l["@odata.id"].asString() + " does not exist";
      }
    }
    for (const Json::Value& l : body["Links"]["TargetEndpoints"]) {
      if (!res.contains(normalise(l["@odata.id"].asString()))) {
        return "the target endpoint " + l["@odata.id"].asString() + " does not exist";
      }
    }
    for (const Json::Value& info : body["MemoryChunkInfo"]) {
      const std::string chunk = normalise(info["MemoryChunk"]["@odata.id"].asString());
      if (!res.contains(chunk)) return "the memory chunk " + chunk + " does not exist";
      for (const std::string& uri : connection_uris()) {
        auto c = res.find(uri);
        if (c == res.end()) continue;
        for (const Json::Value& other : c->second["MemoryChunkInfo"]) {
          if (normalise(other["MemoryChunk"]["@odata.id"].asString()) == chunk) {
            return "the memory chunk " + chunk + " is already connected by connection " +
                   c->second["Id"].asString();
          }
        }
      }
    }
    return "";
  }

  // Every memory connection, listed in the collection or not.
  std::vector<std::string> connection_uris() const {
    std::vector<std::string> out;
    const std::string prefix = std::string(kCxlConnections) + "/";
    for (const auto& [uri, v] : res) {
      if (uri.starts_with(prefix) && uri.find('/', prefix.size()) == std::string::npos) {
        out.push_back(uri);
      }
    }
    return out;
  }

  std::string connect(const Json::Value& body) {
    const std::string id = std::to_string(next_connection++);
    const std::string uri = std::string(kCxlConnections) + "/" + id;
    Json::Value c;
    c["@odata.id"] = uri;
    c["@odata.type"] = "#Connection.v1_4_0.Connection";
    c["Id"] = id;
    c["Name"] = "Connection " + id;
    c["ConnectionType"] = "Memory";
    c["Status"]["State"] = "Enabled";
    c["Status"]["Health"] = "OK";
    c["MemoryChunkInfo"] = body["MemoryChunkInfo"];
    c["Links"]["InitiatorEndpoints"] = body["Links"]["InitiatorEndpoints"];
    c["Links"]["TargetEndpoints"] = body["Links"]["TargetEndpoints"];
    res[uri] = c;
    add_member(kCxlConnections, uri);
    for (const char* side : {"InitiatorEndpoints", "TargetEndpoints"}) {
      for (const Json::Value& l : body["Links"][side]) {
        res[normalise(l["@odata.id"].asString())]["Links"]["Connections"].append(link(uri));
      }
    }
    ++version[kCxlConnections];
    return uri;
  }

  void disconnect(const std::string& uri) {
    auto without = [&uri](const Json::Value& list) {
      Json::Value out(Json::arrayValue);
      for (const Json::Value& l : list) {
        if (l["@odata.id"].asString() != uri) out.append(l);
      }
      return out;
    };
    auto it = res.find(uri);
    if (it == res.end()) return;
    for (const char* side : {"InitiatorEndpoints", "TargetEndpoints"}) {
      for (const Json::Value& l : it->second["Links"][side]) {
        Json::Value& e = res[normalise(l["@odata.id"].asString())];
        e["Links"]["Connections"] = without(e["Links"]["Connections"]);
      }
    }
    Json::Value& coll = res[kCxlConnections];
    coll["Members"] = without(coll["Members"]);
    coll["Members@odata.count"] = coll["Members"].size();
    res.erase(uri);
    ++version[kCxlConnections];
  }

  void add_member(const std::string& collection, const std::string& uri) {
    Json::Value& c = res[collection];
    c["Members"].append(link(uri));
    c["Members@odata.count"] = c["Members"].size();
  }

  void add_block(const std::string& id, const std::string& type, const std::vector<int>& zones,
                 const std::string& sub, const Json::Value& part) {
    const std::string uri = std::string(kBlocks) + "/" + id;
    Json::Value b;
    b["@odata.id"] = uri;
    b["@odata.type"] = "#ResourceBlock.v1_4_3.ResourceBlock";
    b["Id"] = id;
    b["Name"] = id;
    b["ResourceBlockType"].append(type);
    b["Status"]["State"] = "Enabled";
    b["Status"]["Health"] = "OK";
    b["CompositionStatus"]["Reserved"] = false;
    b["CompositionStatus"]["CompositionState"] = "Unused";
    b["CompositionStatus"]["SharingCapable"] = false;
    b["CompositionStatus"]["MaxCompositions"] = 1;
    b["CompositionStatus"]["NumberOfCompositions"] = 0;
    b["Links"]["ComputerSystems"] = Json::Value(Json::arrayValue);
    for (int z : zones) {
      const std::string zuri = std::string(kZones) + "/" + std::to_string(z);
      b["Links"]["Zones"].append(link(zuri));
      if (z == zones.front()) res[zuri]["Links"]["ResourceBlocks"].append(link(uri));
    }
    if (!sub.empty()) {
      const std::string puri = uri + "/" + sub + "/0";
      Json::Value p = part;
      p["@odata.id"] = puri;
      p["Id"] = "0";
      p["Status"]["State"] = "Enabled";
      p["Status"]["Health"] = "OK";
      res[puri] = p;
      b[sub].append(link(puri));
    }
    res[uri] = b;
    add_member(kBlocks, uri);
  }

  // The members every resource has.
  static Json::Value resource(const std::string& uri, const std::string& type,
                              const std::string& id, const std::string& name) {
    Json::Value v;
    v["@odata.id"] = uri;
    v["@odata.type"] = type;
    v["Id"] = id;
    v["Name"] = name;
    return v;
  }

  // A PCIe device with one function under a generated block, as a real service shows the GPU or
  // drive the block holds: <block>/PCIeDevices/0 (SerialNumber, PCIeFunctions) and its
  // function 0 (VendorId, DeviceId, ClassCode). Returns the device's URI.
  std::string add_pcie_device(const std::string& block, const std::string& serial,
                              const std::string& vendor, const std::string& device,
                              const std::string& class_code) {
    const std::string dev = std::string(kBlocks) + "/" + block + "/PCIeDevices/0";
    const std::string fns = dev + "/PCIeFunctions";
    const std::string fn = fns + "/0";
    Json::Value d = resource(dev, "#PCIeDevice.v1_21_0.PCIeDevice", "0", block);
    d["SerialNumber"] = serial;
    d["PCIeFunctions"] = link(fns);
    d["Status"]["State"] = "Enabled";
    d["Status"]["Health"] = "OK";
    res[dev] = d;
    Json::Value c;
    c["@odata.id"] = fns;
    c["@odata.type"] = "#PCIeFunctionCollection.PCIeFunctionCollection";
    c["Name"] = "PCIe Functions";
    res[fns] = c;
    add_member(fns, fn);
    Json::Value f = resource(fn, "#PCIeFunction.v1_7_0.PCIeFunction", "0", block + " function 0");
    f["FunctionId"] = 0;
    f["FunctionType"] = "Physical";
    f["VendorId"] = vendor;
    f["DeviceId"] = device;
    f["ClassCode"] = class_code;
    f["Links"]["PCIeDevice"] = link(dev);
    res[fn] = f;
    return dev;
  }

  // A compute node as a ComputerSystem resource block, with the system it holds; no system is
  // composed from it yet.
  void add_host_block(const std::string& id, int zone) {
    add_block(id, "ComputerSystem", {zone}, "", Json::Value());
    const std::string uri = std::string(kBlocks) + "/" + id;
    const std::string own = uri + "/Systems/1";
    Json::Value s = resource(own, "#ComputerSystem.v1_27_0.ComputerSystem", "1", id);
    s["SystemType"] = "Physical";
    s["HostName"] = id + ".cluster";  // not the block's Id, so tests can tell which names
    s["PowerState"] = "On";
    s["Status"]["State"] = "Enabled";
    s["Status"]["Health"] = "OK";
    res[own] = s;
    res[uri]["ComputerSystems"].append(link(own));
    generated["host"].push_back(id);
  }

  void generate() {
    for (int z = 1; z <= 2; ++z) {
      char name[64];
      for (uint32_t i = 0; i < o.gpus_per_zone; ++i) {
        std::snprintf(name, sizeof name, "gpu-z%d-%02u", z, i);
        Json::Value p;
        p["@odata.type"] = "#Processor.v1_22_0.Processor";
        p["ProcessorType"] = "GPU";
        p["Manufacturer"] = "NVIDIA";
        p["Model"] = z == 1 ? "A100-80G" : "H100-80G";
        char serial[32];
        char uuid[64];
        std::snprintf(serial, sizeof serial, "FRG%d%08u", z, i);
        std::snprintf(uuid, sizeof uuid, "GPU-f00dcafe-%04d-4000-8000-%012u", z, i);
        p["SerialNumber"] = serial;
        p["UUID"] = uuid;
        p["Links"]["PCIeDevice"] =
            link(add_pcie_device(name, serial, "0x10DE", z == 1 ? "0x20B5" : "0x2331", "0x030200"));
        add_block(name, "Processor", {z}, "Processors", p);
        generated["gpu"].push_back(name);
      }
      for (uint32_t i = 0; i < o.memory_per_zone; ++i) {
        std::snprintf(name, sizeof name, "mem-z%d-%02u", z, i);
        Json::Value m;
        m["@odata.type"] = "#Memory.v1_20_0.Memory";
        m["MemoryDeviceType"] = "DDR5";
        m["Model"] = "CXL-DDR5";
        m["CapacityMiB"] = Json::UInt64(o.memory_mib);
        add_block(name, "Memory", {z}, "Memory", m);
        generated["mem"].push_back(name);
      }
      for (uint32_t i = 0; i < o.drives_per_zone; ++i) {
        std::snprintf(name, sizeof name, "nvme-z%d-%02u", z, i);
        Json::Value d;
        d["@odata.type"] = "#Drive.v1_22_0.Drive";
        d["Protocol"] = "NVMe";
        d["Model"] = "P5620";
        d["CapacityBytes"] = Json::UInt64(3840) * 1000 * 1000 * 1000;
        char serial[32];
        std::snprintf(serial, sizeof serial, "FRN%d%08u", z, i);
        d["SerialNumber"] = serial;
        const std::string dev =
            add_pcie_device(name, serial, o.drive_vendor_id, o.drive_device_id, "0x010802");
        drive_serial[std::string(kBlocks) + "/" + name] = serial;
        d["Links"]["PCIeFunctions"].append(link(dev + "/PCIeFunctions/0"));
        add_block(name, "Storage", {z}, "Drives", d);
        generated["nvme"].push_back(name);
      }
    }
    for (uint32_t i = 1; i <= o.hosts; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "node%02u", i);
      const int zone = i % 2 == 1 ? 1 : 2;
      if (o.host_blocks) {
        add_host_block(name, zone);
        continue;
      }
      const std::string compute = std::string("compute-") + name;
      add_block(compute, "Compute", {zone, 3 - zone}, "", Json::Value());
      const std::string sys = std::string(kSystems) + "/" + name;
      Json::Value& cb = res[std::string(kBlocks) + "/" + compute];
      cb["CompositionStatus"]["CompositionState"] = "Composed";
      cb["CompositionStatus"]["NumberOfCompositions"] = 1;
      cb["Links"]["ComputerSystems"].append(link(sys));
      Json::Value s;
      s["@odata.id"] = sys;
      s["@odata.type"] = "#ComputerSystem.v1_27_0.ComputerSystem";
      s["Id"] = name;
      s["Name"] = name;
      s["SystemType"] = "Composed";
      s["HostName"] = name;
      s["PowerState"] = "On";
      s["Status"]["State"] = "Enabled";
      s["Status"]["Health"] = "OK";
      s["Links"]["ResourceBlocks"].append(link(std::string(kBlocks) + "/" + compute));
      res[sys] = s;
      add_member(kSystems, sys);
      generated["host"].push_back(name);
    }
    if (o.capabilities_on_zones) {
      Json::Value caps = res[kSystems]["@Redfish.CollectionCapabilities"];
      res[kSystems].removeMember("@Redfish.CollectionCapabilities");
      for (Json::Value& c : caps["Capabilities"]) c["Links"].removeMember("RelatedItem");
      for (const char* z : {"/1", "/2"}) {
        res[std::string(kZones) + z]["@Redfish.CollectionCapabilities"] = caps;
      }
    }
    // Every system takes blocks the way this service was set to advertise.
    for (auto& [uri, v] : res) {
      if (!uri.starts_with(std::string(kSystems) + "/") || !v.isMember("Actions")) continue;
      if (o.patch_only) {
        v["Actions"].removeMember("#ComputerSystem.AddResourceBlock");
        v["Actions"].removeMember("#ComputerSystem.RemoveResourceBlock");
      }
    }
    for (auto& [uri, v] : res) {
      if (!uri.starts_with(std::string(kSystems) + "/") || uri.find('/', 20) != std::string::npos) {
        continue;
      }
      if (!v["Links"].isMember("ResourceBlocks") || o.patch_only) continue;
      v["Actions"]["#ComputerSystem.AddResourceBlock"]["target"] =
          uri + "/Actions/ComputerSystem.AddResourceBlock";
      v["Actions"]["#ComputerSystem.RemoveResourceBlock"]["target"] =
          uri + "/Actions/ComputerSystem.RemoveResourceBlock";
    }
  }

  // ---- state changes ----

  std::string etag(const std::string& uri) const {
    auto it = version.find(uri);
    return "\"" + std::to_string(it == version.end() ? 0 : it->second) + "\"";
  }

  static bool compute_block(const Json::Value& block) {
    for (const Json::Value& t : block["ResourceBlockType"]) {
      if (t.asString() == "ComputerSystem" || t.asString() == "Compute") return true;
    }
    return false;
  }

  std::set<std::string> zones_of(const std::string& block) const {
    std::set<std::string> out;
    auto it = res.find(block);
    if (it == res.end()) return out;
    for (const Json::Value& z : it->second["Links"]["Zones"]) out.insert(z["@odata.id"].asString());
    return out;
  }

  // Why a device block cannot join the system of a ComputerSystem block; "" if it can.
  std::string zone_problem(const std::string& compute, const std::string& block) const {
    const std::set<std::string> a = zones_of(compute), b = zones_of(block);
    for (const std::string& z : b) {
      if (a.contains(z)) return "";
    }
    return "the resource block " + last_segment(block) + " is in no resource zone of " +
           last_segment(compute) + ", so it cannot be composed with it";
  }

  // 400 for a request that can never succeed, 409 for one that collides with what is composed.
  static int refusal_status(const std::string& why) {
    for (const char* never : {"does not exist", "resource zone", "compute block"}) {
      if (why.find(never) != std::string::npos) return 400;
    }
    return 409;
  }
  static const char* refusal_id(const std::string& why) {
    return refusal_status(why) == 409 ? "ResourceInUse" : "PropertyValueConflict";
  }

  // Checks a change of a system's blocks; "" if it may go ahead. A system composed from a
  // ComputerSystem block takes only blocks that share a zone with it.
  std::string check(const std::string& system, const std::vector<std::string>& add) const {
    std::string host_block;
    if (auto sit = res.find(system); sit != res.end()) {
      for (const Json::Value& l : sit->second["Links"]["ResourceBlocks"]) {
        auto b = res.find(l["@odata.id"].asString());
        if (b == res.end()) continue;
        for (const Json::Value& t : b->second["ResourceBlockType"]) {
          if (t.asString() == "ComputerSystem") host_block = b->first;
        }
      }
    }
    for (const std::string& b : add) {
      auto it = res.find(b);
      if (it == res.end() || !b.starts_with(std::string(kBlocks) + "/")) {
        return "the resource block " + b + " does not exist";
      }
      const Json::Value& st = it->second["CompositionStatus"];
      const Json::Value& owners = it->second["Links"]["ComputerSystems"];
      bool mine = false;
      for (const Json::Value& l : owners) mine = mine || l["@odata.id"].asString() == system;
      if (!mine && owners.size() >= std::max(1u, st["MaxCompositions"].asUInt())) {
        return "the resource block " + last_segment(b) + " is already composed into " +
               last_segment(owners[0]["@odata.id"].asString());
      }
      if (!host_block.empty() && b != host_block) {
        if (std::string why = zone_problem(host_block, b); !why.empty()) return why;
      }
    }
    return "";
  }

  // Checks a POST to the Systems collection; "" if the system may be composed.
  std::string check_compose(const Json::Value& body) const {
    if (!body["Name"].isString() || body["Name"].asString().empty()) {
      return "the property Name is required to compose a system and does not exist in the request";
    }
    const Json::Value& list = body["Links"]["ResourceBlocks"];
    if (!list.isArray() || list.empty()) {
      return "Links.ResourceBlocks is required to compose a system and does not exist in the "
             "request";
    }
    std::vector<std::string> blocks;
    std::string compute;
    for (const Json::Value& l : list) {
      const std::string b = normalise(l["@odata.id"].asString());
      auto it = res.find(b);
      if (it == res.end() || !b.starts_with(std::string(kBlocks) + "/")) {
        return "the resource block " + b + " does not exist";
      }
      if (compute_block(it->second)) {
        if (!compute.empty()) {
          return "a composed system takes exactly one compute block (MaxCompute 1); the request "
                 "names " +
                 last_segment(compute) + " and " + last_segment(b);
        }
        compute = b;
      }
      blocks.push_back(b);
    }
    if (compute.empty()) {
      return "a composed system needs one compute block (MinCompute 1) and the request names "
             "none";
    }
    if (std::string why = check("", blocks); !why.empty()) return why;
    for (const std::string& b : blocks) {
      if (b == compute) continue;
      if (std::string why = zone_problem(compute, b); !why.empty()) return why;
    }
    return "";
  }

  // Composes a system from a checked request; its URI.
  std::string compose(const Json::Value& body) {
    const std::string id = "composed-" + std::to_string(next_system++);
    const std::string uri = std::string(kSystems) + "/" + id;
    std::vector<std::string> blocks;
    std::string host_name = body["HostName"].asString();
    for (const Json::Value& l : body["Links"]["ResourceBlocks"]) {
      const std::string b = normalise(l["@odata.id"].asString());
      blocks.push_back(b);
      if (host_name.empty() && compute_block(res[b])) {
        for (const Json::Value& own : res[b]["ComputerSystems"]) {
          auto it = res.find(own["@odata.id"].asString());
          if (it != res.end() && host_name.empty()) host_name = it->second["HostName"].asString();
        }
      }
    }
    Json::Value s;
    s["@odata.id"] = uri;
    s["@odata.type"] = "#ComputerSystem.v1_27_0.ComputerSystem";
    s["Id"] = id;
    s["Name"] = body["Name"];
    s["SystemType"] = "Composed";
    if (!host_name.empty()) s["HostName"] = host_name;
    s["PowerState"] = "On";
    s["Status"]["State"] = "Enabled";
    s["Status"]["Health"] = "OK";
    s["Links"]["ResourceBlocks"] = Json::Value(Json::arrayValue);
    if (!o.patch_only) {
      s["Actions"]["#ComputerSystem.AddResourceBlock"]["target"] =
          uri + "/Actions/ComputerSystem.AddResourceBlock";
      s["Actions"]["#ComputerSystem.RemoveResourceBlock"]["target"] =
          uri + "/Actions/ComputerSystem.RemoveResourceBlock";
    }
    res[uri] = s;
    add_member(kSystems, uri);
    apply(uri, blocks, {});
    return uri;
  }

  void apply(const std::string& system, const std::vector<std::string>& add,
             const std::vector<std::string>& remove) {
    Json::Value& sys = res[system];
    for (const std::string& b : add) {
      Json::Value& block = res[b];
      bool present = false;
      for (const Json::Value& l : sys["Links"]["ResourceBlocks"]) {
        present = present || l["@odata.id"].asString() == b;
      }
      if (present) continue;
      sys["Links"]["ResourceBlocks"].append(link(b));
      block["Links"]["ComputerSystems"].append(link(system));
      Json::Value& st = block["CompositionStatus"];
      st["NumberOfCompositions"] = block["Links"]["ComputerSystems"].size();
      st["CompositionState"] = st["SharingEnabled"].asBool() ? "ComposedAndAvailable" : "Composed";
      ++version[b];
    }
    auto without = [](const Json::Value& list, const std::string& uri) {
      Json::Value out(Json::arrayValue);
      for (const Json::Value& l : list) {
        if (l["@odata.id"].asString() != uri) out.append(l);
      }
      return out;
    };
    for (const std::string& b : remove) {
      Json::Value& block = res[b];
      sys["Links"]["ResourceBlocks"] = without(sys["Links"]["ResourceBlocks"], b);
      block["Links"]["ComputerSystems"] = without(block["Links"]["ComputerSystems"], system);
      Json::Value& st = block["CompositionStatus"];
      st["NumberOfCompositions"] = block["Links"]["ComputerSystems"].size();
      if (block["Links"]["ComputerSystems"].empty()) st["CompositionState"] = "Unused";
      ++version[b];
    }
    ++version[system];
  }

  void settle_tasks() {
    const auto now = std::chrono::steady_clock::now();
    for (auto& [uri, t] : tasks) {
      if (t.finished || now < t.due) continue;
      t.finished = true;
      if (t.fails) {
        t.failed = true;
        continue;
      }
      if (!t.connection.isNull()) {
        if (std::string why = check_connection(t.connection); !why.empty()) {
          t.failed = true;
          t.message = why;
        } else {
          connect(t.connection);
        }
        continue;
      }
      if (!t.disconnect.empty()) {
        disconnect(t.disconnect);
        continue;
      }
      if (!t.compose.isNull()) {
        // Checked again: another request may have taken a block meanwhile.
        if (std::string why = check_compose(t.compose); !why.empty()) {
          t.failed = true;
          t.message = why;
        } else {
          compose(t.compose);
        }
        continue;
      }
      if (!check(t.system, t.add).empty()) {
        t.failed = true;
        t.message = check(t.system, t.add);
        continue;
      }
      apply(t.system, t.add, t.remove);
    }
  }

  Json::Value task_body(const Task& t) const {
    Json::Value v;
    v["@odata.id"] = t.uri;
    v["@odata.type"] = "#Task.v1_7_4.Task";
    v["Id"] = last_segment(t.uri);
    v["TaskState"] = !t.finished ? "Running" : t.failed ? "Exception" : "Completed";
    v["TaskStatus"] = t.failed ? "Critical" : "OK";
    if (t.failed) {
      Json::Value m;
      m["Message"] = t.message;
      v["Messages"].append(m);
    }
    return v;
  }

  // ---- serving ----

  void send(httplib::Response& res_out, int status, const Json::Value& body) {
    res_out.status = status;
    res_out.set_content(text(body), "application/json");
  }

  void fail(httplib::Response& r, int status, const std::string& id, const std::string& msg) {
    send(r, status, error_body(id, msg, status, o.old_style_errors));
  }

  // One page of a collection: page_size members from $skip on, and the next page's link.
  Json::Value page(const std::string& uri, Json::Value v, const httplib::Request& req) const {
    const uint32_t skip =
        req.has_param("$skip")
            ? static_cast<uint32_t>(std::atoi(req.get_param_value("$skip").c_str()))
            : 0;
    Json::Value part(Json::arrayValue);
    const Json::Value all = v["Members"];
    for (uint32_t i = skip; i < all.size() && i < skip + o.page_size; ++i) part.append(all[i]);
    v["Members"] = part;
    if (skip + o.page_size < all.size()) {
      v["Members@odata.nextLink"] = uri + "?$skip=" + std::to_string(skip + o.page_size);
    }
    return shaped(uri, v);
  }

  // Serves a collection the way the mode wants.
  Json::Value shaped(const std::string& uri, Json::Value v) const {
    if (o.sloppy && v.isMember("Members") && uri != kRoot) {
      v["Links"]["Members"] = v["Members"];
      v.removeMember("Members");
    }
    return v;
  }

  // A POST to `path` that creates a resource: 201 with its Location at once, or 202 with a
  // task monitor when tasks are on or a fault asks for one. `remember` records in the task
  // what it will create when it finishes; `create` creates it now and answers its URI.
  void created(httplib::Response& r, const std::string& path,
               const std::function<void(Task&)>& remember,
               const std::function<std::string()>& create) {
    auto tf = take_fault("POST", path, true);
    if (o.task_ms > 0 || tf) {
      Task t = new_task(tf ? &*tf : nullptr);
      remember(t);
      r.set_header("Location", t.uri);
      send(r, 202, task_body(t));
      tasks[t.uri] = t;
      return;
    }
    const std::string uri = create();
    r.set_header("Location", uri);
    send(r, 201, res[uri]);
  }

  Task new_task(const FakeRedfishFault* task_fault) {
    Task t;
    t.uri = std::string(kMonitors) + "/" + std::to_string(next_task++);
    t.due = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, o.task_ms));
    t.fails = task_fault != nullptr;
    if (t.fails) t.message = task_fault->message;
    return t;
  }

  // The answer to a change that took effect at once, or the 202 of a task.
  void changed(httplib::Response& r, const std::string& system, std::vector<std::string> add,
               std::vector<std::string> remove, const FakeRedfishFault* task_fault) {
    if (o.task_ms > 0 || task_fault != nullptr) {
      Task t;
      t.uri = std::string(kMonitors) + "/" + std::to_string(next_task++);
      t.due = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, o.task_ms));
      t.system = system;
      t.add = std::move(add);
      t.remove = std::move(remove);
      t.fails = task_fault != nullptr;
      if (t.fails) t.message = task_fault->message;
      r.set_header("Location", t.uri);
      send(r, 202, task_body(t));
      tasks[t.uri] = t;
      return;
    }
    if (o.noop_actions) {  // success answered, nothing changed
      r.status = 204;
      return;
    }
    if (std::string why = hot_plug(system, add, remove); !why.empty()) {
      return fail(r, 500, "InternalError", why);
    }
    apply(system, add, remove);
    if (o.sloppy) {
      r.status = 204;
      return;
    }
    Json::Value ok;
    Json::Value info;
    info["MessageId"] = "Base.1.16.Success";
    info["Message"] = "The request completed successfully.";
    ok["@Message.ExtendedInfo"].append(info);
    send(r, 200, ok);
  }

  // o.hot_plug run for each generated drive taken away from or given to `system` (removals
  // first), as "COMMAND detach|attach SYSTEM-ID BLOCK-ID SERIAL"; "" when every run exits 0,
  // else what went wrong, and the blocks stay where they were. Its output goes to stderr.
  std::string hot_plug(const std::string& system, const std::vector<std::string>& add,
                       const std::vector<std::string>& remove) {
    if (o.hot_plug.empty()) return "";
    auto run = [&](const char* action, const std::string& block) -> std::string {
      auto it = drive_serial.find(block);
      if (it == drive_serial.end()) return "";
      const std::string cmd = o.hot_plug + " " + action + " " + last_segment(system) + " " +
                              last_segment(block) + " " + it->second + " 2>&1";
      FILE* p = ::popen(cmd.c_str(), "r");
      if (p == nullptr) return std::string("cannot run the hot-plug command: ") + strerror(errno);
      std::string out;
      char buf[512];
      while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
      const int status = ::pclose(p);
      std::fputs(out.c_str(), stderr);
      if (status == 0) return "";
      while (!out.empty() && out.back() == '\n') out.pop_back();
      return std::string("the ") + action + " of " + last_segment(block) + " failed: " + out;
    };
    for (const std::string& b : remove) {
      if (std::string why = run("detach", b); !why.empty()) return why;
    }
    for (const std::string& b : add) {
      if (std::string why = run("attach", b); !why.empty()) return why;
    }
    return "";
  }

  bool authenticated(const httplib::Request& req) const {
    if (const std::string t = req.get_header_value("X-Auth-Token"); !t.empty()) {
      return sessions.contains(t);
    }
    return test_support::is_basic_auth(req.get_header_value("Authorization"), o.username,
                                       o.password);
  }

  // Every system that links resource blocks, with the block ids in order (tasks settled
  // first). The caller holds mu.
  std::map<std::string, std::vector<std::string>> systems() {
    settle_tasks();
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& [uri, v] : res) {
      if (!uri.starts_with(std::string(kSystems) + "/") || !v["Links"].isMember("ResourceBlocks"))
        continue;
      std::vector<std::string>& blocks = out[last_segment(uri)];
      for (const Json::Value& l : v["Links"]["ResourceBlocks"]) {
        blocks.push_back(last_segment(l["@odata.id"].asString()));
      }
    }
    return out;
  }

  // The first matching fault, consumed; nullopt if none.
  std::optional<FakeRedfishFault> take_fault(const std::string& method, const std::string& path,
                                             bool task_only) {
    for (auto it = faults.begin(); it != faults.end(); ++it) {
      if (!it->method.empty() && it->method != method) continue;
      if (!it->path.empty() && path.find(it->path) == std::string::npos) continue;
      if ((it->kind == FakeRedfishFault::Kind::kTaskFails) != task_only) continue;
      if (it->skip > 0) {
        --it->skip;
        return std::nullopt;
      }
      FakeRedfishFault f = *it;
      if (--it->count == 0) faults.erase(it);
      return f;
    }
    return std::nullopt;
  }

  void handle(const httplib::Request& req, httplib::Response& r) {
    const std::string path = normalise(req.path);
    if (path.starts_with("/control/")) return control(req, r, path);
    std::optional<FakeRedfishFault> fault;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counts[req.method];
      std::string line = req.method + " " + req.path;
      for (const auto& [key, value] : req.params) {
        line += (line.find('?') == std::string::npos ? "?" : "&") + key + "=" + value;
      }
      if (req.method != "GET" && line.find("/SessionService/") == std::string::npos) {
        const std::string epoch = req.get_header_value("X-Composer-Epoch");
        changes.push_back({line, epoch.empty() ? 0 : std::stoll(epoch),
                           std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count()});
      }
      log.push_back(std::move(line));
      if (!o.root_redirect.empty() && req.method == "GET" && req.path == kRoot) {
        // The root moved: to its trailing-slash form here, or to another origin.
        const bool here = o.root_redirect == "/";
        r.status = here ? 308 : 302;
        r.set_header("Location", here ? std::string(kRoot) + "/" : o.root_redirect + kRoot + "/");
        return;
      }
      if (path != kSessions) fault = take_fault(req.method, path, false);
    }
    if (fault && fault->kind == FakeRedfishFault::Kind::kDelay) {
      std::unique_lock<std::mutex> lock(mu);
      stopping_cv.wait_for(lock, std::chrono::milliseconds(fault->delay_ms),
                           [this] { return stopping; });
    } else if (fault && fault->kind == FakeRedfishFault::Kind::kStatus) {
      return fail(r, fault->status, "InternalError", fault->message);
    } else if (fault && fault->kind == FakeRedfishFault::Kind::kReset) {
      r.status = 200;
      r.set_content_provider(
          1000, "application/json",
          [](size_t, size_t, httplib::DataSink& sink) {
            sink.write("{\"partial\":", 11);
            return false;  // breaks the connection part way through the answer
          },
          nullptr);
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    settle_tasks();
    const bool open = (req.method == "GET" && (path == kRoot || path == "/redfish")) ||
                      (req.method == "POST" && path == kSessions);
    if (!open && !authenticated(req)) {
      return fail(r, 401, "NoValidSession",
                  "There is no valid session established with the implementation.");
    }
    if (req.method == "POST" && path == kSessions) return login(req, r);
    if (req.method == "DELETE" && path.starts_with(std::string(kSessions) + "/")) {
      for (auto it = sessions.begin(); it != sessions.end(); ++it) {
        if (it->second == path) {
          sessions.erase(it);
          res.erase(path);
          r.status = 204;
          return;
        }
      }
      return fail(r, 404, "ResourceMissingAtURI", "The session " + path + " does not exist.");
    }
    if (req.method == "GET" && path.starts_with(std::string(kMonitors) + "/")) {
      auto it = tasks.find(path);
      if (it == tasks.end())
        return fail(r, 404, "ResourceMissingAtURI", "No task monitor " + path + ".");
      const Task& t = it->second;
      if (!t.finished) return send(r, 202, task_body(t));
      if (t.failed) return fail(r, 500, "InternalError", t.message);
      if (o.sloppy) {
        r.status = 204;
        return;
      }
      return send(r, 200, task_body(t));
    }
    if (req.method == "GET") {
      auto it = res.find(path);
      if (it == res.end())
        return fail(r, 404, "ResourceMissingAtURI",
                    "The resource at the URI " + path + " was not found.");
      r.set_header("ETag", etag(path));
      if (o.page_size > 0 && it->second["Members"].isArray() &&
          it->second["Members"].size() > o.page_size) {
        return send(r, 200, page(path, it->second, req));
      }
      return send(r, 200, shaped(path, it->second));
    }
    if (req.method == "POST" && (path.ends_with("/Actions/ComputerSystem.AddResourceBlock") ||
                                 path.ends_with("/Actions/ComputerSystem.RemoveResourceBlock"))) {
      const bool adding = path.ends_with("AddResourceBlock");
      const std::string system = path.substr(0, path.find("/Actions/"));
      auto sit = res.find(system);
      if (sit == res.end() || o.patch_only) {
        return fail(r, 404, "ResourceMissingAtURI", "The action " + path + " does not exist.");
      }
      Json::Value body;
      if (!parse(req.body, &body) || !body["ResourceBlock"]["@odata.id"].isString()) {
        return fail(r, 400, "ActionParameterMissing",
                    "The action requires the parameter ResourceBlock with an @odata.id.");
      }
      const std::string block = normalise(body["ResourceBlock"]["@odata.id"].asString());
      if (adding) {
        if (std::string why = check(system, {block}); !why.empty()) {
          return fail(r, refusal_status(why), refusal_id(why), why);
        }
      } else if (!res.contains(block)) {
        return fail(r, 400, "ResourceMissingAtURI",
                    "the resource block " + block + " does not exist");
      }
      auto tf = take_fault("POST", path, true);
      return changed(r, system,
                     adding ? std::vector<std::string>{block} : std::vector<std::string>{},
                     adding ? std::vector<std::string>{} : std::vector<std::string>{block},
                     tf ? &*tf : nullptr);
    }
    if (req.method == "POST" && path == kSystems) {
      Json::Value body;
      if (!parse(req.body, &body) || !body.isObject()) {
        return fail(r, 400, "MalformedJSON", "The body of a POST to " + path + " is not JSON.");
      }
      if (std::string why = check_compose(body); !why.empty()) {
        return fail(r, refusal_status(why), refusal_id(why), why);
      }
      return created(
          r, path, [&](Task& t) { t.compose = body; }, [&] { return compose(body); });
    }
    if (req.method == "POST" && path == kCxlConnections) {
      Json::Value body;
      if (!parse(req.body, &body) || !body.isObject()) {
        return fail(r, 400, "MalformedJSON", "The body of a POST to " + path + " is not JSON.");
      }
      if (std::string why = check_connection(body); !why.empty()) {
        return fail(r, why.find("already connected") != std::string::npos ? 409 : 400,
                    why.find("already connected") != std::string::npos ? "ResourceInUse"
                                                                       : "PropertyValueError",
                    why);
      }
      return created(
          r, path, [&](Task& t) { t.connection = body; }, [&] { return connect(body); });
    }
    if (req.method == "DELETE" && path.starts_with(std::string(kCxlConnections) + "/")) {
      if (!res.contains(path)) {
        return fail(r, 404, "ResourceMissingAtURI", "The connection " + path + " does not exist.");
      }
      auto tf = take_fault("DELETE", path, true);
      if (o.task_ms > 0 || tf) {
        Task t = new_task(tf ? &*tf : nullptr);
        t.disconnect = path;
        r.set_header("Location", t.uri);
        send(r, 202, task_body(t));
        tasks[t.uri] = t;
        return;
      }
      disconnect(path);
      if (o.sloppy) {
        r.status = 204;
        return;
      }
      Json::Value ok;
      Json::Value info;
      info["MessageId"] = "Base.1.16.Success";
      info["Message"] = "The request completed successfully.";
      ok["@Message.ExtendedInfo"].append(info);
      return send(r, 200, ok);
    }
    if (req.method == "PATCH" && path.starts_with(std::string(kSystems) + "/")) {
      auto sit = res.find(path);
      if (sit == res.end()) return fail(r, 404, "ResourceMissingAtURI", "No system " + path + ".");
      const std::string match = req.get_header_value("If-Match");
      if (match.empty() && !o.sloppy) {
        return fail(r, 428, "PreconditionRequired",
                    "This service requires If-Match on a PATCH of " + path + ".");
      }
      if (!match.empty() && match != etag(path)) {
        return fail(r, 412, "PreconditionFailed",
                    "The ETag " + match + " does not match the current " + etag(path) + ".");
      }
      Json::Value body;
      if (!parse(req.body, &body) || !body["Links"]["ResourceBlocks"].isArray()) {
        return fail(r, 400, "PropertyMissing", "The PATCH must set Links.ResourceBlocks.");
      }
      std::set<std::string> want, have;
      for (const Json::Value& l : body["Links"]["ResourceBlocks"])
        want.insert(normalise(l["@odata.id"].asString()));
      for (const Json::Value& l : sit->second["Links"]["ResourceBlocks"])
        have.insert(l["@odata.id"].asString());
      std::vector<std::string> add, remove;
      for (const std::string& w : want)
        if (!have.contains(w)) add.push_back(w);
      for (const std::string& h : have)
        if (!want.contains(h)) remove.push_back(h);
      if (std::string why = check(path, add); !why.empty())
        return fail(r, refusal_status(why), refusal_id(why), why);
      auto tf = take_fault("PATCH", path, true);
      return changed(r, path, add, remove, tf ? &*tf : nullptr);
    }
    return fail(r, 405, "OperationNotAllowed", req.method + " is not allowed on " + path + ".");
  }

  void login(const httplib::Request& req, httplib::Response& r) {
    if (o.login_status != 0 && o.login_status != 201) {
      // A service without sessions this way: no token, only its answer.
      if (o.login_status < 400) {
        Json::Value v;
        v["Name"] = "Session Service";
        return send(r, o.login_status, v);
      }
      return fail(r, o.login_status, "OperationNotAllowed",
                  "POST is not allowed on " + std::string(kSessions) + ".");
    }
    Json::Value body;
    if (!parse(req.body, &body) || body["UserName"].asString() != o.username ||
        body["Password"].asString() != o.password) {
      return fail(r, 401, "InsufficientPrivilege", "The user name or password is not correct.");
    }
    const std::string id = std::to_string(next_session++);
    const std::string uri = std::string(kSessions) + "/" + id;
    const std::string token = "tok-" + id + "-" + std::to_string(std::rand());
    sessions[token] = uri;
    Json::Value s;
    s["@odata.id"] = uri;
    s["Id"] = id;
    s["UserName"] = o.username;
    res[uri] = s;
    r.set_header("X-Auth-Token", token);
    r.set_header("Location", uri);
    send(r, 201, s);
  }

  void control(const httplib::Request& req, httplib::Response& r, const std::string& path) {
    Json::Value body;
    if (req.method == "POST" && !req.body.empty() && !parse(req.body, &body)) {
      return fail(r, 400, "MalformedJSON", "The control request body is not JSON.");
    }
    if (req.method == "POST" && path == "/control/fault") {
      FakeRedfishFault f;
      const std::string kind = body["kind"].asString();
      if (kind == "status")
        f.kind = FakeRedfishFault::Kind::kStatus;
      else if (kind == "delay")
        f.kind = FakeRedfishFault::Kind::kDelay;
      else if (kind == "reset")
        f.kind = FakeRedfishFault::Kind::kReset;
      else if (kind == "task_fails")
        f.kind = FakeRedfishFault::Kind::kTaskFails;
      else
        return fail(r, 400, "PropertyValueNotInList",
                    "kind '" + kind + "' is not one of status, delay, reset, task_fails");
      f.method = body["method"].asString();
      f.path = body["path"].asString();
      f.status = body.get("status", 500).asInt();
      f.delay_ms = body.get("delay_ms", 0).asInt();
      f.message = body.get("message", "injected fault").asString();
      f.count = body.get("count", 1).asUInt();
      f.skip = body.get("skip", 0).asUInt();
      std::lock_guard<std::mutex> lock(mu);
      faults.push_back(f);
      r.status = 204;
      return;
    }
    if (req.method == "POST" && path == "/control/clear") {
      std::lock_guard<std::mutex> lock(mu);
      faults.clear();
      r.status = 204;
      return;
    }
    if (req.method == "POST" && path == "/control/health") {
      if (Status s = set_health(body["block"].asString(), body["health"].asString()); !s) {
        return fail(r, s.error().code == ErrorCode::kNotFound ? 404 : 400, "PropertyValueError",
                    s.error().message);
      }
      r.status = 204;
      return;
    }
    if (req.method == "POST" && path == "/control/unplug") {
      const std::string block = body["block"].asString();
      std::lock_guard<std::mutex> lock(mu);
      const std::string uri = std::string(kBlocks) + "/" + block;
      for (const auto& [system, blocks] : systems()) {
        if (std::find(blocks.begin(), blocks.end(), block) == blocks.end()) continue;
        const std::string sys = std::string(kSystems) + "/" + system;
        if (std::string why = hot_plug(sys, {}, {uri}); !why.empty()) {
          return fail(r, 500, "InternalError", why);
        }
        apply(sys, {}, {uri});
        r.status = 204;
        return;
      }
      return fail(r, 404, "ResourceMissingAtURI",
                  "The resource block '" + block + "' is composed into no system.");
    }
    if (req.method == "GET" && path == "/control/state") {
      std::lock_guard<std::mutex> lock(mu);
      Json::Value out;
      for (const auto& [system, blocks] : systems()) {
        Json::Value list(Json::arrayValue);
        for (const std::string& b : blocks) list.append(b);
        out["systems"][system] = list;
      }
      out["sessions"] = Json::UInt64(sessions.size());
      return send(r, 200, out);
    }
    fail(r, 404, "ResourceMissingAtURI", "No control endpoint " + req.method + " " + path + ".");
  }

  Status set_health(const std::string& block, const std::string& health) {
    if (health != "OK" && health != "Warning" && health != "Critical") {
      return Error{ErrorCode::kInvalidArgument,
                   "fake redfish: health '" + health + "' is not one of OK, Warning, Critical"};
    }
    std::lock_guard<std::mutex> lock(mu);
    auto it = res.find(std::string(kBlocks) + "/" + block);
    if (it == res.end() && o.cxl) {
      // A CXL target endpoint: the health of the memory chunks behind it.
      auto ep = res.find(std::string(kCxlEndpoints) + "/" + block);
      if (ep != res.end()) {
        bool any = false;
        for (const Json::Value& ent : ep->second["ConnectedEntities"]) {
          if (ent["EntityType"].asString() != "MemoryChunk") continue;
          auto chunk = res.find(normalise(ent["EntityLink"]["@odata.id"].asString()));
          if (chunk == res.end()) continue;
          chunk->second["Status"]["Health"] = health;
          ++version[chunk->first];
          any = true;
        }
        if (any) return Status::Ok();
      }
    }
    if (it == res.end()) {
      return Error{ErrorCode::kNotFound,
                   "fake redfish: no resource block '" + block + "'" +
                       (o.cxl ? " and no CXL memory endpoint of that Id" : "")};
    }
    it->second["Status"]["Health"] = health;
    ++version[it->first];
    return Status::Ok();
  }
};

FakeRedfish::FakeRedfish(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FakeRedfish::~FakeRedfish() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->stopping_cv.notify_all();
  impl_->front.reset();
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Expected<std::unique_ptr<FakeRedfish>> FakeRedfish::start(FakeRedfishOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(options);
  if (impl->o.mockups.empty()) impl->o.mockups = default_mockups();
  if (Status s = impl->load(impl->o.mockups); !s) return s.error();
  if (impl->o.cxl) {
    if (Status s = impl->load_cxl(impl->o.mockups); !s) return s.error();
  }
  impl->generate();
  if (impl->o.cxl) impl->generate_cxl();
  if (impl->o.broken_capabilities) {
    // Still advertised by the Systems collection, but no longer there.
    impl->res.erase(std::string(kSystems) + "/Capabilities");
  }
  for (const std::string& id : impl->o.reserved) {
    auto it = impl->res.find(std::string(kBlocks) + "/" + id);
    if (it == impl->res.end()) {
      return Error{ErrorCode::kNotFound, "fake redfish: no resource block '" + id + "' to reserve"};
    }
    it->second["CompositionStatus"]["Reserved"] = true;
  }
  if (impl->o.cxl && impl->o.cxl_only) impl->res[kRoot].removeMember("CompositionService");
  Impl* p = impl.get();
  auto handler = [p](const httplib::Request& req, httplib::Response& r) { p->handle(req, r); };
  for (const char* pattern : {R"(/.*)"}) {
    p->server.Get(pattern, handler);
    p->server.Post(pattern, handler);
    p->server.Patch(pattern, handler);
    p->server.Delete(pattern, handler);
    p->server.Put(pattern, handler);
  }
  p->server.set_tcp_nodelay(true);  // headers and body go out in two writes
  if (p->o.sloppy) p->server.set_keep_alive_max_count(1);
  p->server.set_read_timeout(5, 0);
  p->server.set_write_timeout(5, 0);
  // Sloppy mode: the HTTP server sits behind the HTTP/1.0 front, on a port of its own.
  const int http_port = p->o.sloppy ? 0 : p->o.port;
  if (http_port == 0) {
    p->port = p->server.bind_to_any_port("127.0.0.1");
  } else {
    p->port = p->server.bind_to_port("127.0.0.1", http_port) ? http_port : -1;
  }
  if (p->port <= 0) {
    return Error{ErrorCode::kUnavailable,
                 "fake redfish: cannot listen on 127.0.0.1:" + std::to_string(http_port)};
  }
  // Bound and listening already: connections made before the thread runs wait in the backlog.
  p->thread = std::thread([p] { p->server.listen_after_bind(); });
  if (p->o.sloppy) {
    auto front = Http10Front::start(p->port, p->o.port);
    if (!front) {
      p->server.stop();
      p->thread.join();
      return front.error();
    }
    p->front = std::move(front).value();
    p->port = p->front->port();
  }
  return std::unique_ptr<FakeRedfish>(new FakeRedfish(std::move(impl)));
}

int FakeRedfish::port() const { return impl_->port; }
std::string FakeRedfish::base_url() const {
  return "http://127.0.0.1:" + std::to_string(impl_->port);
}

void FakeRedfish::inject(FakeRedfishFault fault) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (fault.count > 0) impl_->faults.push_back(std::move(fault));
}

void FakeRedfish::clear_faults() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->faults.clear();
}

void FakeRedfish::expire_sessions() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (const auto& [token, uri] : impl_->sessions) impl_->res.erase(uri);
  impl_->sessions.clear();
}

Status FakeRedfish::set_health(const std::string& block_id, const std::string& health) {
  return impl_->set_health(block_id, health);
}

std::vector<std::string> FakeRedfish::system_blocks(const std::string& system_id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->settle_tasks();
  std::vector<std::string> out;
  auto it = impl_->res.find(std::string(kSystems) + "/" + system_id);
  if (it == impl_->res.end()) return out;
  for (const Json::Value& l : it->second["Links"]["ResourceBlocks"]) {
    out.push_back(last_segment(l["@odata.id"].asString()));
  }
  return out;
}

std::map<std::string, std::vector<std::string>> FakeRedfish::systems() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->systems();
}

std::vector<std::string> FakeRedfish::systems_with_block(const std::string& block_id) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->settle_tasks();
  const std::string block = std::string(kBlocks) + "/" + block_id;
  std::vector<std::string> out;
  for (const auto& [uri, v] : impl_->res) {
    if (!uri.starts_with(std::string(kSystems) + "/")) continue;
    for (const Json::Value& l : v["Links"]["ResourceBlocks"]) {
      if (l["@odata.id"].asString() == block) out.push_back(last_segment(uri));
    }
  }
  return out;
}

std::vector<std::string> FakeRedfish::generated(const std::string& kind) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->generated.find(kind);
  return it == impl_->generated.end() ? std::vector<std::string>{} : it->second;
}

std::vector<std::string> FakeRedfish::hosts() const { return generated("host"); }

std::vector<std::pair<std::string, std::string>> FakeRedfish::memory_connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->settle_tasks();
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& uri : impl_->connection_uris()) {
    auto c = impl_->res.find(uri);
    if (c == impl_->res.end()) continue;
    const Json::Value& l = c->second["Links"];
    out.emplace_back(last_segment(l["InitiatorEndpoints"][0]["@odata.id"].asString()),
                     last_segment(l["TargetEndpoints"][0]["@odata.id"].asString()));
  }
  return out;
}

Status FakeRedfish::connect_behind_back(const std::vector<std::string>& initiators,
                                        const std::vector<std::string>& targets) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Json::Value body;
  body["ConnectionType"] = "Memory";
  for (const std::string& i : initiators) {
    const std::string uri = std::string(kCxlEndpoints) + "/" + i;
    if (!impl_->res.contains(uri)) {
      return Error{ErrorCode::kNotFound, "fake redfish: no CXL endpoint '" + i + "'"};
    }
    body["Links"]["InitiatorEndpoints"].append(link(uri));
  }
  for (const std::string& t : targets) {
    const std::string uri = std::string(kCxlEndpoints) + "/" + t;
    auto e = impl_->res.find(uri);
    if (e == impl_->res.end()) {
      return Error{ErrorCode::kNotFound, "fake redfish: no CXL endpoint '" + t + "'"};
    }
    body["Links"]["TargetEndpoints"].append(link(uri));
    for (const Json::Value& ent : e->second["ConnectedEntities"]) {
      if (ent["EntityType"].asString() != "MemoryChunk") continue;
      Json::Value info;
      info["MemoryChunk"] = link(normalise(ent["EntityLink"]["@odata.id"].asString()));
      body["MemoryChunkInfo"].append(info);
    }
  }
  if (std::string why = impl_->check_connection(body); !why.empty()) {
    return Error{ErrorCode::kConflict, "fake redfish: " + why};
  }
  impl_->connect(body);
  return Status::Ok();
}

std::vector<std::string> FakeRedfish::request_log() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->log;
}

std::vector<FakeRedfish::Change> FakeRedfish::changes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->changes;
}

uint64_t FakeRedfish::writes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  uint64_t n = 0;
  for (const std::string& line : impl_->log) {
    if (line.starts_with("GET ") || line.find("/SessionService/") != std::string::npos) continue;
    ++n;
  }
  return n;
}

size_t FakeRedfish::open_sessions() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->sessions.size();
}

uint64_t FakeRedfish::requests(const std::string& method) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->counts.find(method);
  return it == impl_->counts.end() ? 0 : it->second;
}

}  // namespace composer::testing
