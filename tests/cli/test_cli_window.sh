#!/usr/bin/env bash
# A lost hold never runs beside the next one, by default (issue 39):
#   - a command that ignores SIGTERM and started children that ignore it too,
#     its lock deleted, forced open or evicted (volatile-lru): the next plain
#     `dlock run` starts only once the last process of the old tree is gone
#     (0 ms of overlap), and within 1 s of that moment; ROUNDS rounds;
#   - a command that dies on SIGTERM: the next run within 1 s of the DEL;
#   - a normal end: free at once;
#   - while a lost holder's tree is being ended, a plain run of every kind
#     (--fair, --read, --write, --semaphore) is refused, naming the delay.
# usage: test_cli_window.sh PATH/TO/dlock SOURCE_DIR [ROUNDS]
DLOCK=$1
SRC=$2
ROUNDS=${3:-3}
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

KILL_AFTER=1   # s: the old tree's SIGKILL comes this long after SIGTERM

# Evicts every key with a TTL (volatile-lru, maxmemory cut to 1 byte for a
# moment) until the lock $1 is gone, then sets the server back. The lock-delay
# marker has no TTL: a volatile-* policy never takes it.
evict() {
  rc config set maxmemory-policy volatile-lru >/dev/null
  rc config set maxmemory 1 >/dev/null
  for _ in $(seq 1 1000); do
    rc set t:poke x >/dev/null 2>&1   # refused (OOM), evicts
    [ "$(rc exists "$1")" = 0 ] && break
  done
  rc config set maxmemory 0 >/dev/null
  rc config set maxmemory-policy noeviction >/dev/null
}

# One round: the old tree ignores TERM; $1: how the lock is lost ("del",
# "force" or "evict"). Sets overlap_ms (> 0: the next command started beside
# the old tree) and after_ms (from the old tree's end to the next command's
# start).
one_round() {
  local how=$1 name="t:win" dir="$tmp/round"
  rm -rf "$dir"; mkdir -p "$dir"
  "$D" run --kill-after ${KILL_AFTER}s "$name" -- sh -c '
    trap "" TERM
    for i in 1 2 3 4; do (exec sleep 300) & echo $! >> "$0/pids"; done
    echo $$ >> "$0/pids"; wait' "$dir" >/dev/null 2>"$dir/old.err" &
  local old=$!
  bg+=("$old")   # killed at exit (its guard then kills its tree) should the test end early
  until_ok sh -c "[ \$(wc -l < '$dir/pids' 2>/dev/null || echo 0) -ge 5 ]" ||
    { bad "the old tree did not start"; return; }
  # The next run: a plain one, no option. Its command says when it started
  # and whether any process of the old tree was still there.
  "$D" run -w 60s "$name" -- sh -c '
    date +%s%N > "$0/start"
    for p in $(cat "$0/pids"); do
      kill -0 "$p" 2>/dev/null && ! grep -q "^State:.*Z" "/proc/$p/status" 2>/dev/null &&
        echo "ALIVE $p"
    done
    true' "$dir" >"$dir/next.out" 2>"$dir/next.err" &
  local next=$!
  bg+=("$next")
  sleep 0.3
  case $how in
    del) rc del "$name" >/dev/null ;;
    force) "$D" unlock --force "$name" >/dev/null ;;
    evict) evict "$name" ;;
  esac
  # When the old tree is gone, to 5 ms.
  local gone_at=""
  for _ in $(seq 1 $((4000 * SLOW))); do
    local any=0
    for p in $(cat "$dir/pids"); do alive "$p" && any=1 && break; done
    if [ $any = 0 ]; then gone_at=$(now_ms); break; fi
    sleep 0.005
  done
  wait "$old"; local orc=$?
  wait "$next"; local nrc=$?
  is "$orc" 76 "the old run learnt of its loss ($how)"
  is "$nrc" 0 "the next run ran ($how)"
  [ -n "$gone_at" ] || { bad "the old tree never ended ($how)"; return; }
  local start_ms=$(( $(cat "$dir/start" 2>/dev/null || echo 0) / 1000000 ))
  # The next command itself looked at every old process as it started (a
  # zombie, killed and not yet reaped, runs no more): one alive is an overlap,
  # of as long as the poll above (a few ms apart) still saw it.
  overlap_ms=0
  if grep -q ALIVE "$dir/next.out"; then
    overlap_ms=$((gone_at - start_ms)); [ $overlap_ms -le 0 ] && overlap_ms=1
  fi
  after_ms=$((start_ms - gone_at))
}

