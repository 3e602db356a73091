// What the redfish driver's tests share: the fake service started for a test, and a driver
// connected to it with the fake's account and short timeouts.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "composer/drivers/redfish_fabric.h"
#include "composer/testing/fake_redfish.h"

namespace composer::drivers::harness {

inline std::unique_ptr<testing::FakeRedfish> start_fake(const testing::FakeRedfishOptions& o) {
  auto s = testing::FakeRedfish::start(o);
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? std::move(s).value() : nullptr;
}

inline RedfishOptions driver_options(const testing::FakeRedfish& fake, long poll_ms = 20) {
  RedfishOptions o;
  o.base_url = fake.base_url();
  o.username = "admin";
  o.password = "composer-test-pw";
  o.request_timeout_ms = 3000;
  o.poll_interval_ms = poll_ms;
  o.task_wait_ms = 5000;
  return o;
}

inline std::unique_ptr<RedfishFabric> connect_driver(RedfishOptions o) {
  auto f = RedfishFabric::create(std::move(o));
  EXPECT_TRUE(f.ok()) << f;
  return f.ok() ? std::move(f).value() : nullptr;
}

}  // namespace composer::drivers::harness
