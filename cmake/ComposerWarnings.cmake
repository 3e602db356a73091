# One interface target carries the project's warning flags; every target links it PRIVATE.
add_library(composer_warnings INTERFACE)
add_library(composer::warnings ALIAS composer_warnings)
target_compile_options(composer_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Wunused -Woverloaded-virtual
  # C++20 designated initializers leave the other members at their defaults on purpose.
  -Wno-missing-field-initializers -Wnull-dereference -Wformat=2 -Wimplicit-fallthrough
  $<$<BOOL:${COMPOSER_WERROR}>:-Werror>)
# Hardened build, as for any daemon or plugin that runs as root.
target_compile_options(composer_warnings INTERFACE -fstack-protector-strong -D_FORTIFY_SOURCE=2
  -D_GLIBCXX_ASSERTIONS)
target_link_options(composer_warnings INTERFACE -Wl,-z,relro,-z,now)
