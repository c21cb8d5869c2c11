#!/usr/bin/env bash
# dlock run and the command's whole process tree: nothing the command started
# runs beside the next holder. A lost lock ends the whole tree (SIGKILL after
# --kill-after, whether or not the command itself exited) before dlock exits
# 76; SIGTERM/SIGINT/SIGHUP to dlock go to the whole tree and the lock stays
# held until the last process is gone; leftovers of a command that exited
# keep the lock (flock's way) or are ended (--kill-orphans); the terminal's
# Ctrl-C reaching leftovers outside the group; kill -9 of the guard; the
# guard's name; --on-lost ignore's exit status.
# Processes are found by a word of their own in their arguments (procs_with).
# Where the lock is not lost, a monitor samples "the lock is free" and then
# "one of them lives": both true means they ran beside a free lock. (A lost
# lock is free to others at once: the grace is the price; what matters there
# is that nothing is left when dlock exits 76.) DLOCK_TREE_RUNS repeats the
# tree cases (default 1).
# usage: test_cli_tree.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"
RUNS=${DLOCK_TREE_RUNS:-1}
n=0
T=$tmp
export T

# A word no other process has: a sleep's duration, $1 seconds and a tail of
# digits unique to this script and case.
word() { printf '%d.%d%03d%d' "$1" "$$" "$n" "$2"; }
any_with() { [ -n "$(procs_with "$1")" ]; }
# The next holder's command: ALIVE for each process that has the word $W
# among its arguments (the word comes in the environment, not as an argument).
S=$(printf '\001')
cat >"$tmp/alive.sh" <<EOF
for f in /proc/[0-9]*/cmdline; do
  case "$S\$(tr '\\0' '\\001' <"\$f" 2>/dev/null)" in
    *"$S\$W$S"*) echo "ALIVE \${f%/cmdline}" ;;
  esac
done
true
EOF
# next_alone NAME WORD WHAT: the next holder of NAME finds no process of WORD.
next_alone() {
  W=$2 "$D" run --wait $((10 * SLOW))s "$1" -- sh "$tmp/alive.sh" >"$tmp/next.out" 2>"$tmp/err"
  is "$?" 0 "$3: the next holder got the lock"
  hasnt "$tmp/next.out" "ALIVE" "$3: the next holder runs alone"
}
# monitor NAME WORD PID &: until PID is gone, records each time NAME was seen
# free and then a process of WORD alive (it was alive while the lock was free).
monitor() {
  while alive "$3"; do
    if free "$1" && any_with "$2"; then echo "$1 free while $2 ran" >>"$tmp/beside"; fi
    sleep 0.02
  done
}
: >"$tmp/beside"
start_monitor() { monitor "$@" & mon=$!; }
stop_monitor() { wait "$mon" 2>/dev/null; }
elapsed_since() { echo $(( $(now_ms) - $1 )); }
no_leftover() { is "$(procs_with "$1")" "" "$2: nothing of the command's left when dlock exits"; }

for _ in $(seq 1 "$RUNS"); do
n=$((n + 1))
echo "== round $n of $RUNS"

# --- A lock forced open: the command's child is ended too.
w=$(word 340 1)
"$D" run t:lost -- sh -c "sleep $w && echo step2" >"$tmp/a.out" 2>"$tmp/a.err" & p=$!
check "A: the command's child started" until_ok any_with "$w"
"$D" unlock --force t:lost >/dev/null
wait "$p"; is "$?" 76 "A: lost: exit 76"
no_leftover "$w" "A"
hasnt "$tmp/a.out" "step2" "A: the command did not go on"
next_alone t:lost "$w" "A"

# --- The command exits at SIGTERM, its child ignores it: SIGKILL after
# --kill-after, though the direct child has exited; 76 only then.
w=$(word 341 2)
"$D" run --kill-after 1s t:lost2 -- sh -c \
  "trap 'exit 7' TERM; sh -c \"trap '' TERM; exec sleep $w\" & wait" >/dev/null 2>"$tmp/b.err" & p=$!
check "B: the command's child started" until_ok any_with "$w"
t0=$(now_ms)
"$D" unlock --force t:lost2 >/dev/null
wait "$p"; is "$?" 76 "B: lost, the child killed after the grace: exit 76"
took=$(elapsed_since "$t0")
[ "$took" -ge 1000 ] && ok || bad "B: exit after $took ms, before the 1 s grace"
no_leftover "$w" "B"
has "$tmp/b.err" "SIGKILL" "B: the SIGKILL is reported"
next_alone t:lost2 "$w" "B"

