// One step of a tally that never goes below zero: the pool rows' counts (model::count_state)
// and the allocator's indexes move by these.
#pragma once

#include <cstdint>

namespace composer {

// Up by one when `add`, else down by one, never below zero.
void bump(uint32_t& counter, bool add);
// Up by `amount` when `add`, else down by it, never below zero.
void bump(uint64_t& counter, uint64_t amount, bool add);

}  // namespace composer
