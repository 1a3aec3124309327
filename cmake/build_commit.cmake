# Writes OUTPUT, a header defining FUSEKIT_BUILD_COMMIT: the commit SOURCE_DIR's checkout is at
# (12 hex digits), with "-dirty" where a tracked file differs from it, or "unknown" outside git.
# Run at every build (cmake -P; src/CMakeLists.txt), it rewrites OUTPUT only when the text
# changes, so an unchanged commit recompiles and relinks nothing.
#
# usage: cmake -DSOURCE_DIR=DIR -DOUTPUT=FILE -P build_commit.cmake
foreach(var SOURCE_DIR OUTPUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "build_commit.cmake: -D${var}=... is required")
  endif()
endforeach()

set(commit "unknown")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                  RESULT_VARIABLE rev_rc OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rev_rc EQUAL 0 AND rev MATCHES "^[0-9a-f]+$")
    set(commit "${rev}")
    # Untracked files (build trees, scratch) do not make a build dirty; edits to tracked ones do.
    execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                    RESULT_VARIABLE status_rc OUTPUT_VARIABLE changes ERROR_QUIET)
    if(NOT status_rc EQUAL 0 OR NOT changes STREQUAL "")
      string(APPEND commit "-dirty")
    endif()
  endif()
endif()

set(text "// Generated at build time by cmake/build_commit.cmake: the commit this build was made from.\n")
string(APPEND text "#pragma once\n#define FUSEKIT_BUILD_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()
