// The liqid driver: a Liqid fabric (Liqid REST API v2, under <base_url>/liqid/api/v2) as a
// composer fabric.
//
// Machines are the hosts: a machine's name is its fabric host id and, unless host_map says
// otherwise, its Slurm node name. Groups are the zones: a machine reaches the devices in its
// group's pool, and a device's zone is the group whose pool holds it. Devices in the system
// free pool (in no group) are not offered: Liqid relates a device to a machine only from the
// machine's group, so an admin places devices into group pools first.
//
// Devices: GPUs (status/gpu, device/info/gpu), memory (status/mem, device/info/mem) and NVMe
// drives (status/storage, device/info/ssd); a device's Liqid name ("gpu0") is its id. Which
// group and machine hold a device comes from predevice.
//
// What is already held: a device the Director shows assigned to a machine is attached to that
// machine's host, whoever assigned it (composerd tells its own from others' by its ledger); one
// assigned to a machine that is not served here (host_map) is held by that machine. Devices in
// the system free pool are listed in `skipped`. Detaching a device from a machine it is not on
// succeeds without a request, wherever it sits.
//
// Assumed, as the Liqid SDK (3.2.0) documents no more: device_state is a string whose values
// are not listed, so the states taken as healthy (active, ok, available, online, idle,
// attached, connected), degraded (degraded, warning, busy) and critical (any other) are this
// driver's reading; capacities are "capacity(MB)" of the status objects (CapacityMB in the
// SDK), taken as MiB; a device with no group in predevice is in the system free pool.
//
// Attach and detach run inside one fabric edit per call: fabric/edit, then relate/<type>
// (POST to attach, DELETE to detach) for every device, then fabric/reprogram. Any error after
// the edit began cancels it (fabric/edit/cancel), which reverts every pending change, so a
// failed call leaves the fabric as it was. Reprogram answers when it is done, so operations
// finish within the call.
//
// Every answer is checked: the HTTP status, then the envelope {"response": {"code": 0,
// "errors": [], "data": [...]}}; a non-zero code or any error fails the call with the
// errors' messages.
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

// The Director's address, credentials, TLS, timeouts, host_map (machine name -> Slurm node)
// and slots come from FabricManagerOptions; the attach slots apply to every machine, since the
// API publishes no such limit.
struct LiqidOptions : FabricManagerOptions {
  // kApiKey trades the credentials once for an API key from the digest endpoint
  // (POST digest/<label>) and sends it as X-API-Key; the digest is deleted when the driver is
  // destroyed. kBasic sends HTTP basic authentication with every request.
  enum class Auth { kApiKey, kBasic };
  Auth auth = Auth::kApiKey;
  std::string api_key_label = "slurm-composer";
};

class LiqidFabric final : public Fabric {
 public:
  // Checks the options, authenticates (obtaining the API key in kApiKey mode) and reads the
  // machines once. Errors name the option or the Director's answer that is wrong.
  static Expected<std::unique_ptr<LiqidFabric>> create(LiqidOptions options);
  // Deletes the API key's digest, if one was created.
  ~LiqidFabric() override;
  LiqidFabric(const LiqidFabric&) = delete;
  LiqidFabric& operator=(const LiqidFabric&) = delete;

  std::string_view driver() const override { return "liqid"; }
  Expected<FabricInventory> inventory() override;
  // All or nothing: an unknown machine or device (kNotFound), a device related to another
  // machine or sitting in another group's pool (kConflict) refuses the call before the edit
  // begins. A Director error during the edit cancels it and reports the operation kFailed with
  // the Director's message.
  Expected<Operation> attach(const std::string& fabric_host,
                             const std::vector<std::string>& device_ids) override;
  Expected<Operation> detach(const std::string& fabric_host,
                             const std::vector<std::string>& device_ids) override;
  // The Director applies one edit transaction at a time (edit, relate, reprogram): composerd
  // hands it every change waiting as one batch, one edit per machine.
  bool serialises_changes(const std::string& lane) const override;
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>& changes) override;
  // Operations finish within attach, detach and apply_batch; this answers their final state.
  Expected<Operation> operation_status(const std::string& operation_id) override;
  Expected<std::vector<std::pair<std::string, Health>>> health() override;

 private:
  struct Impl;
  explicit LiqidFabric(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace composer::drivers
