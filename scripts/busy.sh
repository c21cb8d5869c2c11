#!/usr/bin/env bash
# Runs a command beside busy loops, as on a machine where other work goes on
# (make test-busy, make safety-busy): BUSY_LOOPS (default 2) shells spinning
# at full speed, stopped by pid when the command ends. Exits with its status.
# usage: scripts/busy.sh COMMAND [ARGS...]
set -uo pipefail
n=${BUSY_LOOPS:-2}
pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap stop EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 "$n"); do
  bash -c 'while :; do :; done' &
  pids+=($!)
done
echo "busy.sh: $n busy loop(s) (pids ${pids[*]}) beside: $*"
start=$SECONDS
"$@"
rc=$?
echo "busy.sh: $* ended with status $rc after $((SECONDS - start)) s"
exit $rc
