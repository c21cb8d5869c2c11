#!/usr/bin/env bash
# `make install` as a user meets it: install the build into a temporary
# prefix (with cmake --install, then with make install PREFIX=, and through
# DESTDIR both ways), then build a program against it with find_package(dlock)
# (shared and static targets) and with pkg-config (dlock, and dlock-static
# for the static link the docs give), and run each. Args: BUILD_DIR SOURCE_DIR.
set -euo pipefail
build=$1 src=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/dlock-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

check_prefix() {  # $1 = where the files landed
  local p=$1
  for f in include/dlock/dlock.h include/dlock/dlock.hpp lib/libdlock.a lib/pkgconfig/dlock.pc \
           lib/pkgconfig/dlock-static.pc lib/cmake/dlock/dlockConfig.cmake share/man/man1/dlock.1; do
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

  # pkg-config: --cflags gives only what dlock.h needs (no hiredis/libuv
  # include paths or defines); the static flags carry the dependencies.
  local flags cflags sflags
  cflags=$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --cflags dlock) || fail "pkg-config --cflags dlock"
  cflags=$(echo $cflags)
  case "$cflags" in
    -I*" "*|"") fail "pkg-config --cflags dlock gives '$cflags', want one -I" ;;
    -I*) [ "$(realpath -m "${cflags#-I}")" = "$(realpath -m "$p/include")" ] ||
           fail "pkg-config --cflags dlock gives '$cflags', want -I$p/include" ;;
    *) fail "pkg-config --cflags dlock gives '$cflags', want -I$p/include" ;;
  esac
  sflags=$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --static --libs dlock) || fail "pkg-config --static"
  case " $sflags " in *" -lhiredis "*) ;; *) fail "no -lhiredis in the static flags: $sflags" ;; esac
  case " $sflags " in *" -luv "*) ;; *) fail "no -luv in the static flags: $sflags" ;; esac
  case " $sflags " in *" -lssl "*) ;; *) fail "no -lssl (TLS) in the static flags: $sflags" ;; esac
  # The static link as docs/install.md gives it: dlock-static names libdlock.a
  # itself, so libdlock.so beside it is not picked (-ldlock would be).
  [ -e "$p/lib/libdlock.so" ] || fail "no libdlock.so beside libdlock.a: the static link proves nothing"
  local stflags
  stflags=$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --cflags --libs dlock-static) ||
    fail "pkg-config --cflags --libs dlock-static"
  # shellcheck disable=SC2086
  cc "$here/consumer.c" -o "$tmp/pcs" $stflags || fail "cc with pkg-config dlock-static flags ($stflags)"
  "$tmp/pcs" | grep -q "^ok " || fail "pkg-config static consumer run"
  ldd "$tmp/pcs" | grep -q libdlock && fail "the dlock-static consumer needs libdlock.so: $(ldd "$tmp/pcs" | grep libdlock)"
  [ "$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --modversion dlock-static)" = \
    "$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --modversion dlock)" ] || fail "dlock-static.pc's version differs"
  flags=$(PKG_CONFIG_PATH="$p/lib/pkgconfig" pkg-config --cflags --libs dlock) || fail "pkg-config dlock"
  # shellcheck disable=SC2086
  cc "$here/consumer.c" -o "$tmp/pc" $flags -Wl,-rpath,"$p/lib" || fail "cc with pkg-config flags ($flags)"
  "$tmp/pc" | grep -q "^ok " || fail "pkg-config consumer run"
  # C++: dlock.hpp from the installed include directory, nothing else.
  if command -v c++ >/dev/null; then
    printf '#include <dlock/dlock.hpp>\n#include <mutex>\nint main() { dlock::client c("redis://127.0.0.1:1"); dlock::mutex m(c, "x"); std::lock_guard<dlock::mutex> g(m); }\n' >"$tmp/cpp.cpp"
    # shellcheck disable=SC2086
    c++ -std=c++17 -Wall -Wextra -Werror "$tmp/cpp.cpp" -o "$tmp/cpp" $flags -Wl,-rpath,"$p/lib" ||
      fail "C++ consumer of dlock.hpp with pkg-config flags ($flags)"
  fi
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

# The Makefile: `make install PREFIX=...` and `DESTDIR=...` as make users
# expect. A dry run first: a Makefile that ignored PREFIX must fail here, not
# write into /usr/local.
unset MAKEFLAGS MFLAGS MAKELEVEL
bt=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")
mk() { make -s -C "$src" BUILD_DIR="$build" CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=$bt" "$@"; }
mk -n install PREFIX="$tmp/mk" | grep -qF -- "$tmp/mk" || fail "make install ignores PREFIX"
mk install PREFIX="$tmp/mk" >/dev/null || fail "make install PREFIX=$tmp/mk"
check_prefix "$tmp/mk"
echo "ok: make install PREFIX="
mk -n install PREFIX=/opt/dlock-mk DESTDIR="$tmp/mkstage" | grep -qF -- "$tmp/mkstage" ||
  fail "make install ignores DESTDIR"
mk install PREFIX=/opt/dlock-mk DESTDIR="$tmp/mkstage" >/dev/null || fail "make install DESTDIR="
check_prefix "$tmp/mkstage/opt/dlock-mk"
[ ! -e /opt/dlock-mk ] || fail "DESTDIR install wrote outside DESTDIR"
echo "ok: make install PREFIX= DESTDIR="