# --- --max-hold: no orphan left, run after run.
w=$(word 30 3)
for k in 1 2; do
  "$D" run --max-hold 1500ms t:mh -- sh -c "trap 'exit 7' TERM; sleep $w & wait" >/dev/null 2>&1 & p=$!
  wait "$p"; is "$?" 76 "C$k: --max-hold: exit 76"
  no_leftover "$w" "C$k"
done

# --- SIGTERM, SIGINT, SIGHUP to dlock: passed on to the whole tree (the
# shell's foreground sleep dies of it); the lock stays held while the
# command's trap runs, and is released after.
for sig in TERM INT HUP; do
  w=$(word 360 4)
  rm -f "$tmp/termed" "$tmp/go"
  "$D" run --kill-after $((30 * SLOW))s t:sig -- sh -c \
    "trap 'touch \$T/termed; while [ ! -e \$T/go ]; do sleep 0.05; done; exit 3' $sig
     sleep $w" >/dev/null 2>&1 & p=$!
  check "D-$sig: the command's child started" until_ok any_with "$w"
  start_monitor t:sig "$w" "$p"
  kill -"$sig" "$p"
  check "D-$sig: the command's trap runs" until_ok test -e "$tmp/termed"
  check "D-$sig: the lock is held while the command ends" held t:sig
  check "D-$sig: dlock waits for it" alive "$p"
  : >"$tmp/go"
  wait "$p"; is "$?" 3 "D-$sig: dlock exits with the command's status"
  stop_monitor
  no_leftover "$w" "D-$sig"
  check "D-$sig: released after" free t:sig
done

# --- SIGTERM to dlock, a grandchild that ignores it: SIGKILL after the grace,
# the lock held until then.
w=$(word 361 5)
"$D" run --kill-after 1s t:sigk -- sh -c "sh -c \"trap '' TERM; exec sleep $w\" & wait" \
  >/dev/null 2>"$tmp/e.err" & p=$!
check "E: the grandchild started" until_ok any_with "$w"
start_monitor t:sigk "$w" "$p"
t0=$(now_ms)
kill -TERM "$p"
wait "$p"; is "$?" 143 "E: the command died of SIGTERM: 143"
took=$(elapsed_since "$t0")
stop_monitor
[ "$took" -ge 1000 ] && ok || bad "E: exit after $took ms, before the 1 s grace"
no_leftover "$w" "E"
check "E: released after" free t:sigk

# --- The command exits and leaves processes behind (a background job, a
# double-forked setsid one): the lock stays held until they end.
w=$(word 2 6)
t0=$(now_ms)
"$D" run -v t:orph -- sh -c "sleep $w & exit 0" >/dev/null 2>"$tmp/f.err" & p=$!
check "F: the leftover started" until_ok any_with "$w"
start_monitor t:orph "$w" "$p"
wait "$p"; is "$?" 0 "F: exit 0, the command's status"
took=$(elapsed_since "$t0")
stop_monitor
[ "$took" -ge 2000 ] && ok || bad "F: dlock exited after $took ms, before its leftover (2 s)"
has "$tmp/f.err" "left 1 process running" "F: -v says what is left"
w=$(word 2 7)
"$D" run t:orph2 -- sh -c "(setsid sleep $w >/dev/null 2>&1 &); exit 0" >/dev/null 2>&1 & p=$!
check "F2: the setsid leftover started" until_ok any_with "$w"
start_monitor t:orph2 "$w" "$p"
wait "$p"; is "$?" 0 "F2: exit 0"
stop_monitor
no_leftover "$w" "F2"

# --- --kill-orphans: the leftovers are ended, SIGKILL for one that ignores
# SIGTERM; the lock is held until they are gone.
w=$(word 300 8)
w2=$(word 301 8)
t0=$(now_ms)
rm -f "$tmp/ready"
# (the command exits once its leftover ignores SIGTERM: it is sent at once)
"$D" run --kill-orphans --kill-after 1s t:ko -- sh -c \
  "sleep $w & sh -c \"trap '' TERM; touch \\\$T/ready; exec sleep $w2\" &
   while [ ! -e \$T/ready ]; do sleep 0.02; done; exit 4" >/dev/null 2>&1 & p=$!
check "G: the leftovers started" until_ok any_with "$w2"
start_monitor t:ko "$w2" "$p"
wait "$p"; is "$?" 4 "G: --kill-orphans: the command's status"
took=$(elapsed_since "$t0")
stop_monitor
no_leftover "$w" "G"
no_leftover "$w2" "G"
[ "$took" -ge 1000 ] && ok || bad "G: exit after $took ms, before the 1 s grace"
next_alone t:ko "$w2" "G"

