// What Slurm's commands print, read one way by composerd and by the plugins.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace composer {

// The nodes that `sinfo -h -N -o '%N|%T'` shows drained or draining (a state holding "drain":
// drained, draining, drained*, ...), each once, in the order shown. An epilog that fails drains
// its node, and its compositions are kept until an admin resumes it. Other lines are skipped.
std::vector<std::string> drained_nodes(std::string_view sinfo_node_states);

// The Key=Value fields of one `scontrol -o show ...` line, in order. Slurm's keys all start
// with a capital letter; a word that does not (no '=', or a lower-case key) continues the
// value before it, so that a value with spaces stays whole: a job's
// "AdminComment=composer: gpus=2 nodes=1", a path with a space.
using ScontrolFields = std::vector<std::pair<std::string, std::string>>;
ScontrolFields parse_scontrol_line(std::string_view line);
// The value of `key`; "" when absent.
std::string scontrol_field(const ScontrolFields& fields, std::string_view key);

}  // namespace composer
