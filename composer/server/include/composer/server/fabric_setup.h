// The fabric driver composerd runs, built from composer.conf's fabric settings.
#pragma once

#include <memory>

#include "composer/common/error.h"
#include "composer/core/fabric.h"
#include "composer/server/config.h"

namespace composer::server {

class FabricMeters;

// Fabric=sim: the simulated fabric from the NodeName and DeviceGroup lines. Fabric=redfish or
// liqid: the driver, connected and authenticated (it reads the credentials file). FabricName
// lines: a MultiFabric over one driver per line. Errors start with "Fabric=<driver> (<name>):"
// or "FabricName=<name> (Driver=<driver>):" and never carry the credentials.
// `meters`: when set, one meter per driver (named by its FabricName, else by the driver) and
// every driver call timed into it (composer_fabric_* metrics).
Expected<std::unique_ptr<Fabric>> make_fabric(const Config& config, FabricMeters* meters = nullptr);

// What `composerd --check --discover` prints of one inventory: per type the devices, by model
// and zone, with what the fabric shows attached or held and by whom; the hosts with their
// zones and slots; every resource the driver skipped, with its reason; and a warning when
// nothing can be pooled. Read only: whether an attachment is composerd's own is in its ledger,
// which --check does not open.
std::string describe_inventory(const FabricInventory& inventory);

// What composerd --check can verify without the network: the credentials file of every real
// driver exists, is private and names a user. Ok for simulated fabrics.
Status check_fabric_files(const Config& config);

}  // namespace composer::server
