#!/usr/bin/env bash
# dlock run's hold limit (--max-hold), a revoked lock ending its command, and
# the fenced writes of dlock fence (issue 16).
# usage: test_cli_beyond.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

echo "== run --max-hold: a stuck command keeps its lock that long at most"
t0=$(now_ms)
"$D" --watchdog 1s run --max-hold 1500ms t:mh -- sh -c 'trap "exit 7" TERM; sleep 30 & wait' \
  >/dev/null 2>"$tmp/mh.err" & p=$!
until_ok held t:mh
sleep 1.1
check "held past its first renewals" held t:mh
wait "$p"; is "$?" 76 "--max-hold reached: exit 76"
took=$(( $(now_ms) - t0 ))
[ "$took" -le $((1500 + 1500 * SLOW)) ] && ok || bad "--max-hold 1.5s ended the run after $took ms"
has "$tmp/mh.err" "max-hold" "the loss names --max-hold"
check "the lock is gone when the limit ends" until_ok free t:mh
expect 0 "$D" run --max-hold 10s t:mh2 -- true
check "a run that ends in time releases as usual" free t:mh2
expect 64 "$D" run --max-hold 10s --lease 5s t:mh3 -- true
has "$tmp/err" "--lease" "--max-hold with --lease is refused"
expect 64 "$D" run --max-hold 0 t:mh3 -- true
expect 64 "$D" run --max-hold soon t:mh3 -- true
has "$tmp/err" "not a positive duration" "a bad --max-hold is named"

finish
