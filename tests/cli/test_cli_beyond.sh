#!/usr/bin/env bash
# dlock run's hold limit (--max-hold), a revoked lock ending its command at
# once, the fenced writes of dlock fence, and dlock elect / leader (issue 16).
# usage: test_cli_beyond.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

echo "== run --max-hold: a stuck command keeps its lock that long at most"
# Watchdog 1 s and limit 1.5 s, times the slack: renewals in time on a busy
# machine too.
wd=$((1000 * SLOW)); mh=$((1500 * SLOW))
t0=$(now_ms)
"$D" --watchdog ${wd}ms run --max-hold ${mh}ms t:mh -- sh -c 'trap "exit 7" TERM; sleep 30 & wait' \
  >/dev/null 2>"$tmp/mh.err" & p=$!
until_ok held t:mh
sleep_ms $((1100 * SLOW))
check "held past its first renewals" held t:mh
wait "$p"; is "$?" 76 "--max-hold reached: exit 76"
took=$(( $(now_ms) - t0 ))
[ "$took" -le $((mh + 1500 * SLOW)) ] && ok || bad "--max-hold ${mh}ms ended the run after $took ms"
has "$tmp/mh.err" "max-hold" "the loss names --max-hold"
check "the lock is gone when the limit ends" until_ok free t:mh
expect 0 "$D" run --max-hold 10s t:mh2 -- true
check "a run that ends in time releases as usual" free t:mh2
expect 64 "$D" run --max-hold 10s --lease 5s t:mh3 -- true
has "$tmp/err" "--lease" "--max-hold with --lease is refused"
expect 64 "$D" run --max-hold 0 t:mh3 -- true
has "$tmp/err" "above 0" "--max-hold 0 is refused, saying why"
expect 64 "$D" run --max-hold soon t:mh3 -- true
has "$tmp/err" "--max-hold 'soon' is not a duration" "a bad --max-hold is named"

echo "== revocation: unlock --force or a DEL ends the command at once (exit 76)"
for how in force del; do
  "$D" run t:rv -- sh -c 'trap "exit 7" TERM; sleep 30 & wait' >/dev/null 2>"$tmp/rv.err" & p=$!
  until_ok held t:rv
  sleep 0.3   # the hold's first renewal, which has Redis track its key
  t0=$(now_ms)
  if [ "$how" = force ]; then "$D" unlock --force t:rv >/dev/null; else rc del t:rv >/dev/null; fi
  wait "$p"; is "$?" 76 "$how: the run ends with 76"
  took=$(( $(now_ms) - t0 ))
  # The default watchdog (30 s) renews every 10 s: heard at once, not then.
  [ "$took" -le $((1000 * SLOW)) ] && ok || bad "$how: the run ended $took ms after the change"
  has "$tmp/rv.err" "lost" "$how: the loss is said"
done

