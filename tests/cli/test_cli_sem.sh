#!/usr/bin/env bash
# dlock run --semaphore (at most N commands at once, a killed runner's permit
# back within the watchdog timeout, the loss of a permit), dlock latch
# set/down/wait, and what status and list show of semaphores and latches.
# usage: test_cli_sem.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

held_permits() { rc zcard "{$1}:timeout"; }
awaiters() { [ "$(rc pubsub numsub "redisson_countdownlatch__channel__{$1}" | tail -1)" = "$2" ]; }
until_permits() { local n=$2; for _ in $(seq 1 $((100 * SLOW))); do [ "$(held_permits "$1")" = "$n" ] && return 0; sleep 0.05; done; return 1; }

echo "== run --semaphore: at most N at once"
# Each command counts itself in (INCR), notes how many ran with it, stays a
# while, and counts itself out. 6 runners, 2 permits.
body='n=$(redis-cli -p '"$REDIS_PORT"' incr sem:running); echo "$n" >> '"$tmp"'/conc; sleep 0.4; redis-cli -p '"$REDIS_PORT"' decr sem:running >/dev/null'
for i in 1 2 3 4 5 6; do
  "$D" run --semaphore sem:a --permits 2 -- sh -c "$body" & bg+=($!)
done
fails=0
for p in "${bg[@]}"; do wait "$p" || fails=$((fails + 1)); done; bg=()
is "$fails" "0" "every runner exited 0"
is "$(wc -l < "$tmp/conc" | tr -d ' ')" "6" "every command ran"
is "$(sort -n "$tmp/conc" | tail -1)" "2" "at most 2 ran at once (and 2 did)"
is "$(rc get sem:a)" "2" "both permits back afterwards"
is "$(held_permits sem:a)" "0" "no permit left held"

echo "== run --semaphore: environment, waits, exit codes"
expect 0 "$D" run --semaphore sem:b --permits 1 -- sh -c 'echo "name=$DLOCK_NAME permit=$DLOCK_PERMIT tok=$DLOCK_TOKEN"'
has "$tmp/out" "name=sem:b permit=" "DLOCK_NAME and DLOCK_PERMIT"
grep -qE 'permit=[0-9a-f]{32} tok=$' "$tmp/out" && ok || bad "DLOCK_PERMIT is a 32-hex permit id: $(cat "$tmp/out")"
expect 42 "$D" run --semaphore sem:b --permits 1 -- sh -c 'exit 42'
"$D" run --semaphore sem:b --permits 1 -- sleep $((3 * SLOW)) & holder=$!; bg+=($holder)
check "the permit is taken" until_permits sem:b 1
expect 75 "$D" run --semaphore sem:b --permits 1 -n -- echo ran
hasnt "$tmp/out" "ran" "not run when no permit is free"
has "$tmp/err" "out of permits" "and told why"
expect 75 "$D" run --semaphore sem:b --permits 1 -w 300ms -- echo ran
expect 9 "$D" run --semaphore sem:b --permits 1 --timeout 200ms -E 9 -- echo ran
t0=$(now_ms)
expect 0 "$D" run --semaphore sem:b --permits 1 -w $((6 * SLOW))s -- echo ran
took=$(( $(now_ms) - t0 ))
has "$tmp/out" "ran" "a waiter runs once the permit comes back"
[ "$took" -ge 500 ] && ok || bad "the waiter did not wait ($took ms)"
wait "${bg[@]}"; bg=()

echo "== run --semaphore: kill -9 of a runner gives its permit back"
# After its lease and its lock-delay (--kill-after + 2 s): nobody clears the
# delay of a runner killed with SIGKILL.
"$D" --watchdog 2s run --kill-after 1s --semaphore sem:k --permits 1 -- sleep 60 & victim=$!; bg+=($victim)
check "the victim holds the permit" until_permits sem:k 1
sleep 0.3
cmdpid=$(command_of "$victim")
kill -9 "$victim"
t0=$(now_ms)
expect 0 "$D" run --semaphore sem:k --permits 1 -w 30s -- true
took=$(( $(now_ms) - t0 ))
[ "$took" -le $((6000 + 2000 * SLOW)) ] && ok || bad "the dead runner's permit came back after $took ms (watchdog 2 s, delay 3 s)"
[ "$took" -ge 3000 ] && ok || bad "the dead runner's permit came back after $took ms, before its lock-delay (3 s) ended"
[ -n "$cmdpid" ] && until_ok gone "$cmdpid" && ok || bad "the dead runner's command ($cmdpid) was killed too"
bg=()

