// The SVG charts parse as XML, and what they draw is what the report says.
#include <gtest/gtest.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "composer/accounting/report.h"
#include "composer/accounting/report_chart.h"
#include "ledger.h"

namespace composer::accounting {
namespace {

using testing::kH;
using testing::kT0;

struct XmlDoc {
  explicit XmlDoc(const std::string& text)
      : doc(xmlReadMemory(text.data(), static_cast<int>(text.size()), "chart.svg", nullptr,
                          XML_PARSE_NONET | XML_PARSE_NOWARNING)) {}
  ~XmlDoc() {
    if (doc != nullptr) xmlFreeDoc(doc);
  }
  // Attributes of every element matching `xpath` (the SVG namespace is bound to "s").
  std::vector<std::map<std::string, std::string>> select(const std::string& xpath) const {
    std::vector<std::map<std::string, std::string>> out;
    xmlXPathContextPtr ctx = xmlXPathNewContext(doc);
    xmlXPathRegisterNs(ctx, BAD_CAST "s", BAD_CAST "http://www.w3.org/2000/svg");
    xmlXPathObjectPtr found = xmlXPathEvalExpression(BAD_CAST xpath.c_str(), ctx);
    if (found != nullptr && found->nodesetval != nullptr) {
      for (int i = 0; i < found->nodesetval->nodeNr; ++i) {
        std::map<std::string, std::string> attrs;
        for (xmlAttrPtr a = found->nodesetval->nodeTab[i]->properties; a != nullptr; a = a->next) {
          xmlChar* v = xmlNodeListGetString(doc, a->children, 1);
          attrs[reinterpret_cast<const char*>(a->name)] =
              v != nullptr ? reinterpret_cast<char*>(v) : "";
          xmlFree(v);
        }
        out.push_back(std::move(attrs));
      }
    }
    xmlXPathFreeObject(found);
    xmlXPathFreeContext(ctx);
    return out;
  }
  xmlDocPtr doc;
};

class ChartTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::use_utc(); }
  Report example() {
    auto l = testing::worked_example();
    auto r =
        build_report(l.inventory, l.events,
                     {.start_ms = kT0 + 2 * kH, .end_ms = kT0 + 10 * kH, .now_ms = kT0 + 24 * kH});
    EXPECT_TRUE(r.ok());
    return *r;
  }
};

TEST_F(ChartTest, IsWellFormedSvg) {
  const std::string svg = report_svg(example());
  XmlDoc doc(svg);
  ASSERT_NE(doc.doc, nullptr) << svg.substr(0, 400);
  xmlNodePtr root = xmlDocGetRootElement(doc.doc);
  ASSERT_NE(root, nullptr);
  EXPECT_STREQ(reinterpret_cast<const char*>(root->name), "svg");
  EXPECT_EQ(doc.select("/s:svg/s:g[@class='usage']").size(), 3u);
  EXPECT_EQ(doc.select("/s:svg/s:g[@class='heat']").size(), 3u);
  EXPECT_EQ(doc.select("//s:rect[@class='cell']").size(), 3u * 7 * 24);
  EXPECT_EQ(doc.select("//s:polyline[@class='available']").size(), 3u);
}

TEST_F(ChartTest, BarsShowTheSeriesOfTheReport) {
  const Report r = example();
  XmlDoc doc(report_svg(r));
  ASSERT_NE(doc.doc, nullptr);
  size_t expected = 0;
  for (const Series& s : r.series) {
    for (const SeriesPoint& p : s.points) {
      for (const auto& [cls, ms] : p.attached_ms_by_class) {
        ++expected;
        const std::string xpath = "//s:rect[@class='bar'][@data-type='" + s.type +
                                  "'][@data-class='" + cls + "'][@data-start-ms='" +
                                  std::to_string(p.start_ms) + "']";
        auto bars = doc.select(xpath);
        ASSERT_EQ(bars.size(), 1u) << xpath;
        EXPECT_NEAR(std::stod(bars[0]["data-devices"]),
                    static_cast<double>(ms) / static_cast<double>(p.length_ms), 1e-4);
      }
    }
  }
  EXPECT_EQ(doc.select("//s:rect[@class='bar']").size(), expected);
  // 02:00-03:00: training held 1.5 GPUs and 2 s on average.
  auto first = doc.select("//s:rect[@class='bar'][@data-type='gpu'][@data-start-ms='" +
                          std::to_string(kT0 + 2 * kH) + "']");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["data-devices"], "1.5006");
}

