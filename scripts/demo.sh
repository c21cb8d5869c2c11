#!/usr/bin/env bash
# make demo: a throwaway redis-server and the `dlock` command doing its main
# job: processes taking turns on a lock, a refused try, a killed holder whose
# lock is taken over once the watchdog timeout runs out. Stops the server by
# pid at the end, also on Ctrl-C.
set -uo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
dlock=$(cd "$build/cli" && pwd)/dlock
# shellcheck source=scripts/redis-throwaway.sh
. "$here/redis-throwaway.sh"

bg=()
cleanup() {
  for p in "${bg[@]}"; do kill -9 "$p" 2>/dev/null; done
  redis_stop
}
trap cleanup EXIT
trap 'echo; echo "interrupted: stopping"; exit 130' INT TERM

ts() { date +%H:%M:%S.%3N; }
# children of a pid, from /proc (procps may not be installed)
children_of() {
  local f s pid
  for f in /proc/[0-9]*/stat; do
    s=$(cat "$f" 2>/dev/null) || continue
    pid=${s%% *}
    s=${s##*) }          # after "pid (comm) ", which may hold spaces
    set -- $s            # $1 state, $2 ppid
    [ "${2:-}" = "$want" ] && echo "$pid"
  done
}
# Bold headings on a terminal only: a file or a pipe gets plain text.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }

redis_start || exit 1
export DLOCK_URL=$REDIS_URL
say "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$REDIS_PORT (pid $REDIS_PID)"

say "1. Three workers, two rounds each: dlock run demo:report -- <job>"
job='echo "$(date +%H:%M:%S.%3N) $W   holds $DLOCK_NAME  (fencing token $DLOCK_TOKEN)"; sleep 0.3; echo "$(date +%H:%M:%S.%3N) $W   done"'
for w in alpha beta gamma; do
  (for r in 1 2; do W=$w "$dlock" run demo:report -- sh -c "$job"; sleep 0.05; done) &
  bg+=($!)
done
wait "${bg[@]}"; bg=()
echo "   (no two holds overlap; the tokens only grow)"

say "2. Someone holds demo:report for 2 s; a --wait 0 attempt is refused"
"$dlock" run demo:report -- sleep 2 &
bg+=($!)
sleep 0.3
echo "\$ dlock status demo:report"
"$dlock" status demo:report | sed 's/^/   /'
echo "\$ dlock run --wait 0 demo:report -- echo never"
"$dlock" run --wait 0 demo:report -- echo never
echo "   exit status: $?  (75: not acquired)"
wait "${bg[@]}"; bg=()

say "3. A holder dies with SIGKILL (watchdog 2 s): its command goes with it, its lock frees by itself"
"$dlock" --watchdog 2s run demo:crash -- sh -c 'sleep 60 & wait' &
holder=$!
bg+=($holder)
sleep 0.5
echo "\$ dlock status demo:crash"
"$dlock" status demo:crash | sed 's/^/   /'
guard=$(want=$holder children_of)
cmd=$(want=$guard children_of)
echo "$(ts) kill -9 dlock (pid $holder) only: the machine's dlock 'dies'"
kill -9 "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
sleep 0.2
if [ -n "$cmd" ] && kill -0 "$cmd" 2>/dev/null; then
  echo "   its command (pid $cmd) still runs!"
else
  echo "   its command (pid ${cmd:-?}) and what it started are gone with it"
fi
start=$(date +%s%N)
echo "$(ts) another process waits for demo:crash ..."
"$dlock" run demo:crash -- sh -c 'echo "$(date +%H:%M:%S.%3N) taken over: token $DLOCK_TOKEN"'
echo "   after $(( ($(date +%s%N) - start) / 1000000 )) ms: within the 2 s watchdog timeout, without polling"
bg=()

say "done: server stopped (pid $REDIS_PID)"
