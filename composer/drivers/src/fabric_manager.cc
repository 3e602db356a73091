#include "composer/drivers/fabric_manager.h"

#include <optional>
#include <string>

#include "composer/drivers/credentials.h"

namespace composer::drivers {
namespace {

// What is wrong with a base URL, if anything: it must be http(s)://HOST[:PORT], without
// credentials (they belong in the credentials file) and without a path.
std::optional<std::string> base_url_problem(std::string& url, std::string_view api_root) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    return "base URL '" + url + "' must start with http:// or https://";
  }
  const std::string authority = url.substr(url.find("//") + 2);
  if (authority.substr(0, authority.find('/')).find('@') != std::string::npos) {
    return "the base URL must not carry credentials; put them in the credentials file";
  }
  if (authority.empty() || authority.find('/') != std::string::npos) {
    return "base URL '" + url + "' must be http(s)://HOST[:PORT] only; the driver adds " +
           std::string(api_root);
  }
  return std::nullopt;
}

}  // namespace

Status check_fabric_manager_options(FabricManagerOptions* o, std::string_view driver,
                                    std::string_view api_root, std::string_view host_name) {
  auto bad = [&](const std::string& message) {
    return Error{ErrorCode::kInvalidArgument, std::string(driver) + " options: " + message};
  };
  if (auto why = base_url_problem(o->base_url, api_root)) return bad(*why);
  if (!o->credentials_file.empty()) {
    if (!o->username.empty() || !o->password.empty()) {
      return bad("give the credentials either inline or in a credentials file, not both");
    }
    if (Status s = load_fabric_credentials(o->credentials_file, std::string(driver), &o->username,
                                           &o->password);
        !s) {
      return s.error();
    }
  }
  if (o->username.empty()) return bad("no username: set a credentials file");
  if (o->connect_timeout_ms <= 0 || o->request_timeout_ms <= 0) {
    return bad("timeouts must be positive numbers of milliseconds");
  }
  if (o->get_retries < 0) return bad("GET retries must be 0 or more");
  if (o->default_slots == 0) return bad("attach slots per type must be at least 1");
  for (const auto& [host, node] : o->host_map) {
    if (host.empty() || node.empty()) {
      return bad("a host map line has an empty " + std::string(host_name) + " or node name");
    }
  }
  return Status::Ok();
}

}  // namespace composer::drivers
