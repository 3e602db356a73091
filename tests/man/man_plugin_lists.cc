// Prints what the plugins' core itself knows, one item a line, for check_man.sh:
//   man_plugin_lists plugstack   the plugstack.conf arguments spank_composer.so accepts
//   man_plugin_lists options     the options it adds to sbatch, srun and salloc
#include <iostream>
#include <string>
#include <string_view>

#include "composer/slurm/options.h"
#include "composer/slurm/plugin_config.h"

int main(int argc, char** argv) {
  const std::string_view what = argc == 2 ? argv[1] : "";
  if (what == "options") {
    for (std::string_view option : composer::slurm::kAllOptions)
      std::cout << "--" << option << '\n';
    return 0;
  }
  if (what == "plugstack") {
    // The parser names every argument it knows when it refuses one it does not.
    auto refused = composer::slurm::parse_plugstack_args({"="});
    const std::string marker = "(known: ";
    const std::string message = refused ? std::string() : refused.error().message;
    const size_t start = message.find(marker);
    const size_t end = message.rfind(')');
    if (start == std::string::npos || end == std::string::npos || end < start) {
      std::cerr << "man_plugin_lists: the plugstack parser no longer lists its arguments: '"
                << message << "'\n";
      return 1;
    }
    std::string list = message.substr(start + marker.size(), end - start - marker.size());
    size_t pos = 0;
    while (pos <= list.size()) {
      const size_t comma = list.find(", ", pos);
      std::cout << list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos)
                << '\n';
      if (comma == std::string::npos) break;
      pos = comma + 2;
    }
    return 0;
  }
  std::cerr << "usage: man_plugin_lists plugstack|options\n";
  return 2;
}