TEST_F(ChartTest, HeatMapCellsShowTheShareAttached) {
  const Report r = example();
  XmlDoc doc(report_svg(r));
  ASSERT_NE(doc.doc, nullptr);
  for (const HeatMap& h : r.heat_maps) {
    for (int d = 0; d < 7; ++d) {
      for (int hour = 0; hour < 24; ++hour) {
        auto cells =
            doc.select("//s:rect[@class='cell'][@data-type='" + h.type + "'][@data-weekday='" +
                       std::to_string(d) + "'][@data-hour='" + std::to_string(hour) + "']");
        ASSERT_EQ(cells.size(), 1u);
        const int64_t avail = h.available_ms[d][hour];
        if (avail == 0) {
          EXPECT_EQ(cells[0]["data-share"], "");
        } else {
          EXPECT_NEAR(std::stod(cells[0]["data-share"]),
                      static_cast<double>(h.attached_ms[d][hour]) / static_cast<double>(avail),
                      1e-4);
        }
      }
    }
  }
  // Monday 05:00 on the GPUs: 2 h and 3 s attached of 3 h.
  auto cell =
      doc.select("//s:rect[@class='cell'][@data-type='gpu'][@data-weekday='0'][@data-hour='5']");
  EXPECT_EQ(cell[0]["data-share"], "0.6669");
}

TEST_F(ChartTest, NamesFromTheLedgerAreEscaped) {
  auto l = testing::worked_example();
  for (auto& e : l.events) {
    if (e.owner.workload == "training") e.owner.workload = "<b>&\"x'";
  }
  auto r =
      build_report(l.inventory, l.events,
                   {.start_ms = kT0 + 2 * kH, .end_ms = kT0 + 10 * kH, .now_ms = kT0 + 24 * kH});
  ASSERT_TRUE(r.ok());
  XmlDoc doc(report_svg(*r));
  ASSERT_NE(doc.doc, nullptr);
  bool found = false;
  for (auto& bar : doc.select("//s:rect[@class='bar']")) found |= bar["data-class"] == "<b>&\"x'";
  EXPECT_TRUE(found);
}

TEST_F(ChartTest, EachClassHasOneColourInEveryPanel) {
  // The GPUs are used by training and inference, the memory by training only, the NVMe by
  // inference only: a class keeps its colour whichever classes a panel shows.
  XmlDoc doc(report_svg(example()));
  ASSERT_NE(doc.doc, nullptr);
  std::map<std::string, std::set<std::string>> fills;   // class -> fills
  std::map<std::string, std::set<std::string>> panels;  // class -> types drawn in
  for (auto& bar : doc.select("//s:rect[@class='bar']")) {
    fills[bar["data-class"]].insert(bar["fill"]);
    panels[bar["data-class"]].insert(bar["data-type"]);
  }
  for (auto& swatch : doc.select("//s:rect[@class='legend']")) {
    fills[swatch["data-class"]].insert(swatch["fill"]);
  }
  ASSERT_EQ(fills.size(), 2u);
  EXPECT_EQ(panels["training"], (std::set<std::string>{"gpu", "mem"}));
  EXPECT_EQ(panels["inference"], (std::set<std::string>{"gpu", "nvme"}));
  EXPECT_EQ(fills["training"].size(), 1u);
  EXPECT_EQ(fills["inference"].size(), 1u);
  EXPECT_NE(*fills["training"].begin(), *fills["inference"].begin());

  // Another report with other classes: training keeps its colour, and "(none)" gets its own.
  std::mt19937_64 rng(7);
  auto l = testing::random_ledger(rng, 60);
  auto r = build_report(l.inventory, l.events,
                        {.start_ms = kT0, .end_ms = kT0 + 100 * kH, .now_ms = kT0 + 200 * kH});
  ASSERT_TRUE(r.ok());
  XmlDoc other(report_svg(*r));
  std::map<std::string, std::set<std::string>> other_fills;
  for (auto& bar : other.select("//s:rect[@class='bar']")) {
    other_fills[bar["data-class"]].insert(bar["fill"]);
  }
  ASSERT_EQ(other_fills.size(), 3u);
  EXPECT_EQ(other_fills["training"], fills["training"]);
  std::set<std::string> distinct;
  for (auto& [cls, f] : other_fills) {
    EXPECT_EQ(f.size(), 1u) << cls;
    distinct.insert(*f.begin());
  }
  EXPECT_EQ(distinct.size(), 3u);
}

