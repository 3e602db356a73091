// The rows of docs/API.md's "Endpoints" table, read from the document itself, so that tests
// that go over every route (the access matrix, the bad-input campaign) cannot drift from it.
#pragma once

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "composer/common/strings.h"

namespace composer::testing {

struct DocumentedRoute {
  std::string method;  // GET, PUT, POST, DELETE
  std::string path;    // as documented: placeholders ({job}) and query template included
  std::string who;     // the "who" column
};

inline std::vector<DocumentedRoute> documented_routes() {
  std::ifstream in(std::string(COMPOSER_SOURCE_DIR) + "/docs/API.md");
  std::string line;
  bool in_table = false;
  std::vector<DocumentedRoute> rows;
  const std::regex row(R"(^\| `(GET|PUT|POST|DELETE) ([^`]+)` \| ([^|]+) \|)");
  while (std::getline(in, line)) {
    if (line.starts_with("## Endpoints")) in_table = true;
    if (!in_table) continue;
    if (line.starts_with("## ") && !line.starts_with("## Endpoints")) break;
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      rows.push_back({m[1], std::string(trim(m[2].str())), std::string(trim(m[3].str()))});
    }
  }
  return rows;
}

}  // namespace composer::testing
