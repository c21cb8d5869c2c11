#!/usr/bin/env bash
# dlock run over the lock family: fair locks (arrival order), read and write
# locks (readers share, a writer excludes), several names as one multi-lock
# (all or nothing), and what status shows of each.
# usage: test_cli_family.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

qlen() { rc llen "redisson_lock_queue:{$1}"; }
hlen() { rc hlen "$1"; }
until_qlen() { local n=$2; for _ in $(seq 1 $((100 * SLOW))); do [ "$(qlen "$1")" = "$n" ] && return 0; sleep 0.05; done; return 1; }

echo "== --fair: turns in arrival order"
"$D" run --fair f:order -- sleep $((2 * SLOW)) & bg+=($!)
until_ok held f:order
for i in 1 2 3; do
  "$D" run --fair f:order -- sh -c "echo $i >> '$tmp/order'" & bg+=($!)
  check "fair waiter $i queued" until_qlen f:order "$i"
done
wait "${bg[@]}"; bg=()
is "$(tr -d '\n' < "$tmp/order")" "123" "fair runs took their turns in arrival order"
is "$(qlen f:order)" "0" "the queue is empty afterwards"
free f:order && ok || bad "fair lock released"

echo "== --fair: a waiter that gives up leaves the queue; status shows the queue"
"$D" run --fair f:q -- sleep $((3 * SLOW)) & holder=$!; bg+=($holder)
until_ok held f:q
"$D" run --fair f:q -- true & bg+=($!)
check "a waiter queued" until_qlen f:q 1
expect 0 "$D" status f:q
has "$tmp/out" "queue:" "status shows the fair queue"
expect 0 "$D" status --json f:q
is "$(jq -r '.queue | length' "$tmp/out")" "1" "JSON queue"
expect 75 "$D" run --fair -w 300ms f:q -- true
is "$(qlen f:q)" "1" "the waiter that timed out left the queue"
wait "${bg[@]}"; bg=()

echo "== --read / --write"
"$D" run --read r:1 -- sleep $((2 * SLOW)) & bg+=($!)
until_ok held r:1
t0=$(now_ms)
expect 0 "$D" run --read r:1 -- sh -c 'redis-cli -p '"$REDIS_PORT"' hlen r:1'
is "$(cat "$tmp/out")" "3" "two readers at once (mode + two reader fields)"
took=$(( $(now_ms) - t0 ))
[ "$took" -lt $((1500 * SLOW)) ] && ok || bad "a second reader waited ($took ms)"
expect 75 "$D" run --write -n r:1 -- echo ran
hasnt "$tmp/out" "ran" "a writer is refused while readers hold"
has "$tmp/err" "held by" "and told who holds it"
expect 0 "$D" run --write r:1 -- sh -c 'redis-cli -p '"$REDIS_PORT"' hget r:1 mode'
is "$(cat "$tmp/out")" "write" "the writer gets it once the readers are gone"
wait "${bg[@]}"; bg=()
"$D" run --write r:2 -- sleep $((2 * SLOW)) & bg+=($!)
until_ok held r:2
expect 75 "$D" run --read -n r:2 -- true
expect 0 "$D" status r:2
has "$tmp/out" "read-write lock, mode write" "status shows the mode"
has "$tmp/out" "writes" "and the writer's role"
wait "${bg[@]}"; bg=()
# A reader's command asking for the write lock of the same name re-enters as
# the same owner, which can never get it while it reads: refused at once.
t0=$(now_ms)
expect 70 "$D" run --read r:3 -- "$D" run --write r:3 -- true
took=$(( $(now_ms) - t0 ))
[ "$took" -lt $((3000 * SLOW)) ] && ok || bad "read-then-write took $took ms (should be refused at once)"
free r:3 && ok || bad "nothing left held after the refused upgrade"
expect 0 "$D" run --write r:4 -- "$D" run --read r:4 -- sh -c 'redis-cli -p '"$REDIS_PORT"' hget r:4 mode'
is "$(cat "$tmp/out")" "write" "a writer's command may read the same name"

