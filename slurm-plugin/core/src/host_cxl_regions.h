// The CXL regions the host side makes itself, for CXL memory in no region (host_memory.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "composer/common/error.h"
#include "host_sysfs.h"

namespace composer::slurm {

// An endpoint decoder of a CXL memory device with no capacity in any region, and the root
// decoder (a host's fixed memory window that takes persistent memory) to make a region in.
struct FreeCxlMemory {
  std::string memdev;
  std::string endpoint_decoder;
  std::string root_decoder;
};

// The CXL memory devices of one capacity that nothing maps, each with a window to make its
// region in; and for those no window takes, one sentence each saying why.
struct CxlChoice {
  std::vector<FreeCxlMemory> free;
  std::vector<std::string> unfit;
};

// The CXL memory devices whose persistent capacity is `size` and unused: each with the first
// endpoint decoder of its port that maps nothing, and the first window that targets its host
// bridge and has room for `size` beside its regions and those chosen before it here
// (AMemoryDeviceGetsItsRegionInAWindowThatTargetsItsHostBridge).
CxlChoice free_cxl_memory(const std::string& sysfs, uint64_t size);

// A persistent-memory region of `size` on `m`, a namespace named kRegionName over all of it
// and its dax device (devdax): the dax device, ready for bring_online.
Expected<DaxDevice> make_cxl_region(const std::string& sysfs, const std::string& id,
                                    const FreeCxlMemory& m, uint64_t size,
                                    std::chrono::steady_clock::time_point deadline);

// Undoes make_cxl_region for the dax device `dax` once kmem let it go: true when it did, false
// for a dax device in no namespace named kRegionName (left as it is).
Expected<bool> destroy_cxl_region(const std::string& sysfs, const std::string& id,
                                  const std::string& dax);

}  // namespace composer::slurm
