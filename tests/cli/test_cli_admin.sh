#!/usr/bin/env bash
# What an operator meets: unlock --force on every kind (waking that kind's
# waiters), list without dlock's own fence guards, who holds a semaphore's
# permits, --connect-timeout and -w bounding the connect, one clean line for
# a key of another type, a cluster node behind redis://, the -v line on a
# narrow terminal, leader --watch and an ignored SIGINT, the insecure TLS
# warning and TLS failures' own exit code, messages in the command's words.
# usage: test_cli_admin.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

# A waiter woken by a force unlock gets the lock long before the holder's
# lease (30 s, the watchdog) could have run out.
WOKEN=$((8 * SLOW))

echo "== unlock --force: a read-write lock, in the mode it is held in"
for side in read write; do
  "$D" run --$side t:rw -- sleep 60 >/dev/null 2>"$tmp/rwh.err" & h=$!
  until_ok held t:rw
  "$D" run --write t:rw -- true >/dev/null 2>&1 & w=$!   # waits: conflicts with both
  sleep 0.3
  expect 0 "$D" unlock --force t:rw
  has "$tmp/out" "was held by" "rwlock ($side): says by whom"
  mode=reading; [ "$side" = write ] && mode=writing
  has "$tmp/out" "read-write lock, held for $mode" "rwlock ($side): says the kind and mode"
  wait "$h"; is "$?" 76 "rwlock ($side): its holder learns of the loss (76)"
  t0=$(now_ms)
  wait "$w"; is "$?" 0 "rwlock ($side): the waiting writer got it"
  [ $(( $(now_ms) - t0 )) -lt $((WOKEN * 1000)) ] && ok || bad "rwlock ($side): the writer was not woken"
done

echo "== unlock --force: a fair lock with its queue"
"$D" run --fair t:fair -- sleep 60 >/dev/null 2>&1 & h=$!
until_ok held t:fair
"$D" run --fair t:fair -- true >/dev/null 2>&1 & w1=$!
until_ok sh -c "[ \$(redis-cli -p $REDIS_PORT llen 'redisson_lock_queue:{t:fair}') = 1 ]"
"$D" run --fair t:fair -- true >/dev/null 2>&1 & w2=$!
until_ok sh -c "[ \$(redis-cli -p $REDIS_PORT llen 'redisson_lock_queue:{t:fair}') = 2 ]"
expect 0 "$D" unlock --force t:fair
has "$tmp/out" "fair lock, 2 in its queue" "fair lock: the queue is named"
has "$tmp/out" "the first in its queue woken" "fair lock: its queue's head is woken"
wait "$h"; is "$?" 76 "fair lock: the holder learns of the loss"
t0=$(now_ms)
wait "$w1"; is "$?" 0 "fair lock: the first waiter ran"
wait "$w2"; is "$?" 0 "fair lock: the second waiter ran"
[ $(( $(now_ms) - t0 )) -lt $((WOKEN * 1000)) ] && ok || bad "fair lock: the waiters were not woken"

echo "== unlock --force --permit ID: a permit semaphore's permit"
"$D" run --semaphore t:sem --permits 1 -- sleep 60 >/dev/null 2>&1 & h=$!
until_ok sh -c "[ \$(redis-cli -p $REDIS_PORT zcard '{t:sem}:timeout') = 1 ]"
"$D" run --semaphore t:sem --permits 1 -- true >/dev/null 2>&1 & w=$!
sleep 0.3
expect 64 "$D" unlock --force t:sem
has "$tmp/err" "--permit ID" "a permit semaphore without --permit: says what to give"
"$D" status --json t:sem >"$tmp/sem.json"
id=$(jq -r '.holders[0].permit' "$tmp/sem.json")
is "$(jq -r '.holders[0].pid' "$tmp/sem.json")" "$h" "status --json names the permit's holder (pid)"
"$D" status t:sem >"$tmp/sem.txt"
has "$tmp/sem.txt" "dlock run on $(hostname), pid $h" "status names the permit's holder: host, pid"
has "$tmp/sem.txt" ": sleep 60" "status names the permit holder's command"
has "$tmp/sem.txt" ", for " "status says since when"
expect 0 "$D" unlock --force --permit "$id" t:sem
has "$tmp/out" "permit $id was held by dlock run" "the freed permit and its holder are named"
wait "$h"; is "$?" 76 "permit: its holder learns of the loss"
t0=$(now_ms)
wait "$w"; is "$?" 0 "permit: the waiter ran"
[ $(( $(now_ms) - t0 )) -lt $((WOKEN * 1000)) ] && ok || bad "permit: the waiter was not woken"
expect 0 "$D" unlock --force --permit "$id" t:sem
has "$tmp/out" "was not held" "a permit freed already"
expect 64 "$D" unlock --force --permit zz t:sem
has "$tmp/err" "not a permit id" "a bad permit id"
expect 64 "$D" unlock --force --permit "$id" t:nolock
rc set t:count 5 >/dev/null
expect 65 "$D" unlock --force t:count
has "$tmp/err" "nothing to unlock" "a count: nothing to unlock"

