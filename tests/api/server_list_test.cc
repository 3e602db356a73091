#include "composer/api/server_list.h"

#include <gtest/gtest.h>

namespace composer::api {
namespace {

TEST(ServerList, CommaSeparatedUrlsInTheirOrder) {
  auto one = parse_server_list("http://127.0.0.1:6830");
  ASSERT_TRUE(one.ok()) << one.error();
  EXPECT_EQ(*one, std::vector<std::string>{"http://127.0.0.1:6830"});
  auto three =
      parse_server_list("https://ctl2:6830, unix:/run/composer/composerd.sock,http://c:1/");
  ASSERT_TRUE(three.ok()) << three.error();
  EXPECT_EQ(*three, (std::vector<std::string>{"https://ctl2:6830",
                                              "unix:/run/composer/composerd.sock", "http://c:1/"}));
}

TEST(ServerList, BadListsSayWhichEntryAndWhatIsAllowed) {
  const std::string rule =
      "expected composerd URLs separated by commas, each http://HOST:PORT, https://HOST:PORT or "
      "unix:/PATH, for example http://127.0.0.1:6830,http://ctl2:6830";
  struct Case {
    std::string list, message;
  };
  for (const Case& c : {
           Case{" ", "the server list is empty: " + rule},
           Case{"http://a:1,,http://b:1",
                "server list 'http://a:1,,http://b:1': an empty entry; " + rule},
           Case{"http://a:1,b:1", "server list 'http://a:1,b:1': 'b:1' is not a URL; " + rule},
           Case{"unix:run/x.sock",
                "server list 'unix:run/x.sock': 'unix:run/x.sock' is not a URL; " + rule},
           Case{"http://A:1,http://a:1/",
                "server list 'http://A:1,http://a:1/': 'http://a:1/' is given twice"},
       }) {
    auto r = parse_server_list(c.list);
    ASSERT_FALSE(r.ok()) << c.list;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.error().message, c.message);
  }
}

TEST(ServerList, SameServerIgnoresTrailingSlashesAndCase) {
  EXPECT_TRUE(same_server("http://CTL2:6830/", "http://ctl2:6830"));
  EXPECT_FALSE(same_server("http://ctl2:6830", "http://ctl2:6831"));
}

}  // namespace
}  // namespace composer::api
