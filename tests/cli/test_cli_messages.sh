#!/usr/bin/env bash
# What the command says where a new user trips: a password the server wants
# and was not given, the short usage line, a forced election, an eviction
# policy that may drop a held lock, a latch name that does not exist, a fair
# lock's kind, a key of another type said once, Lua's internals kept out.
# usage: test_cli_messages.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

echo "== NOAUTH: where the password goes"
extra_redis P --requirepass 'pw-M3ss' || exit 1
expect 77 "$D" --url "redis://127.0.0.1:$P_PORT" status t:x
has "$tmp/err" "NOAUTH" "the server's refusal is shown"
has "$tmp/err" "--password-file" "the hint names --password-file"
has "$tmp/err" "\$DLOCK_PASSWORD" "the hint names \$DLOCK_PASSWORD"
expect 77 "$D" -q --url "redis://127.0.0.1:$P_PORT" status t:x
is "$(wc -c <"$tmp/err")" 0 "-q: no hint either"
printf 'wrong\n' >"$tmp/badpw"
expect 77 "$D" --url "redis://127.0.0.1:$P_PORT" --password-file "$tmp/badpw" status t:x
hasnt "$tmp/err" "asks for a password" "a wrong password is not told to give one"
stop_extra P

echo "== the short usage line names every command"
expect 64 "$D"
usage=$(grep '^usage:' "$tmp/err")
"$D" --help >"$tmp/help"
cmds=$(awk '/^Commands:/{f=1;next} f&&/^$/{exit} f&&/^  [a-z]/{print $1}' "$tmp/help" | sort -u)
[ "$(echo "$cmds" | wc -l)" -ge 12 ] && ok || bad "the long help's commands were not read: $cmds"
for c in $cmds; do
  case "$usage" in *"|$c|"* | *" $c|"* | *"|$c "*) ok ;; *) bad "the short usage lacks '$c': $usage" ;; esac
done

echo "== unlock --force on an elected leader names the election"
"$D" elect t:el -- sleep 60 >/dev/null 2>"$tmp/el.err" & e=$!; bg+=($e)
until_ok held t:el
expect 0 "$D" unlock --force t:el
has "$tmp/out" "leader of election 't:el', term " "the holder is named the election's leader"
has "$tmp/out" "dlock elect on " "the command is dlock elect"
hasnt "$tmp/out" "dlock run" "not called dlock run"
wait "$e"; is "$?" 76 "the leader learns of its loss (76)"
"$D" run t:plain -- sleep 60 >/dev/null 2>&1 & r=$!; bg+=($r)
until_ok held t:plain
expect 0 "$D" unlock --force t:plain
has "$tmp/out" "dlock run on " "a run is still a dlock run"
hasnt "$tmp/out" "election" "a run is no election"
wait "$r"

echo "== run: one warning when the eviction policy may evict the lock"
extra_redis E --maxmemory-policy allkeys-lru || exit 1
expect 0 "$D" --url "redis://127.0.0.1:$E_PORT" run t:ev -- true
is "$(grep -c "maxmemory-policy is allkeys-lru" "$tmp/err")" 1 "one line names the policy"
has "$tmp/err" "noeviction" "and the fix"
expect 0 "$D" -q --url "redis://127.0.0.1:$E_PORT" run t:ev -- true
is "$(wc -c <"$tmp/err")" 0 "-q: silent"
expect 0 "$D" --url "redis://127.0.0.1:$E_PORT" run --semaphore t:evs --permits 2 -- true
has "$tmp/err" "evict the permit" "a semaphore run: the permit"
redis-cli -p "$E_PORT" config set maxmemory-policy volatile-lru >/dev/null
expect 0 "$D" --url "redis://127.0.0.1:$E_PORT" run t:ev -- true
has "$tmp/err" "maxmemory-policy is volatile-lru" "volatile-lru evicts locks (they have a TTL)"
redis-cli -p "$E_PORT" config set maxmemory-policy noeviction >/dev/null
expect 0 "$D" --url "redis://127.0.0.1:$E_PORT" run t:ev -- true
is "$(wc -c <"$tmp/err")" 0 "noeviction: nothing said"
stop_extra E

echo "== latch wait --must-exist"
expect 0 "$D" latch wait t:nolatch
expect 66 "$D" latch wait --must-exist t:nolatch
has "$tmp/err" "does not exist" "an absent latch is said to be absent"
expect 0 "$D" latch set t:l 1
expect 75 "$D" latch wait -w 0 --must-exist t:l
( sleep 0.3; "$D" latch down t:l ) & bg+=($!)
expect 0 "$D" latch wait -w $((10 * SLOW))s --must-exist t:l
expect 64 "$D" latch down --must-exist t:l

echo "== status: a fair lock's kind, from its queue"
"$D" run --fair t:fair -- sleep 60 >/dev/null 2>&1 & h=$!; bg+=($h)
until_ok held t:fair
expect 0 "$D" status --json t:fair
is "$(jq -r .kind "$tmp/out")" "lock" "nobody queued: lock (Redis holds a fair one alike)"
expect 0 "$D" status t:fair
has "$tmp/out" "or a fair lock with nobody queued" "the text says it may be a fair lock"
"$D" run --fair t:fair -- true >/dev/null 2>&1 & w=$!; bg+=($w)
until_ok sh -c "[ \$(redis-cli -p $REDIS_PORT llen 'redisson_lock_queue:{t:fair}') = 1 ]"
expect 0 "$D" status --json t:fair
is "$(jq -r .kind "$tmp/out")" "fair lock" "queued: fair lock"
expect 0 "$D" list --json 't:fa*'
is "$(jq -r '.[0].kind' "$tmp/out")" "fair lock" "list says so too"
kill "$h"; wait "$h" 2>/dev/null; wait "$w" 2>/dev/null

echo "== a key of another type: said once, without Lua's internals"
rc hset t:hash a b >/dev/null
rc set t:str x >/dev/null
expect 65 "$D" status t:hash
is "$(grep -o "not a lock" "$tmp/err" | wc -l)" 1 "status: 'not a lock' once"
expect 65 "$D" run -n t:hash -- true
is "$(grep -o "not a " "$tmp/err" | wc -l)" 1 "run on a hash: said once"
expect 65 "$D" run -n t:str -- true
hasnt "$tmp/err" "user_script" "run on a string: no script line"
hasnt "$tmp/err" " script: " "run on a string: no script sha"
has "$tmp/err" "t:str" "the key is named"

echo "== an unknown URL scheme lists every form"
expect 64 "$D" --url "foo://h" status t:x
for s in redis:// rediss:// unix:// redis-sentinel:// redis-cluster:// redis-replicated:// \
         rediss-sentinel:// rediss-cluster:// rediss-replicated://; do
  has "$tmp/err" "$s" "the message names $s"
done

finish
