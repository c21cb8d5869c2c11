#!/usr/bin/env bash
# The dlock command, run for real against a throwaway redis-server: exit codes,
# argument errors, signal forwarding, release after the child dies, on-lost
# behaviour, list with hundreds of locks, JSON parsed with jq.
# usage: test_cli.sh PATH/TO/dlock SOURCE_DIR  (the other test_cli_*.sh the same)
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

echo "== usage errors (64)"
expect 64 "$D"
expect 64 "$D" bogus
expect 64 "$D" --bogus status x
expect 64 "$D" run
expect 64 "$D" run name
expect 64 "$D" run name --
expect 64 "$D" run name name -- true   # one name twice (several names are a multi-lock)
expect 64 "$D" run -- true
expect 64 "$D" run --wait abc name -- true
expect 64 "$D" run --wait -1 name -- true
expect 64 "$D" run --lease 0 name -- true
expect 64 "$D" run --lease 5x name -- true
expect 64 "$D" run --conflict-exit-code 300 name -- true
expect 64 "$D" run --on-lost maybe name -- true
expect 64 "$D" run --bogus name -- true
expect 64 "$D" status
expect 64 "$D" status a b
expect 64 "$D" unlock name
has "$tmp/err" "--force" "unlock without --force explains"
expect 64 "$D" watch --interval 1ms
expect 64 "$D" --command-timeout 0 status x
expect 64 "$D" --watchdog nope status x
expect 64 "$D" --url http://x status x
has "$tmp/err" "scheme" "bad URL names its bad part"
expect 64 "$D" --url "redis://u:Sekr1t@h:99999" status x
hasnt "$tmp/err" "Sekr1t" "no password in a URL error"
expect 64 "$D" status ""
expect 64 "$D" status "$(head -c 5000 /dev/zero | tr '\0' n)"
# A table of hostile arguments: each must be refused with 64 and a message.
long_name=$(head -c 100000 /dev/zero | tr '\0' n)   # argv strings stop at 128 KiB on Linux
while IFS= read -r args; do
  eval "set -- $args"
  expect 64 "$D" "$@"
  [ -s "$tmp/err" ] && ok || bad "no message for: $args"
done <<'ARGS'
status "$long_name"
run "$long_name" -- true
--url "redis://h$(printf '\r\n')FLUSHALL" status x
--url "javascript:alert(1)" status x
--url "redis://[zz]:1" status x
--url "redis://h:0" status x
--url "unix://relative.sock" status x
--url "redis://u:p%zz@h" status x
--url "" status x
run --wait 1e30 x -- true
run --wait 400d x -- true
run --wait 10000h x -- true
run --wait nan x -- true
run --wait " 5" x -- true
run --lease -5s x -- true
run --conflict-exit-code -1 x -- true
run --conflict-exit-code 3.5 x -- true
--watchdog 10ms status x
--watchdog 0 status x
--command-timeout 2000000h status x
watch --interval -1
watch --interval 10ms
list a b
unlock --force
run --name
run -w
run -E
run -E 256 x -- true
run -- x
run -- x y -- true
run --name a a -- true
run --name a --name a -- true
run --read -- true
run x --write -- true
run --fair --read x -- true
run -w 1m1h x -- true
status --name
status --name a b
unlock --force --name
--password-file
--command-timeout
help a b
watch a b
ARGS
# Non-UTF-8 bytes in a name are just bytes; the JSON stays valid.
expect 0 "$D" status "$(printf 'bin\xff\xfe')" --json
jq -e '.name | length > 0' "$tmp/out" >/dev/null && ok || bad "non-UTF-8 name: invalid JSON"
expect 0 "$D" --help
has "$tmp/out" "Exit codes" "--help documents exit codes"
has "$tmp/out" "76" "--help mentions 76"
expect 0 "$D" --version
has "$tmp/out" "dlock 0.2.0" "--version"

