// What may name a node, device model, workload class, fabric or group: letters, digits, '-',
// '_' and '.', as Slurm's own names. One rule for composer.conf, the API and the plugins.
#pragma once

#include <cstddef>
#include <string_view>

namespace composer {

// Non-empty, at most max_size characters, each a letter, digit, '-', '_' or '.'.
bool valid_name(std::string_view name, size_t max_size = 255);

}  // namespace composer
