#!/usr/bin/env bash
# make demo as a reader runs it with its output in a file or a pipe: it ends
# with status 0, shows its three parts, and writes no terminal escape codes
# (those are for a terminal only). usage: check_demo.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
out=$(mktemp /tmp/dlock-demo-XXXXXX)
trap 'rm -f "$out"' EXIT
fail=0
"$src/scripts/demo.sh" "$build" >"$out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { echo "FAIL: the demo exited $rc"; fail=1; }
for part in "== 1. " "== 2. " "== 3. " "== done"; do
  grep -qF -- "$part" "$out" || { echo "FAIL: no '$part' heading"; fail=1; }
done
if grep -q $'\033' "$out"; then
  echo "FAIL: escape codes in the demo's output to a file:"; grep -n $'\033' "$out" | head -3 | od -c | head -5
  fail=1
fi
[ "$fail" -eq 0 ] && echo "ok: the demo, plain text to a file"
exit "$fail"
