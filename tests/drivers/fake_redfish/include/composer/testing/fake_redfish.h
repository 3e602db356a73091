// A fake Redfish composition service for tests: a real HTTP server on loopback that serves the
// DMTF public-composability mockup whole (its pre-composed, shared, multi-zone and SAS blocks
// as they are) plus generated resource blocks (GPUs, memory, NVMe drives in
// two zones, and composed systems "node01".. to attach them to), keeps state (attach and
// detach change what it serves), authenticates (sessions and basic auth) and injects faults.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/error.h"

namespace composer::testing {

struct FakeRedfishOptions {
  // The mockup tree (a folder holding public-composability/). Empty: $COMPOSER_REDFISH_MOCKUPS,
  // else the path the build was configured with.
  std::string mockups;
  // Generated blocks per zone (zones "1" and "2"): GPUs (A100-80G in zone 1, H100-80G in
  // zone 2), 64 GiB memory blocks and 3.84 TB NVMe drives. Each GPU and drive identifies itself
  // as a real one does: the Processor's SerialNumber ("FRG<zone><8 digits of its index>") and
  // UUID ("GPU-f00dcafe-000<zone>-4000-8000-<12 digits of its index>") and Links.PCIeDevice, the
  // Drive's SerialNumber ("FRN...") and Links.PCIeFunctions; the PCIe device
  // <block>/PCIeDevices/0 has function 0 with VendorId and DeviceId (0x10DE:0x20B5 for A100,
  // 0x10DE:0x2331 for H100, 0x8086:0x0b60 for the drives).
  uint32_t gpus_per_zone = 16;
  // The PCI ids the drives report (QEMU's nvme device is 0x1b36:0x0010).
  std::string drive_vendor_id = "0x8086";
  std::string drive_device_id = "0x0b60";
  // Not empty: a command that makes a drive's attach and detach real (tests/kvm: QMP
  // device_add and device_del on the composed system's QEMU guest). For each generated drive an
  // action or PATCH (without task_ms) adds to or removes from a system, it runs
  // "COMMAND attach|detach SYSTEM-ID BLOCK-ID SERIAL" (sh -c) before answering; when it exits
  // non-zero the change answers 500 with its output and nothing changes.
  std::string hot_plug;
  uint32_t memory_per_zone = 2;
  // The capacity of each generated memory block (the kvm level gives its guest's CXL device's).
  uint32_t memory_mib = 64 * 1024;
  uint32_t drives_per_zone = 2;
  // Generated composed systems node01..nodeNN (HostName the same), each with its own compute
  // block; odd ones sit in zone 1, even ones in zone 2, and reach both.
  uint32_t hosts = 4;
  std::string username = "admin";
  std::string password = "composer-test-pw";
  // Sloppy mode: collection members under Links instead of Members, 204 without a body where
  // a strict service answers 200 with a message, and an HTTP/1.0 server in front: status lines
  // read "HTTP/1.0", no keep-alive, every connection closed after one answer, and answers below
  // 400 carry no Content-Length (their body ends when the connection closes).
  // Strict mode also insists on If-Match for a PATCH.
  bool sloppy = false;
  // Compute nodes as resource blocks of ResourceBlockType ComputerSystem instead of composed
  // systems: blocks node01..nodeNN (odd ones in zone 1, even ones in zone 2, each with its own
  // system <block>/Systems/1 whose HostName is the block Id) that no system is composed from
  // yet. A POST to the Systems collection (its composition capabilities name it as
  // TargetCollection) with Name and Links.ResourceBlocks = [one ComputerSystem block, device
  // blocks in its zone] composes a system "composed-<n>" (201 and Location, or 202 and a task
  // monitor when task_ms is set); that system then takes blocks by action or PATCH as the
  // others. Blocks in use answer 409, blocks in another zone than the compute block 400.
  bool host_blocks = false;
  // Systems advertise no AddResourceBlock/RemoveResourceBlock actions: blocks are added by a
  // PATCH of Links.ResourceBlocks.
  bool patch_only = false;
  // > 0: actions and PATCHes answer 202 with a task monitor that completes after this long.
  int task_ms = 0;
  // An older service: the composition capabilities annotation sits on each resource zone
  // instead of on the Systems collection.
  bool capabilities_on_zones = false;
  // Also serve a CXL fabric from the public-cxl mockup (beside public-composability): the root
  // links Fabrics; Fabrics/CXL with its endpoints, zones and memory connections, the CXL
  // chassis with their memory domains and chunks, and Systems/CXL-System. Generated on top: a
  // pool chassis "CXLPool" with cxl_chunks memory chunks of 64 GiB, each behind a target
  // endpoint "TP<n>" in CXL zone 3, and an initiator endpoint "I-<host>" in zone 3 for every
  // generated host. Connections really appear (POST) and disappear (DELETE), with tasks and
  // faults as for the resource block actions.
  bool cxl = false;
  uint32_t cxl_chunks = 4;
  // With cxl: a service with only the CXL fabric (the root links no CompositionService).
  bool cxl_only = false;
  // Shapes of real services, each off by default:
  // > 0: every collection longer than this is served in pages of page_size members, each
  // naming the next through Members@odata.nextLink (".../Collection?$skip=N").
  uint32_t page_size = 0;
  // "/": GET /redfish/v1 answers 308 to /redfish/v1/ (the root is served there too); a URL
  // (http://host:port): GET /redfish/v1 answers 302 to <URL>/redfish/v1/, another origin.
  std::string root_redirect;
  // The Systems collection advertises its CapabilitiesObject, which answers 404.
  bool broken_capabilities = false;
  // AddResourceBlock/RemoveResourceBlock actions and PATCHes answer 204 and change nothing.
  bool noop_actions = false;
  // Error bodies in the older {"Status": N, "Message": "..."} shape instead of
  // {"error": {..., "@Message.ExtendedInfo": [...]}}.
  bool old_style_errors = false;
  // != 0 and != 201: the session login answers this status without a session (200 with a
  // body, or an error such as 405); basic authentication still works.
  int login_status = 0;
  // Resource blocks (by Id) served with CompositionStatus.Reserved true.
  std::vector<std::string> reserved;
  int port = 0;  // 0: any free port on 127.0.0.1
};

// A fault for the next `count` requests whose method matches (empty: any) and whose path
// contains `path` (empty: any). Control paths and the session login are never faulted.
struct FakeRedfishFault {
  enum class Kind {
    kStatus,     // answer `status` with a Redfish error body carrying `message`
    kDelay,      // wait delay_ms before serving the request (a timeout for a short client)
    kReset,      // close the connection part way through the answer
    kTaskFails,  // the action or PATCH answers 202 and its task ends in an Exception
  };
  Kind kind = Kind::kStatus;
  std::string method;
  std::string path;
  int status = 500;
  int delay_ms = 0;
  std::string message = "injected fault";
  uint32_t count = 1;
  uint32_t skip = 0;  // matching requests let through before the fault starts
};

class FakeRedfish {
 public:
  // Loads the mockups, generates the blocks and starts serving. Errors name the missing
  // mockup folder or the port that could not be bound.
  static Expected<std::unique_ptr<FakeRedfish>> start(FakeRedfishOptions options = {});
  ~FakeRedfish();  // stops serving and waits for the server thread
  FakeRedfish(const FakeRedfish&) = delete;
  FakeRedfish& operator=(const FakeRedfish&) = delete;

