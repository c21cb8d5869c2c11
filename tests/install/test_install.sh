#!/usr/bin/env bash
# `make install` as a user meets it: install the build into a temporary
# prefix (and once more through DESTDIR), then build a program against it
# with find_package(dlock) (shared and static targets) and with pkg-config,
# and run each. Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=$1 src=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/dlock-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

check_prefix() {  # $1 = where the files landed
  local p=$1
  for f in include/dlock/dlock.h lib/libdlock.a lib/pkgconfig/dlock.pc \
           lib/cmake/dlock/dlockConfig.cmake share/man/man1/dlock.1; do
    [ -e "$p/$f" ] || fail "$f not installed under $p"
  done
  ls "$p"/lib/libdlock.so.0* >/dev/null 2>&1 || fail "libdlock.so.0 (SOVERSION) not installed"

  # CMake package
  mkdir -p "$tmp/c" && cp "$here/consumer.c" "$tmp/c/" && cp "$here/CMakeLists.txt.in" "$tmp/c/CMakeLists.txt"
  rm -rf "$tmp/c/b"
  cmake -S "$tmp/c" -B "$tmp/c/b" -DCMAKE_PREFIX_PATH="$p" >/dev/null || fail "find_package(dlock) with prefix $p"
  cmake --build "$tmp/c/b" >/dev/null || fail "consumer build against $p"
  LD_LIBRARY_PATH="$p/lib" "$tmp/c/b/consumer_shared" || fail "consumer (shared) run"
  "$tmp/c/b/consumer_static" || fail "consumer (static) run"
  ldd "$tmp/c/b/consumer_static" | grep -q libdlock && fail "static consumer links libdlock.so"

  # pkg-config
  local flags
  flags=$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --cflags --libs dlock) || fail "pkg-config dlock"
  # shellcheck disable=SC2086
  cc "$here/consumer.c" -o "$tmp/pc" $flags -Wl,-rpath,"$p/lib" || fail "cc with pkg-config flags ($flags)"
  "$tmp/pc" | grep -q "^ok " || fail "pkg-config consumer run"
  [ "$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --modversion dlock)" = "$("$tmp/pc" | cut -d' ' -f2)" ] ||
    fail "dlock.pc version differs from the library's"
  "$p/bin/dlock" --version >/dev/null 2>&1 || [ ! -e "$p/bin/dlock" ] || fail "installed dlock --version"
}

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || fail "cmake --install --prefix"
check_prefix "$tmp/prefix"
echo "ok: --prefix install, find_package (shared, static) and pkg-config consumers"

# DESTDIR staging (how packagers install): files land under DESTDIR/PREFIX and
# the .pc file still points at its own place.
DESTDIR="$tmp/stage" cmake --install "$build" --prefix /opt/dlock-test >/dev/null || fail "DESTDIR install"
check_prefix "$tmp/stage/opt/dlock-test"
echo "ok: DESTDIR install relocates"
