#include "composer/model/model.h"

#include <gtest/gtest.h>

#include "composer/common/units.h"

namespace composer {
namespace {

using S = CompositionState;

TEST(StateMachine, FollowsTheLifecycle) {
  EXPECT_TRUE(can_transition(S::kRequested, S::kComposing));
  EXPECT_TRUE(can_transition(S::kComposing, S::kReady));
  EXPECT_TRUE(can_transition(S::kReady, S::kReleasing));
  EXPECT_TRUE(can_transition(S::kReleasing, S::kReleased));
  for (S s : {S::kRequested, S::kComposing, S::kReady, S::kReleasing}) {
    EXPECT_TRUE(can_transition(s, S::kFailed)) << to_string(s);
    EXPECT_TRUE(is_live(s));
  }
}

TEST(StateMachine, RefusesIllegalTransitions) {
  EXPECT_FALSE(can_transition(S::kRequested, S::kReady));
  EXPECT_FALSE(can_transition(S::kReady, S::kComposing));
  EXPECT_FALSE(can_transition(S::kComposing, S::kReleasing));
  EXPECT_FALSE(can_transition(S::kReleased, S::kReleasing));
  EXPECT_FALSE(can_transition(S::kReady, S::kReleased));
  for (S to : {S::kRequested, S::kComposing, S::kReady, S::kReleasing, S::kReleased, S::kFailed}) {
    EXPECT_FALSE(can_transition(S::kReleased, to));
    EXPECT_FALSE(can_transition(S::kFailed, to));
  }
  EXPECT_FALSE(is_live(S::kReleased));
  EXPECT_FALSE(is_live(S::kFailed));
}

TEST(StateNames, RoundTrip) {
  for (S s : {S::kRequested, S::kComposing, S::kReady, S::kReleasing, S::kReleased, S::kFailed}) {
    EXPECT_EQ(parse_composition_state(to_string(s)), s);
  }
  for (DeviceType t : kAllDeviceTypes) EXPECT_EQ(parse_device_type(to_string(t)), t);
  EXPECT_FALSE(parse_device_type("fpga").has_value());
}

TEST(DeviceState, WorstWins) {
  Device d;
  EXPECT_EQ(d.state(), DeviceState::kFree);
  d.composition_id = 3;
  EXPECT_EQ(d.state(), DeviceState::kAttached);
  d.drained = true;
  EXPECT_EQ(d.state(), DeviceState::kDrained);
  d.health = Health::kCritical;
  EXPECT_EQ(d.state(), DeviceState::kFailed);
  EXPECT_FALSE(d.allocatable());
}

TEST(Request, PrintsAsTheAdminCommentForm) {
  Request r{.gpus = 2, .gpu_model = "A100", .mem_bytes = 64 * kGiB, .nvme = 1};
  EXPECT_EQ(r.to_string(), "gpus=A100:2 mem=64G nvme=1");
  EXPECT_EQ(Request{}.to_string(), "none");
}

TEST(Request, TheAdminCommentReadsBackAsWritten) {
  const ComposerComment c{.request = {.gpus = 2, .gpu_model = "A100-80G", .mem_bytes = 64 * kGiB},
                          .workload = "training",
                          .nodes = 2};
  EXPECT_EQ(to_admin_comment(c), "composer: gpus=A100-80G:2 mem=64G workload=training nodes=2");
  auto back = parse_admin_comment("vip; " + to_admin_comment(c));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, c);
  auto plain = parse_admin_comment("composer: nvme=1 nodes=1");
  ASSERT_TRUE(plain && *plain);
  EXPECT_EQ((*plain)->request.nvme, 1u);
  EXPECT_EQ((*plain)->workload, "");
  EXPECT_FALSE(*parse_admin_comment(""));
  EXPECT_FALSE(*parse_admin_comment("(null)"));
  auto bad = parse_admin_comment("composer: gpus=two nodes=1");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("'gpus=two'"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(parse_admin_comment("composer: colour=red"));
}

TEST(Request, TheAdminCommentCarriesTheNodesAZoneKeptTheJobOff) {
  const ComposerComment c{.request = {.gpus = 1}, .nodes = 1, .avoid = "cn1,cn3"};
  EXPECT_EQ(to_admin_comment(c), "composer: gpus=1 nodes=1 avoid=cn1,cn3");
  auto back = parse_admin_comment(to_admin_comment(c));
  ASSERT_TRUE(back && *back);
  EXPECT_EQ(**back, c);
}

}  // namespace
}  // namespace composer

namespace composer {
namespace {

TEST(DeviceIdentity, PciIdsHaveOneForm) {
  EXPECT_EQ(normal_pci_id("0x10DE"), "0x10de");
  EXPECT_EQ(normal_pci_id("10de"), "0x10de");
  EXPECT_EQ(normal_pci_id("0X1af4"), "0x1af4");
  EXPECT_EQ(normal_pci_id("b60"), "0x0b60");
  EXPECT_EQ(normal_pci_id(""), std::nullopt);
  EXPECT_EQ(normal_pci_id("0x"), std::nullopt);
  EXPECT_EQ(normal_pci_id("0x10de0"), std::nullopt);
  EXPECT_EQ(normal_pci_id("nvidia"), std::nullopt);
  EXPECT_TRUE(DeviceIdentity{}.empty());
  EXPECT_FALSE((DeviceIdentity{"", "", "S1", ""}).empty());
}

}  // namespace
}  // namespace composer