# --- The terminal's Ctrl-C once the command has exited: passed on to what it
# left running outside dlock's process group (a setsid job, which the
# terminal does not reach), which ends; dlock exits with the command's status.
# (Sent every 0.3 s: one that comes while the command still runs is its own.)
w=$(word 9 11)
rm -f "$tmp/tty.ready"
cat >"$tmp/tty_cmd.sh" <<'EOF2'
setsid sh -c 'trap "exit 0" INT; : >"$T/tty.ready"; while :; do sleep 0.1; done' "$W" &
exit 0
EOF2
{ for _ in $(seq 1 $((100 * SLOW))); do [ -e "$tmp/tty.ready" ] && break; sleep 0.05; done
  for _ in $(seq 1 20); do printf '\003'; sleep 0.3; done; } |
  W=$w timeout $((30 * SLOW)) script -qfec "exec $D run t:tty -- sh $tmp/tty_cmd.sh" /dev/null \
    >"$tmp/tty.out" 2>&1
is "$?" 0 "I: Ctrl-C after the command exited ends its setsid leftover; exit 0"
no_leftover "$w" "I"
for q in $(procs_with "$w"); do kill "$q"; done
check "I: released" free t:tty

# --- kill -9 of the guard alone: dlock ends what the command started (they
# come to it) and exits 70; nothing runs on.
w=$(word 342 9)
"$D" run t:g9 -- sh -c "sleep $w & setsid sleep $w & wait" >/dev/null 2>"$tmp/h.err" & p=$!
check "H: started" until_ok any_with "$w"
g=$(children_of "$p" | head -1)
start_monitor t:g9 "$w" "$p"
kill -9 "$g"
wait "$p"; is "$?" 70 "H: guard killed: exit 70"
stop_monitor
no_leftover "$w" "H"
has "$tmp/h.err" "guard process" "H: the message names the guard"
next_alone t:g9 "$w" "H"
done

echo "== the guard's name; kill -9 of dlock and its guard together"
w=$(word 343 10)
"$D" run t:name -- sh -c "sleep $w & wait" >/dev/null 2>&1 & p=$!
check "started" until_ok any_with "$w"
g=$(children_of "$p" | head -1)
is "$(cat "/proc/$g/comm")" "dlk-guard" "the guard's process name (ps -e, pkill): no 'dlock' in it"
is "$(tr '\0' '\n' <"/proc/$g/cmdline" | head -1)" "dlock-guard" "the guard's command line (ps -f)"
cmd=$(children_of "$g" | head -1)
kill -9 "$p" "$g"
# The command dies by its parent-death signal; its own children escape (the
# case the man page and docs/cli.md name as uncovered): ended here by pid.
check "both killed: the command dies with its guard" until_ok gone "$cmd"
for q in $(procs_with "$w"); do kill "$q"; done

echo "== --on-lost ignore: the exit status says the lock was lost"
"$D" run --on-lost ignore t:ign -- sh -c 'sleep 1; exit 3' >/dev/null 2>"$tmp/i.err" & p=$!
until_ok held t:ign
"$D" unlock --force t:ign >/dev/null
wait "$p"; is "$?" 76 "--on-lost ignore: lost: exit 76"
has "$tmp/i.err" "warning" "--on-lost ignore warns"
"$D" -q run --on-lost ignore t:ign -- sh -c 'sleep 1; exit 3' >/dev/null 2>"$tmp/i.err" & p=$!
until_ok held t:ign
"$D" unlock --force t:ign >/dev/null
wait "$p"; is "$?" 76 "--on-lost ignore -q: exit 76, for a cron job to tell"
is "$(wc -c <"$tmp/i.err")" 0 "-q: nothing on stderr"
"$D" run --on-lost ignore --lost-exit-code command t:ign -- sh -c 'sleep 1; exit 3' >/dev/null 2>&1 & p=$!
until_ok held t:ign
"$D" unlock --force t:ign >/dev/null
wait "$p"; is "$?" 3 "--lost-exit-code command: the command's status"
"$D" run --lost-exit-code 9 t:ign -- sleep 1 >/dev/null 2>&1 & p=$!
until_ok held t:ign
"$D" unlock --force t:ign >/dev/null
wait "$p"; is "$?" 9 "--lost-exit-code 9"
expect 0 "$D" run --on-lost ignore t:ign -- true
expect 64 "$D" run --lost-exit-code 256 t:ign -- true
expect 64 "$D" run --kill-after inf t:ign -- true
expect 64 "$D" run --kill-after soon t:ign -- true

is "$(cat "$tmp/beside")" "" "no process of a command ran while its lock was free"
finish
