#include "composer/drivers/redfish_fabric.h"

#include <json/json.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "composer/api/codec.h"
#include "composer/client/http.h"
#include "composer/common/log.h"
#include "composer/common/units.h"
#include "composer/drivers/credentials.h"
#include "wire.h"

namespace composer::drivers {
namespace {

constexpr std::string_view kServiceRoot = "/redfish/v1";
// Operation ids: "tasks:" and the steps of a change, separated by '|', so that any instance of
// the driver (also after a restart) can follow and, on failure, undo them.
constexpr std::string_view kTaskPrefix = "tasks:";
constexpr char kTaskSeparator = '|';
constexpr char kStepSeparator = '>';  // within a step: monitor>undo action>block

Error fabric_error(std::string message) {
  return Error{ErrorCode::kFabric, "redfish: " + std::move(message)};
}
Error bad_option(std::string message) {
  return Error{ErrorCode::kInvalidArgument, "redfish options: " + std::move(message)};
}

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

// The URIs an array of links (or a single link) names.
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

// The members of a collection. Strict services put them in "Members"; some put them under
// "Links" or spell the key in lower case.
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

// A Redfish error body's messages (error.@Message.ExtendedInfo[].Message), else its message.
std::string error_message(const std::string& body) {
  Json::Value v;
  std::string why;
  if (body.empty() || !parse_json(body, &v, &why) || !v.isObject()) return "";
  const Json::Value& e = v["error"];
  std::string out;
  for (const Json::Value& info : e["@Message.ExtendedInfo"]) {
    const std::string m = info["Message"].asString();
    if (m.empty()) continue;
    if (!out.empty()) out += "; ";
    out += m;
  }
  if (out.empty()) out = e["message"].asString();
  // A task's own messages (a failed task answers with the Task resource).
  if (out.empty()) {
    for (const Json::Value& info : v["Messages"]) {
      const std::string m = info["Message"].asString();
      if (m.empty()) continue;
      if (!out.empty()) out += "; ";
      out += m;
    }
  }
  return out;
}

ErrorCode code_for_status(long status) {
  switch (status) {
    case 401:
      return ErrorCode::kUnauthenticated;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 409:
    case 412:
      return ErrorCode::kConflict;
    default:
      return ErrorCode::kFabric;
  }
}

struct Reply {
  long status = 0;
  Json::Value body;  // null when the answer had none
  std::string location;
  std::string etag;
};

enum class TaskState { kRunning, kDone, kFailed };
struct TaskPoll {
  TaskState state = TaskState::kRunning;
  std::string message;
};

// What the driver learnt about a block or a system the last time it read it.
// One step of a change: a block added or removed, with its task monitor while it runs and the
// action that reverses it.
struct Step {
  std::string monitor;
  std::string undo_target;  // empty: cannot be undone on its own (a PATCH)
  std::string block;
  TaskState state = TaskState::kRunning;
  std::string message;
};

struct BlockInfo {
  std::string uri;
  std::string id;
  std::vector<std::string> zones;
  bool compute = false;
  // A ComputerSystem block: a host of its own. own_systems: the systems it holds (top-level
  // ComputerSystems); composed_into: the systems composed from it (Links.ComputerSystems).
  bool system_block = false;
  std::vector<std::string> own_systems;
  std::vector<std::string> composed_into;
};

// A host that is a ComputerSystem resource block, and the system composed from it (empty until
// one is).
struct HostBlock {
  std::string block_uri;
  std::string system_uri;
  std::string node;
};

// The path of a URI a service answered, which may be absolute (http://host/redfish/v1/...).
std::string path_of(const std::string& uri) {
  for (const char* scheme : {"http://", "https://"}) {
    if (!uri.starts_with(scheme)) continue;
    const size_t slash = uri.find('/', std::string_view(scheme).size());
    return slash == std::string::npos ? "/" : uri.substr(slash);
  }
  return uri;
}

// CXL memory of a Fabrics-model fabric: a memory chunk behind a target endpoint.
struct CxlChunk {
  std::string uri;     // the MemoryChunks resource
  std::string target;  // the target endpoint that exposes it
  std::vector<std::string> zones;
};
// A host's way into a CXL fabric.
struct CxlInitiator {
  std::string uri;
  std::vector<std::string> zones;
};
// A connection of ConnectionType Memory.
struct CxlConnection {
  std::string uri;
  std::vector<std::string> chunks;
  std::vector<std::string> initiators;
};

// Undo markers of CXL steps (Step::undo_target): delete the connection between an initiator
// and the step's chunk, or connect them again (initiator and target endpoint follow).
constexpr std::string_view kCxlDisconnect = "cxl-del,";
constexpr std::string_view kCxlConnect = "cxl-add,";

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

}  // namespace

struct RedfishFabric::Impl {
  explicit Impl(RedfishOptions opts)
      : o(std::move(opts)),
        http(client::HttpOptions{.connect_timeout_ms = o.connect_timeout_ms,
                                 .timeout_ms = o.request_timeout_ms,
                                 .retries = o.get_retries,
                                 .backoff_ms = 100,
                                 .max_backoff_ms = 2000,
                                 .ca_file = o.ca_file,
                                 .verify_tls = o.verify_tls}) {}

  RedfishOptions o;
  client::HttpClient http;

