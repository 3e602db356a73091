// `composerctl slurm-config`: the slurm.conf and gres.conf lines that match composerd's pool.
#pragma once

#include <string>
#include <vector>

#include "composer/model/model.h"

namespace composer::cli {

// Pool licenses (fabric_gpu, fabric_mem in GiB, fabric_nvme; failed devices left out, drained
// ones counted since they come back), GresTypes, and per node the count-only GRES for its
// attach slots (cgpu, cnvme), grouped by identical slot counts.
std::string slurm_config_text(const std::vector<PoolRow>& pool, const std::vector<Host>& hosts);

}  // namespace composer::cli