TEST_F(ChartTest, HeatMapsHaveAColourScaleThatSaysWhatGreyMeans) {
  const Report r = example();
  XmlDoc doc(report_svg(r));
  ASSERT_NE(doc.doc, nullptr);
  for (const HeatMap& h : r.heat_maps) {
    const std::string g = "/s:svg/s:g[@class='heat'][@data-type='" + h.type + "']";
    auto steps = doc.select(g + "/s:rect[@class='scale-step']");
    ASSERT_EQ(steps.size(), 5u);
    EXPECT_EQ(steps.front()["data-share"], "0.00");
    EXPECT_EQ(steps.back()["data-share"], "1.00");
    // The scale's shades are the cells' shades: a cell with share 0 has the 0% colour.
    auto grey = doc.select(g + "/s:rect[@class='scale-unknown']");
    ASSERT_EQ(grey.size(), 1u);
    auto unknown = doc.select(g + "/s:rect[@class='cell'][@data-share='']");
    ASSERT_FALSE(unknown.empty());  // an 8-hour report leaves most of the week unknown
    for (auto& cell : unknown) EXPECT_EQ(cell["fill"], grey[0]["fill"]);
    for (auto& cell : doc.select(g + "/s:rect[@class='cell'][@data-share='0.0000']")) {
      EXPECT_EQ(cell["fill"], steps.front()["fill"]);
    }
    EXPECT_EQ(doc.select(g + "/s:text[@class='scale-note'][contains(., 'Grey: no device was "
                             "available')]")
                  .size(),
              1u);
  }
}

// Before composerd knew any drive, the NVMe heat map is grey and its available line lies on
// the axis; the GPU panels, known all along, are unchanged.
TEST_F(ChartTest, HoursBeforeAnyDeviceWasKnownShowNothingAvailable) {
  auto l = testing::worked_example();
  for (Device& d : l.inventory) {
    if (d.type == DeviceType::kNvme) d.known_since_ms = kT0 + 6 * kH;
  }
  auto r =
      build_report(l.inventory, l.events,
                   {.start_ms = kT0 + 2 * kH, .end_ms = kT0 + 10 * kH, .now_ms = kT0 + 24 * kH});
  ASSERT_TRUE(r.ok()) << r.error();
  XmlDoc doc(report_svg(*r));
  ASSERT_NE(doc.doc, nullptr);
  const std::string grey = doc.select("//s:rect[@class='scale-unknown']")[0]["fill"];
  const auto cell = [&](const std::string& type, int hour) {
    auto cells = doc.select("//s:rect[@class='cell'][@data-type='" + type +
                            "'][@data-weekday='0'][@data-hour='" + std::to_string(hour) + "']");
    EXPECT_EQ(cells.size(), 1u);
    return cells.empty() ? std::map<std::string, std::string>{} : cells[0];
  };
  for (int hour = 2; hour < 6; ++hour) {
    EXPECT_EQ(cell("nvme", hour)["data-share"], "") << hour;
    EXPECT_EQ(cell("nvme", hour)["fill"], grey) << hour;
    EXPECT_NE(cell("gpu", hour)["data-share"], "") << hour;
  }
  // The drive was known from 06:00, idle until job 12 took it at 09:00.
  EXPECT_EQ(cell("nvme", 6)["data-share"], "0.0000");
  EXPECT_EQ(cell("nvme", 9)["data-share"], "1.0000");

  // The available line: one horizontal segment per hour, on the axis (y of the base line)
  // for the four hours before the drive, one device above it after.
  auto line = doc.select("//s:g[@class='usage'][@data-type='nvme']/s:polyline[@class='available']");
  ASSERT_EQ(line.size(), 1u);
  std::vector<std::string> ys;
  std::istringstream points(line[0]["points"]);
  for (std::string point; points >> point;) ys.push_back(point.substr(point.find(',') + 1));
  ASSERT_EQ(ys.size(), 16u);  // 8 hours, two points each
  auto axis = doc.select("//s:g[@class='usage'][@data-type='nvme']/s:line[@stroke='#333']");
  ASSERT_FALSE(axis.empty());
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(std::stod(ys[i]), std::stod(axis[0]["y1"])) << i;
  for (size_t i = 8; i < 16; ++i) EXPECT_LT(std::stod(ys[i]), std::stod(axis[0]["y1"])) << i;
}

