#include "composer/common/slurm_text.h"

#include <algorithm>
#include <cctype>

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

ScontrolFields parse_scontrol_line(std::string_view line) {
  ScontrolFields out;
  for (const auto& word : split(line, ' ', {.trim = true, .skip_empty = true})) {
    const auto eq = word.find('=');
    const bool starts_field =
        eq != std::string::npos && eq > 0 && std::isupper(static_cast<unsigned char>(word[0])) != 0;
    if (starts_field) {
      out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    } else if (!out.empty()) {
      std::string& value = out.back().second;
      value += value.empty() ? word : " " + word;
    }
  }
  return out;
}

std::string scontrol_field(const ScontrolFields& fields, std::string_view key) {
  for (const auto& [k, v] : fields)
    if (k == key) return v;
  return "";
}

}  // namespace composer