echo "== list leaves dlock's fence guards out"
expect 0 "$D" fence --token 5 SET t:fenced v
is "$(rc get 'dlock_fence:{t:fenced}')" "5" "the fence guard exists"
expect 0 "$D" list
hasnt "$tmp/out" "dlock_fence" "list leaves out dlock_fence:*"
has "$tmp/out" "t:count" "list still shows counts"
expect 0 "$D" list --json
hasnt "$tmp/out" "dlock_fence" "list --json leaves out dlock_fence:*"
expect 0 "$D" list 'dlock_fence:*'
has "$tmp/out" "dlock_fence:{t:fenced}" "asked for by name, they are shown"

echo "== a key of another type: one clean line from every command"
rc set t:str hello >/dev/null
rc rpush t:list a >/dev/null
for args in "run t:str -- true" "run -n t:str -- true" "run --fair t:str -- true" \
            "run t:ok t:str -- true" "elect t:str -- true" "unlock --force t:str"; do
  # shellcheck disable=SC2086
  expect 65 timeout $((10 * SLOW)) "$D" $args
  is "$(cat "$tmp/err")" "dlock: key 't:str' holds a string, not a lock" "$args"
done
expect 65 timeout $((10 * SLOW)) "$D" run --read t:str -- true
is "$(cat "$tmp/err")" "dlock: key 't:str' holds a string, not a read-write lock" "run --read"
expect 65 "$D" run --semaphore t:str --permits 2 -- true
is "$(cat "$tmp/err")" "dlock: key 't:str' holds a string, not a permit semaphore" "run --semaphore"
expect 65 "$D" latch down t:list
is "$(cat "$tmp/err")" "dlock: key 't:list' holds a list, not a latch" "latch down"
expect 65 "$D" status t:str
is "$(cat "$tmp/err")" "dlock: key 't:str' holds a string, not a lock, semaphore, latch or rate limiter" "status"
is "$(rc get t:str)" "hello" "the string is left as it was"
"$D" run --read t:rwk -- sleep $((3 * SLOW)) >/dev/null 2>&1 & bg+=($!)
until_ok held t:rwk
expect 65 timeout $((10 * SLOW)) "$D" run -n t:rwk -- true
is "$(cat "$tmp/err")" "dlock: key 't:rwk' holds a read-write lock, not a lock" "a lock on a read-write lock"

echo "== messages in the command's words"
expect 64 "$D" run t:dup t:dup -- true
has "$tmp/err" "'t:dup' is named twice" "a name given twice"
hasnt "$tmp/err" "locks[" "no library array indexes"
expect 64 "$D" run --read t:dup --write t:dup -- true
has "$tmp/err" "two sides of one read-write lock" "--read and --write of one name"
expect 64 "$D" --watchdog 10ms status t:x
has "$tmp/err" "--watchdog '10ms' is out of range: 30ms to 1d" "a watchdog out of range, with units"
expect 64 "$D" run -w 400d t:x -- true
has "$tmp/err" "longer than a year" "a duration too long is said so"
expect 64 "$D" --connect-timeout 0 status t:x
expect 64 "$D" --failover-quarantine soon run t:fq -- true
has "$tmp/err" "--failover-quarantine (off, auto or a duration) 'soon' is not a duration" \
  "a bad quarantine names the option and its values"
