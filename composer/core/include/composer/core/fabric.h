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

// One attach or detach, as a batch carries it.
struct FabricChange {
  bool attach = true;
  std::string fabric_host;
  std::vector<std::string> device_ids;
};

// What apply_batch() started: one operation for every change it took, and the changes it
// refused before anything changed, by their index in the batch, each with its reason.
struct BatchStarted {
  Operation operation;  // id "" and kDone when it took none
  std::map<size_t, Error> refused;
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
  // MaxFabricOperations): "" for a driver that talks to one; the member's name for the
  // multi-fabric router.
  virtual std::string lane(const std::string& /*fabric_host*/) const { return {}; }
  // Whether the fabric manager of a lane applies changes one at a time (a Liqid Director's
  // edit transaction, then a reprogram of the fabric): composerd then hands it every change
  // waiting as one batch (apply_batch), one batch at a time.
  virtual bool serialises_changes(const std::string& /*lane*/) const { return false; }
  // Several changes of one lane as one fabric change, where serialises_changes() says so. A
  // change the fabric cannot take is refused alone; the others go ahead together.
  virtual Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& /*changes*/) {
    return Error{ErrorCode::kInternal, std::string(driver()) + ": no batches of changes"};
  }
  // Health of every device the fabric knows.
  virtual Expected<std::vector<std::pair<std::string, Health>>> health() = 0;
};

}  // namespace composer
