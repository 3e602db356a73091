# clang-format and clang-tidy run from the build. The format is that of one pinned
# clang-format release (each release formats a little differently); where it is not installed
# the format check says so and passes.
set(COMPOSER_CLANG_FORMAT_VERSION 14)
find_program(CLANG_FORMAT_EXE NAMES clang-format-${COMPOSER_CLANG_FORMAT_VERSION} clang-format)
if(CLANG_FORMAT_EXE)
  execute_process(COMMAND ${CLANG_FORMAT_EXE} --version OUTPUT_VARIABLE _composer_cf_version
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _composer_cf_version MATCHES "version ${COMPOSER_CLANG_FORMAT_VERSION}\\.")
    message(STATUS "composer: ${CLANG_FORMAT_EXE} is not clang-format "
      "${COMPOSER_CLANG_FORMAT_VERSION} (${_composer_cf_version}): format check skipped")
    set(CLANG_FORMAT_EXE "")
  endif()
endif()
find_program(CLANG_TIDY_EXE NAMES clang-tidy clang-tidy-14)

if(COMPOSER_CLANG_TIDY)
  if(NOT CLANG_TIDY_EXE)
    message(FATAL_ERROR "COMPOSER_CLANG_TIDY=ON but clang-tidy was not found")
  endif()
  set(CMAKE_CXX_CLANG_TIDY ${CLANG_TIDY_EXE} --quiet)
endif()

if(CLANG_FORMAT_EXE)
  file(GLOB_RECURSE COMPOSER_FORMAT_SOURCES CONFIGURE_DEPENDS
    ${CMAKE_SOURCE_DIR}/composer/*.cc ${CMAKE_SOURCE_DIR}/composer/*.h
    ${CMAKE_SOURCE_DIR}/db/*.cc ${CMAKE_SOURCE_DIR}/db/*.h
    ${CMAKE_SOURCE_DIR}/policies/*.cc ${CMAKE_SOURCE_DIR}/policies/*.h
    ${CMAKE_SOURCE_DIR}/slurm-plugin/*.cc ${CMAKE_SOURCE_DIR}/slurm-plugin/*.h
    ${CMAKE_SOURCE_DIR}/tests/*.cc ${CMAKE_SOURCE_DIR}/tests/*.h)
  add_custom_target(format
    COMMAND ${CLANG_FORMAT_EXE} -i --style=file ${COMPOSER_FORMAT_SOURCES}
    COMMENT "clang-format: rewriting sources in place")
  add_custom_target(format-check
    COMMAND ${CLANG_FORMAT_EXE} --dry-run --Werror --style=file ${COMPOSER_FORMAT_SOURCES}
    COMMENT "clang-format: checking sources")
else()
  add_custom_target(format-check
    COMMAND ${CMAKE_COMMAND} -E echo
      "format-check: skipped, clang-format ${COMPOSER_CLANG_FORMAT_VERSION} is not installed"
    COMMENT "clang-format: checking sources")
endif()