echo "== fence: writes checked against the key's guard"
export D
expect 0 "$D" run t:fc -- sh -c 'echo "$DLOCK_TOKEN" > "$0/t1"; "$D" fence SET fk first' "$tmp"
has "$tmp/out" "OK" "fence SET prints the reply"
is "$(rc get fk)" "first" "fence SET under dlock run wrote with DLOCK_TOKEN"
t1=$(cat "$tmp/t1")
expect 0 "$D" run t:fc -- sh -c 'echo "$DLOCK_TOKEN" > "$0/t2"; "$D" fence INCRBY fn 5; "$D" fence SET fk second' "$tmp"
has "$tmp/out" "5" "fence INCRBY prints the new value"
t2=$(cat "$tmp/t2")
[ "$t2" -gt "$t1" ] && ok || bad "the second run's token $t2 is not above $t1"
expect 79 "$D" fence --token "$t1" SET fk stale
has "$tmp/err" "refused" "a stale token is refused, and says so"
has "$tmp/err" "$t2" "the refusal names the newer token"
is "$(rc get fk)" "second" "the stale write changed nothing"
expect 0 "$D" fence --guard fk
is "$(cat "$tmp/out")" "$t2" "fence --guard prints the highest token seen"
expect 0 "$D" fence --token "$t2" DEL fk
is "$(rc exists fk)" "0" "fence DEL deleted the key"
expect 79 "$D" fence --token "$t1" SET fk back
is "$(rc exists fk)" "0" "a deletion is remembered: the stale writer does not bring the key back"
expect 0 "$D" fence -t "$t2" SET fk -dash-value
is "$(rc get fk)" "-dash-value" "arguments after COMMAND are the command's, dashes and all"
expect 64 env -u DLOCK_TOKEN "$D" fence SET fk v
has "$tmp/err" "no token" "fence without a token says how to give one"
expect 64 env DLOCK_TOKEN= "$D" fence SET fk v
has "$tmp/err" "empty" "an empty DLOCK_TOKEN (several names) is named"
expect 64 "$D" fence --token 0 SET fk v
expect 64 "$D" fence --token abc SET fk v
expect 64 "$D" fence --token "$t2" GET fk
has "$tmp/err" "not a write" "a command fence does not fence is refused"
expect 64 "$D" fence --token "$t2" SET
expect 64 "$D" run t:fa t:fb -- sh -c '"$D" fence SET fk v'
has "$tmp/err" "empty" "a run over several names has no token for fence"
rc set plain v >/dev/null
expect 65 "$D" fence --token "$t2" HSET plain f v
is "$(rc get plain)" "v" "a wrong type changes nothing"

echo "== elect / leader: one leader, terms that grow, observers told, loss ends CMD"
expect 0 "$D" leader t:el
has "$tmp/out" "no leader" "leader with nobody elected"
"$D" leader --watch t:el > "$tmp/watch.out" 2>&1 & wp=$!
until_ok grep -q "no leader" "$tmp/watch.out"
"$D" elect t:el -- sh -c 'echo "$DLOCK_TERM" > "$0/term1"; trap "exit 7" TERM; sleep 30 & wait' "$tmp" \
  >/dev/null 2>"$tmp/el.err" & p=$!
until_ok held t:el
until_ok test -s "$tmp/term1"
t1=$(cat "$tmp/term1")
expect 0 "$D" leader t:el
has "$tmp/out" "term $t1" "leader names the term"
has "$tmp/out" "$(hostname)" "leader names the host"
expect 75 "$D" elect -n -E 75 t:el -- true
"$D" unlock --force t:el >/dev/null
wait "$p"; is "$?" 76 "elect: leadership lost (forced open) ends CMD with 76"
# The second leader leads until the watcher has shown it (the watch reads
# who leads when told of a change: a term that ends first is not shown).
expect 0 "$D" elect t:el -- sh -c 'echo "$DLOCK_TERM" > "$0/term2"
  for _ in $(seq 1 '"$((100 * SLOW))"'); do
    grep -q "term $DLOCK_TERM" "$0/watch.out" && break; sleep 0.05
  done' "$tmp"
t2=$(cat "$tmp/term2")
[ "$t2" -gt "$t1" ] && ok || bad "the second term $t2 is not above $t1"
check "a finished elect resigned" free t:el
until_ok sh -c "[ \$(grep -c 'no leader' '$tmp/watch.out') -ge 2 ]"
kill "$wp" 2>/dev/null; wait "$wp" 2>/dev/null
has "$tmp/watch.out" "term $t1" "leader --watch saw the first leader"
has "$tmp/watch.out" "term $t2" "leader --watch saw the second leader"
[ "$(grep -c 'no leader' "$tmp/watch.out")" -ge 2 ] && ok || bad "leader --watch saw the ends: $(cat "$tmp/watch.out")"
t0=$(now_ms)
expect 76 "$D" --watchdog ${wd}ms elect --max-hold ${mh}ms t:elmh -- sleep 30
took=$(( $(now_ms) - t0 ))
[ "$took" -le $((mh + 2000 * SLOW)) ] && ok || bad "elect --max-hold ${mh}ms ended after $took ms"
expect 64 "$D" elect --fair t:el -- true
expect 64 "$D" elect --lease 5s t:el -- true
expect 0 "$D" elect --lock-delay 1s t:el -- true
expect 0 "$D" elect --lock-delay 0 t:el -- true
expect 64 "$D" elect --semaphore t:el --permits 2 -- true
has "$tmp/err" "--semaphore" "elect refuses --semaphore, naming it"
expect 64 "$D" leader
expect 64 "$D" leader a b

