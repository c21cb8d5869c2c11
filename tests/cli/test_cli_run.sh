#!/usr/bin/env bash
# dlock run, the life of a hold: kill -9 of dlock takes its command (and what
# that started) with it; the terminal's Ctrl-C and Ctrl-Z through a real pty;
# a lock forced open or lost with Redis gone or while dlock was paused; flock's
# option names; -v while waiting; nested runs re-entering their lock.
# usage: test_cli_run.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

# A holder for the -v test below: waited for in the background while the
# other sections run (its "every 10 s" line needs more than 10 s of waiting).
"$D" run t:v -- sleep 11.5 & vh=$!; bg+=($vh)
until_ok held t:v
"$D" run -v t:v -- true >/dev/null 2>"$tmp/v.err" & vw=$!; bg+=($vw)

echo "== kill -9 of dlock: its command and everything it started go with it"
mkdir -p "$tmp/k9"
# a background child, one that left the process group (setsid), one orphaned
# by a subshell that exited (a double fork)
"$D" --watchdog 1s run --kill-after 1s t:k9 -- sh -c '
  sleep 300 & echo $! > "$0/bg"
  setsid sleep 300 & echo $! > "$0/sid"
  (sleep 300 & echo $! > "$0/orphan")
  echo $$ > "$0/cmd"; wait' "$tmp/k9" >/dev/null 2>&1 &
p=$!
check "command and grandchildren started" until_ok test -s "$tmp/k9/cmd" -a -s "$tmp/k9/bg" -a -s "$tmp/k9/sid" -a -s "$tmp/k9/orphan"
kill -9 "$p"; wait "$p" 2>/dev/null
for f in cmd bg sid orphan; do
  check "kill -9 of dlock: its $f process is gone" until_ok gone "$(cat "$tmp/k9/$f")"
done
# The next run of the name does not start beside any of them (it waits out
# the lease and the dead run's lock-delay, --kill-after + 2 s: 4 s at most).
expect 0 "$D" run --wait 10s t:k9 -- sh -c 'for f in cmd bg sid orphan; do
  kill -0 "$(cat "$0/$f")" 2>/dev/null && echo "ALIVE $f"; done; true' "$tmp/k9"
hasnt "$tmp/out" "ALIVE" "the next holder runs alone"
# (What a command leaves running when it exits: test_cli_tree.sh.)

echo "== the terminal: Ctrl-C and Ctrl-Z through a pty"
# Ctrl-C reaches the command once (the terminal signals its process group,
# which dlock shares); dlock exits with the command's status and releases.
# The command says when its trap is set (a loaded machine can take longer
# than any fixed pause to start it). script's shell execs dlock: with
# SHELL unset (as in CI) that shell is dash, which would otherwise sit
# between script and dlock, die of the ^C itself and make script report 130.
{ n=0; until [ -e "$tmp/cc.ready" ] || [ $n -ge 600 ]; do sleep 0.05; n=$((n + 1)); done; printf '\003'; sleep $((2 * SLOW)); } |
  script -qfec "exec $D run t:cc -- sh -c 'trap \"echo got-INT; exit 42\" INT; : >\"$tmp/cc.ready\"; sleep 30 & wait'" /dev/null >"$tmp/pty.out" 2>&1
is "$?" 42 "Ctrl-C: dlock exits with the command's status"
is "$(grep -c 'got-INT' "$tmp/pty.out")" 1 "Ctrl-C reaches the command exactly once"
check "released after Ctrl-C" free t:cc
# Ctrl-Z stops dlock and the command together (as a job of a job-control
# shell: a terminal does not stop an orphaned process group); fg resumes both
# and the command finishes under its lock.
mkfifo "$tmp/fifo_cz"
script -qfec "bash --norc --noprofile -c 'set -m; $D run t:cz -- sh -c \"for i in 1 2 3 4 5 6; do sleep 0.25; echo tick\\\$i; done\"; echo stopped=\$?; sleep 1; fg; echo rc=\$?'" /dev/null \
  >"$tmp/cz.out" 2>&1 <"$tmp/fifo_cz" & sp=$!
