#!/usr/bin/env bash
# The C examples compile as a user would build them: plain cc -std=c11, no
# feature macro on the command line (each example defines what it uses),
# warnings as errors. usage: check_examples_c11.sh SOURCE_DIR
set -u
src=$1
cc=${CC:-cc}
uv=$(pkg-config --cflags libuv 2>/dev/null || true)
fail=0
for f in "$src"/examples/*.c; do
  # shellcheck disable=SC2086
  if "$cc" -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$src/include" $uv "$f"; then
    echo "ok: $(basename "$f")"
  else
    echo "FAIL: $(basename "$f") does not build with $cc -std=c11"; fail=1
  fi
done
exit "$fail"
