// The one strict JSON field reader (composer/api/json_reader.h): its wording, the context of a
// document, objects that let other fields be, and maps.
#include "composer/api/json_reader.h"

#include <gtest/gtest.h>

#include "composer/api/codec.h"

namespace composer::api {
namespace {

Json::Value parse(const char* text) {
  Expected<Json::Value> v = parse_json(text);
  EXPECT_TRUE(v) << v.error();
  return v ? *v : Json::Value();
}

struct Pair {
  std::string name;
  int64_t count = 0;
};

Expected<Pair> read_pair(const Json::Value& v, std::string_view context = {},
                         OtherFields other = OtherFields::kRefuse) {
  return read_json(
      [&] {
        JsonObject r(v, "", "a pair", {"name", "count"}, other);
        Pair p;
        p.name = r.get("name", as_nonempty_string);
        r.get_if("count", &p.count, as_int);
        return p;
      },
      context);
}

std::string refusal(const char* text, std::string_view context = {}) {
  Expected<Pair> p = read_pair(parse(text), context);
  EXPECT_FALSE(p) << text;
  if (p) return "";
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  return p.error().message;
}

TEST(JsonReader, OneWordingForEveryRefusal) {
  EXPECT_EQ(refusal("[]"), "body: expected a pair (an object), got an array");
  EXPECT_EQ(refusal(R"({"count":1})"), "name: required field is missing");
  EXPECT_EQ(refusal(R"({"name":""})"), "name: must not be empty");
  EXPECT_EQ(refusal(R"({"name":7})"), "name: expected a string, got the number 7");
  EXPECT_EQ(refusal(R"({"name":"a","count":1.5})"),
            "count: 1.5 is not a whole number from -9223372036854775808 to 9223372036854775807");
  EXPECT_EQ(refusal(R"({"name":"a","colour":"red"})"),
            "colour: unknown field; a pair has only these fields: name, count");
}

TEST(JsonReader, AContextComesFirst) {
  EXPECT_EQ(refusal("[]", "snapshot"), "snapshot: expected a pair (an object), got an array");
  EXPECT_EQ(refusal(R"({"count":1})", "snapshot"), "snapshot: name: required field is missing");
}

TEST(JsonReader, OptionalFieldsKeepTheirDefault) {
  Expected<Pair> p = read_pair(parse(R"({"name":"a"})"));
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->count, 0);
  p = read_pair(parse(R"({"name":"a","count":-4})"));
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->count, -4);
}

TEST(JsonReader, OtherFieldsMayBeLetBe) {
  Expected<Pair> p = read_pair(parse(R"({"name":"a","colour":"red"})"), {}, OtherFields::kIgnore);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->name, "a");
}

TEST(JsonReader, MapsAndArraysNameTheElement) {
  const Json::Value v = parse(R"({"by":{"a":1,"b":"x"},"list":[true,3]})");
  Expected<int> r = read_json([&] {
    JsonObject top(v, "", "a test", {"by", "list"});
    const JsonObject by = JsonObject::map(top.required("by"), top.path("by"), "a map of counts");
    EXPECT_EQ(by.u32("a"), 1u);
    EXPECT_EQ(by.names().size(), 2u);
    (void)by.u32("b");
    return 0;
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "by.b: \"x\" is not a whole number from 0 to 4294967295");
  r = read_json([&] {
    JsonObject top(v, "", "a test", {"by", "list"});
    (void)top.array("list", as_bool);
    return 0;
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "list[1]: expected true or false, got the number 3");
}

}  // namespace
}  // namespace composer::api
