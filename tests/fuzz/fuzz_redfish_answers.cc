// The Redfish driver's readers of a service's answers: discovery at create() (service root,
// CompositionService, resource blocks and zones, systems, a CXL fabric), then inventory() and
// health(), against a service whose every answer the fuzz input gives (answer_server.h).
#include <cstddef>
#include <cstdint>

#include "answer_server.h"
#include "composer/core/guarded_fabric.h"
#include "composer/drivers/redfish_fabric.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& server = composer::fuzz::serve(data, size);
  composer::drivers::RedfishOptions o;
  composer::fuzz::point_at(server.url(), o);
  o.auth = composer::drivers::RedfishOptions::Auth::kBasic;
  o.poll_interval_ms = 1;
  o.task_wait_ms = 5;
  // As composerd runs it: behind the wall that turns an exception into a fabric error.
  auto fabric =
      composer::guarded_driver([&] { return composer::drivers::RedfishFabric::create(o); });
  composer::fuzz::read_everything(fabric);
  return 0;
}
