#!/usr/bin/env bash
# Builds tests/cpp/test_hpp.cpp with one compiler and one standard, as a user
# builds against dlock.hpp (warnings as errors), and runs it on a throwaway
# redis-server. Exit 77 (CTest: skipped) when the compiler is not installed.
#   run_cpp.sh CXX STD SOURCE_DIR LIBDLOCK
# CXX: g++ or clang++; STD: c++17, c++20; LIBDLOCK: the built libdlock.so.
set -u
cxx=$1 std=$2 src=$3 lib=$4
command -v "$cxx" >/dev/null 2>&1 || { echo "SKIP: $cxx is not installed (scripts/deps.sh installs it)"; exit 77; }
SRC=$src
# shellcheck source=../../scripts/redis-throwaway.sh
. "$src/scripts/redis-throwaway.sh"
tmp=$(mktemp -d /tmp/dlock-cpp-XXXXXX)
trap 'redis_stop; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

# Beyond -Wall -Wextra: what stricter C++ projects turn on, so that the header
# never breaks their builds.
"$cxx" -std="$std" -Wall -Wextra -Werror -pedantic -Wshadow -Wconversion -Wsign-conversion \
  -Wold-style-cast -Wnon-virtual-dtor -I"$src/include" \
  "$src/tests/cpp/test_hpp.cpp" -o "$tmp/test_hpp" "$lib" -Wl,-rpath,"$(dirname "$lib")" -pthread ||
  { echo "FAIL: test_hpp.cpp does not build with $cxx -std=$std"; exit 1; }

# The slack of timing bounds, as th_slack() measures it (tests/cli/lib.sh).
slack=$(awk -v base="${DLOCK_TEST_SLOW:-1}" -v cpus="$(nproc 2>/dev/null || echo 1)" '
  { split($4, q, "/"); a = q[1] - 1 > $1 ? q[1] - 1 : $1
    l = int(a / cpus + 0.999); if (l < 1) l = 1; if (l > 4) l = 4
    if (base < 1) base = 1; if (base > 1) l = l > 2 ? 2 : 1; print int(base) * l }' \
  /proc/loadavg 2>/dev/null || echo 1)

redis_start || exit 1
"$tmp/test_hpp" "$REDIS_URL" "$slack"
