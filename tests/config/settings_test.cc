#include "composer/config/settings.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace composer::config {
namespace {

struct Inner {
  std::string url;
  uint32_t slots = 8;
};

struct Outer {
  int port = 0;
  int64_t timeout_ms = 0;
  bool durable = true;
  std::vector<std::string> users;
  std::string backend;
  Inner inner;
};

Settings<Outer> outer_table(KeyCase key_case) {
  Settings<Inner> inner(KeyCase::kInsensitive,
                        {{"Url", set::text<Inner>(&Inner::url)},
                         {"Slots", set::whole<Inner>(&Inner::slots, 1, 1024)}});
  Settings<Outer> t(
      key_case, {{"Port", set::whole<Outer>(&Outer::port, 1, 65535)},
                 {"Timeout", set::seconds<Outer>(&Outer::timeout_ms, 1, 3600)},
                 {"Durable", set::yes_no<Outer>(&Outer::durable)},
                 {"Users", set::names<Outer>(&Outer::users)},
                 {"Backend", set::one_of<Outer>(&Outer::backend,
                                                std::vector<std::pair<std::string, std::string>>{
                                                    {"sqlite", "sqlite"}, {"pg", "postgresql"}},
                                                "expected sqlite or pg")}});
  t.add_all("Inner", inner, [](Outer& o) -> Inner& { return o.inner; });
  return t;
}

Status apply(const Settings<Outer>& t, const std::string& key, const std::string& value,
             Outer& into) {
  const Setter<Outer>* setter = t.find(key);
  if (setter == nullptr) return Error{ErrorCode::kNotFound, "no " + key};
  return (*setter)(key, value, into);
}

TEST(Settings, EachKeyStoresItsTypedValue) {
  const Settings<Outer> t = outer_table(KeyCase::kInsensitive);
  Outer o;
  ASSERT_TRUE(apply(t, "Port", "6830", o));
  ASSERT_TRUE(apply(t, "Timeout", "5", o));
  ASSERT_TRUE(apply(t, "Durable", "no", o));
  ASSERT_TRUE(apply(t, "Users", "root, slurm", o));
  ASSERT_TRUE(apply(t, "Backend", "PG", o));
  ASSERT_TRUE(apply(t, "InnerUrl", "https://fm", o));
  ASSERT_TRUE(apply(t, "InnerSlots", "16", o));
  EXPECT_EQ(o.port, 6830);
  EXPECT_EQ(o.timeout_ms, 5000);
  EXPECT_FALSE(o.durable);
  EXPECT_EQ(o.users, (std::vector<std::string>{"root", "slurm"}));
  EXPECT_EQ(o.backend, "postgresql");
  EXPECT_EQ(o.inner.url, "https://fm");
  EXPECT_EQ(o.inner.slots, 16u);
}

// A refusal names the key as written, the value and the rule, and stores nothing.
TEST(Settings, ARefusalNamesKeyValueAndRuleAndStoresNothing) {
  const Settings<Outer> t = outer_table(KeyCase::kInsensitive);
  Outer o;
  o.port = 7;
  Status port = apply(t, "port", "0", o);
  ASSERT_FALSE(port);
  EXPECT_EQ(port.error().message, "port=0: expected a whole number from 1 to 65535");
  EXPECT_EQ(o.port, 7);
  Status backend = apply(t, "Backend", "mysql", o);
  ASSERT_FALSE(backend);
  EXPECT_EQ(backend.error().message, "Backend=mysql: expected sqlite or pg");
  EXPECT_EQ(apply(t, "InnerSlots", "0", o).error().message,
            "InnerSlots=0: expected a whole number from 1 to 1024");
  EXPECT_EQ(o.inner.slots, 8u);
}

TEST(Settings, KeysMatchAsTheTableSays) {
  const Settings<Outer> loose = outer_table(KeyCase::kInsensitive);
  const Settings<Outer> strict = outer_table(KeyCase::kSensitive);
  EXPECT_NE(loose.find("PORT"), nullptr);
  EXPECT_NE(loose.find("innerurl"), nullptr);
  EXPECT_EQ(strict.find("PORT"), nullptr);
  EXPECT_NE(strict.find("Port"), nullptr);
  EXPECT_EQ(loose.find("Colour"), nullptr);
}

// The list a refusal of an unknown key names comes from the table, in its order.
TEST(Settings, NamesListsTheKeysInTheTablesOrder) {
  EXPECT_EQ(outer_table(KeyCase::kInsensitive).names(),
            "Port, Timeout, Durable, Users, Backend, InnerUrl, InnerSlots");
}

}  // namespace
}  // namespace composer::config
