#include "composer/common/slurm_text.h"

#include <algorithm>

#include "composer/common/strings.h"

namespace composer {

std::vector<std::string> drained_nodes(std::string_view sinfo_node_states) {
  std::vector<std::string> out;
  for (const std::string& line : split(sinfo_node_states, '\n')) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() != 2 || f[0].empty() || f[1].find("drain") == std::string::npos) continue;
    if (std::find(out.begin(), out.end(), f[0]) == out.end()) out.push_back(f[0]);
  }
  return out;
}

}  // namespace composer
