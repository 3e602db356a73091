// A device or a host of a fabric inventory by id, for the tests that read what a driver
// reports. Header-only; its users link composer::core.
#pragma once

#include <string>

#include "composer/core/fabric.h"

namespace composer::test_support {

// The device with this id; nullptr if the inventory has none.
inline const Device* find_device(const FabricInventory& inv, const std::string& id) {
  for (const Device& d : inv.devices) {
    if (d.id == id) return &d;
  }
  return nullptr;
}

// The host with this fabric id; nullptr if the inventory has none.
inline const Host* find_host(const FabricInventory& inv, const std::string& fabric_id) {
  for (const Host& h : inv.hosts) {
    if (h.fabric_id == fabric_id) return &h;
  }
  return nullptr;
}

}  // namespace composer::test_support
