// A composerd that may no longer act (it lost its leadership) starts no change on the fabric;
// reads still pass, and everything passes while it may.
#include "composer/core/fenced_fabric.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace composer {
namespace {

// Counts the calls that reach it.
class Counting final : public Fabric {
 public:
  explicit Counting(int& calls) : calls_(calls) {}
  std::string_view driver() const override { return "redfish"; }
  Expected<FabricInventory> inventory() override {
    ++calls_;
    return FabricInventory{};
  }
  Expected<Operation> attach(const std::string&, const std::vector<std::string>&) override {
    ++calls_;
    return Operation{.id = "a", .state = OperationState::kDone};
  }
  Expected<Operation> detach(const std::string&, const std::vector<std::string>&) override {
    ++calls_;
    return Operation{.id = "d", .state = OperationState::kDone};
  }
  Expected<BatchStarted> apply_batch(const std::vector<FabricChange>&) override {
    ++calls_;
    return BatchStarted{};
  }
  Expected<Operation> operation_status(const std::string& id) override {
    ++calls_;
    return Operation{.id = id, .state = OperationState::kDone};
  }
  Expected<std::vector<std::pair<std::string, Health>>> health() override {
    ++calls_;
    return std::vector<std::pair<std::string, Health>>{};
  }

 private:
  int& calls_;
};

TEST(FencedFabricTest, NoChangeOnceItMayNotAct) {
  int calls = 0;
  std::atomic<bool> active{true};
  FencedFabric fabric(std::make_unique<Counting>(calls), [&active] { return active.load(); });
  ASSERT_TRUE(fabric.attach("h", {"gpu-0"}).ok());
  ASSERT_TRUE(fabric.detach("h", {"gpu-0"}).ok());
  ASSERT_TRUE(fabric.apply_batch({}).ok());
  EXPECT_EQ(calls, 3);

  active = false;
  auto attach = fabric.attach("h", {"gpu-0"});
  ASSERT_FALSE(attach.ok());
  EXPECT_EQ(attach.error().code, ErrorCode::kUnavailable);
  EXPECT_FALSE(fabric.detach("h", {"gpu-0"}).ok());
  EXPECT_FALSE(fabric.apply_batch({}).ok());
  EXPECT_EQ(calls, 3);  // none reached the driver
  // Reads change nothing: they pass.
  EXPECT_TRUE(fabric.inventory().ok());
  EXPECT_TRUE(fabric.operation_status("a").ok());
  EXPECT_TRUE(fabric.health().ok());
  EXPECT_EQ(calls, 6);
}

}  // namespace
}  // namespace composer
