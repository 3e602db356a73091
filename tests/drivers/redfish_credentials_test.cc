#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "composer/drivers/credentials.h"
#include "composer/drivers/redfish_fabric.h"
#include "composer/test_support/temp_dir.h"

namespace composer::drivers {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string write(const test_support::TempDir& dir, const std::string& text, mode_t mode) {
  const std::string path = dir.file("creds");
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path;
}

TEST(RedfishCredentials, ReadsUsernameAndPasswordFromAPrivateFile) {
  test_support::TempDir dir;
  const std::string path = write(dir, "# fabric\nusername=admin\npassword=p=w d\n", 0600);
  std::string user, pass;
  ASSERT_TRUE(load_fabric_credentials(path, "redfish", &user, &pass).ok());
  EXPECT_EQ(user, "admin");
  EXPECT_EQ(pass, "p=w d");
}

TEST(RedfishCredentials, RefusesAGroupOrWorldReadableFileWithoutQuotingIt) {
  test_support::TempDir dir;
  for (mode_t mode : {0640, 0604, 0660}) {
    const std::string path = write(dir, "username=admin\npassword=s3cret\n", mode);
    std::string user, pass;
    Status s = load_fabric_credentials(path, "redfish", &user, &pass);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::kPermissionDenied);
    EXPECT_THAT(s.error().message, HasSubstr("chmod 600"));
    EXPECT_THAT(s.error().message, Not(HasSubstr("s3cret")));
    EXPECT_TRUE(pass.empty());
  }
}

TEST(RedfishCredentials, NamesTheBadLineButNeverItsContent) {
  test_support::TempDir dir;
  const std::string path = write(dir, "username=admin\nhunter2\n", 0600);
  std::string user, pass;
  Status s = load_fabric_credentials(path, "redfish", &user, &pass);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("line 2"));
  EXPECT_THAT(s.error().message, Not(HasSubstr("hunter2")));

  const std::string other = write(dir, "user=admin\n", 0600);
  s = load_fabric_credentials(other, "redfish", &user, &pass);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("line 1 has a key other than username and password"));

  // A password typed where the key goes: the sentence names the line, not the key.
  const std::string secret = write(dir, "username=admin\nhunter2=x\n", 0600);
  s = load_fabric_credentials(secret, "redfish", &user, &pass);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr(secret + " line 2"));
  EXPECT_THAT(s.error().message, Not(HasSubstr("hunter2")));
}

TEST(RedfishCredentials, RefusesAMissingFileAndAFileWithoutUsername) {
  test_support::TempDir dir;
  std::string user, pass;
  Status s = load_fabric_credentials(dir.file("absent"), "redfish", &user, &pass);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("does not exist"));
  const std::string path = write(dir, "password=x\n", 0600);
  s = load_fabric_credentials(path, "redfish", &user, &pass);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("no username"));
}

TEST(RedfishOptions, RefusesBadBaseUrlsBeforeConnecting) {
  RedfishOptions o;
  o.username = "admin";
  o.password = "pw";
  o.base_url = "ftp://fabric";
  auto f = RedfishFabric::create(o);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr("http:// or https://"));
  o.base_url = "https://admin:pw@fabric";
  f = RedfishFabric::create(o);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, Not(HasSubstr("pw@")));
  EXPECT_THAT(f.error().message, HasSubstr("credentials"));
  o.base_url = "https://fabric/redfish/v1";
  f = RedfishFabric::create(o);
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.error().message, HasSubstr("adds /redfish/v1"));
}

}  // namespace
}  // namespace composer::drivers
