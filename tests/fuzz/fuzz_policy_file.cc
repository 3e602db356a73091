// The policy file: parsed (every zone name resolves to UTC, so no file is read), validated
// against a pool, compiled into Slurm's objects and asked for its caps, as composerd does
// when an admin applies one.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "composer/policies/compile_plan.h"
#include "composer/policies/evaluate.h"
#include "composer/policies/parser.h"
#include "composer/policies/validate.h"

namespace pol = composer::policies;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto policy = pol::parse_policy(text, "fuzz.policy", [](std::string_view) {
    return pol::TimeZone::from_posix("UTC", "UTC0");
  });
  if (!policy) return 0;
  pol::PoolSize pool;
  pool.gpus = 16;
  pool.mem_gib = 1024;
  pool.nvme = 8;
  if (!pol::validate(*policy, pool).ok()) return 0;
  const int64_t now_s = 1'764'000'000;  // a fixed instant: the same input, the same run
  (void)pol::compile_plan(*policy, pool, now_s);
  pol::Evaluator evaluator(*policy, pool);
  for (const auto& c : policy->classes) (void)evaluator.caps_in_force(now_s, c.name);
  return 0;
}