exec 8>"$tmp/fifo_cz"
until_ok held t:cz
sleep 0.3
printf '\032' >&8
until_ok grep -q "stopped=" "$tmp/cz.out"
ticks=$(grep -c "^tick[0-9]" "$tmp/cz.out")
sleep 0.6
is "$(grep -c "^tick[0-9]" "$tmp/cz.out")" "$ticks" "Ctrl-Z: the command stopped too"
has "$tmp/cz.out" "stopped=148" "Ctrl-Z: the shell sees the job stopped (128+SIGTSTP)"
wait "$sp"
exec 8>&-
has "$tmp/cz.out" "rc=0" "after Ctrl-Z and fg: the command finished, exit 0"
is "$(grep -c "^tick[0-9]" "$tmp/cz.out")" 6 "the command ran to its end"
check "released after the stopped run ended" free t:cz

echo "== a lock forced open while the command runs"
# Heard at once (client tracking: test_cli_beyond.sh times it), long before
# the command would end or a renewal would notice; were it not, the release
# would find it gone: exit 76 either way.
"$D" run t:f1 -- sh -c 'sleep 1.5; echo finished' >"$tmp/f1.out" 2>"$tmp/f1.err" & p=$!
until_ok held t:f1
"$D" unlock --force t:f1 >/dev/null
wait "$p"; is "$?" 76 "lost while the command ran: exit 76"
has "$tmp/f1.err" "lost" "the loss is reported"
"$D" run --on-lost ignore t:f2 -- sh -c 'sleep 1.5; exit 3' >/dev/null 2>"$tmp/f2.err" & p=$!
until_ok held t:f2
"$D" unlock --force t:f2 >/dev/null
wait "$p"; is "$?" 76 "--on-lost ignore: exit 76 all the same (--lost-exit-code command: 3)"
has "$tmp/f2.err" "warning" "--on-lost ignore warns of the loss found by the release"

echo "== a hash that is not a lock (65)"
rc hset plainhash a 1 b 2 >/dev/null
expect 65 timeout $((10 * SLOW)) "$D" run plainhash -- true
has "$tmp/err" "not a lock" "run on a plain hash says it is not a lock"
expect 65 timeout $((10 * SLOW)) "$D" run --wait 0 plainhash -- true
has "$tmp/err" "not a lock" "run --wait 0 on a plain hash says it is not a lock"
is "$(rc hgetall plainhash | tr '\n' ' ')" "a 1 b 2 " "the plain hash is left alone"

echo "== flock's option names: -w/--timeout, -n, -E"
"$D" run t:tt -- sleep $((4 * SLOW)) & bg+=($!)
until_ok held t:tt
t0=$(now_ms)
expect 75 "$D" run --timeout 1 t:tt -- echo ran
took=$(( $(now_ms) - t0 ))
[ "$took" -ge 1000 ] && [ "$took" -lt $((3500 * SLOW)) ] && ok || bad "run --timeout 1 gave up after $took ms"
hasnt "$tmp/out" "ran" "run --timeout 1: command not run"
expect 75 "$D" run -w 0.5 t:tt -- true
expect 75 "$D" run -w0.2 t:tt -- true
expect 75 "$D" run --timeout=0.2 t:tt -- true
expect 75 "$D" run -n t:tt -- true
expect 9 "$D" run -n -E 9 t:tt -- true
expect 0 "$D" run -n -E0 t:tt -- echo ran
hasnt "$tmp/out" "ran" "-E 0: a refused run exits 0 without running the command"
expect 0 "$D" --command-timeout 2s status t:tt
expect 64 "$D" --timeout 1 status t:tt
has "$tmp/err" "--command-timeout" "a --timeout outside run points to --command-timeout"
expect 64 "$D" status --timeout 1 t:tt

echo "== nested runs"
expect 0 "$D" run t:nest -- sh -c '
  echo "outer=$DLOCK_OWNER"
  '"$D"' run --wait 2s t:nest -- sh -c "echo inner=\$DLOCK_OWNER count=\$(redis-cli -p '"$REDIS_PORT"' hget t:nest \$DLOCK_OWNER)"'
