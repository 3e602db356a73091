// SQL text put together at compile time from named parts, without the preprocessor.
//
// A statement that shares a part with others (a column list, a filter, a test of a state)
// names the part; joined<...> concatenates the parts into one constant with static storage,
// so the statement is still one named constant whose text the statement caches key on.
//
//   constexpr Text kColumns("id, name");
//   constexpr Sql kSelect = statement<"listing things", "SELECT ", kColumns, " FROM things">;
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace composer::db {

// A string of N - 1 characters and its terminating NUL, usable as a template argument.
template <size_t N>
struct Text {
  char chars[N]{};

  constexpr Text() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): a literal stands for its Text.
  constexpr Text(const char (&s)[N]) { std::copy_n(s, N, chars); }
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

namespace detail {

template <size_t... N>
constexpr auto join_texts(const Text<N>&... parts) {
  Text<(N + ... + 1) - sizeof...(N)> out;
  size_t at = 0;
  ((std::copy_n(parts.chars, N - 1, out.chars + at), at += N - 1), ...);
  return out;
}

}  // namespace detail

// The parts one after the other, as one Text with static storage.
template <Text... parts>
inline constexpr auto joined = detail::join_texts(parts...);

// One named SQL statement: what it does (for error messages) and its text. Every statement of
// a store is such a constant; `text` must have static storage (a literal, or statement<...>).
struct Sql {
  std::string_view what;  // "inserting composition"
  std::string_view text;
};

// A statement put together from parts: what it does, then the parts of its text.
//   constexpr Sql kSelect = statement<"listing things", "SELECT ", kColumns, " FROM things">;
template <Text what, Text... parts>
inline constexpr Sql statement{what.view(), joined<parts...>.view()};

}  // namespace composer::db
