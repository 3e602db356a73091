#include "slurm_config.h"

#include <map>
#include <sstream>
#include <utility>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::cli {

std::string slurm_config_text(const std::vector<PoolRow>& pool, const std::vector<Host>& hosts) {
  uint64_t gpus = 0;
  uint64_t mem_bytes = 0;
  uint64_t nvme = 0;
  for (const auto& row : pool) {
    const uint64_t usable = row.total - row.failed;
    switch (row.type) {
      case DeviceType::kGpu:
        gpus += usable;
        break;
      case DeviceType::kNvme:
        nvme += usable;
        break;
      case DeviceType::kMem:
        // Failed blocks' share of the bytes, assuming equal blocks within a row.
        mem_bytes += row.total == 0 ? 0 : row.total_bytes / row.total * usable;
        break;
    }
  }
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::string>> by_slots;
  for (const auto& h : hosts) by_slots[{h.gpu_slots, h.nvme_slots}].push_back(h.node);

  std::ostringstream out;
  out << "# slurm.conf: the pool as cluster-wide licenses (fabric_mem in GiB), and a count-only\n"
      << "# GRES per node for its attach slots. job_submit/composer requests both for each job.\n"
      << "Licenses=fabric_gpu:" << gpus << ",fabric_mem:" << gib_rounded_down(mem_bytes)
      << ",fabric_nvme:" << nvme << "\n"
      << "GresTypes=cgpu,cnvme\n"
      << "JobSubmitPlugins=composer\n"
      << "# add to the NodeName lines:\n";
  for (const auto& [slots, nodes] : by_slots) {
    out << "#   NodeName=" << join(nodes) << " ... Gres=cgpu:" << slots.first
        << ",cnvme:" << slots.second << "\n";
  }
  out << "\n# gres.conf\n";
  for (const auto& [slots, nodes] : by_slots) {
    out << "NodeName=" << join(nodes) << " Name=cgpu Count=" << slots.first << "\n";
    out << "NodeName=" << join(nodes) << " Name=cnvme Count=" << slots.second << "\n";
  }
  return out.str();
}

}  // namespace composer::cli
