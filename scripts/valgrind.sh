#!/usr/bin/env bash
# Runs the C test binaries under valgrind memcheck: any error or leak (definite
# or indirect) fails. Children (redis-server, helper processes) are not traced.
# usage: scripts/valgrind.sh BUILD_DIR [test ...]
set -uo pipefail
build=${1:-build}
shift || true
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(test_config test_lock test_wait test_watchdog test_multiproc test_inspect test_badinput
  test_fair test_multilock test_redlock test_rwlock test_rwlock_interop test_semaphore test_latch
  test_holdlimit test_fence test_revoke test_election test_tls)
export DLOCK_TEST_SLOW=${DLOCK_TEST_SLOW:-20}
supp="$(cd "$(dirname "$0")" && pwd)/valgrind.supp"
failed=0
for t in "${tests[@]}"; do
  log="$build/valgrind-$t.log"
  start=$(date +%s)
  valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect \
    --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --trace-children=no \
    --suppressions="$supp" --log-file="$log" "$build/tests/$t" >"$build/valgrind-$t.out" 2>&1
  rc=$?
  errs=$(grep -E "ERROR SUMMARY" "$log" | tail -1 | sed 's/.*ERROR SUMMARY: \([0-9]*\).*/\1/')
  printf '%-16s rc=%-3s errors=%-4s %4ss\n' "$t" "$rc" "${errs:-?}" $(( $(date +%s) - start ))
  if [ "$rc" -ne 0 ]; then
    failed=1
    grep -E "^\[  (FAILED|ERROR) |LINE" "$build/valgrind-$t.out" | head -5
    grep -A12 -E "definitely lost|Invalid|uninitialised|Mismatched" "$log" | head -40
  fi
done
exit $failed
