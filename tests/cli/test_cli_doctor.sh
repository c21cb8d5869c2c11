#!/usr/bin/env bash
# dlock doctor: what makes locks unsafe on a deployment, each finding with its
# fix; exit 0 healthy, 1 warnings, 2 unsafe (issue 25). Real servers, each
# set up the way a finding needs.
# usage: test_cli_doctor.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

url() { echo "redis://127.0.0.1:$1"; }

echo "== a healthy server: append-only file, noeviction"
extra_redis H --appendonly yes
expect 0 "$D" doctor "$(url "$H_PORT")"
has "$tmp/out" "healthy" "a healthy server is said healthy"
hasnt "$tmp/out" "WARNING" "no warning on a healthy server"
has "$tmp/out" "note: 127.0.0.1:$H_PORT: clock: offset" "the node's clock offset is noted"
has "$tmp/out" "round trip" "with the round trip"
# The URL may come from --url / $DLOCK_URL as for every command.
expect 0 env DLOCK_URL="$(url "$H_PORT")" "$D" doctor
expect 0 "$D" doctor --url "$(url "$H_PORT")"

echo "== eviction: allkeys-lru and volatile-lru with a maxmemory are unsafe (exit 2)"
extra_redis E --appendonly yes --maxmemory 50mb --maxmemory-policy allkeys-lru
expect 2 "$D" doctor "$(url "$E_PORT")"
has "$tmp/out" "UNSAFE" "the finding is marked unsafe"
has "$tmp/out" "maxmemory-policy is allkeys-lru" "the policy is named"
has "$tmp/out" "127.0.0.1:$E_PORT" "the node is named"
has "$tmp/out" "fix: CONFIG SET maxmemory-policy noeviction" "the fix is given"
redis-cli -p "$E_PORT" config set maxmemory-policy volatile-lru >/dev/null
expect 2 "$D" doctor "$(url "$E_PORT")"
has "$tmp/out" "maxmemory-policy is volatile-lru" "volatile-lru is named"
has "$tmp/out" "every held lock has one" "volatile-*: locks carry TTLs, says the finding"
# No maxmemory: nothing is evicted yet, a warning.
redis-cli -p "$E_PORT" config set maxmemory 0 >/dev/null
expect 1 "$D" doctor "$(url "$E_PORT")"
has "$tmp/out" "once a maxmemory is set" "without a maxmemory the policy is a warning"
redis-cli -p "$E_PORT" config set maxmemory-policy noeviction >/dev/null
expect 0 "$D" doctor "$(url "$E_PORT")"

echo "== persistence: off with no replica is a warning; a replica or an AOF is enough"
# The default test server: --save "" --appendonly no, no replica.
expect 1 "$D" doctor
has "$tmp/out" "persistence: persistence is off" "persistence off is named"
has "$tmp/out" "fix: appendonly yes" "its fix is given"
rc config set save "3600 1" >/dev/null
expect 1 "$D" doctor
has "$tmp/out" "RDB snapshots only" "snapshots without AOF or replica: a warning too"
rc config set save "" >/dev/null
extra_redis R --replicaof 127.0.0.1 "$REDIS_PORT"
check "the replica connects" until_ok sh -c "redis-cli -p $REDIS_PORT info replication | grep -q 'connected_slaves:1'"
expect 0 "$D" doctor
hasnt "$tmp/out" "persistence" "a server with a replica is not flagged for persistence"

echo "== replicas: --replicas asks for WAIT acknowledgement"
expect 1 "$D" doctor --replicas 2
has "$tmp/out" "1 replica(s) connected, fewer than the 2" "too few replicas are counted"
has "$tmp/out" "min-replicas-to-write is 0" "min-replicas-to-write 0 is flagged when WAIT is wanted"
rc config set min-replicas-to-write 1 >/dev/null
expect 0 "$D" doctor --replicas 1
has "$tmp/out" "healthy" "one replica, min-replicas-to-write 1: healthy"
rc config set min-replicas-to-write 0 >/dev/null
stop_extra R

echo "== acl: commands a lock needs, WAIT refused"
rc config set appendonly yes >/dev/null
expect 0 "$D" doctor
rc acl setuser noeval on '>pw' '~*' '&*' +@all -evalsha -wait >/dev/null
expect 1 env DLOCK_PASSWORD=pw "$D" doctor --replicas 1 "redis://noeval@127.0.0.1:$REDIS_PORT"
has "$tmp/out" "user noeval may not run what locks need: evalsha" "the missing command is named"
has "$tmp/out" "WAIT is refused" "WAIT refused is flagged when acknowledgement is wanted"
has "$tmp/out" "docs/acl-rule.txt" "the fix points to the rule"
# Key patterns: checked only for a name given.
rc acl setuser app on '>pw' '~app:*' '&*' +@all >/dev/null
expect 0 env DLOCK_PASSWORD=pw "$D" doctor "redis://app@127.0.0.1:$REDIS_PORT"
expect 1 env DLOCK_PASSWORD=pw "$D" doctor --name app:x "redis://app@127.0.0.1:$REDIS_PORT"
has "$tmp/out" "(its key or channel)" "a name outside the user's key patterns is flagged"
has "$tmp/out" "for app:x" "the name checked is said"
# A user who may not ask: the check it could not make is a warning that names
# the permission (not "healthy").
rc acl setuser blind on '>pw' '~*' '&*' +@all -acl >/dev/null
expect 1 env DLOCK_PASSWORD=pw "$D" doctor "redis://blind@127.0.0.1:$REDIS_PORT"
has "$tmp/out" "WARNING: 127.0.0.1:$REDIS_PORT: acl: ACL WHOAMI refused" "a user without +acl gets a warning"
has "$tmp/out" "this user lacks +acl|whoami and +acl|dryrun" "which names what it lacks"
hasnt "$tmp/out" "healthy" "and is not said healthy"
# A restricted user that may not run INFO or CONFIG GET (issue 38): warnings
# naming each permission, exit 1.
rc acl setuser noinfo on '>pw' '~*' '&*' +@all -info -config -acl >/dev/null
expect 1 env DLOCK_PASSWORD=pw "$D" doctor "redis://noinfo@127.0.0.1:$REDIS_PORT"
has "$tmp/out" "WARNING: 127.0.0.1:$REDIS_PORT: info: INFO refused" "INFO refused: a warning"
has "$tmp/out" "this user lacks +info" "naming +info"
hasnt "$tmp/out" "healthy" "not healthy"
rc config set appendonly no >/dev/null
rc acl setuser noconfig on '>pw' '~*' '&*' +@all -config >/dev/null
expect 1 env DLOCK_PASSWORD=pw "$D" doctor "redis://noconfig@127.0.0.1:$REDIS_PORT"
has "$tmp/out" "WARNING: 127.0.0.1:$REDIS_PORT: persistence:" "CONFIG GET refused: the persistence check is a warning"
has "$tmp/out" "this user lacks +config|get" "naming +config|get"
has "$tmp/out" "fix: run dlock doctor as a user allowed +config|get" "and the fix"
rc config set appendonly yes >/dev/null

