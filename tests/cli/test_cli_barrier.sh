#!/usr/bin/env bash
# dlock barrier NAME N -- CMD: the double barrier from the shell (issue 36.4).
# usage: test_cli_barrier.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

members() { rc zcard "dlock_barrier:{$1}:members"; }
has_members() { [ "$(members "$1")" = "$2" ]; }

echo "== N parties: CMD runs on each only once all N have entered"
for i in 1 2; do
  "$D" barrier t:b3 3 -- sh -c "echo \$DLOCK_BARRIER_ROUND \$DLOCK_NAME > $tmp/b$i" \
    >/dev/null 2>"$tmp/b$i.err" & eval "p$i=\$!"
done
check "two parties in" until_ok has_members t:b3 2
sleep_ms 500
check "no CMD before the third" test ! -e "$tmp/b1" -a ! -e "$tmp/b2"
t0=$(now_ms)
expect 0 "$D" barrier t:b3 3 -- sh -c "echo \$DLOCK_BARRIER_ROUND \$DLOCK_NAME > $tmp/b3"
wait "$p1"; is "$?" 0 "party 1 exits 0"
wait "$p2"; is "$?" 0 "party 2 exits 0"
took=$(( $(now_ms) - t0 ))
[ "$took" -le $((2000 * SLOW)) ] && ok || bad "the parties ended $took ms after the third came"
r=$(cat "$tmp/b3")
case "$r" in [1-9]*" t:b3") ok ;; *) bad "DLOCK_BARRIER_ROUND DLOCK_NAME: got '$r'" ;; esac
is "$(cat "$tmp/b1")" "$r" "party 1 saw the same round"
is "$(cat "$tmp/b2")" "$r" "party 2 saw the same round"
is "$(rc exists 'dlock_barrier:{t:b3}')" 0 "all left: the barrier's keys are gone"

echo "== leave: a party whose CMD ends first waits for the others"
"$D" barrier t:bl 2 -- true >/dev/null 2>&1 & p1=$!
t0=$(now_ms)
expect 0 "$D" barrier t:bl 2 -- sleep 1
wait "$p1"; is "$?" 0 "the quick party exits 0"
took=$(( $(now_ms) - t0 ))
[ "$took" -ge 950 ] && ok || bad "the quick party left after $took ms, before the slow CMD ended"

echo "== exit codes"
expect 3 "$D" barrier t:b1 1 -- sh -c 'exit 3'
expect 127 "$D" barrier t:b1 1 -- /nonexistent/cmd
is "$(rc exists 'dlock_barrier:{t:b1}')" 0 "a failed CMD still leaves"
t0=$(now_ms)
expect 75 "$D" barrier -w 300ms t:bw 2 -- touch "$tmp/never"
took=$(( $(now_ms) - t0 ))
[ "$took" -ge 290 ] && [ "$took" -le $((300 + 1500 * SLOW)) ] && ok || bad "-w 300ms took $took ms"
check "CMD not run when the others did not come" test ! -e "$tmp/never"
is "$(rc exists 'dlock_barrier:{t:bw}')" 0 "the timed-out party withdrew"
expect 64 "$D" barrier t:bu 0 -- true
has "$tmp/err" "number of parties '0'" "N 0 is named"
expect 64 "$D" barrier t:bu 2
has "$tmp/err" "missing -- CMD" "no CMD is named"
expect 64 "$D" barrier t:bu -- true
"$D" barrier t:bn 2 -- true >/dev/null 2>&1 & p1=$!
check "one party in" until_ok has_members t:bn 1
expect 64 "$D" barrier -w 100ms t:bn 3 -- true
has "$tmp/err" "round of 2 parties" "another N is refused, saying the round's"
expect 0 "$D" barrier t:bn 2 -- true
wait "$p1"
rc set t:bs x >/dev/null
expect 0 "$D" barrier t:bs 1 -- true   # a plain key NAME is not the barrier's
rc set 'dlock_barrier:{t:bt}' x >/dev/null
expect 65 "$D" barrier t:bt 1 -- true
is "$(rc get 'dlock_barrier:{t:bt}')" x "another type's key is left as it is"

echo "== signals: a waiting entrant withdraws; CMD gets them while it runs"
for sig in INT TERM; do
  "$D" barrier t:bs$sig 2 -- touch "$tmp/sig$sig" >/dev/null 2>"$tmp/sig.err" & p1=$!
  check "an entrant waits ($sig)" until_ok has_members t:bs$sig 1
  t0=$(now_ms)
  kill -$sig "$p1"; wait "$p1"; code=$?
  [ "$sig" = INT ] && want=130 || want=143
  is "$code" "$want" "SIG$sig while entering: exit 128 + the signal"
  took=$(( $(now_ms) - t0 ))
  [ "$took" -le $((1000 * SLOW)) ] && ok || bad "SIG$sig took $took ms to end the enter"
  is "$(members t:bs$sig)" 0 "SIG$sig: the entrant withdrew (nothing left for the others)"
  check "CMD not run after SIG$sig" test ! -e "$tmp/sig$sig"
done
"$D" barrier t:bsc 1 -- sh -c "trap 'echo got > $tmp/trapped; exit 9' TERM; echo up > $tmp/up; while :; do sleep 0.05; done" \
  >/dev/null 2>&1 & p1=$!
check "CMD started" until_ok test -e "$tmp/up"
kill -TERM "$p1"; wait "$p1"
is "$?" 9 "SIGTERM went on to CMD, whose status is the exit"
is "$(cat "$tmp/trapped" 2>/dev/null)" got "CMD trapped the SIGTERM"
is "$(rc exists 'dlock_barrier:{t:bsc}')" 0 "left after CMD ended"

echo "== a party killed mid-way is dropped after its lease"
wd=$((800 * SLOW))
"$D" --watchdog ${wd}ms barrier t:bk 2 -- true >/dev/null 2>&1 & k=$!
check "one party in" until_ok has_members t:bk 1
sleep_ms $((2 * wd))
is "$(members t:bk)" 1 "renewed while it lives"
kill -9 "$k"; wait "$k" 2>/dev/null
check "dropped after its lease" until_ok free 'dlock_barrier:{t:bk}'
expect 75 "$D" barrier -w 200ms t:bk 2 -- true   # the dead party opens nothing
# Killed while CMD runs: the other's leave waits for its lease only.
"$D" --watchdog ${wd}ms barrier t:bk2 2 -- sleep 30 >/dev/null 2>&1 & k=$!
t0=$(now_ms)
"$D" barrier t:bk2 2 -- true >/dev/null 2>"$tmp/bk2.err" & e=$!
sleep_ms 300
dl=$(children_of "$k" | head -1)
kill -9 "$k"; [ -n "$dl" ] && kill "$dl" 2>/dev/null
wait "$e"; is "$?" 0 "the survivor leaves once the dead party's lease ends"
took=$(( $(now_ms) - t0 ))
[ "$took" -le $((wd + 3000 * SLOW)) ] && ok || bad "the survivor waited $took ms"

finish
