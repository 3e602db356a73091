# One interface target carries the project's warning flags; every target links it PRIVATE.
set(COMPOSER_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined (empty: none)")
add_library(composer_warnings INTERFACE)
add_library(composer::warnings ALIAS composer_warnings)
target_compile_options(composer_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Wunused -Woverloaded-virtual
  # C++20 designated initializers leave the other members at their defaults on purpose.
  -Wno-missing-field-initializers -Wnull-dereference -Wformat=2 -Wimplicit-fallthrough
  # GCC 12 warns falsely about std::string concatenation at -O3 (GCC PR 105329 and 105651,
  # fixed in 13), which a Release build on Debian 12 hits in several files.
  $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
  $<$<BOOL:${COMPOSER_WERROR}>:-Werror>)
# Hardened build, as for any daemon or plugin that runs as root. A packager's own fortify level
# (dpkg-buildflags) is kept: defining it twice with another value is a warning.
target_compile_options(composer_warnings INTERFACE -fstack-protector-strong -D_GLIBCXX_ASSERTIONS)
# Fortify needs the optimiser: not in an unoptimised build (DEB_BUILD_OPTIONS=noopt, -O0).
string(TOUPPER "${CMAKE_BUILD_TYPE}" _composer_build_type)
set(_composer_flags "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_composer_build_type}}")
if(NOT COMPOSER_SANITIZE AND NOT _composer_flags MATCHES "_FORTIFY_SOURCE" AND
   _composer_flags MATCHES "-O([1-9sgz]|fast)" AND NOT _composer_flags MATCHES "-O0")
  target_compile_options(composer_warnings INTERFACE -D_FORTIFY_SOURCE=2)
endif()
target_link_options(composer_warnings INTERFACE -Wl,-z,relro,-z,now)

# Sanitizer builds (the test command's sanitizer level: -DCOMPOSER_SANITIZE=address,undefined):
# every finding stops the program, so a test that provokes one fails.
if(COMPOSER_SANITIZE)
  target_compile_options(composer_warnings INTERFACE -fsanitize=${COMPOSER_SANITIZE}
    -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(composer_warnings INTERFACE -fsanitize=${COMPOSER_SANITIZE})
endif()
