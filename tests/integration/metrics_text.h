// composerd's /metrics as text: one sample's value, for the tests and the benchmark.
#pragma once

#include <sstream>
#include <string>

namespace composer::testing {

// The value of the sample named `series` (its name and labels as written, e.g.
// `composer_compositions{state="ready"}`), or -1 when the text does not have it.
inline double metric(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

}  // namespace composer::testing
