// The redfish driver (composer/drivers/redfish_fabric.h) inside: the state its calls share and
// the helpers they use, split by concern:
//   redfish_session.cc      logging in and out, requests with the credential
//   redfish_inventory.cc    discovering the service; resource blocks and composed systems
//   redfish_cxl.cc          CXL memory through the Fabrics model
//   redfish_composition.cc  attach, detach and compose, followed through task monitors
//   redfish_fabric.cc       the public class: checks the options, hands the calls on
#pragma once

#include <json/json.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "composer/api/codec.h"
#include "composer/common/log.h"
#include "composer/common/units.h"
#include "composer/drivers/redfish_fabric.h"
#include "composer/http/http.h"
#include "fabric_manager_http.h"

namespace composer::drivers {
namespace redfish {

constexpr std::string_view kServiceRoot = "/redfish/v1";
// Operation ids: "tasks:" and the steps of a change, separated by '|', so that any instance of
// the driver (also after a restart) can follow and, on failure, undo them.
constexpr std::string_view kTaskPrefix = "tasks:";
constexpr char kTaskSeparator = '|';
constexpr char kStepSeparator = '>';  // within a step: monitor>undo action>block
// Redirects of a GET followed within the service's origin, at most.
constexpr int kMaxRedirects = 5;
// Pages of one collection followed through Members@odata.nextLink, at most.
constexpr int kMaxPages = 1000;

Error fabric_error(std::string message);

std::string odata_id(const Json::Value& v);

std::string last_segment(std::string uri);

std::string trim_slash(std::string uri);

// The URIs an array of links (or a single link) names.
std::vector<std::string> links(const Json::Value& v);

// The members of a collection. Strict services put them in "Members"; some put them under
// "Links" or spell the key in lower case.
std::vector<std::string> members(const Json::Value& collection);

// A device's zone from its block's zones: the one zone, or all of them joined by '+'
// ("1+2"), or "default" when the block names none.
std::string zone_of(const std::vector<std::string>& zones);

Health health_of(const Json::Value& status);

Health worst(Health a, Health b);

// A Redfish error body's messages (error.@Message.ExtendedInfo[].Message), else its message.
std::string error_message(const std::string& body);

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

// One step of a change: a block added or removed, with its task monitor while it runs and the
// action that reverses it.
struct Step {
  std::string monitor;
  std::string undo_target;  // empty: cannot be undone on its own (a PATCH)
  std::string block;
  TaskState state = TaskState::kRunning;
  std::string message;
};

// What the driver learnt about a block or a system the last time it read it.
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
std::string path_of(const std::string& uri);

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
                              const std::string& chunk);

}  // namespace redfish

// The helpers above are the Impl's own; only the redfish driver's files include this header.
using namespace redfish;  // NOLINT(google-build-using-namespace)

struct RedfishFabric::Impl {
  explicit Impl(RedfishOptions opts) : o(std::move(opts)), http(http_options(o, o.get_retries)) {}

  RedfishOptions o;
  http::HttpClient http;

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
  std::set<std::string> reported_skips;  // skipped resources already logged

  // The first fabric of FabricType CXL under /redfish/v1/Fabrics, if any.
  std::string cxl_fabric_id;
  std::string cxl_endpoints_uri;
  std::string cxl_connections_uri;

  std::string url(const std::string& uri) const;

  Expected<std::vector<std::string>> auth_headers();

  Status login();

  void logout();

  // One request with the credential; answers any HTTP status. A session that expired is
  // opened again once.
  Expected<Reply> request(const std::string& method, const std::string& uri,
                          const Json::Value* body = nullptr,
                          const std::vector<std::string>& extra = {});

  Expected<Json::Value> get(const std::string& uri);

  // The members of a collection, over every page its Members@odata.nextLink names.
  Expected<std::vector<std::string>> collection(const std::string& uri);

  Status discover();

  // Finds the first fabric of FabricType CXL, if the service has Fabrics at all.
  Status discover_cxl(const Json::Value& root);

