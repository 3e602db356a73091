// Time arguments in the forms Slurm's own tools (sreport, sacct) read, in local time:
//   now, now-N[unit], now+N[unit]   unit: seconds (the default), minutes, hours, days, weeks,
//                                   or s, sec, m, min, h, hour, d, day, w, week (plurals too)
//   today, midnight, noon, teatime (16:00), tomorrow, yesterday
//   YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], MM.DD[.YY], MMDD[YY], HH:MM[:SS] (today)
#pragma once

#include <cstdint>
#include <string_view>

#include "composer/common/error.h"

namespace composer::accounting {

// Milliseconds since the epoch; kInvalidArgument with the allowed forms for anything else,
// including dates that do not exist (2024-02-30, 25:00).
Expected<int64_t> parse_slurm_time(std::string_view text, int64_t now_ms);

}  // namespace composer::accounting