expect 64 "$D" --failover-quarantine 0 run t:fq -- true
for q in off auto 2s; do
  expect 0 "$D" --failover-quarantine "$q" run t:fq -- true
done
"$D" --watchdog 1s elect t:el -- sleep 30 >/dev/null 2>"$tmp/el.err" & h=$!
until_ok held t:el
rc del t:el >/dev/null
wait "$h"; is "$?" 76 "elect: leadership lost: 76"
has "$tmp/el.err" "leadership of election 't:el' lost" "an election's loss is a leadership's"

echo "== a restart of Redis under a holder is named as one"
extra_redis R || exit 1
"$D" --url "redis://127.0.0.1:$R_PORT" --watchdog 2s run t:rs -- sleep 30 >/dev/null 2>"$tmp/rs.err" & h=$!
check "holder on the extra server" until_ok sh -c "[ \$(redis-cli -p $R_PORT exists t:rs) = 1 ]"
port=$R_PORT
stop_extra R
rdir=$(mktemp -d /tmp/dlock-redis-XXXXXX); extra_dirs+=("$rdir")
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$rdir" \
  --logfile "$rdir/redis.log" --daemonize no & extra_pids+=($!)
wait "$h"; is "$?" 76 "restart: the hold is lost"
has "$tmp/rs.err" "Redis restarted or failed over" "restart: the loss names the restart"

echo "== --connect-timeout, and -w bounding the connect"
# A stopped server accepts connections (the kernel does) and never answers.
extra_redis M || exit 1
kill -STOP "$M_PID"
mute="redis://127.0.0.1:$M_PORT"
t0=$(now_ms)
expect 69 "$D" --url "$mute" --connect-timeout 1s status t:x
took=$(( $(now_ms) - t0 ))
has "$tmp/err" "--connect-timeout" "the message names --connect-timeout"
[ "$took" -lt $((1000 + 4000 * SLOW)) ] && ok || bad "--connect-timeout 1s took $took ms"
t0=$(now_ms)
expect 69 "$D" --url "$mute" run -w 1s t:x -- true
took=$(( $(now_ms) - t0 ))
[ "$took" -lt $((1000 + 4000 * SLOW)) ] && ok || bad "run -w 1s took $took ms to give up connecting"
has "$tmp/err" "-w" "the message names -w"
t0=$(now_ms)
expect 69 "$D" --url "$mute" latch wait -w 1s t:x
took=$(( $(now_ms) - t0 ))
[ "$took" -lt $((1000 + 4000 * SLOW)) ] && ok || bad "latch wait -w 1s took $took ms"
kill -CONT "$M_PID"
"$D" --help >"$tmp/help"
has "$tmp/help" "--connect-timeout DUR" "--help names --connect-timeout"
grep -A2 -- "--connect-timeout DUR" "$tmp/help" | grep -q "default 10s" && ok || bad "--help gives its default"

echo "== redis:// on a cluster node: the MOVED answer points to redis-cluster://"
cluster_node() {   # VAR: a cluster-enabled server with its bus port chosen
  local var=$1 dir port pid
  dir=$(mktemp -d /tmp/dlock-redis-XXXXXX); extra_dirs+=("$dir")
  for _ in $(seq 1 20); do
    port=$(( 20000 + RANDOM % 20000 ))
    port_in_use "$port" || port_in_use $((port + 1)) && continue
    redis-server --port "$port" --cluster-port $((port + 1)) --cluster-enabled yes \
      --cluster-config-file nodes.conf --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$dir" --logfile "$dir/redis.log" --daemonize no &
    pid=$!
    # Ours, not another test's server that took the port first (the ping
    # alone would pass on it): its process_id is the pid we started.
    if until_ok redis-cli -p "$port" ping &&
       [ "$(redis-cli -p "$port" info server | tr -d '\r' | sed -n 's/^process_id://p')" = "$pid" ]; then
      extra_pids+=("$pid"); printf -v "${var}_PORT" %s "$port"; return 0
    fi
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done
  return 1
}
cluster_node CA && cluster_node CB || exit 1
redis-cli -p "$CA_PORT" cluster addslotsrange 0 8191 >/dev/null
redis-cli -p "$CB_PORT" cluster addslotsrange 8192 16383 >/dev/null
redis-cli -p "$CA_PORT" cluster meet 127.0.0.1 "$CB_PORT" $((CB_PORT + 1)) >/dev/null
check "the two-node cluster is up" until_ok sh -c "redis-cli -p $CA_PORT cluster info | grep -q cluster_state:ok"
# 'a' hashes to slot 15495, served by the second node
expect 70 "$D" --url "redis://127.0.0.1:$CA_PORT" status a
has "$tmp/err" "MOVED" "the answer is shown"
has "$tmp/err" "redis-cluster://" "the MOVED answer points to redis-cluster://"
expect 70 "$D" --url "redis://127.0.0.1:$CA_PORT" run -n a -- true
has "$tmp/err" "redis-cluster://" "run: the MOVED answer points to redis-cluster://"
expect 0 "$D" --url "redis-cluster://127.0.0.1:$CA_PORT" run -n a -- true