  // Composer zone of a CXL fabric zone: "<fabric id, lower case>-<zone id>", e.g. "cxl-3", so
  // that it never meets a resource zone of the same Id.
  std::string cxl_zone(const std::string& zone_uri) const;

  // Every connection of ConnectionType Memory, as the service shows it now: the Connections
  // collection's, and those of `linked` (what endpoints' Links.Connections name) beside it.
  Expected<std::vector<CxlConnection>> cxl_connections(const std::set<std::string>& linked = {});

  // The CXL part of the inventory: memory chunks behind target endpoints become pooled memory
  // (id "cxl-<endpoint>", or "cxl-<endpoint>-<domain>-<chunk>" when the endpoint exposes
  // several), initiator endpoints become hosts (the computer system they belong to, else the
  // endpoint), and memory connections say what is attached where.
  Status cxl_inventory(FabricInventory* inv, std::map<std::string, CxlChunk>* chunks,
                       std::map<std::string, std::vector<CxlInitiator>>* initiators,
                       std::map<std::string, std::string>* endpoint_host);

  // What the host can recognise a Processor or Drive by: its SerialNumber and UUID, else those
  // of the PCIeDevice its Links.PCIeDevice names; VendorId and DeviceId of the first PCIe
  // function its Links.PCIeFunctions (else that PCIeDevice's PCIeFunctions) names. Redfish has
  // no property for the host's PCI address of a device, so Device::address stays empty.
  void read_identity(const Json::Value& resource, DeviceIdentity* id);
  // What the host recognises a CXL memory device by: the PCI ids of the PCIe device under the
  // endpoint's logical device `logical_device`, and the serial of its Global CXL ID (`entity`'s
  // Identifiers) in the form Linux shows: "0x" and 16 hex digits.
  DeviceIdentity cxl_identity(const Json::Value& entity, const std::string& logical_device);

  // The device a resource block is, if any. Sets *compute for Compute and ComputerSystem
  // blocks (the hosts' own blocks).
  // A block that is no device and no host block sets *skip to the reason.
  Expected<std::optional<Device>> read_block(const Json::Value& b, bool* compute,
                                             std::string* skip);

  // The failure domains of a device in `chassis` (a block's Links.Chassis, or the chassis a
  // CXL memory chunk sits under): that chassis and each one up its Links.ContainedBy chain,
  // one domain per chassis at level lower(ChassisType) ("module", "enclosure", "rack"), named
  // by the chassis Id; the nearest chassis wins a level two of them share. A chassis that
  // cannot be read, or has no ChassisType, ends its chain there; at most 8 chassis deep.
  // Read through chassis_seen, which inventory() empties first.
  std::vector<FailureDomain> chassis_domains(const std::vector<std::string>& chassis);
  struct ChassisInfo {
    std::string level;  // empty: unreadable or untyped
    std::string name;
    std::string contained_by;
  };
  std::map<std::string, ChassisInfo> chassis_seen;

  // Whether a system can take resource blocks, and how.
  static std::string action_target(const Json::Value& system, const char* action);

  std::optional<std::string> node_name(const Json::Value& system) const;

  Expected<FabricInventory> inventory();

  // Under FabricNodeNames=hostname, hosts that share a HostName are all left out (with a
  // sentence naming them in `skipped`): one Slurm node is never several fabric hosts.
  void refuse_shared_names(FabricInventory* inv, std::map<std::string, std::string>* system_index,
                           std::map<std::string, HostBlock>* host_block_index,
                           std::map<std::string, std::vector<CxlInitiator>>* initiators) const;

  // The CompositionService part of the inventory: resource blocks and composed systems. A
  // ComputerSystem block is a host of its own, id the block's Id, whether or not a system is
  // composed from it yet; the system composed from it (the one whose Links.ResourceBlocks hold
  // the block) is no host of its own, and what sits in it is attached to the block's host.
  Status block_inventory(FabricInventory* out, std::map<std::string, std::string>* block_index,
                         std::map<std::string, std::string>* system_index,
                         std::map<std::string, HostBlock>* host_block_index,
                         std::map<std::string, std::string>* system_host_index);

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
  Status resolve(const std::string& host, const std::vector<std::string>& ids, Resolved* out);