echo "== Redis unreachable (69)"
dead_port=$(( REDIS_PORT + 1 )); port_in_use $dead_port && dead_port=$(( REDIS_PORT + 2 ))
expect 69 "$D" --url "redis://ops:Sekr1t@127.0.0.1:$dead_port" status x
has "$tmp/err" "127.0.0.1:$dead_port" "unreachable names the address"
hasnt "$tmp/err" "Sekr1t" "unreachable hides the password"
expect 69 "$D" --url "redis://127.0.0.1:$dead_port" run x -- true
expect 69 "$D" --url "redis://127.0.0.1:$dead_port" list

echo "== run: the child's status, environment, and release"
expect 0 "$D" run t:env -- sh -c 'echo "name=$DLOCK_NAME token=$DLOCK_TOKEN"'
has "$tmp/out" "name=t:env token=" "child environment"
tok1=$(sed -n 's/.*token=//p' "$tmp/out")
expect 0 "$D" run t:env -- sh -c 'echo "$DLOCK_TOKEN"'
tok2=$(cat "$tmp/out")
[ -n "$tok1" ] && [ "$tok2" -gt "$tok1" ] && ok || bad "fencing token grows ($tok1 then $tok2)"
is "$(rc get 'redisson_lock_token:{t:env}')" "$tok2" "token stored where Redisson keeps it"
free t:env && ok || bad "lock released after the child"
expect 3 "$D" run t:exit -- sh -c 'exit 3'
expect 137 "$D" run t:kill -- sh -c 'kill -9 $$'
expect 143 "$D" run t:term -- sh -c 'kill -TERM $$'
free t:kill && ok || bad "released after the child was killed"
expect 127 "$D" run t:nf -- /no/such/command
free t:nf && ok || bad "released when the command cannot run"
expect 0 "$D" -q run t:q -- true

echo "== not acquired (75), waiting, --conflict-exit-code"
"$D" run t:busy -- sleep $((3 * SLOW)) & bg+=($!)
until_ok held t:busy
expect 75 "$D" run --wait 0 t:busy -- echo ran
has "$tmp/err" "held by" "conflict line says who holds it"
has "$tmp/err" "left" "conflict line says for how long"
hasnt "$tmp/out" "ran" "command not run"
expect 9 "$D" run --wait 0 --conflict-exit-code 9 t:busy -- true
# free, but a long waiter (of another process) has reserved the next turn
rc set 'dlock_lock_next:{t:resv}' 'other:1' px 5000 >/dev/null
expect 75 "$D" run --wait 0 t:resv -- echo ran
has "$tmp/err" "reserved" "conflict line says the next turn is reserved"
hasnt "$tmp/out" "ran" "command not run"
expect 75 "$D" -q run --wait 0 t:busy -- true
[ -s "$tmp/err" ] && bad "-q still printed" || ok
t0=$(now_ms)
expect 75 "$D" run --wait 400ms t:busy -- true
took=$(( $(now_ms) - t0 ))
[ $took -ge 400 ] && ok || bad "--wait 400ms gave up after $took ms"
t0=$(now_ms)
expect 0 "$D" run --wait $((6 * SLOW))s t:busy -- true   # waits for the holder, wakes on its release
took=$(( $(now_ms) - t0 ))
[ $took -ge 1000 ] && ok || bad "waiter did not wait ($took ms)"
wait "${bg[@]}"; bg=()

echo "== signals"
# Forwarded to the child; the lock is released once the child is gone.
for sig in TERM INT HUP; do
  "$D" run t:sig -- sh -c "trap 'echo got $sig; exit 42' $sig; sleep 30 & wait" >"$tmp/sig.out" 2>&1 &
  p=$!
  until_ok held t:sig
  sleep 0.2
  kill -"$sig" "$p"
  wait "$p"; got=$?
  is "$got" 42 "SIG$sig forwarded: dlock exits with the child's status"
  has "$tmp/sig.out" "got $sig" "child got SIG$sig"
  free t:sig && ok || bad "released after SIG$sig"
