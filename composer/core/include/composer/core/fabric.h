// The fabric driver interface: everything composerd asks of a fabric manager.
// Drivers (composer/drivers, which depends on this header, never the reverse): sim, the
// multi-fabric router, redfish, liqid. Every call is bounded by the driver's timeouts.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/model/model.h"

namespace composer {

struct FabricInventory {
  std::vector<Host> hosts;
  std::vector<Device> devices;  // composition_id/node unset: the fabric knows no compositions
  // device id -> fabric host id, for every device the fabric shows attached (composed into,
  // or for CXL memory connected to) exactly one host, whoever attached it: composerd tells
  // its own attachments from foreign ones by its ledger, never by the fabric's word.
  std::map<std::string, std::string> attached;
  // Devices the fabric shows held in a way that is not one attachment to one host, so they
  // are never handed out nor detached by composerd: a block shared by several systems
  // (Redfish CompositionStatus.SharingEnabled), a reserved block, a device the fabric shows
  // in use by something that is not a host. device id -> the holder in words, e.g.
  // "shared by systems node1, node2" or "reserved by the fabric".
  std::map<std::string, std::string> held;
  // Resources the driver read but does not pool, each with its reason, e.g.
  // "/redfish/v1/CompositionService/ResourceBlocks/Block7: a SAS drive; only NVMe drives are
  // pooled". For `composerd --check --discover` and the start-up log.
  std::vector<std::string> skipped;
};

enum class OperationState { kRunning, kDone, kFailed };

// Attach and detach may finish later (a Redfish task monitor, a Liqid reprogram): the caller
// polls operation_status() until the state is no longer kRunning, within its own deadline.
struct Operation {
  std::string id;
  OperationState state = OperationState::kRunning;
  std::string error;  // set when kFailed
};

class Fabric {
 public:
  virtual ~Fabric() = default;

  virtual std::string_view driver() const = 0;  // "sim", "redfish", "liqid"
  virtual Expected<FabricInventory> inventory() = 0;
  // Attaching a device already attached to the same host succeeds; to another host fails.
  virtual Expected<Operation> attach(const std::string& fabric_host,
                                     const std::vector<std::string>& device_ids) = 0;
  // Detaching a device that is not attached succeeds.
  virtual Expected<Operation> detach(const std::string& fabric_host,
                                     const std::vector<std::string>& device_ids) = 0;
  virtual Expected<Operation> operation_status(const std::string& operation_id) = 0;
  // Which fabric manager a host's operations go to, for limits per fabric (composer.conf's
  // FabricMaxOperations): "" for a driver that talks to one; the member's name for the
  // multi-fabric router.
  virtual std::string lane(const std::string& /*fabric_host*/) const { return {}; }
  // Health of every device the fabric knows.
  virtual Expected<std::vector<std::pair<std::string, Health>>> health() = 0;
};

}  // namespace composer
