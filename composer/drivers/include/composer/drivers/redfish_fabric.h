// The redfish driver: a DMTF Redfish CompositionService as a composer fabric.
//
// Resource blocks are the devices: a Processor block whose processor is a GPU is a GPU, a
// Memory block is pooled memory, a Storage block whose drives all have Protocol NVMe is an NVMe
// device; the block's Id is the device id. Any other block (SAS or SATA drives, SimpleStorage,
// network, untyped) is listed in the inventory's `skipped` with its reason. Resource zones
// are the composer zones; a block in several zones is in all of them: its zone is their union
// ("1+2"), which every host reaching one of them reaches too. Composed systems are the hosts,
// reaching the zones of their compute blocks (the capabilities' zones only for a system that
// lists no compute block);
// attaching adds resource blocks to a host's composed system (the AddResourceBlock action or
// a PATCH of Links.ResourceBlocks, whichever the system advertises), detaching removes them.
// Answers of 202 are followed through their task monitor.
//
// Compute nodes as resource blocks: a resource block of ResourceBlockType ComputerSystem is a
// host of its own, whose id is the block's Id whether or not a system is composed from it yet
// (so the id does not change when one is), named as the other hosts (host_map by that Id,
// otherwise the HostName of the system the block holds, else of the system composed from it,
// otherwise the Id), with the zones of the block's Links.Zones. The system composed from it
// is the one whose Links.ResourceBlocks hold the block (or the block's Links.ComputerSystems);
// it is no host of its own, and devices in it are attached to the block's host. The first
// attach to such a host composes that system: a POST to the TargetCollection of the
// ComputerSystemComposition capabilities naming the system after the node and listing
// Links.ResourceBlocks = [the block, the devices] (201 with Location, or 202 followed through
// its task monitor). Later attaches add blocks to it as above. Detaching removes the device
// blocks and keeps the system even when only the compute block is left in it: deleting a
// composed system may power the node off under its running jobs.
//
// What is already held: a block composed into one system is attached to that system's host,
// whoever composed it; a block shared by several systems (CompositionStatus.SharingEnabled)
// or Reserved is held, as is anything in a system that is not a served host. Detaching a
// block from a host that does not hold it succeeds without a request, wherever the block
// sits. After a change the service answered at once (200 or 204, no task), the system is read
// back; a block not where the change put it fails the call (and what did move is undone).
//
// Shapes of real services: the service root with or without its trailing slash; redirects of
// a GET (301, 302, 307, 308) followed within the service's origin (5 at most), a redirect to
// another origin refused; Members@odata.nextLink followed on every collection; error bodies
// with @Message.ExtendedInfo, error.message, or the older {"Status", "Message"}; a session
// login answered with anything but 201 refused with the status and a hint to FabricAuth=basic;
// a composition capabilities object that does not load is a warning, with the default slots.
// With use_host_name, hosts that share a HostName are all left out (in `skipped`, named).
//
// HTTP/1.0 services that close every connection and end bodies by closing are served as any
// other: each answer is read to the end of its connection when it carries no Content-Length.
//
// CXL memory through the Fabrics model, when /redfish/v1/Fabrics holds a fabric of FabricType
// CXL (the first one is used): every memory chunk a target endpoint exposes (a
// ConnectedEntities entry of EntityType MemoryChunk) is pooled memory, id "cxl-<endpoint Id>"
// ("cxl-<endpoint>-<domain>-<chunk>" when the endpoint exposes several), capacity from
// MemoryChunkSizeMiB, model "CXL <AddressRangeType>", health from the chunk's Status, zone
// "<fabric Id in lower case>-<zone Id>" (e.g. "cxl-3"). Initiator endpoints are the hosts: the
// computer system their EntityLink points into (else the endpoint Id), named as above (host_map,
// HostName, Id) and merged with the composed system of the same Id. Attaching POSTs a
// Connection of ConnectionType Memory to the fabric's Connections, linking the host's
// initiator endpoint that shares a zone with the chunk's target endpoint, the target endpoint
// and the chunk; detaching DELETEs that connection, and only a connection of exactly that
// host's initiators and that one chunk. The connections are the Connections collection's and
// those the endpoints' Links.Connections name. A chunk in one such connection is attached to
// the host; in any other (several hosts or chunks, an initiator that is no served host) it is
// held, never taken over by an attach nor deleted by a detach. A service with only a CXL
// fabric (no CompositionService) is accepted.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/core/fabric.h"
#include "composer/drivers/fabric_manager.h"
#include "composer/model/model.h"

namespace composer::drivers {

// The service's address (the service root is <base_url>/redfish/v1), credentials, TLS,
// timeouts, host_map and slots come from FabricManagerOptions; the attach slots apply when the
// service's composition capabilities give no limit.
struct RedfishOptions : FabricManagerOptions {
  // kSession logs in through SessionService and sends X-Auth-Token (logged out when the
  // driver is destroyed); kBasic sends HTTP basic authentication with every request.
  enum class Auth { kSession, kBasic };
  Auth auth = Auth::kSession;
  // Task monitors of 202 answers: polled every poll_interval_ms; attach and detach wait at
  // most task_wait_ms before answering kRunning (then operation_status() polls again).
  long poll_interval_ms = 200;
  long task_wait_ms = 30000;
  // Host names: a composed system is the Slurm node host_map[system Id] when the map is not
  // empty (systems not in it are ignored); otherwise its HostName when use_host_name is set;
  // otherwise its Id. A ComputerSystem resource block host goes by its block Id here.
  bool use_host_name = false;
};

class RedfishFabric final : public Fabric {
 public:
  // Checks the options, logs in and discovers the service (CompositionService, ResourceBlocks,
  // ResourceZones, the Systems collection and its composition capabilities, a CXL fabric). Errors
  // name the option or the service's answer that is wrong.
  static Expected<std::unique_ptr<RedfishFabric>> create(RedfishOptions options);
  // Logs out of the session, if one was opened.
  ~RedfishFabric() override;
  RedfishFabric(const RedfishFabric&) = delete;
  RedfishFabric& operator=(const RedfishFabric&) = delete;

  std::string_view driver() const override { return "redfish"; }
  Expected<FabricInventory> inventory() override;
  // All or nothing: an unknown host or block (kNotFound), or a block composed into another
  // system or memory connected to another host (kConflict), refuses the call before anything
  // changes; a block or connection that fails half way through makes the driver remove what
  // it had added. A ComputerSystem block host with no composed system gets one composed with
  // the devices in it; a refusal of the service (a block in another zone, say) carries its
  // message.
  Expected<Operation> attach(const std::string& fabric_host,
                             const std::vector<std::string>& device_ids) override;
  // Never deletes a composed system, even one left with only its compute block.
  Expected<Operation> detach(const std::string& fabric_host,
                             const std::vector<std::string>& device_ids) override;
  // Operation ids name the task monitors still running; polling one checks them once.
  Expected<Operation> operation_status(const std::string& operation_id) override;
  Expected<std::vector<std::pair<std::string, Health>>> health() override;

 private:
  struct Impl;
  explicit RedfishFabric(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::drivers