done
# A signal during the wait ends it without running the command.
"$D" run t:held -- sleep 30 & h=$!; bg+=($h)
until_ok held t:held
"$D" run t:held -- sh -c 'echo RAN' >"$tmp/w.out" 2>&1 &
w=$!
sleep 0.5
kill -INT "$w"; wait "$w"; got=$?
is "$got" 130 "SIGINT while waiting: 128+2"
hasnt "$tmp/w.out" "RAN" "command not run after an interrupted wait"
# The child dies under the holder (SIGKILL from outside): released at once.
child=$(command_of "$h")
[ -n "$child" ] && kill -9 "$child"
wait "$h"; got=$?
is "$got" 137 "holder exits 128+9 when its child is killed"
free t:held && ok || bad "released after the child was killed"
bg=()

echo "== lock lost while the command runs"
# term: the key is deleted under a running child -> SIGTERM, exit 76.
"$D" --watchdog 900ms run t:lost -- sh -c 'trap "echo stopping; exit 5" TERM; sleep 30 & wait' >"$tmp/lost.out" 2>"$tmp/lost.err" &
p=$!
until_ok held t:lost
t0=$(now_ms)
rc del t:lost >/dev/null
wait "$p"; got=$?
took=$(( $(now_ms) - t0 ))
is "$got" 76 "--on-lost term exits 76"
has "$tmp/lost.out" "stopping" "child got SIGTERM"
has "$tmp/lost.err" "lost" "dlock says the lock was lost"
[ $took -le $((3000 * SLOW)) ] && ok || bad "loss noticed after $took ms (watchdog 900ms)"
# ignore: warn, let the child finish; the exit status says the lock was lost
# (76), unless --lost-exit-code command asks for the child's.
"$D" --watchdog 900ms run --on-lost ignore --lost-exit-code command t:lost2 -- sh -c 'sleep 2; exit 4' >"$tmp/lost.out" 2>"$tmp/lost.err" &
p=$!
until_ok held t:lost2
rc del t:lost2 >/dev/null
wait "$p"; got=$?
is "$got" 4 "--on-lost ignore --lost-exit-code command keeps the child's status"
has "$tmp/lost.err" "warning" "--on-lost ignore warns"
# A --lease that runs out is a loss too.
expect 76 "$D" run --lease 700ms t:lease -- sh -c 'sleep 5'
has "$tmp/err" "lease" "lease expiry reported"
# A child that ignores SIGTERM gets SIGKILL 10 s later.
if [ "${DLOCK_TEST_QUICK:-0}" != 1 ]; then
  "$D" --watchdog 900ms run t:stubborn -- sh -c 'trap "" TERM; sleep 60 & wait; sleep 60' >/dev/null 2>"$tmp/lost.err" &
  p=$!
  until_ok held t:stubborn
  # t0 before the DEL: revocation hears it within milliseconds, maybe before
  # the redis-cli process has even exited.
  t0=$(now_ms)
  rc del t:stubborn >/dev/null
  wait "$p"; got=$?
  took=$(( $(now_ms) - t0 ))
  is "$got" 76 "stubborn child: still exit 76"
  has "$tmp/lost.err" "SIGKILL" "SIGKILL after the grace period"
  [ $took -ge 10000 ] && [ $took -le $((16000 * SLOW)) ] && ok || bad "SIGKILL came after $took ms"
fi

