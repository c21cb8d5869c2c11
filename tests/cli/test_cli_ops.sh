#!/usr/bin/env bash
# dlock as ops teams use it: per-command help, passwords kept out of ps, exit
# codes for refused credentials and bad configuration, durations, names that
# begin with '-' or hold terminal escapes, JSON that round-trips any name,
# watch when Redis goes away.
# usage: test_cli_ops.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

# raw_cmd ARG...: one command to the test server, arguments as exact bytes
raw_cmd() {
  local a
  { printf '*%d\r\n' $#; for a in "$@"; do printf '$%d\r\n%s\r\n' "$(printf '%s' "$a" | wc -c)" "$a"; done; } |
    redis-cli -p "$REDIS_PORT" --pipe >/dev/null
}
UUID=0b5e63c4-7bb7-4ac3-a2a6-2a9d2a5cfb61

echo "== help for every command (0)"
for c in run status list watch unlock help; do
  expect 0 "$D" help "$c"; cp "$tmp/out" "$tmp/help1"
  has "$tmp/help1" "usage: dlock $c" "dlock help $c"
  expect 0 "$D" "$c" --help; cmp -s "$tmp/out" "$tmp/help1" && ok || bad "dlock $c --help differs from dlock help $c"
  expect 0 "$D" "$c" -h; cmp -s "$tmp/out" "$tmp/help1" && ok || bad "dlock $c -h differs"
done
expect 0 "$D" run some:name --help -- true
has "$tmp/out" "usage: dlock run" "run --help with other arguments"
expect 0 "$D" run t:h -- printf '%s' --help
is "$(cat "$tmp/out")" "--help" "a --help after -- belongs to the command"
expect 64 "$D" help bogus
expect 0 "$D" help
has "$tmp/out" "Durations" "help documents durations"

echo "== passwords"
extra_redis A --requirepass 'pw-S3cret' || exit 1
A="redis://127.0.0.1:$A_PORT"
printf 'pw-S3cret\n' >"$tmp/pw"; printf 'wrong\n' >"$tmp/badpw"; : >"$tmp/emptypw"
expect 77 "$D" --url "$A" status x
hasnt "$tmp/err" "unreachable" "a refused password is not 'unreachable'"
expect 0 env DLOCK_PASSWORD=pw-S3cret "$D" --url "$A" run t:pw -- true
expect 0 env REDISCLI_AUTH=pw-S3cret "$D" --url "$A" status t:pw
expect 0 "$D" --url "$A" --password-file "$tmp/pw" status t:pw
expect 77 "$D" --url "$A" --password-file "$tmp/badpw" status t:pw
hasnt "$tmp/err" "wrong" "a refused password is never shown"
expect 0 env DLOCK_PASSWORD=nope "$D" --url "redis://:pw-S3cret@127.0.0.1:$A_PORT" status t:pw
expect 77 "$D" --url "redis://:pw-S3cret@127.0.0.1:$A_PORT" --password-file "$tmp/badpw" status t:pw
expect 0 env DLOCK_PASSWORD=pw-S3cret REDISCLI_AUTH=nope "$D" --url "$A" status t:pw
expect 66 "$D" --url "$A" --password-file "$tmp/nosuchfile" status t:pw
has "$tmp/err" "nosuchfile" "an unreadable password file is named"
expect 66 "$D" --url "$A" --password-file "$tmp/emptypw" status t:pw
# an ACL user named in the URL, its password from the environment
redis-cli -p "$A_PORT" -a pw-S3cret --no-auth-warning acl setuser ops on '>ops-pw' '~*' '&*' '+@all' >/dev/null
expect 0 env DLOCK_PASSWORD=ops-pw "$D" --url "redis://ops@127.0.0.1:$A_PORT" run t:acl -- true
expect 77 env DLOCK_PASSWORD=pw-S3cret "$D" --url "redis://ops@127.0.0.1:$A_PORT" status t:acl
expect 64 "$D" --url "redis://ops@127.0.0.1:$A_PORT" status t:acl
has "$tmp/err" "DLOCK_PASSWORD" "a user without a password says where to give one"
# a user that may not run CLIENT LIST still gets the status, without who is who
redis-cli -p "$A_PORT" -a pw-S3cret --no-auth-warning acl setuser lim on '>lim-pw' '~*' '&*' '+@all' '-@dangerous' >/dev/null
env DLOCK_PASSWORD=ops-pw "$D" --url "redis://ops@127.0.0.1:$A_PORT" run t:lim -- sleep $((2 * SLOW)) & p=$!; bg+=($p)
check "held by the ACL user" until_ok sh -c "redis-cli -p $A_PORT -a pw-S3cret --no-auth-warning exists t:lim | grep -q 1"
expect 0 env DLOCK_PASSWORD=lim-pw "$D" --url "redis://lim@127.0.0.1:$A_PORT" status t:lim
has "$tmp/out" "state:   held" "status without CLIENT LIST permission"
has "$tmp/out" "CLIENT LIST refused" "status says why it cannot tell who holds"
wait "$p"
# a password given in --url does not stay visible in ps
"$D" --url "redis://:pw-S3cret@127.0.0.1:$A_PORT" run t:ps -- sleep $((2 * SLOW)) & p=$!; bg+=($p)
check "holder with a password in --url" until_ok sh -c "redis-cli -p $A_PORT -a pw-S3cret --no-auth-warning exists t:ps | grep -q 1"
tr '\0' ' ' <"/proc/$p/cmdline" >"$tmp/cmdline"
hasnt "$tmp/cmdline" "pw-S3cret" "ps does not show the --url password"
wait "$p"

echo "== exit codes of configuration errors"
expect 78 "$D" --url "$REDIS_URL/99" status x
has "$tmp/err" "database" "no such database: the message says so"
expect 78 env DLOCK_URL=http://nowhere "$D" status x
has "$tmp/err" "\$DLOCK_URL" "a bad \$DLOCK_URL is named"
hasnt "$tmp/err" "--url" "a bad \$DLOCK_URL is not called --url"
expect 78 env DLOCK_URL="redis://h:99999" "$D" run x -- true
expect 64 "$D" --url http://nowhere status x
has "$tmp/err" "--url" "a bad --url is named"

echo "== durations"
dur_ttl() { expect 0 "$D" run --lease "$1" "t:d$1" -- sh -c "redis-cli -p $REDIS_PORT pttl t:d$1"; cat "$tmp/out"; }
t=$(dur_ttl 1m30s); [ "$t" -gt 85000 ] && [ "$t" -le 90000 ] && ok || bad "--lease 1m30s: pttl $t"
t=$(dur_ttl 2h30m); [ "$t" -gt 8990000 ] && [ "$t" -le 9000000 ] && ok || bad "--lease 2h30m: pttl $t"
t=$(dur_ttl 1d); [ "$t" -gt 86390000 ] && [ "$t" -le 86400000 ] && ok || bad "--lease 1d: pttl $t"
t=$(dur_ttl 1h0m5s500ms); [ "$t" -gt 3600000 ] && [ "$t" -le 3605500 ] && ok || bad "--lease 1h0m5s500ms: pttl $t"
expect 0 "$D" --watchdog 1m30s run t:wd -- sh -c "redis-cli -p $REDIS_PORT pttl t:wd"
t=$(cat "$tmp/out"); [ "$t" -gt 85000 ] && [ "$t" -le 90000 ] && ok || bad "--watchdog 1m30s: pttl $t"
"$D" run t:inf -- sleep 1 & bg+=($!)
until_ok held t:inf
expect 0 "$D" run --wait inf t:inf -- true
expect 0 "$D" run --wait forever t:free -- true
expect 0 "$D" run --lease forever t:free -- sh -c "redis-cli -p $REDIS_PORT pttl t:free"
t=$(cat "$tmp/out"); [ "$t" -gt 20000 ] && [ "$t" -le 30000 ] && ok || bad "--lease forever is the watchdog: pttl $t"
for bad_dur in 30s1m 1m1m 1x 1.2.3 m5 5m- 366d; do
  expect 64 "$D" run --wait "$bad_dur" t:free -- true
done
expect 64 "$D" --watchdog inf status x
expect 64 "$D" --command-timeout forever status x
expect 64 "$D" watch --interval inf

echo "== names: a leading '-', control characters, any bytes in JSON"
expect 0 "$D" run --name -dash -- sh -c 'echo "$DLOCK_NAME"'
is "$(cat "$tmp/out")" "-dash" "run --name -dash"
expect 0 "$D" run -- -dash2 -- sh -c 'echo "$DLOCK_NAME"'
is "$(cat "$tmp/out")" "-dash2" "run -- -dash2 -- cmd"
"$D" run --name -held -- sleep $((2 * SLOW)) & bg+=($!)
until_ok held -held
expect 0 "$D" status --name -held
has "$tmp/out" "state:   held" "status --name -held"
expect 0 "$D" status --json -- -held
is "$(jq -r .name "$tmp/out")" "-held" "status -- -held"
expect 0 "$D" unlock --force --name -held
has "$tmp/out" "was held" "unlock --force --name -held"
evil=$'ev\e[2J\e]0;pwned\aal\nname\x9b1m\xc2\x9bx\u202eok'
raw_cmd HSET "$evil" "$UUID:1" 1
expect 0 "$D" status "$evil"
hasnt "$tmp/out" $'\e' "status shows no raw escape"
has "$tmp/out" 'ev\x1b[2J\x1b]0;pwned\x07al\nname\x9b1m\xc2\x9bx\xe2\x80\xaeok' "status shows the name escaped"
expect 0 "$D" list 'ev*'
hasnt "$tmp/out" $'\e' "list shows no raw escape"
has "$tmp/out" 'ev\x1b[2J' "list shows the name escaped"
is "$(wc -l <"$tmp/out")" 2 "list: the escaped name takes one line"
"$D" watch 'ev*' --interval 100ms </dev/null >"$tmp/watch_evil" 2>&1 & p=$!
sleep 0.5; kill -INT "$p"; wait "$p"
hasnt "$tmp/watch_evil" $'\e' "watch shows no raw escape"
has "$tmp/watch_evil" 'ev\x1b[2J' "watch shows the name escaped"
# JSON: valid UTF-8 names are exact; other byte strings come as name_base64 too
ctl=$'ctl\e[1m\ttab\nnl\x7f'
raw_cmd HSET "$ctl" "$UUID:3" 1
expect 0 "$D" status "$ctl" --json
jq -e --arg n "$ctl" '.name == $n and (has("name_base64") | not)' "$tmp/out" >/dev/null && ok || bad "json: a UTF-8 name with controls is exact"
bin=$'bin\xff\xfe\x01'
raw_cmd HSET "$bin" "$UUID:2" 1
expect 0 "$D" status "$bin" --json
is "$(jq -r .name_base64 "$tmp/out")" "$(printf '%s' "$bin" | base64)" "json: name_base64 holds the exact bytes"
jq -e '.name | test("bin")' "$tmp/out" >/dev/null && ok || bad "json: name stays readable"
back=$(jq -r .name_base64 "$tmp/out" | base64 -d; echo x); back=${back%x}
expect 0 "$D" status "$back" --json
is "$(jq -r .locked "$tmp/out")" "true" "the decoded name finds the same lock"
expect 0 "$D" list 'bin*' --json
is "$(jq -r '.[0].name_base64' "$tmp/out")" "$(printf '%s' "$bin" | base64)" "list --json: name_base64"

echo "== who holds: host, pid, address, command, for how long"
host=$(uname -n)
"$D" run t:who -- sh -c 'sleep '"$((3 * SLOW))"'; echo "a  b" "it'\''s"' >/dev/null 2>&1 & p=$!; bg+=($p)
until_ok held t:who
check "status names the dlock run holding it" until_ok sh -c "'$D' status t:who | grep -q 'dlock run on'"
expect 0 "$D" status t:who
has "$tmp/out" "dlock run on $host, pid $p (127.0.0.1:" "status: host, pid and address of the holder"
has "$tmp/out" ": sh -c 'sleep" "status: the holder's command"
expect 0 "$D" status t:who --json
is "$(jq -r '.holders[0].client' "$tmp/out")" "dlock" "json: a dlock holder"
is "$(jq -r '.holders[0].host' "$tmp/out")" "$host" "json: host"
is "$(jq -r '.holders[0].pid' "$tmp/out")" "$p" "json: pid"
is "$(jq -r '.holders[0].command' "$tmp/out")" "sh -c 'sleep $((3 * SLOW)); echo \"a  b\" \"it'\\''s\"'" "json: the command, as a shell reads it back"
jq -e '.holders[0].held_ms >= 0 and .holders[0].held_ms < 60000 and (.holders[0].addr | test("^127.0.0.1:[0-9]+$"))' "$tmp/out" >/dev/null && ok || bad "json: held_ms and addr"
expect 0 "$D" list 't:who'
has "$tmp/out" "$host:$p [sh -c 'sleep" "list: host:pid and command of the holder"
# A Redisson holder: no dlock connection carries its uuid.
rc hset t:rdsn 'a1b2c3d4-0000-4000-8000-000000000000:7' 1 >/dev/null
expect 0 "$D" status t:rdsn
has "$tmp/out" "not a dlock client (Redisson or other" "status: a Redisson holder"
expect 0 "$D" status t:rdsn --json
is "$(jq -r '.holders[0].client' "$tmp/out")" "other" "json: a Redisson holder"
expect 0 "$D" list 't:rdsn'
has "$tmp/out" "(not dlock)" "list: a Redisson holder"
# A holder that is waiting is labelled too, and the library names every connection.
redis-cli -p "$REDIS_PORT" client list | grep -o "name=dlock|[^ ]*" >"$tmp/names"
grep -q "name=dlock|[0-9a-f-]\{36\}|$host|$p|run:" "$tmp/names" && ok || bad "CLIENT LIST: the holder's connection name"
wait "$p"

echo "== watch when Redis goes away"
extra_redis W || exit 1
for i in 1 2 3; do redis-cli -p "$W_PORT" hset "w:$i" "$UUID:$i" 1 >/dev/null; done
redis-cli -p "$W_PORT" subscribe 'redisson_lock__channel:{w:2}' >/dev/null & sub=$!; bg+=($sub)
until_ok sh -c "[ \$(redis-cli -p $W_PORT pubsub numsub 'redisson_lock__channel:{w:2}' | tail -1) = 1 ]"
mkfifo "$tmp/wkeys"
"$D" --url "redis://127.0.0.1:$W_PORT" watch 'w:*' --interval 200ms <"$tmp/wkeys" >"$tmp/w.out" 2>&1 & p=$!
exec 7>"$tmp/wkeys"
check "watch shows the locks" until_ok grep -q "^w:3 " "$tmp/w.out"
grep -E "^w:2 .* 1$" "$tmp/w.out" >/dev/null && ok || bad "watch: the waiter count of w:2 (1)"
grep -E "^w:1 .* 0$" "$tmp/w.out" >/dev/null && ok || bad "watch: the waiter count of w:1 (0)"
kill "$sub"
stop_extra W
t0=$(now_ms)
check "watch says Redis is unreachable" until_ok grep -q "Redis unreachable since" "$tmp/w.out"
took=$(( $(now_ms) - t0 ))
[ "$took" -le $((1000 * SLOW)) ] && ok || bad "watch noticed after $took ms (interval 200ms)"
sleep 0.5
printf 'q' >&7; exec 7>&-
for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$p" 2>/dev/null; then bad "watch did not quit on q with Redis down"; kill -9 "$p"; else ok; fi
wait "$p"
sed -n '/Redis unreachable/,$p' "$tmp/w.out" >"$tmp/w.down"
has "$tmp/w.down" "w:3" "with Redis down the last good table stays"
has "$tmp/w.down" "stale" "and says it is stale"
hasnt "$tmp/w.out" "0 locks" "never '0 locks' for a dead server"
hasnt "$tmp/w.out" "no locks" "never 'no locks' for a dead server"

echo "== eviction policy and the client's statistics (status --stats)"
extra_redis EV --maxmemory-policy allkeys-lru || exit 1
EV="redis://127.0.0.1:$EV_PORT"
expect 0 "$D" --url "$EV" status ev:lock
has "$tmp/out" "maxmemory-policy is allkeys-lru" "status warns about an evicting policy"
expect 0 "$D" --url "$EV" status --json ev:lock
check "status --json: the lock's fields and the policy" \
  jq -e '.name == "ev:lock" and .eviction_policy == "allkeys-lru" and .eviction_risk == true' "$tmp/out"
expect 0 "$D" status ev:lock
hasnt "$tmp/out" "maxmemory-policy" "no warning under noeviction"
expect 0 "$D" status --stats
has "$tmp/out" "stats:" "status --stats alone shows the client's statistics"
has "$tmp/out" "round trip" "with the round-trip histogram"
expect 0 "$D" status --stats --json ev:lock
check "status --stats --json: counts and histograms" \
  jq -e '.eviction_policy == "noeviction" and .eviction_risk == false and .stats.connects >= 1
         and .stats.roundtrips >= 2 and .stats.roundtrip.count == .stats.roundtrips
         and (.stats.roundtrip.buckets | length) >= 1' "$tmp/out"
expect 64 "$D" status
has "$tmp/err" "missing lock NAME" "status without NAME or --stats"

finish
