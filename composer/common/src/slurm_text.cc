#include "composer/common/slurm_text.h"

#include <algorithm>
#include <cctype>

#include "composer/common/strings.h"
#include "composer/common/units.h"

namespace composer {
namespace {

Expected<uint64_t> slurm_count(std::string_view text, std::string_view line) {
  auto n = parse_count(text, 1u << 30);
  if (!n) {
    return Error{ErrorCode::kInvalidArgument, "scontrol printed '" + std::string(text) +
                                                  "' where a count belongs: " + std::string(line)};
  }
  return uint64_t{*n};
}

Expected<std::vector<LicenseCount>> license_list(std::string_view text, std::string_view line) {
  std::vector<LicenseCount> out;
  if (text.empty() || text == "(null)") return out;
  for (const auto& part : split(text, ',', {.trim = true, .skip_empty = true})) {
    const auto colon = part.find(':');
    LicenseCount l;
    l.name = part.substr(0, colon);
    l.count = 1;
    if (colon != std::string::npos) {
      auto n = slurm_count(part.substr(colon + 1), line);
      if (!n) return n.error();
      l.count = *n;
    }
    out.push_back(l);
  }
  return out;
}

// A reservation's Duration as scontrol prints it, to the nearest whole minute; -1 for
// UNLIMITED or anything that is not a duration.
int64_t duration_minutes(const std::string& text) {
  const Expected<std::optional<int64_t>> s = parse_slurm_duration(text);
  if (!s || !*s) return -1;
  return (**s + 30) / 60;
}

}  // namespace

std::vector<std::string> drained_nodes(std::string_view sinfo_node_states) {
  std::vector<std::string> out;
  for (const std::string& line : split(sinfo_node_states, '\n')) {
    const std::vector<std::string> f = split(line, '|');
    if (f.size() != 2 || f[0].empty() || f[1].find("drain") == std::string::npos) continue;
    if (std::find(out.begin(), out.end(), f[0]) == out.end()) out.push_back(f[0]);
  }
  return out;
}

ScontrolFields parse_scontrol_line(std::string_view line) {
  ScontrolFields out;
  for (const auto& word : split(line, ' ', {.trim = true, .skip_empty = true})) {
    const auto eq = word.find('=');
    const bool starts_field =
        eq != std::string::npos && eq > 0 && std::isupper(static_cast<unsigned char>(word[0])) != 0;
    if (starts_field) {
      out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    } else if (!out.empty()) {
      std::string& value = out.back().second;
      value += value.empty() ? word : " " + word;
    }
  }
  return out;
}

std::string scontrol_field(const ScontrolFields& fields, std::string_view key) {
  for (const auto& [k, v] : fields)
    if (k == key) return v;
  return "";
}

std::string format_licenses(const std::vector<LicenseCount>& l) {
  std::string out;
  for (const auto& x : l) out += (out.empty() ? "" : ",") + x.name + ":" + std::to_string(x.count);
  return out;
}

std::map<std::string, uint64_t> license_counts(const std::vector<LicenseCount>& l) {
  std::map<std::string, uint64_t> m;
  for (const auto& x : l) m[x.name] = x.count;
  return m;
}

Expected<SlurmState> parse_slurm_state(std::string_view licenses_text,
                                       std::string_view reservations_text) {
  SlurmState state;
  auto use = parse_license_use(licenses_text);
  if (!use) return use.error();
  for (const auto& l : *use) state.licenses.push_back({l.name, l.total});
  for (const auto& line : split(reservations_text, '\n', {.trim = true, .skip_empty = true})) {
    const ScontrolFields w = parse_scontrol_line(line);
    ExistingReservation r;
    r.name = scontrol_field(w, "ReservationName");
    if (r.name.empty()) continue;  // "No reservations in the system"
    r.start_local = scontrol_field(w, "StartTime");
    r.duration_min = duration_minutes(scontrol_field(w, "Duration"));
    r.flags = split(scontrol_field(w, "Flags"), ',', {.trim = true, .skip_empty = true});
    auto lic = license_list(scontrol_field(w, "Licenses"), line);
    if (!lic) return lic.error();
    r.licenses = std::move(*lic);
    r.users = scontrol_field(w, "Users");
    state.reservations.push_back(std::move(r));
  }
  return state;
}

Expected<std::vector<LicenseCount>> parse_licenses(std::string_view text) {
  return license_list(text, text);
}

uint64_t LicenseUse::available() const {
  const uint64_t taken = used + reserved;
  return std::min(free, taken >= total ? 0 : total - taken);
}

Expected<std::vector<LicenseUse>> parse_license_use(std::string_view licenses_text) {
  std::vector<LicenseUse> out;
  for (const auto& line : split(licenses_text, '\n', {.trim = true, .skip_empty = true})) {
    const ScontrolFields w = parse_scontrol_line(line);
    LicenseUse l;
    l.name = scontrol_field(w, "LicenseName");
    if (l.name.empty()) continue;  // "No licenses configured"
    auto total = slurm_count(scontrol_field(w, "Total"), line);
    if (!total) return total.error();
    l.total = *total;
    // Older releases leave out Reserved; an absent count is none.
    for (auto [key, count] : {std::pair{"Used", &l.used}, std::pair{"Free", &l.free},
                              std::pair{"Reserved", &l.reserved}}) {
      const std::string text = scontrol_field(w, key);
      if (text.empty()) continue;
      auto n = slurm_count(text, line);
      if (!n) return n.error();
      *count = *n;
    }
    if (scontrol_field(w, "Free").empty()) l.free = l.total - std::min(l.total, l.used);
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace composer
