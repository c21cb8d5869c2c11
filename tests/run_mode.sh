#!/usr/bin/env bash
# Runs test binaries one after another in one of the harness's modes, as one
# CTest entry (the whole set within one budget): TLS (DLOCK_TEST_TLS=1, every
# dlock connection over rediss:// with client certificates) or ACL
# (DLOCK_TEST_ACL=1, the client logs in as a user limited to docs/acl-rule.txt).
# usage: tests/run_mode.sh tls|acl BINARY...
set -uo pipefail
mode=$1
shift
case "$mode" in
  tls) export DLOCK_TEST_TLS=1 ;;
  acl) export DLOCK_TEST_ACL=1 ;;
  *) echo "usage: $0 tls|acl BINARY..." >&2; exit 2 ;;
esac
# The set runs back to back as one long entry beside the rest of the suite:
# twice the timing bounds (th_slack) unless the caller gave its own (the
# sanitizer targets do). The modes test function, not speed.
export DLOCK_TEST_SLOW=${DLOCK_TEST_SLOW:-2}
failed=()
for t in "$@"; do
  start=$(date +%s)
  if "$t" >"$t.$mode.log" 2>&1; then
    printf '%-22s ok      %4ss\n' "$(basename "$t")" $(( $(date +%s) - start ))
  else
    printf '%-22s FAILED  %4ss (log: %s)\n' "$(basename "$t")" $(( $(date +%s) - start )) "$t.$mode.log"
    grep -E "^\[  (FAILED|ERROR) |LINE|harness:" "$t.$mode.log" | head -20
    failed+=("$(basename "$t")")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "over $mode, failed: ${failed[*]}"
  exit 1
fi
echo "over $mode: all $# passed"
