// Asks composerd's own parser which words are composer.conf keys: reads candidate words (one a
// line, lower case, e.g. every string literal of composer_conf.cc) and prints "CONTEXT KEY" for
// each one the parser accepts, CONTEXT being top (a line of its own), NodeName, DeviceGroup or
// FabricName (an option on such a line). A word is accepted when a one-line file using it is
// refused for any reason but an unknown key or option (a bad value, a missing NodeName line).
// A FabricName line takes the Fabric* keys without the word Fabric, so a candidate
// "fabricurl" is asked about as "url" too, and a candidate "url" as "fabricurl".
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "composer/setup/composer_conf.h"

namespace {

bool accepted(const std::string& text, const std::string& unknown) {
  auto parsed = composer::setup::parse_config(text + "\n", "probe.conf");
  return parsed || parsed.error().message.find(unknown) == std::string::npos;
}

}  // namespace

int main() {
  std::vector<std::string> words;
  for (std::string word; std::getline(std::cin, word);) {
    if (word.empty()) continue;
    words.push_back(word);
    if (word.size() > 6 && word.rfind("fabric", 0) == 0) {
      words.push_back(word.substr(6));
    } else {
      words.push_back("fabric" + word);
    }
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  for (const std::string& word : words) {
    // composerd leaves every JobSubmit* key to the job_submit plugin, whose own parser says
    // which it takes.
    if (word.rfind("jobsubmit", 0) != 0 && accepted(word + "=1", "unknown key '" + word + "'")) {
      std::cout << "top " << word << '\n';
    }
    for (const char* line : {"NodeName=n1", "DeviceGroup=g1", "FabricName=f1"}) {
      const std::string context = std::string(line).substr(0, std::string(line).find('='));
      if (accepted(std::string(line) + " " + word + "=1",
                   "unknown " + context + " option '" + word + "'")) {
        std::cout << context << ' ' << word << '\n';
      }
    }
  }
  return 0;
}
