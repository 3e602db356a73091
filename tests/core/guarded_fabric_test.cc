// A driver that throws on a malformed answer (jsoncpp's exception for a value of another type
// than the one asked for, deep in an answer) tells a fabric error through GuardedFabric; no
// exception reaches composerd's threads.
#include "composer/core/guarded_fabric.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace composer {
namespace {

using ::testing::HasSubstr;

// Every call fails as a driver does that reads a field of an entity the service sent as a
// number (ConnectedEntities: [1]).
class MalformedAnswers final : public Fabric {
 public:
  std::string_view driver() const override { return "redfish"; }
  Expected<FabricInventory> inventory() override { return read<FabricInventory>(); }
  Expected<Operation> attach(const std::string&, const std::vector<std::string>&) override {
    return read<Operation>();
  }
  Expected<Operation> detach(const std::string&, const std::vector<std::string>&) override {
    throw 42;  // not even a std::exception
  }
  std::string lane(const std::string& host) const override { return "lane-of-" + host; }
  bool serialises_changes(const std::string&) const override { return true; }
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>&) override {
    return read<BatchStarted>();
  }
  Expected<Operation> operation_status(const std::string&) override { return read<Operation>(); }
  Expected<std::vector<std::pair<std::string, Health>>> health() override {
    return read<std::vector<std::pair<std::string, Health>>>();
  }

 private:
  // What jsoncpp throws when a field is read from a value that is not an object.
  template <typename T>
  static Expected<T> read() {
    throw std::logic_error("in Json::Value::find(begin, end): requires objectValue or nullValue");
  }
};

TEST(GuardedFabric, AnExceptionFromADriverIsAFabricErrorAndTheRestIsForwarded) {
  GuardedFabric f(std::make_unique<MalformedAnswers>());
  EXPECT_EQ(f.driver(), "redfish");
  EXPECT_EQ(f.lane("h1"), "lane-of-h1");
  EXPECT_TRUE(f.serialises_changes("x"));
  const auto says = [](const Error& e, const std::string& what) {
    EXPECT_EQ(e.code, ErrorCode::kFabric) << e;
    EXPECT_THAT(e.message,
                HasSubstr("redfish: " + what + " failed on an answer it could not read"));
  };
  auto inv = f.inventory();
  ASSERT_FALSE(inv.ok());
  says(inv.error(), "reading the inventory");
  EXPECT_THAT(inv.error().message, HasSubstr("requires objectValue"));
  auto a = f.attach("h1", {"g"});
  ASSERT_FALSE(a.ok());
  says(a.error(), "attach");
  auto d = f.detach("h1", {"g"});
  ASSERT_FALSE(d.ok());
  says(d.error(), "detach");
  auto b = f.apply_batch({});
  ASSERT_FALSE(b.ok());
  says(b.error(), "a batch of changes");
  auto s = f.operation_status("op");
  ASSERT_FALSE(s.ok());
  says(s.error(), "reading an operation's state");
  auto h = f.health();
  ASSERT_FALSE(h.ok());
  says(h.error(), "reading health");
}

}  // namespace
}  // namespace composer