echo "== several names: one multi-lock, all or nothing"
expect 0 "$D" run m:a m:b --fair m:c -- sh -c 'for k in m:a m:b m:c; do redis-cli -p '"$REDIS_PORT"' exists $k; done; printf "%s|" "$DLOCK_NAMES" | tr "\n" ,; echo "tok=$DLOCK_TOKEN"'
is "$(head -3 "$tmp/out" | tr -d '\n')" "111" "every lock held while the command runs"
has "$tmp/out" "m:a,m:b,m:c|" "DLOCK_NAMES lists them"
has "$tmp/out" "tok=" "DLOCK_TOKEN is empty for several names"
for k in m:a m:b m:c; do free $k && ok || bad "$k released"; done
rc hset m:b other:9 1 >/dev/null; rc pexpire m:b $((1500 * SLOW)) >/dev/null
expect 75 "$D" run -n m:a m:b -- echo ran
hasnt "$tmp/out" "ran" "not run when one name is busy"
free m:a && ok || bad "m:a not left held by the refused try"
has "$tmp/err" "'m:b'" "the message names the busy lock"
t0=$(now_ms)
expect 0 "$D" run -w $((5 * SLOW))s m:a m:b -- true
took=$(( $(now_ms) - t0 ))
[ "$took" -ge 500 ] && ok || bad "the multi-lock did not wait for m:b ($took ms)"
expect 64 "$D" run m:a m:a -- true
has "$tmp/err" "m:a" "a name twice is refused"
expect 64 "$D" run --read m:d --write m:d -- true

echo "== --spin: a spin lock's waiter subscribes to nothing"
"$D" run --spin s:one -- sleep $((2 * SLOW)) & bg+=($!)
until_ok held s:one
"$D" run --spin s:one -- sh -c "echo second > '$tmp/spin'" & bg+=($!)
sleep 0.5
is "$(rc pubsub numsub 'redisson_lock__channel:{s:one}' | tail -1)" "0" "no subscriber on the lock's channel"
[ -e "$tmp/spin" ] && bad "the spin waiter ran while the lock was held" || ok
wait "${bg[@]}"; bg=()
is "$(cat "$tmp/spin" 2>/dev/null)" "second" "the spin waiter ran once the lock was free"
free s:one && ok || bad "spin lock released"
rc hset s:one java-uuid:7 1 >/dev/null; rc pexpire s:one 60000 >/dev/null
expect 75 "$D" run --spin -n s:one -- true
has "$tmp/err" "s:one" "a busy spin lock names itself"
rc del s:one >/dev/null
expect 64 "$D" run --spin s:a s:b -- true
has "$tmp/err" "--spin takes one NAME" "--spin with several names is refused"
expect 64 "$D" run --spin -- true
expect 0 "$D" run --stripes 4 --spin s:st 7 -- true

echo "== --rate: at most N starts per DUR"
for i in 1 2 3; do
  expect 0 "$D" run --rate 3/$((4 * SLOW))s -n r:one -- sh -c 'echo "ran $DLOCK_NAME"'
  has "$tmp/out" "ran r:one" "start $i within the rate"
done
expect 75 "$D" run --rate 3/$((4 * SLOW))s -n r:one -- echo ran
hasnt "$tmp/out" "ran" "a fourth start within the window is refused with -n"
has "$tmp/err" "r:one" "the refusal names the limiter"
is "$(rc hget r:one rate)" "3" "Redisson's configuration hash"
t0=$(now_ms)
expect 0 "$D" run --rate 3/$((4 * SLOW))s r:one -- true
took=$(( $(now_ms) - t0 ))
[ "$took" -ge 1000 ] && ok || bad "a waiting start did not wait for the window ($took ms)"
expect 65 "$D" run --rate 5/$((4 * SLOW))s -n r:one -- true
has "$tmp/err" "exists with 3 per" "another rate is refused"
expect 64 "$D" run --rate 5 r:two -- true
expect 64 "$D" run --rate 5/1s r:a r:b -- true
expect 64 "$D" run --rate 5/1s --lease 1s r:a -- true
rc set r:count 5 >/dev/null
expect 65 "$D" run --rate 5/1s r:count -- true
is "$(rc get r:count)" "5" "a count under the name is left alone"
expect 127 "$D" run --rate 5/1s r:three -- /nonexistent/cmd

finish