echo "== run --lock-delay: a lock that ends unreleased stays closed for the delay"
expect 0 "$D" run --lock-delay 2s t:ld -- true
is "$(rc exists 'dlock_lock_delay:{t:ld}')" 0 "a proper release leaves no marker"
expect 0 "$D" run -n t:ld -- true   # released normally: free at once
wd=$((1000 * SLOW)); dl=$((3000 * SLOW))
# killed_holder_delays "HOLDER OPTS" "NEXT OPTS" NAME WHAT: a holder killed
# with SIGKILL (no release; its guard ends the tree) leaves NAME closed to
# the next taker for the delay: a try is refused naming the lock-delay, a
# wait gets it no sooner than the delay after the kill. With OPTS
# "--semaphore NAME --permits 1" NAME is the semaphore (no lock name): its
# permit is held while the leases key has it, lost once its lease is past.
permit_taken() { [ "$(rc zcard "{$1}:timeout")" -ge 1 ]; }
permit_lapsed() { [ -z "$(rc zrangebyscore "{$1}:timeout" "$(now_ms)" +inf)" ]; }
killed_holder_delays() {
  lk=$3; up=held; down=free
  case $1 in --semaphore*) lk=; up=permit_taken; down=permit_lapsed;; esac
  "$D" --watchdog ${wd}ms run $1 --lock-delay ${dl}ms $lk -- sleep 30 >/dev/null 2>&1 & h=$!
  until_ok $up "$3"
  t0=$(now_ms)
  kill -9 "$h"; wait "$h" 2>/dev/null
  check "$4: the lock expires with its lease" until_ok $down "$3"
  expect 75 "$D" run -n $2 --lock-delay ${dl}ms $lk -- true
  has "$tmp/err" "lock-delay" "$4: the refusal of the free lock names the lock-delay"
  expect 0 "$D" run -w $((20 * SLOW))s $2 --lock-delay ${dl}ms $lk -- true
  took=$(( $(now_ms) - t0 ))
  [ "$took" -ge "$dl" ] && ok || bad "$4: the next holder got $3 $took ms after the kill, delay $dl ms"
}
killed_holder_delays "" "" t:ld2 "lock"
expect 64 "$D" run --lock-delay -1 t:x -- true
expect 64 "$D" run --lock-delay 2d t:x -- true
has "$tmp/err" "out of range: 0 to 1d" "a lock-delay above a day is refused"
# The fair lock: the same, through its queue.
killed_holder_delays --fair --fair t:ldf "fair lock"
is "$(rc exists 'dlock_lock_delay:{t:ldf}')" 0 "a proper fair release leaves no marker"
# The read-write lock: a killed writer delays readers (and writers); a killed
# reader delays writers, not readers.
killed_holder_delays --write --read t:ldw "writer, then a reader"
is "$(rc exists 'dlock_lock_delay:{t:ldw}')" 0 "no writer's marker left"
"$D" --watchdog ${wd}ms run --read --lock-delay ${dl}ms t:ldr -- sleep 30 >/dev/null 2>&1 & h=$!
until_ok held t:ldr
kill -9 "$h"; wait "$h" 2>/dev/null
check "reader: the lock expires with its lease" until_ok free t:ldr
expect 0 "$D" run -n --read --lock-delay ${dl}ms t:ldr -- true   # readers: not delayed
is "$(rc zcard 'dlock_read_delay:{t:ldr}')" 1 "the killed reader's entry is left, the proper one's gone"
killed_holder_delays --read --write t:ldr2 "reader, then a writer"
# The permit-expirable semaphore: a killed holder's permit is held back for
# the delay; a run that ends releases its permit and leaves no entry.
killed_holder_delays "--semaphore t:lds --permits 1" "--semaphore t:lds --permits 1" t:lds "semaphore permit"
is "$(rc zcard 'dlock_permit_delay:{t:lds}')" 0 "a released permit leaves no entry"

finish
