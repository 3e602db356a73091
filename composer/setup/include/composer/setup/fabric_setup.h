// The fabric driver composerd runs, built from composer.conf's fabric settings.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "composer/common/error.h"
#include "composer/core/fabric.h"
#include "composer/setup/composer_conf.h"

namespace composer::setup {

// What the caller puts around each driver make_fabric() builds, before a MultiFabric routes
// to it: composerd wraps each in a meter that times its calls (composer_fabric_* metrics),
// which keeps this library free of the daemon. `name`: the driver's FabricName, "" when the
// file has none; `config`: its Fabric* settings (timeouts included). Returns the driver to run.
using WrapDriver = std::function<std::unique_ptr<Fabric>(
    std::unique_ptr<Fabric> driver, const std::string& name, const FabricConfig& config)>;

// Fabric=sim: the simulated fabric from the NodeName and DeviceGroup lines. Fabric=redfish or
// liqid: the driver, connected and authenticated (it reads the credentials file). FabricName
// lines: a MultiFabric over one driver per line. Errors start with "Fabric=<driver> (<name>):"
// or "FabricName=<name> (Driver=<driver>):" and never carry the credentials.
// `wrap`: when set, called once per driver, in file order, on every driver before it is used.
Expected<std::unique_ptr<Fabric>> make_fabric(const Config& config, const WrapDriver& wrap = {});

// What `composerd --check --discover` prints of one inventory: per type the devices, by model
// and zone, with what the fabric shows attached or held and by whom; the hosts with their
// zones and slots; every resource the driver skipped, with its reason; and a warning when
// nothing can be pooled. Read only: whether an attachment is composerd's own is in its ledger,
// which --check does not open.
std::string describe_inventory(const FabricInventory& inventory);

// What composerd --check can verify without the network: the credentials file of every real
// driver exists, is private and names a user. Ok for simulated fabrics.
Status check_fabric_files(const Config& config);

}  // namespace composer::setup