  std::mutex auth_mu;
  std::string token;        // X-Auth-Token of the session
  std::string session_uri;  // to log out
  std::string sessions_uri;

  // Discovered once.
  std::string blocks_uri;
  std::string zones_uri;
  std::string systems_uri;
  // Where a POST composes a new system: the TargetCollection of the ComputerSystemComposition
  // capabilities (empty: the service names none).
  std::string compose_target;
  std::vector<std::string> composition_zones;
  uint32_t gpu_slots = 0, mem_slots = 0, nvme_slots = 0;

  // Refreshed by every inventory: device or host id -> URI.
  std::mutex index_mu;
  std::map<std::string, std::string> block_uris;
  std::map<std::string, std::string> system_uris;
  std::map<std::string, CxlChunk> cxl_chunks;                       // device id ->
  std::map<std::string, std::vector<CxlInitiator>> cxl_initiators;  // host id ->
  std::map<std::string, std::string> cxl_endpoint_host;             // initiator URI -> host id
  std::map<std::string, HostBlock> host_blocks;                     // host id ->
  std::map<std::string, std::string> system_hosts;                  // system URI -> host id

  // The first fabric of FabricType CXL under /redfish/v1/Fabrics, if any.
  std::string cxl_fabric_id;
  std::string cxl_endpoints_uri;
  std::string cxl_connections_uri;

  std::string url(const std::string& uri) const {
    if (uri.starts_with("http://") || uri.starts_with("https://")) return uri;
    return o.base_url + uri;
  }

  Expected<std::vector<std::string>> auth_headers() {
    if (o.auth == RedfishOptions::Auth::kBasic) {
      return std::vector<std::string>{"Authorization: Basic " +
                                      base64(o.username + ":" + o.password)};
    }
    std::lock_guard<std::mutex> lock(auth_mu);
    if (token.empty()) return std::vector<std::string>{};
    return std::vector<std::string>{"X-Auth-Token: " + token};
  }

  Status login() {
    Json::Value body;
    body["UserName"] = o.username;
    body["Password"] = o.password;
    client::HttpRequest req;
    req.method = "POST";
    req.url = url(sessions_uri);
    req.body = api::to_text(body);
    auto r = http.send(req);
    if (!r) return Error{r.error().code, "redfish: session login: " + r.error().message};
    if (r->status != 200 && r->status != 201) {
      std::string m = error_message(r->body);
      return Error{
          r->status == 401 || r->status == 403 ? ErrorCode::kUnauthenticated : ErrorCode::kFabric,
          "redfish: session login at " + sessions_uri + " answered " + std::to_string(r->status) +
              (m.empty() ? "" : ": " + m)};
    }
    const std::string t = r->header("X-Auth-Token");
    if (t.empty()) {
      return fabric_error("session login at " + sessions_uri +
                          " answered no X-Auth-Token header; use basic authentication instead");
    }
    std::string where = r->header("Location");
    if (where.empty()) {
      Json::Value v;
      std::string why;
      if (parse_json(r->body, &v, &why)) where = odata_id(v);
    }
    std::lock_guard<std::mutex> lock(auth_mu);
    token = t;
    session_uri = where;
    log::info("redfish: session opened", {{"url", o.base_url}});
    return Status::Ok();
  }

  void logout() {
    std::string uri;
    {
      std::lock_guard<std::mutex> lock(auth_mu);
      uri = session_uri;
    }
    if (uri.empty()) return;
    client::HttpRequest req;
    req.method = "DELETE";
    req.url = url(uri);
    req.headers = [this] { return auth_headers(); };
    auto r = http.send(req);
    if (!r || r->status >= 300) {
      log::warning(
          "redfish: session logout failed",
          {{"url", o.base_url}, {"error", r ? std::to_string(r->status) : r.error().message}});
    }
    std::lock_guard<std::mutex> lock(auth_mu);
    token.clear();
    session_uri.clear();
  }

  // One request with the credential; answers any HTTP status. A session that expired is
  // opened again once.
  Expected<Reply> request(const std::string& method, const std::string& uri,
                          const Json::Value* body = nullptr, std::vector<std::string> extra = {}) {
    for (int attempt = 0;; ++attempt) {
      client::HttpRequest req;
      req.method = method;
      req.url = url(uri);
      if (body != nullptr) req.body = api::to_text(*body);
      req.headers = [this, extra]() -> Expected<std::vector<std::string>> {
        auto h = auth_headers();
        if (!h) return h;
        for (const std::string& line : extra) h->push_back(line);
        return h;
      };
      auto r = http.send(req);
      if (!r) return Error{r.error().code, "redfish: " + r.error().message};
      if (r->status == 401 && o.auth == RedfishOptions::Auth::kSession && attempt == 0 &&
          !sessions_uri.empty()) {
        log::info("redfish: session refused, logging in again", {{"url", o.base_url}});
        if (Status s = login(); !s) return s.error();
        continue;
      }
      Reply out;
      out.status = r->status;
      out.location = r->header("Location");
      out.etag = r->header("ETag");
      if (!r->body.empty()) {
        std::string why;
        if (!parse_json(r->body, &out.body, &why)) {
          if (r->status < 300) {
            return fabric_error(method + " " + uri + " answered " + std::to_string(r->status) +
                                " with a body that is not JSON: " + why);
          }
          out.body = Json::Value();
        }
      }
      if (r->status >= 400) {
        const std::string m = error_message(r->body);
        return Error{code_for_status(r->status), "redfish: " + method + " " + uri + " answered " +
                                                     std::to_string(r->status) +
                                                     (m.empty() ? "" : ": " + m)};
      }
      return out;
    }
  }

