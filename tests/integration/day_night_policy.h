// A policy for the integration tests: weekdays 08:00-20:00 UTC training may hold 12 GPUs,
// otherwise 2; inference 4 by day, 14 otherwise.
#pragma once

namespace composer::testing {

// Weekdays 08:00-20:00 UTC training may hold 12 GPUs, otherwise 2.
constexpr char kDayNight[] =
    "TimeZone=UTC\n"
    "Window=day Days=Mon-Fri Start=08:00 End=20:00\n"
    "Class=training\n"
    "Class=inference\n"
    "Limit=training Window=day Gpus=12\n"
    "Limit=training Window=Default Gpus=2\n"
    "Limit=inference Window=day Gpus=4\n"
    "Limit=inference Window=Default Gpus=14\n";

}  // namespace composer::testing
