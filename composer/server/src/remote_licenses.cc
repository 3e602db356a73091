#include "remote_licenses.h"

#include <optional>
#include <set>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer::server {

using policies::ActionKind;

Expected<std::vector<RemoteLicense>> parse_remote_licenses(std::string_view sacctmgr_text) {
  std::vector<RemoteLicense> out;
  for (const auto& line : split(sacctmgr_text, '\n', {.trim = true, .skip_empty = true})) {
    const auto f = split(line, '|');
    std::optional<uint32_t> count, allowed;
    if (f.size() == 5) {
      if (auto n = parse_count(f[2], 1u << 30)) count = *n;
      // A resource given to no cluster has neither a cluster nor a share.
      if (f[4].empty()) {
        allowed = 0;
      } else if (auto n = parse_count(f[4], 100)) {
        allowed = *n;
      }
    }
    if (f.size() != 5 || f[0].empty() || !count || !allowed) {
      return Error{ErrorCode::kInvalidArgument,
                   "sacctmgr printed a resource line that does not read as "
                   "name|server|count|cluster|allowed: " +
                       line};
    }
    out.push_back({f[0], f[1], *count, f[3], *allowed});
  }
  return out;
}

std::vector<SyncAction> remote_license_plan(const std::vector<LicenseCount>& wanted,
                                            const std::vector<RemoteLicense>& have,
                                            std::string_view server, std::string_view cluster) {
  const std::string sacctmgr = "sacctmgr -i ";
  const std::string srv(server), cl(cluster);
  std::vector<SyncAction> loosen, tighten;
  auto set_count = [&](const std::string& name, uint64_t from, uint64_t to) {
    const std::string object = policies::remote_license_name(name, server);
    const std::string base = sacctmgr + "modify resource name=" + name + " server=" + srv;
    SyncAction a{
        {ActionKind::kUpdate, object, "count " + std::to_string(from) + " -> " + std::to_string(to),
         base + " set count=" + std::to_string(to)},
        base + " set count=" + std::to_string(from),
        to < from};
    (a.tightens ? tighten : loosen).push_back(std::move(a));
  };
  std::set<std::string> wanted_names;
  for (const auto& w : wanted) {
    wanted_names.insert(w.name);
    const RemoteLicense* any = nullptr;
    const RemoteLicense* ours = nullptr;
    for (const auto& r : have) {
      if (r.name != w.name || r.server != server) continue;
      any = &r;
      if (r.cluster == cluster) ours = &r;
    }
    const std::string object = policies::remote_license_name(w.name, server);
    if (any == nullptr) {
      loosen.push_back(
          {{ActionKind::kCreate, object,
            "add with count " + std::to_string(w.count) + " for cluster " + cl,
            sacctmgr + "add resource name=" + w.name + " server=" + srv +
                " servertype=composer type=license count=" + std::to_string(w.count) +
                " cluster=" + cl + " percentallowed=100"},
           // Never deleted (see above): undone by handing out nothing.
           sacctmgr + "modify resource name=" + w.name + " server=" + srv + " set count=0",
           false});
      continue;
    }
    if (ours == nullptr) {
      loosen.push_back({{ActionKind::kUpdate, object, "give all of it to cluster " + cl,
                         sacctmgr + "add resource name=" + w.name + " server=" + srv +
                             " cluster=" + cl + " percentallowed=100"},
                        sacctmgr + "modify resource name=" + w.name + " server=" + srv +
                            " cluster=" + cl + " set percentallowed=0",
                        false});
    } else if (ours->allowed != 100) {
      const std::string base = sacctmgr + "modify resource name=" + w.name + " server=" + srv +
                               " cluster=" + cl + " set percentallowed=";
      loosen.push_back(
          {{ActionKind::kUpdate, object,
            "share of cluster " + cl + " " + std::to_string(ours->allowed) + "% -> 100%",
            base + "100"},
           base + std::to_string(ours->allowed),
           false});
    }
    if (any->count != w.count) set_count(w.name, any->count, w.count);
  }
  for (const auto& r : have) {
    if (r.server != server || !policies::is_pool_license(r.name) || wanted_names.count(r.name) ||
        r.count == 0) {
      continue;
    }
    wanted_names.insert(r.name);  // once, whatever its clusters
    set_count(r.name, r.count, 0);
  }
  loosen.insert(loosen.end(), tighten.begin(), tighten.end());
  return loosen;
}

}  // namespace composer::server
