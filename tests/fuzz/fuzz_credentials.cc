// A fabric manager's credentials file (username= and password= lines, mode 600), read as
// composerd reads it before it talks to Redfish or Liqid. The refusal never quotes the file:
// a line holding the marker below must not come back in the error.
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "composer/drivers/credentials.h"

namespace {
std::string path() {
  static const std::string p = [] {
    char dir[] = "/tmp/composer-fuzz-credentials.XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    return std::string(dir) + "/credentials";
  }();
  return p;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream out(path(), std::ios::binary | std::ios::trunc);
    out << text;
  }
  chmod(path().c_str(), 0600);
  std::string username, password;
  auto loaded = composer::drivers::load_fabric_credentials(path(), "fuzz", &username, &password);
  constexpr std::string_view kSecret = "s3cr3t-marker";
  if (!loaded && text.find(kSecret) != std::string::npos &&
      loaded.error().message.find(kSecret) != std::string::npos) {
    std::abort();  // an error repeated the file's content
  }
  return 0;
}
