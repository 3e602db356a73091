// What Slurm's commands print, read one way by composerd and by the plugins.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace composer {

// The nodes that `sinfo -h -N -o '%N|%T'` shows drained or draining (a state holding "drain":
// drained, draining, drained*, ...), each once, in the order shown. An epilog that fails drains
// its node, and its compositions are kept until an admin resumes it. Other lines are skipped.
std::vector<std::string> drained_nodes(std::string_view sinfo_node_states);

}  // namespace composer
