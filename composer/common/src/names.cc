#include "composer/common/names.h"

#include <cctype>

namespace composer {

bool valid_name(std::string_view name, size_t max_size) {
  if (name.empty() || name.size() > max_size) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

}  // namespace composer
