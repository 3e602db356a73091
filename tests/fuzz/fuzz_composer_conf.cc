// composer.conf as composerd, composerctl and the simulator read it: every refusal is an
// error value, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "composer/setup/composer_conf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)composer::setup::parse_config(text, "fuzz.conf");
  return 0;
}
