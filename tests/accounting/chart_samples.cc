// Writes the utilisation charts composerd serves (report_svg) for check_chart_render.sh, which
// renders each with headless Chromium: the worked example of ledger.h over eight hours, and a
// random ledger over a week (a heat map full of cells). Usage: chart_samples DIR
#include <fstream>
#include <iostream>
#include <random>
#include <string>

#include "composer/accounting/report.h"
#include "composer/accounting/report_chart.h"
#include "ledger.h"

namespace {

using composer::accounting::build_report;
using composer::accounting::report_svg;
using composer::accounting::testing::kH;
using composer::accounting::testing::kT0;

bool write(const std::string& path, const composer::accounting::testing::Ledger& l,
           int64_t start_ms, int64_t end_ms) {
  auto r = build_report(l.inventory, l.events,
                        {.start_ms = start_ms, .end_ms = end_ms, .now_ms = end_ms + kH});
  if (!r) {
    std::cerr << "chart_samples: " << r.error().message << "\n";
    return false;
  }
  std::ofstream out(path);
  out << report_svg(*r);
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: chart_samples DIR\n";
    return 2;
  }
  composer::accounting::testing::use_utc();
  const std::string dir = argv[1];
  std::mt19937_64 rng(7);
  const bool ok =
      write(dir + "/report-hours.svg", composer::accounting::testing::worked_example(),
            kT0 + 2 * kH, kT0 + 10 * kH) &&
      write(dir + "/report-week.svg", composer::accounting::testing::random_ledger(rng, 40), kT0,
            kT0 + 7 * 24 * kH);
  return ok ? 0 : 1;
}