echo "== status"
expect 0 "$D" status t:none
has "$tmp/out" "state:   free" "free lock"
expect 0 "$D" status t:none --json
is "$(jq -r '.locked' "$tmp/out")" "false" "json: free"
is "$(jq -r '.ttl_ms' "$tmp/out")" "-2" "json: ttl of no key"
"$D" run t:st -- sleep $((3 * SLOW)) & bg+=($!)
until_ok held t:st
"$D" run t:st -- true & bg+=($!)      # a waiter
until_ok sh -c "[ \$(redis-cli -p $REDIS_PORT pubsub numsub redisson_lock__channel:{t:st} | tail -1) = 1 ]"
expect 0 "$D" status t:st --json
is "$(jq -r '.locked' "$tmp/out")" "true" "json: held"
is "$(jq -r '.holders | length' "$tmp/out")" "1" "json: one holder"
is "$(jq -r '.holders[0].count' "$tmp/out")" "1" "json: hold count"
jq -e '.holders[0].owner | test("^[0-9a-f-]{36}:[0-9]+$")' "$tmp/out" >/dev/null && ok || bad "json: owner id format"
jq -e '.ttl_ms > 20000 and .ttl_ms <= 30000' "$tmp/out" >/dev/null && ok || bad "json: ttl"
jq -e '.token >= 1' "$tmp/out" >/dev/null && ok || bad "json: token"
is "$(jq -r '.waiters' "$tmp/out")" "1" "json: waiters"
expect 0 "$D" status t:st
has "$tmp/out" "state:   held" "text: held"
has "$tmp/out" "waiters: 1" "text: waiters"
wait "${bg[@]}"; bg=()
# a Redisson hold, a name that needs escaping
rc hset 'we"ird
name' 'a1b2c3d4-0000-4000-8000-000000000000:7' 2 >/dev/null
expect 0 "$D" status 'we"ird
name' --json
is "$(jq -r '.name' "$tmp/out")" 'we"ird
name' "json escapes the name"
is "$(jq -r '.holders[0].owner' "$tmp/out")" "a1b2c3d4-0000-4000-8000-000000000000:7" "json: Redisson owner"
is "$(jq -r '.holders[0].count' "$tmp/out")" "2" "json: Redisson hold count"
is "$(jq -r '.ttl_ms' "$tmp/out")" "-1" "json: no expiry"
# not a lock (65)
rc set t:str value >/dev/null
expect 65 "$D" status t:str
expect 65 "$D" run t:str -- true
is "$(rc get t:str)" "value" "a non-lock key is left alone"

echo "== list"
{
  for i in $(seq -w 1 400); do
    printf 'HSET many:%s %s:%s 1\r\n' "$i" "0b5e63c4-7bb7-4ac3-a2a6-2a9d2a5cfb61" "$i"
    printf 'PEXPIRE many:%s 600000\r\n' "$i"
  done
  printf 'SET many:string x\r\nHSET many:notlock color blue\r\nRPUSH many:list a\r\n'
} | rc --pipe >/dev/null
expect 0 "$D" list 'many:*'
is "$(($(wc -l < "$tmp/out") - 1))" "400" "list: 400 locks, one line each"
head -1 "$tmp/out" | grep -q "NAME" && ok || bad "list: header"
sed -n '2p' "$tmp/out" | grep -q "^many:001 " && ok || bad "list: sorted by name"
hasnt "$tmp/out" "many:string" "list skips non-locks"
hasnt "$tmp/out" "many:notlock" "list skips hashes that are not locks"
expect 0 "$D" list 'many:*' --json
is "$(jq 'length' "$tmp/out")" "400" "json list length"
jq -e 'all(.[]; .locked and (.holders|length)==1 and .ttl_ms > 0)' "$tmp/out" >/dev/null && ok || bad "json list entries"
expect 0 "$D" list 'nothing:*'
has "$tmp/err" "no locks" "empty list says so"
expect 0 "$D" list 'nothing:*' --json
is "$(jq 'length' "$tmp/out")" "0" "empty json list"
"$D" run t:mine -- sleep $((2 * SLOW)) & bg+=($!)
until_ok held t:mine
expect 0 "$D" list 't:*'
has "$tmp/out" "t:mine" "list shows dlock's own holds"
wait "${bg[@]}"; bg=()