echo "== -v on a narrow terminal: the status line fits"
"$D" run t:vw -- sleep $((2 * SLOW)) >/dev/null 2>&1 & bg+=($!)
until_ok held t:vw
script -qfec "stty cols 60 rows 20; exec $D run -v t:vw -- true" /dev/null >"$tmp/vw.out" 2>&1
is "$?" 0 "-v on a 60-column terminal"
grep -q "waiting for 't:vw'" "$tmp/vw.out" && ok || bad "-v showed its status line"
# Each update is "\r\e[K" + the line: none may reach the 60th column.
longest=$(sed 's/\x1b\[K//g' "$tmp/vw.out" | tr '\r' '\n' | grep "waiting for" | awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')
[ "$longest" -gt 0 ] && [ "$longest" -le 59 ] && ok || bad "-v status line of $longest columns on a 60-column terminal"
grep -q "\.\.\." "$tmp/vw.out" && ok || bad "-v: a cut line ends with ..."

echo "== leader --watch ends on SIGINT, also when started with it ignored"
# A background job of a script starts with SIGINT ignored.
"$D" leader --watch t:lw >"$tmp/lw.out" 2>&1 & lw=$!; bg+=($lw)
until_ok grep -q "no leader" "$tmp/lw.out"
kill -INT "$lw"
if until_ok gone "$lw"; then
  ok; wait "$lw"; is "$?" 0 "leader --watch: exit 0 when interrupted"
else
  bad "leader --watch ended at SIGINT"
fi

echo "== TLS: the insecure warning; a certificate failure has its own exit code (80)"
tdir=$(mktemp -d /tmp/dlock-tls-XXXXXX); extra_dirs+=("$tdir")
tport=""
if openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tdir/k.pem" -out "$tdir/c.pem" -days 1 \
     -subj /CN=dlock-test-elsewhere >/dev/null 2>&1; then
  for _ in $(seq 1 20); do
    p=$(( 20000 + RANDOM % 40000 ))
    port_in_use "$p" && continue
    redis-server --port 0 --tls-port "$p" --tls-cert-file "$tdir/c.pem" --tls-key-file "$tdir/k.pem" \
      --tls-auth-clients no --bind 127.0.0.1 --save "" --appendonly no --dir "$tdir" \
      --logfile "$tdir/redis.log" --daemonize no & extra_pids+=($!)
    if until_ok port_in_use "$p"; then tport=$p; break; fi
  done
fi
if [ -n "$tport" ]; then
  expect 0 "$D" --url "rediss://127.0.0.1:$tport?insecure" status t:x
  is "$(grep -c "warning: the URL says insecure" "$tmp/err")" 1 "?insecure: one warning"
  expect 0 "$D" -q --url "rediss://127.0.0.1:$tport?insecure" status t:x
  is "$(wc -c <"$tmp/err")" 0 "?insecure with -q: quiet"
  expect 80 "$D" --url "rediss://127.0.0.1:$tport" status t:x
  has "$tmp/err" "certificate" "an untrusted certificate: 80, and said so"
  expect 80 "$D" --url "rediss://127.0.0.1:$tport?cacert=$tdir/c.pem" status t:x
else
  echo "FAIL: no TLS test server (openssl or redis-server without TLS)"; fail=$((fail + 1))
fi

finish
