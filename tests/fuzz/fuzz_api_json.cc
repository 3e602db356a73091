// The API's JSON readers, as composerd reads request bodies and the clients read answers,
// the Slurm plugins the pool snapshot: parse_json, then every decoder on the document. A
// document that parses must print and parse again to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "composer/api/codec.h"
#include "composer/api/policy_codec.h"
#include "composer/api/snapshot.h"

namespace api = composer::api;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = api::parse_json(text);
  if (!json) return 0;
  auto again = api::parse_json(api::to_text(*json));
  if (!again || !(*again == *json)) std::abort();  // a document prints as it parses
  (void)api::from_json<composer::Device>(*json);
  (void)api::from_json<composer::Request>(*json);
  (void)api::from_json<composer::Composition>(*json);
  (void)api::from_json<composer::PoolRow>(*json);
  (void)api::from_json<composer::Event>(*json);
  (void)api::from_json<api::ComposeBody>(*json);
  (void)api::from_json<api::HealthInfo>(*json);
  (void)api::from_json<api::DrainBody>(*json);
  (void)api::from_json<api::ErrorBody>(*json);
  (void)api::devices_from_json(*json);
  (void)api::compositions_from_json(*json);
  (void)api::pool_from_json(*json);
  (void)api::events_from_json(*json);
  (void)api::hosts_from_json(*json);
  (void)api::policy_body_from_json(*json);
  (void)api::policy_version_from_json(*json);
  (void)api::policy_applied_from_json(*json);
  (void)api::policy_explanation_from_json(*json);
  (void)api::snapshot_from_json(*json);
  // What decodes encodes back to what decodes the same.
  if (auto body = api::from_json<api::ComposeBody>(*json)) {
    auto back = api::from_json<api::ComposeBody>(api::to_json(*body));
    if (!back || api::to_text(api::to_json(*back)) != api::to_text(api::to_json(*body))) {
      std::abort();
    }
  }
  if (auto device = api::from_json<composer::Device>(*json)) {
    auto back = api::from_json<composer::Device>(api::to_json(*device));
    if (!back || api::to_text(api::to_json(*back)) != api::to_text(api::to_json(*device))) {
      std::abort();
    }
  }
  return 0;
}