echo "== a rate limiter: status, list, JSON"
for _ in 1 2 3; do "$D" run --rate 5/$((60 * SLOW))s rl:one -- true; done
expect 0 "$D" status rl:one
has "$tmp/out" "kind:    rate limiter (overall: every client shares the rate)" "status: its kind"
has "$tmp/out" "rate:    5 per " "status: its rate"
has "$tmp/out" "left:    2 now" "status: what is left"
expect 0 "$D" status rl:one --json
is "$(jq -r '.kind' "$tmp/out")" "rate limiter" "json: kind"
is "$(jq -r '.rate' "$tmp/out")" "5" "json: rate"
is "$(jq -r '.interval_ms' "$tmp/out")" "$((60000 * SLOW))" "json: interval"
is "$(jq -r '.type' "$tmp/out")" "overall" "json: type"
is "$(jq -r '.left' "$tmp/out")" "2" "json: left"
is "$(rc get '{rl:one}:value')" "2" "its count, as it was"
"$D" run --rate 3/1s rl:pc -- true
rc hset rl:pc type 1 >/dev/null   # made per client
expect 0 "$D" status rl:pc --json
is "$(jq -r '.type' "$tmp/out")" "per_client" "json: per client"
is "$(jq -r '.left' "$tmp/out")" "null" "json: no count for every client"
expect 0 "$D" list 'rl:*'
has "$tmp/out" "RATE              TYPE         LEFT" "list: the rate limiters' table"
grep -Eq '^rl:one +5 per [0-9.]+ (s|m) .* overall +2$' "$tmp/out" && ok || bad "list: rl:one, its rate and what is left"
grep -Eq '^rl:pc +3 per 1.0 s +per client +-$' "$tmp/out" && ok || bad "list: rl:pc"
expect 0 "$D" list '*rl:*'
hasnt "$tmp/out" "{rl:one}:value" "list: a limiter's count is no semaphore"
expect 0 "$D" list '*rl:*' --json
is "$(jq '[.[] | select(.kind == "rate limiter")] | length' "$tmp/out")" "2" "json list: two rate limiters"
is "$(jq 'length' "$tmp/out")" "2" "json list: nothing else"
expect 65 "$D" unlock --force rl:one
has "$tmp/err" "holds a rate limiter, not a lock" "unlock refuses a rate limiter"
expect 65 "$D" run rl:one -- true
has "$tmp/err" "key 'rl:one' holds a rate limiter, not a lock" "run names what the key holds"
expect 65 "$D" latch down rl:one
has "$tmp/err" "holds a rate limiter, not a latch" "latch names it too"
is "$(rc get '{rl:one}:value')" "2" "left alone"

echo "== watch"
mkfifo "$tmp/keys"
"$D" watch 'many:00*' --interval 200ms <"$tmp/keys" >"$tmp/watch.out" 2>&1 &
p=$!
exec 7>"$tmp/keys"
sleep 1
printf 'q' >&7
exec 7>&-
for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$p" 2>/dev/null; then bad "watch did not quit on q"; kill -9 "$p"; else ok; fi
wait "$p"; is "$?" 0 "watch exits 0 on q"
has "$tmp/watch.out" "dlock watch" "watch header"
has "$tmp/watch.out" "many:001" "watch shows locks"
frames=$(grep -c "dlock watch" "$tmp/watch.out")
[ "$frames" -ge 3 ] && ok || bad "watch refreshed only $frames times in 1 s at 200ms"
"$D" watch --interval 100ms </dev/null >/dev/null 2>&1 &
p=$!
sleep 0.5
kill -INT "$p"; wait "$p"; is "$?" 0 "watch exits 0 on SIGINT"

echo "== unlock --force"
"$D" --watchdog 900ms run t:force -- sleep 30 >/dev/null 2>"$tmp/force.err" & p=$!
until_ok held t:force
expect 0 "$D" unlock --force t:force
has "$tmp/out" "was held" "force unlock says it was held"
free t:force && ok || bad "force unlock deletes the lock"
wait "$p"; is "$?" 76 "the forced-out holder notices the loss"
expect 0 "$D" unlock --force t:force
has "$tmp/out" "was not held" "force unlock of a free lock"
expect 65 "$D" unlock --force t:str

finish