echo "== keys: foreign keys under the family's prefixes; the family's own are not flagged"
expect 0 "$D" run t:dr -- true
expect 0 "$D" run --fair t:dr2 -- true
redis-cli -p "$H_PORT" rpush 'redisson_lock_token:{orders}' a b >/dev/null
redis-cli -p "$H_PORT" set 'redisson_lock_token:{ok}' 41 >/dev/null
redis-cli -p "$H_PORT" set 'dlock_lock_next:{q}' 'u:1' >/dev/null
redis-cli -p "$H_PORT" hset 'redisson_lock_queue:{f}' a b >/dev/null
redis-cli -p "$H_PORT" set 'redisson_other' x >/dev/null
before=$(redis-cli -p "$H_PORT" dbsize)
expect 1 "$D" doctor "$(url "$H_PORT")"
has "$tmp/out" "2 key(s) under the family's prefixes are not the family's" "two foreign keys counted"
has "$tmp/out" "'redisson_lock_token:{orders}' (a list" "the foreign token key is named with its type"
has "$tmp/out" "'redisson_lock_queue:{f}' (a hash" "the foreign queue key is named"
hasnt "$tmp/out" "{ok}" "a token counter (a string) is the family's"
hasnt "$tmp/out" "{q}" "a reserved turn (a string) is the family's"
is "$(redis-cli -p "$H_PORT" dbsize)" "$before" "doctor writes nothing"
expect 0 "$D" doctor   # the default server: tokens of real runs, a replica gone
hasnt "$tmp/out" "keys:" "the keys dlock run left are the family's"
check "a run left its token counter" [ "$(rc exists "redisson_lock_token:{t:dr}")" = 1 ]

echo "== a lock evicted under dlock run: the loss says evicted"
extra_redis V --maxmemory-policy allkeys-lru
"$D" --url "$(url "$V_PORT")" run t:ev -- sh -c 'trap "exit 7" TERM; sleep 30 & wait' \
  >/dev/null 2>"$tmp/ev.err" & p=$!
check "held on the evicting server" until_ok sh -c "[ \$(redis-cli -p $V_PORT exists t:ev) = 1 ]"
sleep 0.3   # the hold's first renewal, which has Redis track its key
redis-cli -p "$V_PORT" config set maxmemory 1 >/dev/null
redis-cli -p "$V_PORT" set filler x >/dev/null
is "$(redis-cli -p "$V_PORT" exists t:ev)" 0 "the lock was evicted"
wait "$p"; is "$?" 76 "the run ends with 76"
has "$tmp/ev.err" "evicted: Redis evicted it" "the loss names the eviction"
has "$tmp/ev.err" "dlock doctor" "the loss points to dlock doctor"
redis-cli -p "$V_PORT" config set maxmemory 0 >/dev/null
"$D" --url "$(url "$V_PORT")" run t:dl -- sh -c 'trap "exit 7" TERM; sleep 30 & wait' \
  >/dev/null 2>"$tmp/dl.err" & p=$!
check "held again" until_ok sh -c "[ \$(redis-cli -p $V_PORT exists t:dl) = 1 ]"
sleep 0.3
redis-cli -p "$V_PORT" del t:dl >/dev/null
wait "$p"; is "$?" 76 "a DEL ends the run with 76"
has "$tmp/dl.err" "deleted by another client" "the loss names the deletion"

echo "== bad input and unreachable servers"
expect 64 "$D" doctor --replicas 0
has "$tmp/err" "--replicas wants a count" "--replicas 0 is refused, saying why"
expect 64 "$D" doctor --replicas x
expect 64 "$D" doctor "$(url "$H_PORT")" "$(url "$E_PORT")"
has "$tmp/err" "one URL at most" "two URLs are refused"
expect 64 "$D" doctor --bogus
has "$tmp/err" "unknown option '--bogus'" "an unknown option is named"
expect 64 "$D" doctor --name ''
free_port=$(( 20000 + RANDOM % 40000 )); while port_in_use "$free_port"; do free_port=$((free_port + 1)); done
expect 69 "$D" --connect-timeout 1s doctor "$(url "$free_port")"
expect 0 "$D" doctor --help
has "$tmp/out" "usage: dlock doctor" "doctor --help prints its usage"
expect 0 "$D" help doctor

finish
