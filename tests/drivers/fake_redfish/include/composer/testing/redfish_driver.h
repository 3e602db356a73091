// What the redfish driver's tests and the fabric contract share: the fake service started for
// a test, and a driver connected to it with the fake's account and short timeouts. Header-only;
// its users link composer::drivers.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
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
  const testing::FakeRedfishOptions account;  // the fake's default account
  RedfishOptions o;
  o.base_url = fake.base_url();
  o.username = account.username;
  o.password = account.password;
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

// Restarting composerd against the same fake: a new driver instance, running tasks handed
// back to the caller.
inline std::unique_ptr<RedfishFabric> reconnect(const testing::FakeRedfish& fake, long poll_ms) {
  RedfishOptions o = driver_options(fake, poll_ms);
  o.task_wait_ms = 0;
  return connect_driver(std::move(o));
}

// The Redfish Status.Health word the fake takes for a composer health.
inline const char* health_word(Health h) {
  return h == Health::kOk ? "OK" : h == Health::kWarning ? "Warning" : "Critical";
}

}  // namespace composer::drivers::harness
