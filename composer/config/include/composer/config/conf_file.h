// composer.conf's grammar, read the same way by composerd and the job_submit plugin:
// slurm.conf's Key=Value style, whitespace-separated pairs, one setting or one object
// (NodeName=, DeviceGroup=, FabricName=) per line; keys case-insensitive; '#' starts a
// comment. Every refusal is a sentence naming the file, the line and the rule:
//   /etc/slurm/composer.conf line 4: ListenPort=http: expected a whole number from 1 to 65535
// Each reader is strict about the keys it uses and leaves the others to the other reader
// (composerd: the JobSubmit* keys; job_submit: every other key).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "composer/common/error.h"

namespace composer::config {

inline constexpr const char* kDefaultPath = "/etc/slurm/composer.conf";

// Where composer.conf is: $COMPOSER_CONF when set and not empty, else kDefaultPath.
std::string path_from_environment();

struct Pair {
  std::string key;  // as written
  std::string value;
};

// One line that is not blank or a comment.
struct Line {
  int number = 0;
  std::string key;          // the first key, lower-cased
  std::vector<Pair> pairs;  // never empty; pairs[0] is the line's own key
  const std::string& written_key() const { return pairs.front().key; }
  const std::string& value() const { return pairs.front().value; }
};

// Calls `each` on every line of `text` in file order and stops at the first refusal (of the
// grammar or of `each`), answered as at(path, line, its sentence).
Status read_lines(std::string_view text, const std::string& path,
                  const std::function<Status(const Line&)>& each);

// The file's text. kNotFound "cannot read PATH: No such file or directory" when it does not
// exist, kUnavailable with the reason when it cannot be read.
Expected<std::string> read_file(const std::string& path);

// "PATH line N: WHY", or "PATH: WHY" for line 0 (the file as a whole).
Error at(const std::string& path, int line, const std::string& why);

// A line of one setting: a single Key=Value, its key not given on an earlier line (`seen`
// holds the keys given so far).
Status single_setting(const Line& line, std::set<std::string>& seen);

// The typed values. `key` is the key as written; each refusal reads "KEY=VALUE: expected ...".
// A whole number from min to max (0 <= min <= max), read by common's parse_whole_number:
// "KEY=VALUE: expected a whole number from MIN to MAX".
Expected<int64_t> whole_number(const std::string& key, const std::string& value, int64_t min,
                               int64_t max);
// yes/no, true/false, on/off, 1/0 (any case).
Expected<bool> yes_no(const std::string& key, const std::string& value);
// "500ms", "2s", "1m" or a bare number of seconds, from min_ms to max_ms; in milliseconds.
Expected<int64_t> duration_ms(const std::string& key, const std::string& value, int64_t min_ms,
                              int64_t max_ms);
// A name as Slurm's (composer/common/names.h); "KEY needs a value" when empty.
Status name(const std::string& key, const std::string& value);

// Comma-separated names ("root, slurm"), each trimmed and a name as Slurm's.
Expected<std::vector<std::string>> name_list(const std::string& key, const std::string& value);

// Slurm's host list: "node[01-03],gpu7" -> node01 node02 node03 gpu7 (zero padding kept).
// Refuses malformed ranges with a sentence.
Expected<std::vector<std::string>> expand_hostlist(std::string_view expr);
// An absolute path.
Status absolute_path(const std::string& key, const std::string& value);

}  // namespace composer::config
