// What Slurm's commands print, read one way by composerd and by the plugins.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "composer/common/error.h"

namespace composer {

// The nodes that `sinfo -h -N -o '%N|%T'` shows drained or draining (a state holding "drain":
// drained, draining, drained*, ...), each once, in the order shown. An epilog that fails drains
// its node, and its compositions are kept until an admin resumes it. Other lines are skipped.
std::vector<std::string> drained_nodes(std::string_view sinfo_node_states);

// The Key=Value fields of one `scontrol -o show ...` line, in order. Slurm's keys all start
// with a capital letter; a word that does not (no '=', or a lower-case key) continues the
// value before it, so that a value with spaces stays whole: a job's
// "AdminComment=composer: gpus=2 nodes=1", a path with a space.
using ScontrolFields = std::vector<std::pair<std::string, std::string>>;
ScontrolFields parse_scontrol_line(std::string_view line);
// The value of `key`; "" when absent.
std::string scontrol_field(const ScontrolFields& fields, std::string_view key);

// --- licenses and reservations as `scontrol -o show` prints them ----------------------------

// A count of one Slurm license, as -L takes it and scontrol prints it.
struct LicenseCount {
  std::string name;
  uint64_t count = 0;
  bool operator==(const LicenseCount&) const = default;
};
// "a:1,b:2"
std::string format_licenses(const std::vector<LicenseCount>& l);

// By name.
std::map<std::string, uint64_t> license_counts(const std::vector<LicenseCount>& l);

// A license list as scontrol prints it and -L takes it: "fabric_gpu:4,matlab" (a name alone
// counts 1); "" and "(null)" are none. kInvalidArgument naming a count that is not one.
Expected<std::vector<LicenseCount>> parse_licenses(std::string_view text);

// One line of `scontrol -o show licenses`.
struct LicenseUse {
  std::string name;
  uint64_t total = 0;
  uint64_t used = 0;      // by running jobs
  uint64_t free = 0;      // as Slurm prints it
  uint64_t reserved = 0;  // by reservations: composerd's holds, the policy's blockers
  // What a job outside the reservations may take now. Slurm starts a job only when used +
  // reserved + asked <= total; the smaller of that and Free, whichever of the two a Slurm
  // release folds the reservations into.
  uint64_t available() const;
  bool operator==(const LicenseUse&) const = default;
};
// kInvalidArgument with the line that does not parse; "No licenses configured" is none.
Expected<std::vector<LicenseUse>> parse_license_use(std::string_view licenses_text);

// A reservation as `scontrol -o show reservations` prints it.
struct ExistingReservation {
  std::string name;
  std::string start_local;  // "2024-03-04T08:00:00", slurmctld's (= the policy's) time zone
  int64_t duration_min = 0;
  std::vector<std::string> flags;
  std::vector<LicenseCount> licenses;
  std::string users;
};
// What Slurm has now: its licenses' configured totals and its reservations.
struct SlurmState {
  std::vector<LicenseCount> licenses;  // configured totals
  std::vector<ExistingReservation> reservations;
};

// `scontrol -o show licenses` / `scontrol -o show reservations` as text. kInvalidArgument
// with the line that does not parse.
Expected<SlurmState> parse_slurm_state(std::string_view licenses_text,
                                       std::string_view reservations_text);

}  // namespace composer
