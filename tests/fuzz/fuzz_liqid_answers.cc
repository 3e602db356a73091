// The Liqid driver's readers of a Director's answers: the machines at create(), then
// inventory() (each device type's status, info and relations) and health(), against a
// Director whose every answer the fuzz input gives (answer_server.h).
#include <cstddef>
#include <cstdint>

#include "answer_server.h"
#include "composer/core/guarded_fabric.h"
#include "composer/drivers/liqid_fabric.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& server = composer::fuzz::serve(data, size);
  composer::drivers::LiqidOptions o;
  composer::fuzz::point_at(server.url(), o);
  o.auth = composer::drivers::LiqidOptions::Auth::kBasic;
  // As composerd runs it: behind the wall that turns an exception into a fabric error.
  auto fabric = composer::guarded_driver([&] { return composer::drivers::LiqidFabric::create(o); });
  composer::fuzz::read_everything(fabric);
  return 0;
}
