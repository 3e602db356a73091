#include "composer/accounting/report_chart.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

namespace composer::accounting {
namespace {

constexpr int kWidth = 960;
constexpr int kLeft = 70;    // room for the y axis labels
constexpr int kRight = 160;  // room for the legend
constexpr int kPlotHeight = 220;
constexpr int kCellWidth = 28;
constexpr int kCellHeight = 20;
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr const char* kWeekdays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::string fixed(double v, int decimals = 4) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string label_time(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string class_name(const std::string& c) { return c.empty() ? "(none)" : c; }

// One colour per workload class for the whole document, stable across reports: a class's
// colour is the palette entry its name hashes to (FNV-1a), and when two classes of one report
// hash to the same entry, the one later in name order takes the next free entry.
using Colours = std::map<std::string, std::string>;
Colours class_colours(const Report& report) {
  std::set<std::string> classes;
  for (const Series& s : report.series) {
    for (const SeriesPoint& p : s.points) {
      for (const auto& [cls, ms] : p.attached_ms_by_class) classes.insert(cls);
    }
  }
  constexpr size_t n = std::size(kPalette);
  std::vector<bool> taken(n, false);
  Colours out;
  for (const std::string& cls : classes) {
    uint32_t hash = 2166136261u;
    for (unsigned char c : cls) hash = (hash ^ c) * 16777619u;
    size_t slot = hash % n;
    for (size_t tries = 0; tries < n && taken[slot]; ++tries) slot = (slot + 1) % n;
    taken[slot] = true;
    out[cls] = kPalette[slot];
  }
  return out;
}

// Tick times for [start, end): round local times (whole hours, or local midnights for steps
// of a day or more), the smallest step that gives at most kMaxTicks labels.
constexpr int kMaxTicks = 8;
std::vector<int64_t> time_ticks(int64_t start, int64_t end) {
  constexpr int64_t kHour = int64_t{3600} * 1000;
  constexpr int64_t kSteps[] = {kHour,       2 * kHour,   3 * kHour,    6 * kHour,
                                12 * kHour,  24 * kHour,  48 * kHour,   168 * kHour,
                                336 * kHour, 720 * kHour, 2160 * kHour, 8760 * kHour};
  const std::time_t t = static_cast<std::time_t>(start / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  const int64_t offset = static_cast<int64_t>(tm.tm_gmtoff) * 1000;
  std::vector<int64_t> out;
  for (int64_t step : kSteps) {
    out.clear();
    const int64_t local = start + offset;
    for (int64_t tick = (local + step - 1) / step * step; tick - offset < end; tick += step) {
      out.push_back(tick - offset);
      if (out.size() > kMaxTicks) break;
    }
    if (out.size() <= kMaxTicks) return out;
  }
  return out;
}

std::string tick_label(int64_t ms, bool whole_days) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, whole_days ? "%a %m-%d" : "%m-%d %H:%M", &tm);
  return buf;
}

// The white-to-blue shade of a heat map cell for a share attached.
std::string heat_fill(double share) {
  const int shade = static_cast<int>(255 - share * 200);
  char fill[16];
  std::snprintf(fill, sizeof fill, "#%02x%02x%02x", shade, shade, 255);
  return fill;
}
constexpr const char* kUnknownFill = "#cccccc";

// Pool use over time for one type; returns the panel's height.
int usage_panel(std::ostringstream& out, const Series& series, const Colours& colours,
                const std::string& time_zone, int top) {
  const std::string unit = series.unit.empty() ? "devices" : series.unit;
  std::set<std::string> class_set;
  double peak = 0;
  for (const auto& p : series.points) {
    double stacked = 0;
    for (const auto& [cls, ms] : p.attached_ms_by_class) {
      class_set.insert(cls);
      stacked += static_cast<double>(ms) / static_cast<double>(p.length_ms);
    }
    peak = std::max(
        {peak, stacked, static_cast<double>(p.available_ms) / static_cast<double>(p.length_ms)});
  }
  const std::vector<std::string> classes(class_set.begin(), class_set.end());
  if (peak <= 0) peak = 1;
  const int plot_width = kWidth - kLeft - kRight;
  const int base = top + 30 + kPlotHeight;
  const double scale = kPlotHeight / peak;

  out << "<g class=\"usage\" data-type=\"" << escape(series.type) << "\">\n";
  out << "<text x=\"" << kLeft << "\" y=\"" << top + 18
      << "\" font-size=\"15\" font-weight=\"bold\">" << escape(series.type) << ": " << escape(unit)
      << " attached by workload class (average per interval)</text>\n";
  // Axes and a few gridlines with their values.
  for (int i = 0; i <= 4; ++i) {
    const double v = peak * i / 4;
    const double y = base - v * scale;
    out << "<line x1=\"" << kLeft << "\" y1=\"" << fixed(y, 1) << "\" x2=\"" << kLeft + plot_width
        << "\" y2=\"" << fixed(y, 1) << "\" stroke=\"#ddd\"/>\n";
    out << "<text x=\"" << kLeft - 6 << "\" y=\"" << fixed(y + 4, 1)
        << "\" font-size=\"11\" text-anchor=\"end\">" << fixed(v, 1) << "</text>\n";
  }
  const size_t n = series.points.size();
  const double bar = n > 0 ? static_cast<double>(plot_width) / static_cast<double>(n) : 0;
  std::string line;
  for (size_t i = 0; i < n; ++i) {
    const SeriesPoint& p = series.points[i];
    const double x = kLeft + bar * static_cast<double>(i);
    double y = base;
    for (size_t c = 0; c < classes.size(); ++c) {
      auto it = p.attached_ms_by_class.find(classes[c]);
      if (it == p.attached_ms_by_class.end()) continue;
      const double devices = static_cast<double>(it->second) / static_cast<double>(p.length_ms);
      const double h = devices * scale;
      y -= h;
      out << "<rect class=\"bar\" data-type=\"" << escape(series.type) << "\" data-class=\""
          << escape(classes[c]) << "\" data-start-ms=\"" << p.start_ms << "\" data-devices=\""
          << fixed(devices) << "\" x=\"" << fixed(x, 2) << "\" y=\"" << fixed(y, 2) << "\" width=\""
          << fixed(std::max(bar - 0.5, 0.5), 2) << "\" height=\"" << fixed(h, 2) << "\" fill=\""
          << colours.at(classes[c]) << "\"><title>" << escape(class_name(classes[c])) << " from "
          << label_time(p.start_ms) << ": " << fixed(devices, 2) << " devices</title></rect>\n";
    }
    const double avail = static_cast<double>(p.available_ms) / static_cast<double>(p.length_ms);
    line += fixed(x, 2) + "," + fixed(base - avail * scale, 2) + " " + fixed(x + bar, 2) + "," +
            fixed(base - avail * scale, 2) + " ";
  }
  if (!line.empty()) {
    line.pop_back();
    out << "<polyline class=\"available\" points=\"" << line
        << "\" fill=\"none\" stroke=\"#333\" stroke-dasharray=\"4 3\"/>\n";
  }
  out << "<line x1=\"" << kLeft << "\" y1=\"" << base << "\" x2=\"" << kLeft + plot_width
      << "\" y2=\"" << base << "\" stroke=\"#333\"/>\n";
  // Time ticks, one label each, and the axis titles with their units.
  if (n > 0) {
    const int64_t t0 = series.points.front().start_ms;
    const int64_t t1 = series.points.back().start_ms + series.points.back().length_ms;
    const auto ticks = time_ticks(t0, t1);
    const bool whole_days = ticks.size() >= 2 && ticks[1] - ticks[0] >= int64_t{24} * 3600 * 1000;
    for (int64_t tick : ticks) {
      const double x = kLeft + static_cast<double>(plot_width) * static_cast<double>(tick - t0) /
                                   static_cast<double>(t1 - t0);
      out << "<line class=\"tick\" data-ms=\"" << tick << "\" x1=\"" << fixed(x, 1) << "\" y1=\""
          << base << "\" x2=\"" << fixed(x, 1) << "\" y2=\"" << base + 4
          << "\" stroke=\"#333\"/>\n";
      out << "<text class=\"tick-label\" data-ms=\"" << tick << "\" x=\"" << fixed(x, 1)
          << "\" y=\"" << base + 16 << "\" font-size=\"11\" text-anchor=\"middle\">"
          << tick_label(tick, whole_days) << "</text>\n";
    }
  }
  out << "<text class=\"axis-title\" data-axis=\"x\" x=\"" << kLeft + plot_width / 2 << "\" y=\""
      << base + 32 << "\" font-size=\"12\" text-anchor=\"middle\">time (" << escape(time_zone)
      << ")</text>\n";
  out << "<text class=\"axis-title\" data-axis=\"y\" x=\"16\" y=\"" << base - kPlotHeight / 2
      << "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
      << base - kPlotHeight / 2 << ")\">" << escape(unit)
      << " attached (average per interval)</text>\n";
  // Legend.
  int ly = top + 40;
  for (size_t c = 0; c < classes.size(); ++c, ly += 18) {
    out << "<rect x=\"" << kWidth - kRight + 12 << "\" y=\"" << ly - 10
        << "\" width=\"12\" height=\"12\" class=\"legend\" data-class=\"" << escape(classes[c])
        << "\" fill=\"" << colours.at(classes[c]) << "\"/><text x=\"" << kWidth - kRight + 30
        << "\" y=\"" << ly << "\" font-size=\"12\">" << escape(class_name(classes[c]))
        << "</text>\n";
  }
  out << "<line x1=\"" << kWidth - kRight + 12 << "\" y1=\"" << ly - 4 << "\" x2=\""
      << kWidth - kRight + 24 << "\" y2=\"" << ly - 4
      << "\" stroke=\"#333\" stroke-dasharray=\"4 3\"/><text x=\"" << kWidth - kRight + 30
      << "\" y=\"" << ly << "\" font-size=\"12\">available</text>\n";
  out << "</g>\n";
  return 30 + kPlotHeight + 54;
}

// Share attached by weekday and hour for one type; returns the panel's height.
int heat_panel(std::ostringstream& out, const HeatMap& heat, const std::string& time_zone,
               int top) {
  out << "<g class=\"heat\" data-type=\"" << escape(heat.type) << "\">\n";
  out << "<text x=\"" << kLeft << "\" y=\"" << top + 18
      << "\" font-size=\"15\" font-weight=\"bold\">" << escape(heat.type)
      << ": share attached by weekday and hour</text>\n";
  const int grid_top = top + 30;
  for (int h = 0; h < 24; h += 3) {
    out << "<text x=\"" << kLeft + h * kCellWidth + kCellWidth / 2 << "\" y=\""
        << grid_top + 7 * kCellHeight + 14 << "\" font-size=\"11\" text-anchor=\"middle\">"
        << (h < 10 ? "0" : "") << h << "</text>\n";
  }
  for (int d = 0; d < 7; ++d) {
    const int y = grid_top + d * kCellHeight;
    out << "<text x=\"" << kLeft - 6 << "\" y=\"" << y + 14
        << "\" font-size=\"11\" text-anchor=\"end\">" << kWeekdays[d] << "</text>\n";
    for (int h = 0; h < 24; ++h) {
      const int64_t avail = heat.available_ms[d][h];
      const bool known = avail > 0;
      const double share =
          known ? static_cast<double>(heat.attached_ms[d][h]) / static_cast<double>(avail) : 0;
      // White (idle) to dark blue (all attached); grey where nothing was available.
      const std::string fill = known ? heat_fill(share) : kUnknownFill;
      out << "<rect class=\"cell\" data-type=\"" << escape(heat.type) << "\" data-weekday=\"" << d
          << "\" data-hour=\"" << h << "\" data-share=\"" << (known ? fixed(share) : "")
          << "\" x=\"" << kLeft + h * kCellWidth << "\" y=\"" << y << "\" width=\""
          << kCellWidth - 1 << "\" height=\"" << kCellHeight - 1 << "\" fill=\"" << fill
          << "\"><title>" << kWeekdays[d] << " " << (h < 10 ? "0" : "") << h << ":00 "
          << (known ? fixed(share * 100, 1) + "% attached" : std::string("nothing available"))
          << "</title></rect>\n";
    }
  }
  const int grid_bottom = grid_top + 7 * kCellHeight;
  out << "<text class=\"axis-title\" data-axis=\"x\" x=\"" << kLeft + 12 * kCellWidth << "\" y=\""
      << grid_bottom + 30 << "\" font-size=\"12\" text-anchor=\"middle\">hour of day ("
      << escape(time_zone) << ")</text>\n";
  out << "<text class=\"axis-title\" data-axis=\"y\" x=\"16\" y=\"" << grid_top + 70
      << "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << grid_top + 70
      << ")\">weekday</text>\n";
  // The colour scale: what each shade means, and grey.
  const int sx = kLeft + 24 * kCellWidth + 24;
  out << "<text x=\"" << sx << "\" y=\"" << grid_top + 8
      << "\" font-size=\"12\">share attached</text>\n";
  for (int i = 0; i <= 4; ++i) {
    const double share = i / 4.0;
    const int y = grid_top + 16 + i * 18;
    out << "<rect class=\"scale-step\" data-share=\"" << fixed(share, 2) << "\" x=\"" << sx
        << "\" y=\"" << y << "\" width=\"16\" height=\"14\" stroke=\"#999\" fill=\""
        << heat_fill(share) << "\"/><text x=\"" << sx + 22 << "\" y=\"" << y + 11
        << "\" font-size=\"11\">" << i * 25 << "%</text>\n";
  }
  out << "<rect class=\"scale-unknown\" x=\"" << sx << "\" y=\"" << grid_top + 16 + 5 * 18 + 4
      << "\" width=\"16\" height=\"14\" stroke=\"#999\" fill=\"" << kUnknownFill << "\"/><text x=\""
      << sx + 22 << "\" y=\"" << grid_top + 16 + 5 * 18 + 15
      << "\" font-size=\"11\">no device available</text>\n";
  out << "<text class=\"scale-note\" x=\"" << kLeft << "\" y=\"" << grid_bottom + 46
      << "\" font-size=\"11\">Grey: no device was available in that hour (outside the report's "
         "range, no device known to composerd yet, or every device drained or failed).</text>\n";
  out << "</g>\n";
  return 30 + 7 * kCellHeight + 60;
}

}  // namespace

std::string report_svg(const Report& report) {
  std::ostringstream body;
  const Colours colours = class_colours(report);
  int y = 40;
  std::ostringstream notes;
  for (const std::string& note : report.notes) {
    y += 18;
    notes << "<text class=\"note\" x=\"" << kLeft << "\" y=\"" << y << "\" font-size=\"13\">"
          << escape(note) << "</text>\n";
  }
  for (const Series& s : report.series) {
    y += usage_panel(body, s, colours, report.time_zone, y);
    for (const HeatMap& h : report.heat_maps) {
      if (h.type == s.type) y += heat_panel(body, h, report.time_zone, y);
    }
  }
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << y
      << "\" viewBox=\"0 0 " << kWidth << " " << y
      << "\" font-family=\"sans-serif\" data-start-ms=\"" << report.start_ms << "\" data-end-ms=\""
      << report.end_ms << "\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text class=\"title\" x=\"" << kLeft << "\" y=\"24\" font-size=\"17\">"
      << escape(report.title.empty() ? "Composable pool use" : report.title) << ", "
      << label_time(report.start_ms) << " to " << label_time(report.end_ms) << " ("
      << escape(report.time_zone) << ")</text>\n"
      << notes.str() << body.str() << "</svg>\n";
  return out.str();
}

}  // namespace composer::accounting
