// Time arguments in the forms Slurm's own tools read (sacct -S/-E, sreport, sbatch --begin),
// in local time. The one grammar of every composerctl time option:
//   now[{+|-}N[unit]]        unit: seconds (the default), minutes, hours, days, weeks, as Slurm
//                            spells them, or s, sec, m, min, h, d, w (plurals too)
//   DATE[-TIME], YYYY-MM-DD[THH:MM[:SS]]
//   TIME                     a day is picked by the direction (below)
// where
//   DATE  YYYY-MM-DD, MM/DD[/YY], MM.DD[.YY], MMDD[YY] (a year may have 4 digits),
//         today, yesterday, tomorrow
//   TIME  HH:MM[:SS][AM|PM] (a space may come before AM/PM), midnight, noon, elevenses (11:00),
//         fika (15:00), teatime (16:00)
// A date without a time is its 00:00. Case does not matter.
#pragma once

#include <cstdint>
#include <string_view>

#include "composer/common/error.h"

namespace composer::accounting {

// Where a time that leaves out its day or year lies, as Slurm's parse_time(text, past) reads
// it. kPast (sacct, sreport): a time of day is today, a date later in the year than this month
// is last year's. kFuture (sbatch --begin): the next such moment: a time of day already gone
// is tomorrow's, a date already gone this year is next year's.
enum class TimeDirection { kPast, kFuture };

// Milliseconds since the epoch; kInvalidArgument with the allowed forms for anything else,
// including dates that do not exist (2024-02-30, 25:00).
Expected<int64_t> parse_slurm_time(std::string_view text, int64_t now_ms,
                                   TimeDirection direction = TimeDirection::kPast);

}  // namespace composer::accounting