has "$tmp/out" "count=2" "the inner run re-entered the lock (hold count 2)"
outer=$(sed -n 's/^outer=//p' "$tmp/out"); inner=$(sed -n 's/^inner=\([^ ]*\).*/\1/p' "$tmp/out")
[ -n "$outer" ] && is "$inner" "$outer" "the inner run acts as the outer run's owner"
check "released after the nested runs" free t:nest
# A different name nests as a new owner; the outer name is re-entered from two levels down.
expect 0 "$D" run t:A -- "$D" run t:B -- sh -c 'echo B=$DLOCK_OWNER; '"$D"' run --wait 2s t:A -- sh -c "echo A=\$DLOCK_OWNER"'
has "$tmp/out" "A=" "A inside B inside A: re-entered"
[ "$(sed -n 's/^A=//p' "$tmp/out")" != "$(sed -n 's/^B=//p' "$tmp/out")" ] && ok || bad "B got the owner of A"
# Two runs side by side inside one command, on another name: still exclusive.
expect 0 "$D" run t:S -- sh -c "$D run t:T -- sleep 1.5 & sleep 0.7; $D run -n t:T -- true; echo second=\$?; wait"
has "$tmp/out" "second=75" "siblings inside a run do not share a lock they did not inherit"
for k in t:A t:B t:S t:T; do check "$k released" free "$k"; done

echo "== Redis gone under a holder"
extra_redis R1 || exit 1
"$D" --url "redis://127.0.0.1:$R1_PORT" --watchdog 1s --command-timeout 1s run t:gone -- \
  sh -c 'trap "exit 5" TERM; sleep 30 & wait' >/dev/null 2>"$tmp/gone.err" & p=$!
check "holder on the second server" until_ok sh -c "[ \$(redis-cli -p $R1_PORT exists t:gone) = 1 ]"
stop_extra R1
t0=$(now_ms)
wait "$p"; is "$?" 76 "Redis gone: exit 76"
took=$(( $(now_ms) - t0 ))
has "$tmp/gone.err" "unreachable" "the loss says Redis was unreachable"
# the loss is due within the 1 s lease; then no release is tried against the
# dead server (it used to add 3 retries x 1.5 s)
[ "$took" -le $((1000 + 2500 * SLOW)) ] && ok || bad "exit came $took ms after Redis went away"

echo "== dlock paused past its lease"
"$D" --watchdog 1s run t:pause -- sleep $((5 * SLOW)) >/dev/null 2>"$tmp/pause.err" & p=$!
until_ok held t:pause
sleep 0.2
kill -STOP "$p"; sleep 2.5; kill -CONT "$p"
wait "$p"; is "$?" 76 "paused past the lease: exit 76"
has "$tmp/pause.err" "paused" "the loss blames the pause"
hasnt "$tmp/pause.err" "unreachable" "the loss does not blame Redis"

echo "== -v while waiting"
wait "$vw"; is "$?" 0 "-v waiter got the lock in the end"
has "$tmp/v.err" "waiting for 't:v'" "-v says when the wait starts"
holder=$(grep -o "held by [0-9a-f-]*:[0-9]*" "$tmp/v.err" | head -1)
[ -n "$holder" ] && ok || bad "-v says who holds the lock"
has "$tmp/v.err" "left" "-v says for how long"
has "$tmp/v.err" "still waiting for 't:v'" "-v repeats every 10 s"
has "$tmp/v.err" "acquired 't:v' after" "-v says when it got the lock"
is "$(grep -c "still waiting" "$tmp/v.err")" 1 "one repeat in ~11 s (every 10 s)"
# on a terminal: one line, rewritten
"$D" run t:vt -- sleep $((2 * SLOW)) & bg+=($!)
until_ok held t:vt
script -qfec "exec $D run -v t:vt -- true" /dev/null >"$tmp/vt.out" 2>&1
is "$?" 0 "-v on a terminal"
[ "$(grep -o "waiting for 't:vt'" "$tmp/vt.out" | wc -l)" -ge 2 ] && ok || bad "-v on a terminal: the status line is rewritten"
is "$(grep -c "waiting for 't:vt'" "$tmp/vt.out")" 1 "-v on a terminal: one line, not one per update"
grep -q $'\r' "$tmp/vt.out" && ok || bad "-v on a terminal: updated with carriage returns"


finish