TEST_F(ChartTest, EveryPanelHasAxisTitlesWithUnits) {
  Report r = example();
  r.time_zone = "Europe/Berlin";
  XmlDoc doc(report_svg(r));
  ASSERT_NE(doc.doc, nullptr);
  EXPECT_EQ(doc.select("/s:svg/s:g[@class='usage']/s:text[@class='axis-title'][@data-axis='x']"
                       "[.='time (Europe/Berlin)']")
                .size(),
            3u);
  EXPECT_EQ(doc.select("/s:svg/s:g[@class='usage']/s:text[@class='axis-title'][@data-axis='y']"
                       "[contains(., 'devices attached')]")
                .size(),
            3u);
  EXPECT_EQ(doc.select("/s:svg/s:g[@class='heat']/s:text[@class='axis-title'][@data-axis='x']"
                       "[.='hour of day (Europe/Berlin)']")
                .size(),
            3u);
  EXPECT_EQ(doc.select("/s:svg/s:g[@class='heat']/s:text[@class='axis-title'][@data-axis='y']"
                       "[.='weekday']")
                .size(),
            3u);
}

// Ticks of one usage panel: (ms, label) in order.
std::vector<std::pair<int64_t, std::string>> ticks(const XmlDoc& doc, const std::string& type) {
  std::vector<std::pair<int64_t, std::string>> out;
  const std::string g = "/s:svg/s:g[@class='usage'][@data-type='" + type + "']";
  auto lines = doc.select(g + "/s:line[@class='tick']");
  for (auto& line : lines) {
    const std::string ms = line["data-ms"];
    xmlXPathContextPtr ctx = xmlXPathNewContext(doc.doc);
    xmlXPathRegisterNs(ctx, BAD_CAST "s", BAD_CAST "http://www.w3.org/2000/svg");
    const std::string xpath = g + "/s:text[@class='tick-label'][@data-ms='" + ms + "']";
    xmlXPathObjectPtr found = xmlXPathEvalExpression(BAD_CAST xpath.c_str(), ctx);
    EXPECT_EQ(found->nodesetval != nullptr ? found->nodesetval->nodeNr : 0, 1) << xpath;
    std::string label;
    if (found->nodesetval != nullptr && found->nodesetval->nodeNr == 1) {
      xmlChar* text = xmlNodeGetContent(found->nodesetval->nodeTab[0]);
      label = reinterpret_cast<char*>(text);
      xmlFree(text);
    }
    xmlXPathFreeObject(found);
    xmlXPathFreeContext(ctx);
    out.emplace_back(std::stoll(ms), label);
  }
  return out;
}

TEST_F(ChartTest, TimeAxisHasRoundTicksWithOneLabelEach) {
  // 8 hours: a tick every 2 hours (at most 8 labels), each at a whole hour.
  XmlDoc doc(report_svg(example()));
  ASSERT_NE(doc.doc, nullptr);
  auto t = ticks(doc, "gpu");
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.size(), 8u);
  EXPECT_EQ(
      doc.select("/s:svg/s:g[@class='usage'][@data-type='gpu']/s:text[@class='tick-label']").size(),
      t.size());
  std::set<std::string> labels;
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].first % kH, 0);
    EXPECT_GE(t[i].first, kT0 + 2 * kH);
    EXPECT_LT(t[i].first, kT0 + 10 * kH);
    if (i > 0) {
      EXPECT_EQ(t[i].first - t[i - 1].first, t[1].first - t[0].first);
    }
    labels.insert(t[i].second);
  }
  EXPECT_EQ(labels.size(), t.size());  // no two ticks share a label
  EXPECT_EQ(t[0].second, "01-01 02:00") << "kT0 is 2024-01-01 00:00 UTC";

  // A week: one tick a day at midnight, labelled by weekday and date.
  std::mt19937_64 rng(3);
  auto l = testing::random_ledger(rng, 40);
  auto r = build_report(l.inventory, l.events,
                        {.start_ms = kT0, .end_ms = kT0 + 7 * 24 * kH, .now_ms = kT0 + 300 * kH});
  ASSERT_TRUE(r.ok());
  XmlDoc week(report_svg(*r));
  auto w = ticks(week, "gpu");
  ASSERT_EQ(w.size(), 7u);
  for (auto& [ms, label] : w) EXPECT_EQ(ms % (24 * kH), 0);
  EXPECT_EQ(w[0].second, "Mon 01-01");
  EXPECT_EQ(w[6].second, "Sun 01-07");
}

}  // namespace
}  // namespace composer::accounting