  int port() const;
  std::string base_url() const;  // http://127.0.0.1:PORT

  void inject(FakeRedfishFault fault);
  // Drops every fault not yet served.
  void clear_faults();
  // Forgets every session, as a service does when it restarts or sessions time out.
  void expire_sessions();
  // Status.Health of a resource block, or of the memory chunks behind a CXL target endpoint
  // (by the endpoint's Id): "OK", "Warning" or "Critical". kNotFound if unknown.
  Status set_health(const std::string& block_id, const std::string& health);
  // The block ids composed into a system (Links.ResourceBlocks), in order.
  std::vector<std::string> system_blocks(const std::string& system_id) const;
  // Every system that links resource blocks, by Id, with its block ids in order.
  std::map<std::string, std::vector<std::string>> systems() const;
  // Ids of the systems whose Links.ResourceBlocks hold this block.
  std::vector<std::string> systems_with_block(const std::string& block_id) const;
  // Ids of the generated blocks of one kind ("gpu", "mem", "nvme"), and of the generated hosts.
  std::vector<std::string> generated(const std::string& kind) const;
  std::vector<std::string> hosts() const;
  // Memory connections of the CXL fabric: (initiator endpoint Id, target endpoint Id) each.
  std::vector<std::pair<std::string, std::string>> memory_connections() const;
  // A memory connection made by someone else: the initiator endpoints and the memory chunks of
  // the target endpoints (by Id), all in one connection. kNotFound for an unknown endpoint,
  // kConflict for a chunk already connected.
  Status connect_behind_back(const std::vector<std::string>& initiators,
                             const std::vector<std::string>& targets);
  // Sessions currently open, and requests served per method ("GET", "POST", ...).
  size_t open_sessions() const;
  // Every request served but the control ones, "METHOD /path?query" in order; and how many of
  // them would change the service (any method but GET, outside the SessionService).
  std::vector<std::string> request_log() const;
  uint64_t writes() const;
  // Each request that would change the service, with the X-Composer-Epoch header it carried
  // (0: none) and when it arrived (ms since the Unix epoch): which composerd's leadership asked.
  struct Change {
    std::string line;  // as request_log() has it
    int64_t epoch = 0;
    int64_t at_ms = 0;
  };
  std::vector<Change> changes() const;
  uint64_t requests(const std::string& method) const;

  // The same over HTTP, for shell tests (no authentication, loopback only):
  //   POST /control/fault   {"kind": "status|delay|reset|task_fails", "method", "path",
  //                          "status", "delay_ms", "message", "count", "skip"}
  //   POST /control/clear
  //   POST /control/health  {"block": ID, "health": "OK|Warning|Critical"}
  //   POST /control/unplug  {"block": ID}: the fabric takes the block away from the system
  //                          it is composed into, asked by no one (a link lost, a surprise
  //                          removal): the hot-plug command's detach runs, then the system no
  //                          longer lists it
  //   GET  /control/state   {"systems": {ID: [block, ...]}, "sessions": N}

 private:
  struct Impl;
  explicit FakeRedfish(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::testing
