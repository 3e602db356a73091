// A reader's table of settings: each key with the setter that checks its value and stores it.
// composerd's composer.conf keys and the options of its NodeName, DeviceGroup and FabricName
// lines (composer/setup, composer_conf.cc), the job_submit plugin's keys and the SPANK plugin's
// plugstack arguments (slurm-plugin/core, submit_config.cc and plugin_config.cc) are each one
// table, so that a key is one line and the list of the keys a refusal names comes from the
// table itself.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "composer/common/error.h"
#include "composer/common/strings.h"
#include "composer/config/conf_file.h"

namespace composer::config {

// Checks `value`, given for `key` (as written), and stores it into `into`. A refusal is a
// sentence that names the key, the value (unless it may be a secret) and what is allowed:
// "KEY=VALUE: expected ..."; nothing is stored.
template <class T>
using Setter = std::function<Status(const std::string& key, const std::string& value, T& into)>;

// composer.conf's keys are case-insensitive, as slurm.conf's; plugstack arguments are not.
enum class KeyCase { kInsensitive, kSensitive };

template <class T>
class Settings {
 public:
  Settings(KeyCase key_case, std::vector<std::pair<std::string, Setter<T>>> entries)
      : case_(key_case) {
    for (auto& [name, set] : entries) add(name, std::move(set));
  }

  // `name` as the documentation spells it.
  void add(const std::string& name, Setter<T> set) {
    if (index_.emplace(folded(name), entries_.size()).second) {
      entries_.emplace_back(name, std::move(set));
    }
  }

  // Every key of `inner` under `prefix` ("Fabric" + "Url"), set into the part of T that
  // `part` (T& -> U&) names.
  template <class U, class Part>
  void add_all(const std::string& prefix, const Settings<U>& inner, Part part) {
    for (const auto& [name, set] : inner.entries_) {
      add(prefix + name,
          // An init-capture: clang 14 cannot capture a structured binding by name.
          [setter = set, part](const std::string& key, const std::string& value, T& into)
              -> Status { return setter(key, value, std::invoke(part, into)); });
    }
  }

  // The setter of `key`, nullptr when the table has no such key.
  const Setter<T>* find(std::string_view key) const {
    auto it = index_.find(folded(key));
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }

  // The keys as spelled, in the table's order, separated by ", ".
  std::string names() const {
    std::string out;
    for (const auto& [name, set] : entries_) out += (out.empty() ? "" : ", ") + name;
    return out;
  }

 private:
  template <class>
  friend class Settings;

  std::string folded(std::string_view key) const {
    return case_ == KeyCase::kInsensitive ? lower(key) : std::string(key);
  }

  KeyCase case_;
  std::vector<std::pair<std::string, Setter<T>>> entries_;
  std::map<std::string, size_t> index_;  // folded key -> entries_
};

// The typed setters. `field` is a member pointer (&Config::listen_port) or any callable that
// answers the field of a T (T& -> X&); each sentence is composer.conf's typed value's
// (conf_file.h).
namespace set {

template <class T, class F>
auto& field_of(const F& field, T& into) {
  return std::invoke(field, into);
}

// The value as written once `check` (a sentence, or Ok) lets it through.
template <class T, class F>
Setter<T> text(F field,
               const std::function<Status(const std::string& key, const std::string& value)>&
                   check = nullptr) {
  return [=](const std::string& key, const std::string& value, T& into) -> Status {
    if (check) {
      if (Status s = check(key, value); !s) return s;
    }
    field_of(field, into) = value;
    return Status::Ok();
  };
}

// A whole number from min to max (config::whole_number), stored times `scale`.
template <class T, class F>
Setter<T> whole(F field, int64_t min, int64_t max, int64_t scale = 1) {
  return [=](const std::string& key, const std::string& value, T& into) -> Status {
    Expected<int64_t> n = whole_number(key, value, min, max);
    if (!n) return n.error();
    auto& f = field_of(field, into);
    f = static_cast<std::remove_reference_t<decltype(f)>>(*n * scale);
    return Status::Ok();
  };
}

// Whole seconds from min_s to max_s, kept in milliseconds.
template <class T, class F>
Setter<T> seconds(F field, int64_t min_s, int64_t max_s) {
  return whole<T>(field, min_s, max_s, 1000);
}

// A duration with its unit (config::duration_ms), in milliseconds.
template <class T, class F>
Setter<T> duration(F field, int64_t min_ms, int64_t max_ms) {
  return [=](const std::string& key, const std::string& value, T& into) -> Status {
    Expected<int64_t> ms = duration_ms(key, value, min_ms, max_ms);
    if (!ms) return ms.error();
    field_of(field, into) = *ms;
    return Status::Ok();
  };
}

// yes/no, true/false, on/off, 1/0 (config::yes_no).
template <class T, class F>
Setter<T> yes_no(F field) {
  return [=](const std::string& key, const std::string& value, T& into) -> Status {
    Expected<bool> b = config::yes_no(key, value);
    if (!b) return b.error();
    field_of(field, into) = *b;
    return Status::Ok();
  };
}

// An absolute path (config::absolute_path).
template <class T, class F>
Setter<T> absolute_path(F field) {
  return text<T>(field, config::absolute_path);
}

// A name as Slurm's (config::name).
template <class T, class F>
Setter<T> name(F field) {
  return text<T>(field, config::name);
}

// Comma-separated names ("root, slurm"), each a name as Slurm's (config::name_list).
template <class T, class F>
Setter<T> names(F field) {
  return [=](const std::string& key, const std::string& value, T& into) -> Status {
    Expected<std::vector<std::string>> list = name_list(key, value);
    if (!list) return list.error();
    field_of(field, into) = std::move(*list);
    return Status::Ok();
  };
}

// One of a few words, each standing for a value of the field; any other word is refused with
// "KEY=VALUE: RULE" (rule: "expected drain or fail_job"). Words are matched as keys are.
template <class T, class F, class V>
Setter<T> one_of(F field, std::vector<std::pair<std::string, V>> words, const std::string& rule,
                 KeyCase match = KeyCase::kInsensitive) {
  return [=](const std::string& key, const std::string& value, T& into) -> Status {
    const std::string v = match == KeyCase::kInsensitive ? lower(value) : value;
    for (const auto& [word, meaning] : words) {
      if (v == word) {
        field_of(field, into) = meaning;
        return Status::Ok();
      }
    }
    return Error{ErrorCode::kInvalidArgument, key + "=" + value + ": " + rule};
  };
}

}  // namespace set
}  // namespace composer::config
