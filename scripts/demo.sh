#!/usr/bin/env bash
# make demo: a throwaway redis-server, and three processes taking turns on one
# lock through libdlock. Stops its server by pid at the end, also on Ctrl-C.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/redis-throwaway.sh
. "$here/redis-throwaway.sh"
trap redis_stop EXIT
trap 'echo; echo "interrupted"; exit 130' INT TERM

redis_start
echo "== redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$REDIS_PORT (pid $REDIS_PID)"
echo "== three processes take turns on the lock 'demo:report', 3 rounds each"
pids=()
for w in alpha beta gamma; do
  "$build/examples/example_turns" "$REDIS_URL" demo:report "$w" 3 250 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
echo "== every hold above ended before the next began; fencing tokens only go up"
exit $status
