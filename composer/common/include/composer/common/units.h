// Sizes as users write them (Slurm style: 512G, 64M, 2T) and as tables print them, counts, and
// durations as Slurm prints and reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "composer/common/error.h"

namespace composer {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = kKiB * 1024;
inline constexpr uint64_t kGiB = kMiB * 1024;
inline constexpr uint64_t kTiB = kGiB * 1024;
// Largest memory request accepted anywhere: 1 PiB. Larger is a typo, not a job.
inline constexpr uint64_t kMaxMemBytes = kTiB * 1024;

// What a size of zero ("0", "0G") means to parse_size.
enum class ZeroSize {
  kRefused,  // not a size (composer.conf's Size=, policy caps)
  kNone,     // nothing asked for (--compose-mem=0, as Slurm's --gres=gpu:0)
};

// "64G" -> bytes. Suffixes K, M, G, T (binary, case-insensitive, optional trailing B/iB);
// a bare number means megabytes, as in Slurm's --mem. Refuses empty, negative, fractional
// with no suffix, overflow and anything above kMaxMemBytes, with a sentence saying so, and
// zero unless `zero` is kNone.
Expected<uint64_t> parse_size(std::string_view text, ZeroSize zero = ZeroSize::kRefused);

// Memory as whole GiB, the unit of the memory licenses: a request rounds up (a job asking for
// 1536M holds 2), a pool's total rounds down (it cannot lend a part of a GiB it does not hold).
uint64_t gib_rounded_up(uint64_t bytes);
uint64_t gib_rounded_down(uint64_t bytes);

// 68719476736 -> "64G"; exact multiples use the largest unit, others fall back to "M"/bytes.
std::string format_size(uint64_t bytes);

// "a whole number from MIN to MAX": the one wording of the rule every refused whole number
// states, framed as every refused value of a Key=Value is ("KEY=VALUE: expected RULE").
std::string whole_number_rule(uint64_t min, uint64_t max);

// The one reader of a whole number someone wrote (a flag, a URL parameter, a composer.conf
// value, a plugstack argument): digits only, no sign, no blanks, from min to max, any max up to
// UINT64_MAX. Refused with "NAME=TEXT: expected a whole number from MIN to MAX", the frame of
// composer.conf's and the plugstack's sentences (units_test, WholeNumber*).
Expected<uint64_t> parse_whole_number(std::string_view name, std::string_view text, uint64_t min,
                                      uint64_t max);

// parse_whole_number from 0 to `max`, as a uint32_t, for what the machine writes (sysfs, cgroup
// and Slurm's own fields); the refusal names it "count".
Expected<uint32_t> parse_count(std::string_view text, uint32_t max);

// A duration in the forms Slurm prints and reads for a time limit or an elapsed time, in
// seconds: "M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S" (each number at most 6 digits; case
// and surrounding blanks do not matter). No limit ("UNLIMITED", "INFINITE", "Partition_Limit", and
// what sacct prints for none: "UNKNOWN", "INVALID", "NONE", or nothing) is nullopt. Anything else
// is kInvalidArgument with the allowed forms.
Expected<std::optional<int64_t>> parse_slurm_duration(std::string_view text);

}  // namespace composer