  // Connects (or disconnects) CXL memory chunks and a host: a POST of a Connection of
  // ConnectionType Memory between an initiator endpoint of the host that shares a zone with
  // the chunk's target endpoint, and the chunk; detaching deletes that connection. A chunk
  // already where it should be is left alone; one connected to another host refuses the call.
  Expected<Operation> cxl_change(const std::string& host, const Resolved& r, bool adding);

  Expected<TaskPoll> poll_task(const std::string& monitor);

  // Follows the steps of a change until none runs, or the wait runs out (then kRunning with an
  // id that carries every step). When all steps have ended and one failed, the steps that
  // succeeded are undone, so a failed change leaves the system as it was.
  Expected<Operation> settle(std::vector<Step> steps, long wait_ms);

  // Takes the answer to one step of a change (`what` names the request, `resource` the block
  // or chunk it moves) into `steps`. A failed answer ends the change: the steps before it are
  // undone and the error is the answer. A task (202) is waited for before the next step, so
  // that a failure stops the change early. Empty: go on with the next step.
  std::optional<Expected<Operation>> take_step(const std::string& host, const std::string& what,
                                               Expected<Reply> reply,
                                               const std::string& undo_target,
                                               const std::string& resource,
                                               std::vector<Step>* steps);

  static std::string encode(const std::vector<Step>& steps);

  static std::optional<std::vector<Step>> decode(const std::string& id);

  // One change of a system's blocks: an action per block, or one PATCH of the whole list.
  Expected<Operation> change(const std::string& host, const std::string& host_uri,
                             const std::vector<std::string>& uris, bool adding);

  // After a change the service answered at once (200 or 204, no task): reads the system back
  // and fails the call when a block is not where the change put it, undoing (by undo_target,
  // if any) the blocks that did move.
  Expected<Operation> read_back(const std::string& host, const std::string& host_uri,
                                const std::vector<std::string>& todo, bool adding,
                                const std::string& what, const std::string& undo_target);

  // "system <Id>", with the host it belongs to when that host has another id.
  std::string describe_system(const std::string& uri);

  // A host that is a ComputerSystem resource block: its devices go into the system composed
  // from the block, which the first attach composes. Detaching removes device blocks only and
  // never deletes that system, even when only the compute block is left in it: deleting a
  // composed system may power the node off under its running jobs.
  Expected<Operation> host_block_change(const std::string& host, const Resolved& r, bool adding);

  // The system composed from a ComputerSystem block now: the block's Links.ComputerSystems, else
  // the one the last inventory found (`known`) if it still holds the block; "" if none.
  Expected<std::string> composed_system(const std::string& block_uri, const std::string& known);

  // Composes a system from a host's ComputerSystem block and the device blocks: one POST to the
  // capabilities' TargetCollection, all or nothing (nothing to undo when it fails).
  Expected<Operation> compose(const std::string& host, const Resolved& r);

  // A PATCH of Links.ResourceBlocks: one step, all or nothing.
  Expected<Operation> patch(const std::string& host, const std::string& host_uri, const Reply& sys,
                            const std::vector<std::string>& current,
                            const std::vector<std::string>& todo, bool adding);

  // Best effort: reverses one step of a change that failed as a whole.
  void undo(const std::string& target, const std::string& block);

  // Attach or detach: CXL memory first, then resource blocks. When the blocks fail, the call's
  // CXL memory is disconnected again (connected again for a detach).
  // Both may hand back running tasks: the operation id then carries the steps of both.
  Expected<Operation> apply(const std::string& host, const std::vector<std::string>& ids,
                            bool adding);
};

}  // namespace composer::drivers