echo "== run --semaphore: a permit lost while the command runs: exit 76"
"$D" --watchdog 1s run --semaphore sem:l --permits 1 -- sleep 30 >/dev/null 2>"$tmp/lost.err" & r=$!; bg+=($r)
check "the permit is taken" until_permits sem:l 1
rc del sem:l "{sem:l}:timeout" >/dev/null
wait "$r"; got=$?; bg=()
is "$got" "76" "exit 76 when the permit is lost"
has "$tmp/lost.err" "permit of semaphore 'sem:l' lost" "the message says so"

echo "== run --semaphore: the total"
expect 65 "$D" run --semaphore sem:a --permits 3 -- echo ran
hasnt "$tmp/out" "ran" "not run with another total"
has "$tmp/err" "2 permits in all" "the message gives the semaphore's total"
is "$(rc get sem:a)" "2" "and leaves it as it was"
rc set sem:str hello >/dev/null
expect 65 "$D" run --semaphore sem:str --permits 1 -- echo ran
is "$(rc get sem:str)" "hello" "a key that is not a semaphore is left alone"

echo "== run --semaphore: bad input"
for n in 0 -1 x 1.5 "" 2147483648; do
  expect 64 "$D" run --semaphore sem:bad --permits "$n" -- echo ran
  has "$tmp/err" "--permits" "--permits '$n' refused with a message"
done
expect 64 "$D" run --semaphore sem:bad -- true
has "$tmp/err" "needs --permits" "--permits is required"
expect 64 "$D" run --permits 2 sem:bad -- true
expect 64 "$D" run --semaphore sem:bad --permits 2 other -- true
expect 64 "$D" run --semaphore sem:bad --permits 2 --lease 10s -- true
is "$(rc exists sem:bad)" "0" "nothing created by refused runs"
expect 0 "$D" run --help
has "$tmp/out" "--semaphore" "run --help tells of --semaphore"

echo "== latch set / down / wait"
expect 0 "$D" latch set lt:a 3
is "$(rc get lt:a)" "3" "set puts the count"
expect 75 "$D" latch set lt:a 5
has "$tmp/err" "still counting (3 left)" "a latch still counting is not set again"
is "$(rc get lt:a)" "3" "and keeps its count"
w=()
for i in 1 2; do
  ( "$D" latch wait lt:a; echo "$? $(now_ms)" > "$tmp/waiter$i" ) & w+=($!); bg+=($!)
done
check "both awaiters subscribed" until_ok awaiters lt:a 2
expect 75 "$D" latch wait -w 300ms lt:a
has "$tmp/err" "not at zero" "wait gives up after --wait"
has "$tmp/err" "3 left" "and says the count"
expect 0 "$D" latch down lt:a
expect 0 "$D" latch down lt:a
is "$(rc get lt:a)" "1" "two count-downs"
sleep 0.3
for i in 1 2; do [ -e "$tmp/waiter$i" ] && bad "awaiter $i returned before zero" || ok; done
t0=$(now_ms)
expect 0 "$D" latch down lt:a
is "$(rc exists lt:a)" "0" "at zero the key is gone"
for p in "${w[@]}"; do wait "$p"; done; bg=()
for i in 1 2; do
  read -r code at < "$tmp/waiter$i"
  is "$code" "0" "awaiter $i exits 0 at zero"
  [ $((at - t0)) -lt $((2000 * SLOW)) ] && ok || bad "awaiter $i woke $((at - t0)) ms after the last count-down"
done
expect 0 "$D" latch wait -w 0 lt:a
expect 0 "$D" latch wait lt:absent
expect 0 "$D" latch down lt:absent
is "$(rc exists lt:absent)" "0" "a count-down at zero creates nothing"
expect 0 "$D" latch set lt:a 1
"$D" latch wait --wait=20s lt:a -q & p=$!; bg+=($p)
check "the awaiter subscribed" until_ok awaiters lt:a 1
"$D" latch down lt:a; wait "$p"; is "$?" "0" "a wait with --wait ends at zero"; bg=()

echo "== latch: bad input"
for n in 0 -1 x 1.5 "" 2147483648; do
  expect 64 "$D" latch set lt:bad "$n"
  has "$tmp/err" "not a whole number" "count '$n' refused with a message"
