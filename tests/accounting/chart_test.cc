// The SVG charts parse as XML, and what they draw is what the report says.
#include <gtest/gtest.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>

#include <map>
#include <memory>
#include <string>

#include "composer/accounting/chart.h"
#include "composer/accounting/report.h"
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
    if (e.workload == "training") e.workload = "<b>&\"x'";
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

}  // namespace
}  // namespace composer::accounting
