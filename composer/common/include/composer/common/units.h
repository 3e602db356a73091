// Sizes as users write them (Slurm style: 512G, 64M, 2T) and as tables print them.
#pragma once

#include <cstdint>
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

// "64G" -> bytes. Suffixes K, M, G, T (binary, case-insensitive, optional trailing B/iB);
// a bare number means megabytes, as in Slurm's --mem. Refuses empty, negative, fractional
// with no suffix, overflow and anything above kMaxMemBytes, with a sentence saying so.
Expected<uint64_t> parse_size(std::string_view text);

// 68719476736 -> "64G"; exact multiples use the largest unit, others fall back to "M"/bytes.
std::string format_size(uint64_t bytes);

// Strict unsigned integer: digits only, no sign, no spaces, fits in uint32_t.
Expected<uint32_t> parse_count(std::string_view text, uint32_t max);

}  // namespace composer
