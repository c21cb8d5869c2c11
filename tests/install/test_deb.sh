#!/usr/bin/env bash
# `make deb` as a packager and a user meet it: build the Debian packages,
# install them with apt-get (as root), build a program against the installed
# files with pkg-config and with CMake's find_package, run it and the
# installed dlock command against a throwaway redis-server, then purge the
# packages and check nothing of them is left; the same for the Python binding
# (python3-dlock: import dlock from the system's python3, the library found by
# the dynamic loader). Args: SOURCE_DIR [WORK_DIR].
# Needs root (apt-get); refuses to run when a dlock package is installed
# already, since it would replace and then remove it.
set -euo pipefail
src=$(cd "$1" && pwd)
work=${2:-$src/build-deb}
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root (apt-get install)"; exit 77; fi
pkgs=(dlock libdlock-dev libdlock0 python3-dlock)
for p in "${pkgs[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    fail "package $p is installed already: remove it first (this test installs and removes it)"
  fi
done

tmp=$(mktemp -d /tmp/dlock-deb.XXXXXX)
installed=0
# shellcheck source=../../scripts/redis-throwaway.sh
. "$src/scripts/redis-throwaway.sh"
cleanup() {
  redis_stop
  [ "$installed" = 1 ] && apt-get purge -y -q -o DPkg::Lock::Timeout=120 "${pkgs[@]}" >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT

unset MAKEFLAGS MFLAGS MAKELEVEL
make -s -C "$src" deb DEB_BUILD_DIR="$work" >"$tmp/build.log" 2>&1 || { tail -20 "$tmp/build.log"; fail "make deb"; }
ver=$(sed -n 's/^#define DLOCK_VERSION_STRING "\(.*\)"/\1/p' "$src/include/dlock/dlock.h")
major=${ver%%.*}
debs=()
for p in dlock libdlock-dev "libdlock$major" python3-dlock; do
  f=$(ls "$work"/packages/${p}_"$ver"_*.deb 2>/dev/null | head -1)
  [ -n "$f" ] || fail "no package ${p}_${ver}_*.deb in $work/packages"
  debs+=("$f")
done
echo "ok: make deb built ${debs[*]##*/}"

# What each package holds, and what it asks for.
has_file() { dpkg-deb -c "$1" | awk '{print $6}' | grep -qx "./$2" || fail "$(basename "$1") lacks /$2"; }
multi=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
has_file "${debs[2]}" "usr/lib/$multi/libdlock.so.$ver"
has_file "${debs[1]}" "usr/include/dlock/dlock.h"
has_file "${debs[1]}" "usr/include/dlock/dlock.hpp"
has_file "${debs[1]}" "usr/lib/$multi/libdlock.a"
has_file "${debs[1]}" "usr/lib/$multi/pkgconfig/dlock.pc"
has_file "${debs[1]}" "usr/lib/$multi/pkgconfig/dlock-static.pc"
has_file "${debs[1]}" "usr/lib/$multi/cmake/dlock/dlockConfig.cmake"
has_file "${debs[0]}" "usr/bin/dlock"
# Debian's policy: man pages gzipped.
has_file "${debs[0]}" "usr/share/man/man1/dlock.1.gz"
dpkg-deb -c "${debs[0]}" | awk '{print $6}' | grep -qx './usr/share/man/man1/dlock.1' &&
  fail "the man page is not gzipped"
dpkg-deb --fsys-tarfile "${debs[0]}" | tar -xOf - ./usr/share/man/man1/dlock.1.gz | gzip -dc |
  cmp -s - "$src/docs/dlock.1" || fail "dlock.1.gz is not docs/dlock.1"
dpkg-deb -c "${debs[2]}" | awk '{print $6}' | grep -q 'include/' && fail "the library package holds headers"
for dep in libhiredis libuv1 libssl; do
  dpkg-deb -f "${debs[2]}" Depends | grep -q "$dep" || fail "libdlock$major does not depend on $dep"
done
dpkg-deb -f "${debs[1]}" Depends | grep -qF "libdlock$major (= $ver)" || fail "libdlock-dev does not depend on libdlock$major (= $ver)"
has_file "${debs[3]}" "usr/lib/python3/dist-packages/dlock/__init__.py"
has_file "${debs[3]}" "usr/lib/python3/dist-packages/dlock-$ver.dist-info/METADATA"
[ "$(dpkg-deb -f "${debs[3]}" Architecture)" = all ] || fail "python3-dlock is not Architecture: all"
dpkg-deb -f "${debs[3]}" Depends | grep -qF "libdlock$major (>= $ver)" || fail "python3-dlock does not depend on libdlock$major (>= $ver)"
echo "ok: contents and dependencies"

apt-get install -y -q -o DPkg::Lock::Timeout=120 "${debs[@]}" >"$tmp/apt.log" 2>&1 ||
  { tail -20 "$tmp/apt.log"; fail "apt-get install ./*.deb"; }
installed=1
echo "ok: apt-get install"

# A program against the installed files, nothing from the source tree.
redis_start
cp "$here/deb_consumer.c" "$tmp/"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$tmp/deb_consumer.c" -o "$tmp/pc" $(pkg-config --cflags --libs dlock) ||
  fail "cc with pkg-config --cflags --libs dlock"
loaded=$(ldd "$tmp/pc" | sed -n "s/^[[:space:]]*libdlock.so.$major => \([^ ]*\).*/\1/p")
[ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "/usr/lib/$multi/libdlock.so.$major")" ] ||
  fail "pkg-config consumer loads '${loaded:-no libdlock.so.$major}', not the installed one"
[ "$(pkg-config --variable=prefix dlock)" = /usr ] || fail "dlock.pc's prefix is $(pkg-config --variable=prefix dlock), want /usr"
"$tmp/pc" "$REDIS_URL" >"$tmp/out" || fail "pkg-config consumer run: $(cat "$tmp/out")"
grep -q "^ok $ver" "$tmp/out" || fail "pkg-config consumer said: $(cat "$tmp/out")"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror "$tmp/deb_consumer.c" -o "$tmp/pcs" $(pkg-config --cflags --libs dlock-static) ||
  fail "cc with pkg-config --cflags --libs dlock-static"
ldd "$tmp/pcs" | grep -q libdlock && fail "the dlock-static consumer needs libdlock.so"
"$tmp/pcs" "$REDIS_URL" | grep -q "^ok $ver" || fail "pkg-config dlock-static consumer run"
mkdir -p "$tmp/cm"
cp "$here/deb_consumer.c" "$tmp/cm/"
cat >"$tmp/cm/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(deb_consumer C)
find_package(dlock $ver EXACT REQUIRED)
add_executable(consumer_shared deb_consumer.c)
target_link_libraries(consumer_shared PRIVATE dlock::dlock)
add_executable(consumer_static deb_consumer.c)
target_link_libraries(consumer_static PRIVATE dlock::dlock_static)
CM
cmake -S "$tmp/cm" -B "$tmp/cm/b" >/dev/null || fail "find_package(dlock) on the installed package"
cmake --build "$tmp/cm/b" >/dev/null || fail "CMake consumer build"
"$tmp/cm/b/consumer_shared" "$REDIS_URL" | grep -q "^ok $ver" || fail "CMake consumer (shared) run"
"$tmp/cm/b/consumer_static" "$REDIS_URL" | grep -q "^ok $ver" || fail "CMake consumer (static) run"
ldd "$tmp/cm/b/consumer_static" | grep -q libdlock && fail "static consumer links libdlock.so"
echo "ok: pkg-config and find_package consumers built and run against Redis"

# The command from the package.
[ "$(command -v dlock)" = /usr/bin/dlock ] || fail "dlock is not /usr/bin/dlock"
dlock --version | grep -qF "$ver" || fail "dlock --version does not say $ver"
out=$(DLOCK_URL="$REDIS_URL" dlock run deb-test-lock -- sh -c 'echo inside') || fail "dlock run from the package"
[ "$out" = inside ] || fail "dlock run printed '$out'"
[ -e /usr/share/man/man1/dlock.1.gz ] || fail "man page not installed"
echo "ok: /usr/bin/dlock runs a command under a lock"

# The Python binding from the package: the system's python3, from a folder
# outside the source tree, the library found by the dynamic loader.
out=$(cd "$tmp" && env -u DLOCK_LIBRARY -u PYTHONPATH /usr/bin/python3 -c '
import sys, importlib.metadata, dlock
with dlock.Client(sys.argv[1]) as c, c.lock("deb-test-py") as l:
    assert l.held()
mapped = [ln.split()[-1] for ln in open("/proc/self/maps") if "libdlock" in ln]
print(dlock.__file__, mapped[0], importlib.metadata.version("dlock"))
' "$REDIS_URL") || fail "import dlock from python3-dlock: $out"
set -- $out
[ "$1" = /usr/lib/python3/dist-packages/dlock/__init__.py ] || fail "python3 imported dlock from $1"
[ "$(readlink -f "$2")" = "$(readlink -f "/usr/lib/$multi/libdlock.so.$major")" ] ||
  fail "python3-dlock loaded $2, not the installed libdlock.so.$major"
[ "$3" = "$ver" ] || fail "importlib.metadata says dlock $3"
echo "ok: python3 -c 'import dlock' takes a lock through the installed libdlock"

apt-get purge -y -q -o DPkg::Lock::Timeout=120 "${pkgs[@]}" >"$tmp/apt.log" 2>&1 ||
  { tail -20 "$tmp/apt.log"; fail "apt-get purge"; }
installed=0
for f in /usr/bin/dlock "/usr/lib/$multi/libdlock.so.$major" /usr/include/dlock/dlock.h \
         "/usr/lib/$multi/pkgconfig/dlock.pc" /usr/lib/python3/dist-packages/dlock; do
  [ -e "$f" ] && fail "$f left after apt-get remove"
done
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'not-installed' || [ -z "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" ] ||
    fail "package $p still known to dpkg after purge: $(dpkg-query -W -f='${Status}' "$p")"
done
echo "ok: apt-get purge leaves nothing"
echo "PASS"
