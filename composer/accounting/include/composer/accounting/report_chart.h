// SVG charts of a report, for an admin to open in a browser. No scripts, no external files.
// Every drawn value also travels as data-* attributes (and a <title> tooltip), so a reader or
// a test can check what a chart shows against the report it came from.
#pragma once

#include <string>

#include "composer/accounting/report.h"

namespace composer::accounting {

// One standalone SVG document with, for each pooled type in the report:
//  - pool use over time: one bar per series point, stacked by workload class, height = average
//    devices attached (attached device-ms / point length), with the average available devices
//    drawn as a line (<polyline class="available">);
//    bars: <rect class="bar" data-type data-class data-start-ms data-devices>; one colour per
//    class in every panel (the palette entry its name hashes to; legend swatches
//    <rect class="legend" data-class>); time ticks at round local times, at most 8, each
//    <line class="tick" data-ms> with one <text class="tick-label" data-ms>; axis titles
//    <text class="axis-title" data-axis="x|y"> with units and the report's time zone;
//  - a heat map of the share attached, weekday (Monday first) by hour of day;
//    cells: <rect class="cell" data-type data-weekday data-hour data-share>, data-share empty
//    where nothing was available (grey); a colour scale beside it
//    (<rect class="scale-step" data-share>, <rect class="scale-unknown">) and a note
//    (<text class="scale-note">) saying what grey means.
std::string report_svg(const Report& report);

}  // namespace composer::accounting