done
is "$(rc exists lt:bad)" "0" "nothing created by refused sets"
expect 64 "$D" latch set lt:bad
has "$tmp/err" "missing the count" "set needs N"
expect 64 "$D" latch wait
has "$tmp/err" "missing latch NAME" "wait needs NAME"
expect 64 "$D" latch down a b
expect 64 "$D" latch wait -w soon lt:a
expect 64 "$D" latch frob lt:a
expect 64 "$D" latch
rc hset lt:hash f v >/dev/null
expect 65 "$D" latch down lt:hash
expect 65 "$D" latch set lt:hash 2
is "$(rc hget lt:hash f)" "v" "a key that is not a latch is left alone"
expect 0 "$D" latch set --help
has "$tmp/out" "usage: dlock latch set NAME N" "latch set --help"
expect 0 "$D" latch wait --help
has "$tmp/out" "--wait" "latch wait --help"
expect 0 "$D" latch down -h
has "$tmp/out" "usage: dlock latch down NAME" "latch down -h"
expect 0 "$D" help latch wait
has "$tmp/out" "usage: dlock latch wait" "help latch wait"
expect 0 "$D" latch --help
has "$tmp/out" "latch set NAME N | down NAME | wait" "latch --help"

echo "== status and list: semaphores and latches"
"$D" run --semaphore st:sem --permits 3 -- sleep $((4 * SLOW)) & bg+=($!)
"$D" run --semaphore st:sem --permits 3 -- sleep $((4 * SLOW)) & bg+=($!)
check "two permits taken" until_permits st:sem 2
expect 0 "$D" latch set st:latch 2
"$D" latch wait st:latch & lw=$!; bg+=($lw)
check "the awaiter subscribed" until_ok awaiters st:latch 1
expect 0 "$D" status st:sem
has "$tmp/out" "permit-expirable semaphore" "status names the kind"
has "$tmp/out" "1 available, 2 held (3 in all)" "status gives the permits"
is "$(grep -cE '^(holders:| )+ *[0-9a-f]{32} \([0-9.]+ s left\)' "$tmp/out")" "2" "each holder's permit id with its lease left"
expect 0 "$D" status --json st:sem
is "$(jq -r '.kind' "$tmp/out")" "permit semaphore" "JSON kind"
is "$(jq -r '.count' "$tmp/out")" "1" "JSON count"
is "$(jq -r '.holders | length' "$tmp/out")" "2" "JSON holders"
ids=$(rc zrange "{st:sem}:timeout" 0 -1 | od -An -tx1 | tr -d ' \n')
for id in $(jq -r '.holders[].permit' "$tmp/out"); do
  case "$ids" in *"$id"*) ok ;; *) bad "permit $id is not in Redis's leases ($ids)" ;; esac
done
ttl=$(jq -r '.holders[0].ttl_ms' "$tmp/out")
[ "$ttl" -gt 0 ] && [ "$ttl" -le 30000 ] && ok || bad "a watchdog permit's TTL within the watchdog timeout: $ttl"
expect 0 "$D" status st:latch
has "$tmp/out" "count:   2" "status gives a latch's count"
has "$tmp/out" "1 awaiting the latch" "and its awaiters"
expect 0 "$D" status --json st:latch
is "$(jq -r '.kind' "$tmp/out")" "count" "JSON kind of a latch"
is "$(jq -r '.count' "$tmp/out")" "2" "JSON latch count"
is "$(jq -r '.latch_waiters' "$tmp/out")" "1" "JSON latch awaiters"
"$D" run st:lock -- sleep $((4 * SLOW)) & bg+=($!)
until_ok held st:lock
expect 0 "$D" list 'st:*'
has "$tmp/out" "st:lock" "list shows the lock"
grep -qE '^st:sem +permit semaphore +1 ' "$tmp/out" && ok || bad "list shows the semaphore with its free permits: $(cat "$tmp/out")"
grep -qE '^st:latch +semaphore/latch +2 ' "$tmp/out" && ok || bad "list shows the latch with its count"
is "$(grep -cE '[0-9a-f]{8}\.\. [0-9.]+ s' "$tmp/out")" "1" "list shows the permits held with their leases"
expect 0 "$D" list --json 'st:*'
is "$(jq -r '[.[] | .kind] | sort | join(",")' "$tmp/out")" "count,lock,permit semaphore" "list --json has all three"
rc set st:tok:x 1 >/dev/null
rc set "redisson_lock_token:{st:lock}" 9 >/dev/null
expect 0 "$D" list --json '*st:*'
hasnt "$tmp/out" "redisson_lock_token" "list skips fencing-token counters"
"$D" latch down st:latch; "$D" latch down st:latch
wait "$lw"; is "$?" "0" "the awaiter returned at zero"
expect 0 "$D" status st:latch
has "$tmp/out" "state:   free" "a latch at zero is an absent key"
wait "${bg[@]}"; bg=()
expect 0 "$D" list 'st:none*'
has "$tmp/err" "no locks, semaphores, latches or rate limiters match" "an empty listing says so"

finish