  Expected<Json::Value> get(const std::string& uri) {
    auto r = request("GET", uri);
    if (!r) return r.error();
    if (!r->body.isObject()) {
      return fabric_error("GET " + uri + " answered " + std::to_string(r->status) +
                          " without a JSON object");
    }
    return std::move(r->body);
  }

  Status discover() {
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

  // Finds the first fabric of FabricType CXL, if the service has Fabrics at all.
  Status discover_cxl(const Json::Value& root) {
    const std::string fabrics = trim_slash(odata_id(root["Fabrics"]));
    if (fabrics.empty()) return Status::Ok();
    auto coll = get(fabrics);
    if (!coll) return coll.error();
    for (const std::string& uri : members(*coll)) {
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

  // Composer zone of a CXL fabric zone: "<fabric id, lower case>-<zone id>", e.g. "cxl-3", so
  // that it never meets a resource zone of the same Id.
  std::string cxl_zone(const std::string& zone_uri) const {
    std::string name = cxl_fabric_id;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return name + "-" + last_segment(zone_uri);
  }

  // Every connection of ConnectionType Memory, as the service shows it now.
  Expected<std::vector<CxlConnection>> cxl_connections() {
    auto coll = get(cxl_connections_uri);
    if (!coll) return coll.error();
    std::vector<CxlConnection> out;
    for (const std::string& uri : members(*coll)) {
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

  // The CXL part of the inventory: memory chunks behind target endpoints become pooled memory
  // (id "cxl-<endpoint>", or "cxl-<endpoint>-<domain>-<chunk>" when the endpoint exposes
  // several), initiator endpoints become hosts (the computer system they belong to, else the
  // endpoint), and memory connections say what is attached where.
  Status cxl_inventory(FabricInventory* inv, std::map<std::string, CxlChunk>* chunks,
                       std::map<std::string, std::vector<CxlInitiator>>* initiators,
                       std::map<std::string, std::string>* endpoint_host) {
    auto coll = get(cxl_endpoints_uri);
    if (!coll) return coll.error();
    const std::string systems_prefix = systems_uri.empty() ? "" : systems_uri + "/";
    std::map<std::string, std::string> host_system;   // host id -> system URI, if any
    std::map<std::string, std::string> chunk_device;  // chunk URI -> device id
    for (const std::string& uri : members(*coll)) {
      auto e = get(uri);
      if (!e) return e.error();
      std::vector<std::string> zones;
      for (const std::string& z : links((*e)["Links"]["Zones"])) zones.push_back(cxl_zone(z));
      if (zones.empty()) zones.push_back(cxl_zone("default"));
      std::string endpoint_id = (*e)["Id"].asString();
      if (endpoint_id.empty()) endpoint_id = last_segment(uri);
      bool initiator = false;
      std::string system;
      std::vector<std::string> memory;
      for (const Json::Value& ent : (*e)["ConnectedEntities"]) {
        const std::string role = ent["EntityRole"].asString();
        const std::string target = trim_slash(odata_id(ent["EntityLink"]));
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
        d.capacity_bytes = (*chunk)["MemoryChunkSizeMiB"].asUInt64() * kMiB;
        if (d.capacity_bytes == 0) continue;  // nothing to hand out
        const std::string range = (*chunk)["AddressRangeType"].asString();
        d.model = range.empty() ? "CXL" : "CXL " + range;
        d.zone = zones.front();
        d.health = worst(health_of((*chunk)["Status"]), health_of((*e)["Status"]));
        chunk_device[m] = d.id;
        (*chunks)[d.id] = CxlChunk{m, uri, zones};
        inv->devices.push_back(std::move(d));
      }
    }
    auto conns = cxl_connections();
    if (!conns) return conns.error();
    for (const CxlConnection& c : *conns) {
      std::string host;
      for (const std::string& i : c.initiators) {
        if (auto it = endpoint_host->find(i); it != endpoint_host->end()) host = it->second;
      }
      if (host.empty() && !c.initiators.empty()) host = last_segment(c.initiators.front());
      for (const std::string& m : c.chunks) {
        if (auto it = chunk_device.find(m); it != chunk_device.end() && !host.empty()) {
          inv->attached[it->second] = host;
        }
      }
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

  // The device a resource block is, if any. Sets *compute for Compute and ComputerSystem
  // blocks (the hosts' own blocks).
  Expected<std::optional<Device>> read_block(const Json::Value& b, bool* compute) {
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

  // Whether a system can take resource blocks, and how.
  static std::string action_target(const Json::Value& system, const char* action) {
    return system["Actions"][std::string("#ComputerSystem.") + action]["target"].asString();
  }

  std::optional<std::string> node_name(const Json::Value& system) const {
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

  Expected<FabricInventory> inventory() {
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

  // The CompositionService part of the inventory: resource blocks and composed systems. A
  // ComputerSystem block is a host of its own, id the block's Id, whether or not a system is
  // composed from it yet; the system composed from it (the one whose Links.ResourceBlocks hold
  // the block) is no host of its own, and what sits in it is attached to the block's host.
  Status block_inventory(FabricInventory* out, std::map<std::string, std::string>* block_index,
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
      const bool composable = !action_target(*s, "AddResourceBlock").empty() ||
                              (*s)["Links"].isMember("ResourceBlocks");
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

  // The URIs of a host and of devices, reading the inventory again for a name not seen yet.
  // What attach and detach act on: the host's composed system and resource blocks, and its
  // CXL initiators and memory chunks.
  struct Resolved {
    std::string host_uri;    // the composed system (empty: none yet, or not a composed host)
    std::string host_block;  // a ComputerSystem block host: its block
    std::string node;
    std::vector<std::string> blocks;
    std::vector<CxlInitiator> initiators;
    std::vector<std::pair<std::string, CxlChunk>> chunks;  // device id, chunk
  };

  // The URIs of a host and of devices, reading the inventory again for a name not seen yet.
  Status resolve(const std::string& host, const std::vector<std::string>& ids, Resolved* out) {
    for (int pass = 0; pass < 2; ++pass) {
      std::unique_lock<std::mutex> lock(index_mu);
      bool missing = !system_uris.contains(host) && !host_blocks.contains(host) &&
                     !cxl_initiators.contains(host);
      for (const std::string& id : ids) {
        missing = missing || (!block_uris.contains(id) && !cxl_chunks.contains(id));
      }
      if (missing && pass == 0) {
        lock.unlock();
        if (auto inv = inventory(); !inv) return inv.error();
        continue;
      }
      auto h = system_uris.find(host);
      auto hb = host_blocks.find(host);
      auto hi = cxl_initiators.find(host);
      if (h == system_uris.end() && hb == host_blocks.end() && hi == cxl_initiators.end()) {
        return Error{ErrorCode::kNotFound,
                     "redfish: unknown host '" + host +
                         "' (no composable system, ComputerSystem resource block or CXL "
                         "initiator endpoint has that Id)"};
      }
      *out = Resolved{};
      if (hb != host_blocks.end()) {
        out->host_block = hb->second.block_uri;
        out->host_uri = hb->second.system_uri;
        out->node = hb->second.node;
      } else if (h != system_uris.end()) {
        out->host_uri = h->second;
      }
      if (hi != cxl_initiators.end()) out->initiators = hi->second;
      for (const std::string& id : ids) {
        if (auto b = block_uris.find(id); b != block_uris.end()) {
          if (out->host_uri.empty() && out->host_block.empty()) {
            return Error{ErrorCode::kInvalidArgument,
                         "redfish: host '" + host +
                             "' is not a composed system, so it can take "
                             "only CXL memory, not the resource block '" +
                             id + "'"};
          }
          out->blocks.push_back(b->second);
        } else if (auto c = cxl_chunks.find(id); c != cxl_chunks.end()) {
          if (out->initiators.empty()) {
            return Error{ErrorCode::kInvalidArgument, "redfish: host '" + host +
                                                          "' has no CXL initiator endpoint, so it "
                                                          "cannot take the CXL memory '" +
                                                          id + "'"};
          }
          out->chunks.emplace_back(id, c->second);
        } else {
          return Error{ErrorCode::kNotFound,
                       "redfish: unknown device '" + id +
                           "' (no GPU, memory or storage resource block and no CXL memory chunk "
                           "has that Id)"};
        }
      }
      return Status::Ok();
    }
    return Status::Ok();
  }

  // Connects (or disconnects) CXL memory chunks and a host: a POST of a Connection of
  // ConnectionType Memory between an initiator endpoint of the host that shares a zone with
  // the chunk's target endpoint, and the chunk; detaching deletes that connection. A chunk
  // already where it should be is left alone; one connected to another host refuses the call.
  Expected<Operation> cxl_change(const std::string& host, const Resolved& r, bool adding) {
    auto conns = cxl_connections();
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
      std::string own, other;
      std::string own_initiator;
      for (const CxlConnection& c : *conns) {
        if (std::find(c.chunks.begin(), c.chunks.end(), chunk.uri) == c.chunks.end()) continue;
        bool ours = false;
        for (const std::string& i : c.initiators) {
          if (mine.contains(i)) {
            ours = true;
            own_initiator = i;
          }
        }
        if (ours) {
          own = c.uri;
        } else if (!c.initiators.empty()) {
          std::lock_guard<std::mutex> lock(index_mu);
          auto it = cxl_endpoint_host.find(c.initiators.front());
          other = it != cxl_endpoint_host.end() ? it->second : last_segment(c.initiators.front());
        }
      }
      if (own.empty() && !other.empty()) {
        return Error{ErrorCode::kConflict,
                     "redfish: CXL memory " + id + " is connected to host " + other + ", cannot " +
                         (adding ? "attach it to " : "detach it from ") + host};
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
      if (!adding && !own.empty()) todo.push_back(Todo{id, chunk, own, own_initiator});
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
      if (reply && reply->status == 202 && reply->location.empty()) {
        reply = fabric_error(what + " answered 202 without a Location");
      }
      if (!reply) {
        steps.push_back(Step{"", "", t.chunk.uri, TaskState::kFailed, reply.error().message});
        auto undone = settle(std::move(steps), o.task_wait_ms);
        if (!undone || undone->state == OperationState::kRunning) {
          log::error("redfish: a CXL change failed part way and its earlier steps still run",
                     {{"host", host}, {"operation", undone ? undone->id : ""}});
        }
        return reply.error();
      }
      const bool task = reply->status == 202;
      steps.push_back(Step{task ? reply->location : "", undo_target, t.chunk.uri,
                           task ? TaskState::kRunning : TaskState::kDone, ""});
      if (!task) continue;
      auto w = settle(steps, o.task_wait_ms);
      if (!w) return w.error();
      if (w->state == OperationState::kFailed) return w;
      if (w->state == OperationState::kDone) {
        for (Step& st : steps) st.state = TaskState::kDone;
      }
    }
    return settle(std::move(steps), o.task_wait_ms);
  }

  Expected<TaskPoll> poll_task(const std::string& monitor) {
    auto r = request("GET", monitor);
    if (!r) {
      if (r.error().code == ErrorCode::kNotFound) {
        return TaskPoll{TaskState::kFailed,
                        "task monitor " + monitor + " no longer exists; read the inventory"};
      }
      if (r.error().code == ErrorCode::kUnavailable || r.error().code == ErrorCode::kTimeout) {
        return r.error();  // the task may still be fine: ask again later
      }
      return TaskPoll{TaskState::kFailed, r.error().message};
    }
    if (r->status == 202) return TaskPoll{TaskState::kRunning, ""};
    const std::string state = r->body["TaskState"].asString();
    if (state.empty() || state == "Completed") {
      if (r->body["TaskStatus"].asString() == "Critical") {
        return TaskPoll{TaskState::kFailed, "task " + monitor + " completed with status Critical"};
      }
      return TaskPoll{TaskState::kDone, ""};
    }
    if (state == "Exception" || state == "Killed" || state == "Cancelled" ||
        state == "Interrupted") {
      std::string m = error_message(api::to_text(r->body));
      return TaskPoll{TaskState::kFailed,
                      "redfish: task " + monitor + " ended " + state + (m.empty() ? "" : ": " + m)};
    }
    return TaskPoll{TaskState::kRunning, ""};
  }

  // Follows the steps of a change until none runs, or the wait runs out (then kRunning with an
  // id that carries every step). When all steps have ended and one failed, the steps that
  // succeeded are undone, so a failed change leaves the system as it was.
  Expected<Operation> settle(std::vector<Step> steps, long wait_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
    for (;;) {
      bool running = false;
      for (Step& st : steps) {
        if (st.state != TaskState::kRunning) continue;
        auto p = poll_task(st.monitor);
        if (!p) return p.error();
        st.state = p->state;
        st.message = p->message;
        running = running || st.state == TaskState::kRunning;
      }
      if (!running) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        return Operation{encode(steps), OperationState::kRunning, ""};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1L, o.poll_interval_ms)));
    }
    std::string failure;
    for (const Step& st : steps) {
      if (st.state == TaskState::kFailed && failure.empty()) failure = st.message;
    }
    if (failure.empty()) return Operation{encode(steps), OperationState::kDone, ""};
    for (const Step& st : steps) {
      if (st.state == TaskState::kDone && !st.undo_target.empty()) undo(st.undo_target, st.block);
    }
    return Operation{encode(steps), OperationState::kFailed, failure};
  }

  static std::string encode(const std::vector<Step>& steps) {
    bool running = false;
    for (const Step& st : steps) running = running || st.state == TaskState::kRunning;
    if (!running) return "";
    std::string id(kTaskPrefix);
    for (size_t i = 0; i < steps.size(); ++i) {
      if (i > 0) id += kTaskSeparator;
      const Step& st = steps[i];
      // A step that ended well carries no monitor; one that failed carries "!" and its
      // message, so the failure survives until the whole change has ended.
      std::string head = st.monitor;
      if (st.state == TaskState::kDone) head.clear();
      if (st.state == TaskState::kFailed) {
        head = "!" + st.message;
        std::replace(head.begin(), head.end(), kTaskSeparator, '/');
        std::replace(head.begin(), head.end(), kStepSeparator, ')');
      }
      id += head + kStepSeparator + st.undo_target + kStepSeparator + st.block;
    }
    return id;
  }

  static std::optional<std::vector<Step>> decode(const std::string& id) {
    if (!id.starts_with(kTaskPrefix)) return std::nullopt;
    std::vector<Step> steps;
    std::stringstream in(id.substr(kTaskPrefix.size()));
    for (std::string part; std::getline(in, part, kTaskSeparator);) {
      const size_t a = part.find(kStepSeparator);
      const size_t b = a == std::string::npos ? a : part.find(kStepSeparator, a + 1);
      if (b == std::string::npos) return std::nullopt;
      Step st;
      st.monitor = part.substr(0, a);
      st.undo_target = part.substr(a + 1, b - a - 1);
      st.block = part.substr(b + 1);
      st.state = st.monitor.empty() ? TaskState::kDone : TaskState::kRunning;
      if (st.monitor.starts_with("!")) {
        st.state = TaskState::kFailed;
        st.message = st.monitor.substr(1);
        st.monitor.clear();
      }
      steps.push_back(std::move(st));
    }
    if (steps.empty()) return std::nullopt;
    return steps;
  }

  // One change of a system's blocks: an action per block, or one PATCH of the whole list.
  Expected<Operation> change(const std::string& host, const std::string& host_uri,
                             const std::vector<std::string>& uris, bool adding) {
    auto sys = request("GET", host_uri);
    if (!sys) return sys.error();
    const Json::Value& system = sys->body;
    std::vector<std::string> current = links(system["Links"]["ResourceBlocks"]);
    std::vector<std::string> todo;
    for (const std::string& uri : uris) {
      auto block = get(uri);
      if (!block) return block.error();
      const std::vector<std::string> owners = links((*block)["Links"]["ComputerSystems"]);
      const bool in_host =
          std::find(current.begin(), current.end(), uri) != current.end() ||
          std::find(owners.begin(), owners.end(), trim_slash(host_uri)) != owners.end();
      if (!in_host && !owners.empty() &&
          !(*block)["CompositionStatus"]["SharingEnabled"].asBool()) {
        return Error{ErrorCode::kConflict,
                     "redfish: device " + last_segment(uri) + " is composed into " +
                         describe_system(owners.front()) + ", cannot " +
                         (adding ? "attach it to " : "detach it from ") + host};
      }
      if (in_host != adding) todo.push_back(uri);
    }
    if (todo.empty()) return Operation{"", OperationState::kDone, ""};

    const std::string target =
        action_target(system, adding ? "AddResourceBlock" : "RemoveResourceBlock");
    if (target.empty()) return patch(host, host_uri, *sys, current, todo, adding);

    const std::string undo_target =
        action_target(system, adding ? "RemoveResourceBlock" : "AddResourceBlock");
    std::vector<Step> steps;
    for (const std::string& u : todo) {
      Json::Value body;
      body["ResourceBlock"]["@odata.id"] = u;
      auto r = request("POST", target, &body);
      if (r && r->status == 202 && r->location.empty()) {
        r = fabric_error("POST " + target + " answered 202 without a Location");
      }
      if (!r) {
        // Undo what went in before; the error is the answer.
        steps.push_back(Step{"", "", u, TaskState::kFailed, r.error().message});
        auto undone = settle(std::move(steps), o.task_wait_ms);
        if (!undone || undone->state == OperationState::kRunning) {
          log::error("redfish: a change failed part way and its earlier steps are still running",
                     {{"host", host}, {"operation", undone ? undone->id : ""}});
        }
        return r.error();
      }
      steps.push_back(Step{r->status == 202 ? r->location : "", undo_target, u,
                           r->status == 202 ? TaskState::kRunning : TaskState::kDone, ""});
      if (r->status != 202) continue;
      // Wait for this block before the next, so a failure stops the change early.
      auto w = settle(steps, o.task_wait_ms);
      if (!w) return w.error();
      if (w->state == OperationState::kFailed) return w;
      if (w->state == OperationState::kDone) {
        for (Step& st : steps) st.state = TaskState::kDone;
      }
    }
    return settle(std::move(steps), o.task_wait_ms);
  }

  // "system <Id>", with the host it belongs to when that host has another id.
  std::string describe_system(const std::string& uri) {
    const std::string id = last_segment(uri);
    std::lock_guard<std::mutex> lock(index_mu);
    auto it = system_hosts.find(trim_slash(path_of(uri)));
    if (it == system_hosts.end() || it->second == id) return "system " + id;
    return "system " + id + " of host " + it->second;
  }

  // A host that is a ComputerSystem resource block: its devices go into the system composed
  // from the block, which the first attach composes. Detaching removes device blocks only and
  // never deletes that system, even when only the compute block is left in it: deleting a
  // composed system may power the node off under its running jobs.
  Expected<Operation> host_block_change(const std::string& host, const Resolved& r, bool adding) {
    auto system = composed_system(r.host_block, r.host_uri);
    if (!system) return system.error();
    if (!system->empty()) return change(host, *system, r.blocks, adding);
    // No system yet, so nothing of this host to detach; a block in another system still
    // refuses the call, as for every host.
    for (const std::string& uri : r.blocks) {
      auto block = get(uri);
      if (!block) return block.error();
      const std::vector<std::string> owners = links((*block)["Links"]["ComputerSystems"]);
      if (!owners.empty() && !(*block)["CompositionStatus"]["SharingEnabled"].asBool()) {
        return Error{ErrorCode::kConflict,
                     "redfish: device " + last_segment(uri) + " is composed into " +
                         describe_system(owners.front()) + ", cannot " +
                         (adding ? "attach it to " : "detach it from ") + host};
      }
    }
    if (!adding || r.blocks.empty()) return Operation{"", OperationState::kDone, ""};
    return compose(host, r);
  }

  // The system composed from a ComputerSystem block now: the block's Links.ComputerSystems, else
  // the one the last inventory found (`known`) if it still holds the block; "" if none.
  Expected<std::string> composed_system(const std::string& block_uri, const std::string& known) {
    auto block = get(block_uri);
    if (!block) return block.error();
    const std::vector<std::string> owners = links((*block)["Links"]["ComputerSystems"]);
    if (!owners.empty()) return trim_slash(path_of(owners.front()));
    if (known.empty()) return std::string();
    auto sys = request("GET", known);
    if (!sys) {
      if (sys.error().code == ErrorCode::kNotFound) return std::string();
      return sys.error();
    }
    const std::vector<std::string> held = links(sys->body["Links"]["ResourceBlocks"]);
    return std::find(held.begin(), held.end(), block_uri) != held.end() ? known : std::string();
  }

  // Composes a system from a host's ComputerSystem block and the device blocks: one POST to the
  // capabilities' TargetCollection, all or nothing (nothing to undo when it fails).
  Expected<Operation> compose(const std::string& host, const Resolved& r) {
    if (compose_target.empty()) {
      return fabric_error("host " + host +
                          " is a ComputerSystem resource block with no system composed from it, "
                          "and the service's ComputerSystemComposition capabilities name no "
                          "TargetCollection to compose one in");
    }
    const std::string name = r.node.empty() ? host : r.node;
    Json::Value body;
    body["Name"] = name;
    body["Description"] = "Composed for Slurm node " + name;
    body["Links"]["ResourceBlocks"] = Json::Value(Json::arrayValue);
    Json::Value compute;
    compute["@odata.id"] = r.host_block;
    body["Links"]["ResourceBlocks"].append(compute);
    for (const std::string& u : r.blocks) {
      Json::Value link;
      link["@odata.id"] = u;
      body["Links"]["ResourceBlocks"].append(link);
    }
    auto reply = request("POST", compose_target, &body);
    if (!reply) {
      if (reply.error().code == ErrorCode::kConflict) {
        // Perhaps composed meanwhile (an earlier try whose answer was lost, or a service that
        // does not link the system from the block): read again, and add to that system.
        if (auto inv = inventory(); inv) {
          std::string system;
          {
            std::lock_guard<std::mutex> lock(index_mu);
            if (auto it = host_blocks.find(host); it != host_blocks.end()) {
              system = it->second.system_uri;
            }
          }
          if (!system.empty()) return change(host, system, r.blocks, true);
        }
      }
      return reply.error();
    }
    if (reply->status == 202) {
      if (reply->location.empty()) {
        return fabric_error("POST " + compose_target + " answered 202 without a Location");
      }
      // The new system is found from the block once the task has ended.
      return settle({Step{reply->location, "", r.host_block, TaskState::kRunning, ""}},
                    o.task_wait_ms);
    }
    std::string system = reply->location;
    if (system.empty()) system = odata_id(reply->body);
    system = trim_slash(path_of(system));
    if (!system.empty()) {
      std::lock_guard<std::mutex> lock(index_mu);
      if (auto it = host_blocks.find(host); it != host_blocks.end()) it->second.system_uri = system;
      system_hosts[system] = host;
    }
    log::info("redfish: system composed", {{"host", host}, {"system", system}});
    return Operation{"", OperationState::kDone, ""};
  }

  // A PATCH of Links.ResourceBlocks: one step, all or nothing.
  Expected<Operation> patch(const std::string& host, const std::string& host_uri, const Reply& sys,
                            const std::vector<std::string>& current,
                            const std::vector<std::string>& todo, bool adding) {
    if (!sys.body["Links"].isMember("ResourceBlocks")) {
      return fabric_error("system " + host +
                          " advertises neither resource block actions nor Links.ResourceBlocks");
    }
    std::vector<std::string> next;
    for (const std::string& u : current) {
      if (adding || std::find(todo.begin(), todo.end(), u) == todo.end()) next.push_back(u);
    }
    if (adding) next.insert(next.end(), todo.begin(), todo.end());
    Json::Value body;
    body["Links"]["ResourceBlocks"] = Json::Value(Json::arrayValue);
    for (const std::string& u : next) {
      Json::Value link;
      link["@odata.id"] = u;
      body["Links"]["ResourceBlocks"].append(link);
    }
    std::vector<std::string> extra;
    if (!sys.etag.empty()) extra.push_back("If-Match: " + sys.etag);
    auto r = request("PATCH", host_uri, &body, extra);
    if (!r) return r.error();
    if (r->status != 202) return Operation{"", OperationState::kDone, ""};
    if (r->location.empty()) {
      return fabric_error("PATCH " + host_uri + " answered 202 without a Location");
    }
    return settle({Step{r->location, "", last_segment(host_uri), TaskState::kRunning, ""}},
                  o.task_wait_ms);
  }

  // Best effort: reverses one step of a change that failed as a whole.
  void undo(const std::string& target, const std::string& block) {
    auto r = [&]() -> Expected<Reply> {
      if (target.starts_with(kCxlDisconnect)) {
        const std::string initiator = target.substr(kCxlDisconnect.size());
        auto conns = cxl_connections();
        if (!conns) return conns.error();
        for (const CxlConnection& c : *conns) {
          if (std::find(c.chunks.begin(), c.chunks.end(), block) != c.chunks.end() &&
              std::find(c.initiators.begin(), c.initiators.end(), initiator) !=
                  c.initiators.end()) {
            return request("DELETE", c.uri);
          }
        }
        return Reply{204, Json::Value(), "", ""};  // nothing left to remove
      }
      if (target.starts_with(kCxlConnect)) {
        const std::string rest = target.substr(kCxlConnect.size());
        const size_t comma = rest.find(',');
        Json::Value body = memory_connection(
            rest.substr(0, comma), comma == std::string::npos ? "" : rest.substr(comma + 1), block);
        return request("POST", cxl_connections_uri, &body);
      }
      Json::Value body;
      body["ResourceBlock"]["@odata.id"] = block;
      return request("POST", target, &body);
    }();
    std::string failure = r ? "" : r.error().message;
    if (r && r->status == 202 && !r->location.empty()) {
      // The failure is only reported once the undo has ended (or this bound has passed), so
      // that the caller sees the system as it was.
      const auto deadline =
          std::chrono::steady_clock::now() +
          std::chrono::milliseconds(std::max(o.task_wait_ms, o.request_timeout_ms));
      for (;;) {
        auto p = poll_task(r->location);
        if (!p) {
          failure = p.error().message;
        } else if (p->state == TaskState::kFailed) {
          failure = p->message;
        } else if (p->state == TaskState::kRunning && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1L, o.poll_interval_ms)));
          continue;
        }
        break;
      }
    }
    if (!failure.empty()) {
      log::error("redfish: cannot undo a step of a failed change; the reconciler will find it",
                 {{"block", block}, {"error", failure}});
    }
  }

  // Attach or detach: CXL memory first, then resource blocks. When the blocks fail, the call's
  // CXL memory is disconnected again (connected again for a detach).
  // Both may hand back running tasks: the operation id then carries the steps of both.
  Expected<Operation> apply(const std::string& host, const std::vector<std::string>& ids,
                            bool adding) {
    Resolved r;
    if (Status s = resolve(host, ids, &r); !s) return s.error();
    Expected<Operation> cxl = Operation{"", OperationState::kDone, ""};
    if (!r.chunks.empty()) {
      cxl = cxl_change(host, r, adding);
      if (!cxl || cxl->state == OperationState::kFailed) return cxl;
    }
    if (r.blocks.empty()) return cxl;
    auto op = r.host_block.empty() ? change(host, r.host_uri, r.blocks, adding)
                                   : host_block_change(host, r, adding);
    if ((!op || op->state == OperationState::kFailed) && !r.chunks.empty()) {
      if (cxl->state == OperationState::kDone) {
        // Reverse the CXL part; its own steps are not kept once done, so ask again.
        Resolved back = r;
        back.blocks.clear();
        (void)cxl_change(host, back, !adding);
      }
      return op;
    }
    if (!op) return op;
    if (cxl->state == OperationState::kRunning && op->state == OperationState::kRunning) {
      op->id = cxl->id + kTaskSeparator + op->id.substr(kTaskPrefix.size());
    } else if (cxl->state == OperationState::kRunning) {
      return cxl;
    }
    return op;
  }
};

RedfishFabric::RedfishFabric(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RedfishFabric::~RedfishFabric() {
  if (impl_) impl_->logout();
}

Expected<std::unique_ptr<RedfishFabric>> RedfishFabric::create(RedfishOptions o) {
  if (auto why = base_url_problem(o.base_url, "/redfish/v1")) return bad_option(*why);
  if (!o.credentials_file.empty()) {
    if (!o.username.empty() || !o.password.empty()) {
      return bad_option("give the credentials either inline or in a credentials file, not both");
    }
    if (Status s = load_fabric_credentials(o.credentials_file, "redfish", &o.username, &o.password);
        !s) {
      return s.error();
    }
  }
  if (o.username.empty()) return bad_option("no username: set a credentials file");
  if (o.connect_timeout_ms <= 0 || o.request_timeout_ms <= 0) {
    return bad_option("timeouts must be positive numbers of milliseconds");
  }
  if (o.poll_interval_ms <= 0 || o.task_wait_ms < 0) {
    return bad_option("the task poll interval must be positive and the task wait 0 or more ms");
  }
  if (o.get_retries < 0) return bad_option("GET retries must be 0 or more");
  for (const auto& [id, node] : o.host_map) {
    if (id.empty() || node.empty()) {
      return bad_option("a host map line has an empty system id or node name");
    }
  }
  auto impl = std::make_unique<Impl>(std::move(o));
  if (Status s = impl->discover(); !s) {
    impl->logout();
    return s.error();
  }
  return std::unique_ptr<RedfishFabric>(new RedfishFabric(std::move(impl)));
}

Expected<FabricInventory> RedfishFabric::inventory() { return impl_->inventory(); }

Expected<Operation> RedfishFabric::attach(const std::string& fabric_host,
                                          const std::vector<std::string>& device_ids) {
  return impl_->apply(fabric_host, device_ids, true);
}

Expected<Operation> RedfishFabric::detach(const std::string& fabric_host,
                                          const std::vector<std::string>& device_ids) {
  return impl_->apply(fabric_host, device_ids, false);
}

Expected<Operation> RedfishFabric::operation_status(const std::string& operation_id) {
  if (operation_id.empty()) return Operation{"", OperationState::kDone, ""};
  auto steps = Impl::decode(operation_id);
  if (!steps) {
    return Error{ErrorCode::kNotFound, "redfish: unknown operation '" + operation_id +
                                           "' (not an id this driver hands out)"};
  }
  auto op = impl_->settle(std::move(*steps), 0);
  if (op) op->id = operation_id;
  return op;
}

Expected<std::vector<std::pair<std::string, Health>>> RedfishFabric::health() {
  auto inv = impl_->inventory();
  if (!inv) return inv.error();
  std::vector<std::pair<std::string, Health>> out;
  for (const Device& d : inv->devices) out.emplace_back(d.id, d.health);
  return out;
}

}  // namespace composer::drivers