echo "== a TERM-ignoring tree, its lock lost: the next run waits for the whole tree ($ROUNDS rounds)"
total_overlap=0 overlapping=0 worst_after=-100000 late=0
for r in $(seq 1 "$ROUNDS"); do
  case $((r % 3)) in 1) how=del ;; 2) how=force ;; *) how=evict ;; esac
  one_round $how
  total_overlap=$((total_overlap + overlap_ms))
  [ $overlap_ms -gt 0 ] && overlapping=$((overlapping + 1))
  [ $after_ms -gt $worst_after ] && worst_after=$after_ms
  [ $after_ms -gt $((1000 * SLOW)) ] && late=$((late + 1))
done
echo "    $ROUNDS rounds: $overlapping overlapping ($total_overlap ms in all); the next run" \
     "started at most $worst_after ms after the old tree was gone"
is "$overlapping" 0 "no next run started beside the old tree"
is "$late" 0 "every next run started within 1 s of the old tree's end"

echo "== a command that dies on SIGTERM: the next run within 1 s of the DEL"
"$D" run t:term -- sleep 300 >/dev/null 2>&1 & old=$!
until_ok held t:term
"$D" run -w 30s t:term -- sh -c 'date +%s%N' >"$tmp/term.out" 2>&1 & next=$!
sleep 0.3
t0=$(now_ms)
rc del t:term >/dev/null
wait "$old"; is "$?" 76 "the old run learnt of its loss"
wait "$next"; is "$?" 0 "the next run ran"
took=$(( $(head -1 "$tmp/term.out") / 1000000 - t0 ))
echo "    started $took ms after the DEL"
[ "$took" -le $((1000 * SLOW)) ] && ok || bad "the next run started $took ms after the DEL"

echo "== a normal end: free at once"
expect 0 "$D" run t:normal -- true
expect 0 "$D" run -n t:normal -- true
is "$(rc exists 'dlock_lock_delay:{t:normal}')" 0 "no delay left behind"

echo "== while a lost holder's tree is ended, a plain run of each kind is refused"
for kind in "" --fair --read --write; do
  "$D" run --kill-after 5s $kind t:k -- sh -c 'trap "" TERM; sleep 300' >/dev/null 2>&1 & old=$!
  until_ok held t:k
  sleep 0.2
  rc del t:k >/dev/null
  w=$kind; [ "$kind" = --read ] && w=--write   # a lost reader delays writers only
  expect 75 "$D" run -n $w t:k -- true
  has "$tmp/err" "lock-delay" "run -n ${w:-(lock)} after a lost ${kind:-lock} holder: says why"
  wait "$old"; is "$?" 76 "the lost ${kind:-lock} holder exits 76"
  expect 0 "$D" run -n $w t:k -- true   # its tree gone: the delay is cleared
done
"$D" run --kill-after 5s --semaphore t:ks --permits 1 -- sh -c 'trap "" TERM; sleep 300' >/dev/null 2>&1 & old=$!
until_ok sh -c "[ \$(rc zcard '{t:ks}:timeout') = 1 ]"
id=$("$D" status --json t:ks | jq -r '.holders[0].permit')
expect 0 "$D" unlock --force --permit "$id" t:ks
expect 75 "$D" run -n --semaphore t:ks --permits 1 -- true
has "$tmp/err" "lock-delay" "run -n --semaphore after a lost permit: says why"
wait "$old"; is "$?" 76 "the lost permit's holder exits 76"
expect 0 "$D" run -n --semaphore t:ks --permits 1 -- true

finish
