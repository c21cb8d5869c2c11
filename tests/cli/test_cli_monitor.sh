#!/usr/bin/env bash
# The lock monitor: dlock check (what is past a threshold, with its holders;
# exit 0 none, 1 some, 2+ errors) and dlock exporter (Prometheus' /metrics:
# output that promtool accepts, one pass per interval served from memory,
# --max-keys, dlock_up 0 within the scrape timeout when Redis is down or
# hangs), their bad input, and the alert rule for a lock held over 60 s.
# Needs promtool (Debian's prometheus package: installed here through
# scripts/deps.sh) and curl.
# usage: test_cli_monitor.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
"$SRC/scripts/deps.sh" prometheus curl >/dev/null || { echo "FAIL: promtool and curl are needed"; exit 1; }
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

uuid=6f1c0d4e-1111-2222-3333-444455556666   # a Redisson client's id (made up)
until_waiters() { for _ in $(seq 1 $((100 * SLOW))); do [ "$(rc pubsub numsub "$1" | tail -1)" -ge "$2" ] && return 0; sleep 0.05; done; return 1; }
until_queue() { for _ in $(seq 1 $((100 * SLOW))); do [ "$(rc llen "redisson_lock_queue:{$1}")" -ge "$2" ] && return 0; sleep 0.05; done; return 1; }

echo "== check: bad input"
expect 64 "$D" check
has "$tmp/err" "give a threshold" "no threshold"
for v in abc -1s 1x ''; do
  expect 64 "$D" check --held-over "$v"
  has "$tmp/err" "is not a duration" "--held-over '$v'"
done
for opt in --waiters-over --queue-over; do
  for v in x -1 1.5 99999999999 ''; do
    expect 64 "$D" check "$opt" "$v"
    has "$tmp/err" "is not a whole number from 0 to 1000000000" "$opt '$v'"
  done
done
expect 64 "$D" check --held-over 1s 'a*' 'b*'
has "$tmp/err" "one PATTERN" "two patterns"
expect 64 "$D" check --held-over 1s --bogus
has "$tmp/err" "unknown option '--bogus'" "an unknown option"

echo "== check: nothing past"
expect 0 "$D" check --held-over 1s
has "$tmp/out" "dlock check: 0 of 0 past a threshold (held over 1.0 s)" "the summary line"
expect 0 "$D" -q check --held-over 1s
is "$(cat "$tmp/out")" "" "-q: nothing printed when nothing is past"

echo "== check: a dlock run held past --held-over"
"$D" run mon:a -- sleep $((30 * SLOW)) & holder=$!; bg+=($holder)
check "the run holds mon:a" until_ok held mon:a
sleep 1.2
expect 1 "$D" check --held-over 1s 'mon:*'
has "$tmp/out" "dlock check: 1 of 1 past a threshold" "one past"
has "$tmp/out" "mon:a  lock, held" "the lock, its kind and its hold"
has "$tmp/out" "(over 1.0 s)" "the threshold"
has "$tmp/out" "dlock run on $(hostname), pid $holder" "the holder's host and pid"
has "$tmp/out" ": sleep $((30 * SLOW)), since 20" "its command and since when"
expect 0 "$D" check --held-over 1h 'mon:*'
hasnt "$tmp/out" "mon:a  lock" "not past an hour"
expect 1 "$D" -q check --held-over 1s 'mon:*'
has "$tmp/out" "mon:a  lock, held" "-q still prints what is past"
expect 0 "$D" check --held-over 0 'other:*'
has "$tmp/out" "0 of 0" "the pattern narrows the pass"

echo "== check: a Redisson holder, its waiters"
rc hset redisson:job "$uuid:57" 1 >/dev/null; rc pexpire redisson:job 60000 >/dev/null
expect 0 "$D" check --held-over 0 'redisson:*'
has "$tmp/out" "note: 1 held with no hold age known" "a holder of unknown age is not judged, and said so"
"$D" run -w $((20 * SLOW))s redisson:job -- true & waiter=$!; bg+=($waiter)
check "a dlock run waits on it" until_waiters "redisson_lock__channel:{redisson:job}" 1
expect 1 "$D" check --waiters-over 0 'redisson:*'
has "$tmp/out" "redisson:job  lock, 1 waiting (over 0)" "past --waiters-over"
has "$tmp/out" "holder $uuid:57: not a dlock client (Redisson or other" "the Redisson holder"
has "$tmp/out" "hold age unknown; TTL " "what is known: its TTL"
has "$tmp/out" "renewed or not: unknown from one look" "and that renewal cannot be told from one look"
expect 0 "$D" check --waiters-over 1 'redisson:*'
kill "$waiter" 2>/dev/null; wait "$waiter" 2>/dev/null

echo "== check: a fair lock's queue, a latch's awaiters"
"$D" run --fair mon:fair -- sleep $((30 * SLOW)) & bg+=($!)
check "the fair lock is held" until_ok held mon:fair
"$D" run --fair mon:fair -- true & bg+=($!)
"$D" run --fair mon:fair -- true & bg+=($!)
check "two queue for it" until_queue mon:fair 2
expect 1 "$D" check --queue-over 1 'mon:fair'
has "$tmp/out" "mon:fair  fair lock, 2 queued (over 1)" "past --queue-over"
expect 0 "$D" check --queue-over 2 'mon:fair'
"$D" latch set mon:latch 2 >/dev/null
"$D" latch wait mon:latch & bg+=($!)
check "one awaits the latch" until_waiters "redisson_countdownlatch__channel__{mon:latch}" 1
expect 1 "$D" check --waiters-over 0 'mon:latch'
has "$tmp/out" "mon:latch  semaphore/latch, count 2, 1 awaiting the latch (over 0)" "a latch's awaiters"

echo "== check: rate limiters"
# Nothing to hold past a threshold; one whose count is not a number (every
# acquisition refused) is flagged whatever the threshold.
"$D" run --rate 2/60s mon:rate -- true >/dev/null
"$D" run --rate 2/60s mon:rate -- true >/dev/null
expect 0 "$D" check --held-over 0 --waiters-over 0 --queue-over 0 '*mon:rate*'
has "$tmp/out" "dlock check: 0 of 1 past a threshold" "a rate limiter is looked at, never past"
hasnt "$tmp/out" "{mon:rate}:value" "its count is no semaphore"
"$D" run --rate 2/60s mon:ratebad -- true >/dev/null
rc set '{mon:ratebad}:value' abc >/dev/null
expect 1 "$D" check --held-over 1h 'mon:rate*'
has "$tmp/out" "dlock check: 1 of 2 past a threshold" "the broken one counted"
has "$tmp/out" "mon:ratebad  rate limiter (2 per 1 m 0 s): its count or grants hold other data" "the broken one said"
rc del mon:ratebad '{mon:ratebad}:value' '{mon:ratebad}:permits' >/dev/null

echo "== check: Redis unreachable"
expect 69 "$D" --url redis://127.0.0.1:1 check --held-over 1s
has "$tmp/err" "cannot use Redis" "said"

echo "== exporter: bad input"
expect 64 "$D" exporter
has "$tmp/err" "missing --listen ADDR:PORT" "no --listen"
for a in nope 1.2.3.4 127.0.0.1:99999 127.0.0.1:x ::1:80 '[::1]' ':' ''; do
  expect 64 "$D" exporter --listen "$a"
  has "$tmp/err" "give ADDR:PORT" "--listen '$a'"
done
expect 64 "$D" exporter --listen :0 --interval abc
has "$tmp/err" "--interval 'abc' is not a duration" "--interval abc"
expect 64 "$D" exporter --listen :0 --interval 10ms
has "$tmp/err" "out of range: 100ms to 1d" "--interval too short"
expect 64 "$D" exporter --listen :0 --scrape-timeout 0
expect 64 "$D" exporter --listen :0 --max-keys 0
has "$tmp/err" "--max-keys '0' is not a whole number from 1 to 10000000" "--max-keys 0"
expect 64 "$D" exporter --listen :0 'a*' 'b*'
has "$tmp/err" "one PATTERN" "two patterns"

# start_exporter VAR ARGS...: an exporter on a free port; sets VAR (its port)
# and VAR_PID. Its stderr in $tmp/VAR.log.
start_exporter() {
  local var=$1; shift
  "$D" exporter --listen 127.0.0.1:0 "$@" 2>"$tmp/$var.log" &
  local pid=$! port=
  extra_pids+=("$pid")
  for _ in $(seq 1 $((100 * SLOW))); do
    port=$(sed -n 's/.*serving http:\/\/127\.0\.0\.1:\([0-9]*\)\/metrics.*/\1/p' "$tmp/$var.log" 2>/dev/null)
    [ -n "$port" ] && break; sleep 0.05
  done
  printf -v "$var" %s "$port"; printf -v "${var}_PID" %s "$pid"
  [ -n "$port" ]
}
stop_exporter() { kill "$1"; wait "$1"; is "$?" "0" "SIGTERM: the exporter exits 0 (and clean under the sanitizers)"; }
scrape() { curl -sf --max-time $((20 * SLOW)) "http://127.0.0.1:$1/metrics"; }
value() { awk -v m="$2" 'index($0, m " ") == 1 { print $NF }' "$1"; }
promtool_ok() { local out; out=$(promtool check metrics < "$1" 2>&1) && [ -z "$out" ] || { echo "$out" | head -5; return 1; }; }

echo "== exporter: the state of the locks, promtool-clean"
"$D" run --read mon:rw -- sleep $((30 * SLOW)) & bg+=($!)
"$D" run --semaphore mon:sem --permits 3 -- sleep $((30 * SLOW)) & bg+=($!)
rc set mon:count 5 >/dev/null
rc hset 'mon:odd"na\me' "$uuid:9" 1 >/dev/null
"$D" run --rate 3/2s mon:rpc -- true >/dev/null
rc hset mon:rpc type 1 >/dev/null   # made per client
check "the read lock is held" until_ok held mon:rw
check "the permit is held" until_ok test "$(rc zcard '{mon:sem}:timeout')" = 1
check "an exporter starts" start_exporter E1 --interval 60s
scrape "$E1" >"$tmp/m1" || bad "GET /metrics"
check "promtool check metrics accepts it" promtool_ok "$tmp/m1"
is "$(value "$tmp/m1" dlock_up)" "1" "dlock_up 1"
is "$(value "$tmp/m1" 'dlock_lock_held{name="mon:a",kind="lock"}')" "1" "mon:a held"
is "$(value "$tmp/m1" 'dlock_lock_holders{name="mon:a"}')" "1" "one holder"
age=$(value "$tmp/m1" 'dlock_lock_hold_age_seconds{name="mon:a"}')
check "mon:a's hold age is known and above 1 s ($age)" awk -v a="$age" 'BEGIN { exit !(a > 1) }'
ttl=$(value "$tmp/m1" 'dlock_lock_ttl_seconds{name="mon:a"}')
check "mon:a's TTL is the watchdog's, at most 30 s ($ttl)" awk -v a="$ttl" 'BEGIN { exit !(a > 0 && a <= 30) }'
is "$(value "$tmp/m1" 'dlock_lock_queue_length{name="mon:fair"}')" "2" "the fair queue's length"
is "$(value "$tmp/m1" 'dlock_lock_waiters{name="mon:fair"}')" "2" "its waiters"
is "$(value "$tmp/m1" 'dlock_lock_held{name="mon:rw",kind="rwlock"}')" "1" "the read-write lock"
is "$(value "$tmp/m1" 'dlock_rwlock_mode{name="mon:rw",mode="read"}')" "1" "in read mode"
is "$(value "$tmp/m1" 'dlock_rwlock_mode{name="mon:rw",mode="write"}')" "0" "not write"
is "$(value "$tmp/m1" 'dlock_semaphore_permits_available{name="mon:sem"}')" "2" "permits available"
is "$(value "$tmp/m1" 'dlock_semaphore_permits_held{name="mon:sem"}')" "1" "permits held"
is "$(value "$tmp/m1" 'dlock_count_value{name="mon:count"}')" "5" "a plain count"
is "$(value "$tmp/m1" 'dlock_count_value{name="mon:latch"}')" "2" "the latch's count"
is "$(value "$tmp/m1" 'dlock_latch_waiters{name="mon:latch"}')" "1" "its awaiters"
is "$(value "$tmp/m1" 'dlock_rate_limiter_rate{name="mon:rate"}')" "2" "a rate limiter's rate"
is "$(value "$tmp/m1" 'dlock_rate_limiter_interval_seconds{name="mon:rate"}')" "60" "its interval"
is "$(value "$tmp/m1" 'dlock_rate_limiter_available{name="mon:rate"}')" "0" "what is left (two runs took both)"
is "$(value "$tmp/m1" 'dlock_rate_limiter_per_client{name="mon:rate"}')" "0" "overall"
is "$(value "$tmp/m1" 'dlock_rate_limiter_per_client{name="mon:rpc"}')" "1" "a per-client one"
is "$(value "$tmp/m1" 'dlock_rate_limiter_interval_seconds{name="mon:rpc"}')" "2" "its interval"
hasnt "$tmp/m1" 'dlock_rate_limiter_available{name="mon:rpc"}' "nothing left to say per client"
hasnt "$tmp/m1" ':value"}' "a limiter's count is no semaphore's"
has "$tmp/m1" 'dlock_lock_held{name="mon:odd\"na\\me",kind="lock"} 1' "a name with a quote and a backslash, escaped"
hasnt "$tmp/m1" 'dlock_lock_hold_age_seconds{name="redisson:job"}' "no hold age for a Redisson holder"
is "$(value "$tmp/m1" dlock_scan_truncated)" "0" "not truncated"
check "the scan's cost is there" grep -Eq '^dlock_scan_roundtrips [1-9][0-9]*$' "$tmp/m1"
check "and its duration" grep -Eq '^dlock_scan_duration_seconds [0-9.e-]+$' "$tmp/m1"

echo "== exporter: one pass per interval, served from memory"
scans() { rc info commandstats | sed -n 's/^cmdstat_scan:calls=\([0-9]*\),.*/\1/p'; }
s1=$(scans)
for _ in 1 2 3 4 5; do scrape "$E1" >"$tmp/m2" || bad "GET /metrics (again)"; done
is "$(scans)" "$s1" "five more scrapes within the interval: no SCAN sent"
is "$(value "$tmp/m2" dlock_scan_passes_total)" "1" "one pass so far"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$E1/other"); is "$code" "404" "another path: 404"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$E1/metrics"); is "$code" "405" "POST: 405"
code=$(curl -s -o /dev/null -w '%{http_code}' -I "http://127.0.0.1:$E1/metrics"); is "$code" "200" "HEAD: 200"
check "--help of the exporter" "$D" exporter --help

echo "== exporter: a second one on the same address"
expect 71 "$D" exporter --listen "127.0.0.1:$E1"
has "$tmp/err" "cannot listen on 127.0.0.1:$E1: Address already in use" "address in use: a clear error"
stop_exporter "$E1_PID"

echo "== exporter: --max-keys"
for i in $(seq 1 30); do echo "HSET mon:many:$i $uuid:1 1"; done | rc >/dev/null
check "an exporter with --max-keys 10" start_exporter E2 --max-keys 10 --interval 60s 'mon:many:*'
scrape "$E2" >"$tmp/m3" || bad "GET /metrics (max-keys)"
check "promtool accepts it" promtool_ok "$tmp/m3"
is "$(value "$tmp/m3" dlock_scan_objects)" "10" "10 objects looked at"
is "$(value "$tmp/m3" dlock_scan_truncated)" "1" "the pass says it was cut short"
is "$(grep -c '^dlock_lock_held{' "$tmp/m3")" "10" "10 names exported"
stop_exporter "$E2_PID"

echo "== exporter: observed holds, renewals, released locks"
check "an exporter with a short interval" start_exporter E3 --interval 200ms 'redisson:*'
scrape "$E3" >/dev/null
sleep 1.5
rc pexpire redisson:job 60000 >/dev/null   # what a Redisson watchdog does
scrape "$E3" >"$tmp/m4"
obs=$(value "$tmp/m4" 'dlock_lock_held_observed_seconds{name="redisson:job"}')
check "the Redisson hold seen for over 1 s ($obs)" awk -v a="$obs" 'BEGIN { exit !(a >= 1) }'
is "$(value "$tmp/m4" 'dlock_lock_renewed{name="redisson:job"}')" "1" "its TTL rose: renewed"
sleep 0.5
scrape "$E3" >"$tmp/m5"
is "$(value "$tmp/m5" 'dlock_lock_renewed{name="redisson:job"}')" "0" "then not renewed"
rc del redisson:job >/dev/null
sleep 0.3
scrape "$E3" >"$tmp/m6"
is "$(value "$tmp/m6" 'dlock_lock_held{name="redisson:job",kind="lock"}')" "0" "released: shown free"
hasnt "$tmp/m6" 'dlock_lock_ttl_seconds{name="redisson:job"}' "no TTL for a free lock"
check "promtool accepts it" promtool_ok "$tmp/m6"
stop_exporter "$E3_PID"

echo "== exporter: Redis down, Redis hung"
extra_redis R || bad "an extra redis-server"
rc2() { redis-cli -p "$R_PORT" "$@"; }
rc2 hset mon:x "$uuid:1" 1 >/dev/null
check "an exporter on it" start_exporter E4 --url "redis://127.0.0.1:$R_PORT" --interval 100ms --scrape-timeout 1s
scrape "$E4" >"$tmp/m7"
is "$(value "$tmp/m7" dlock_up)" "1" "up while Redis answers"
kill -STOP "$R_PID"
sleep 0.2
t0=$(now_ms); scrape "$E4" >"$tmp/m8"; took=$(( $(now_ms) - t0 ))
kill -CONT "$R_PID"
is "$(value "$tmp/m8" dlock_up)" "0" "Redis hung: dlock_up 0"
has "$tmp/m8" 'dlock_error_info{error="no pass over Redis finished within the scrape timeout (1.0 s)' "and why"
check "answered within the scrape timeout (${took} ms; 1 s + slack)" test "$took" -lt $((1000 + 1500 * SLOW))
check "promtool accepts it" promtool_ok "$tmp/m8"
stop_extra R
sleep 0.3
t0=$(now_ms); scrape "$E4" >"$tmp/m9"; took=$(( $(now_ms) - t0 ))
is "$(value "$tmp/m9" dlock_up)" "0" "Redis down: dlock_up 0"
check "answered within the scrape timeout (${took} ms)" test "$took" -lt $((1000 + 1500 * SLOW))
for _ in $(seq 1 $((30 * SLOW))); do   # the pass begun while it hung may still end first
  scrape "$E4" >"$tmp/m9"; grep -q 'error="cannot connect to 127.0.0.1:' "$tmp/m9" && break; sleep 0.1
done
has "$tmp/m9" "dlock_error_info{error=\"cannot connect to 127.0.0.1:$R_PORT: connect: Connection refused\"} 1" "the error says why"
hasnt "$tmp/m9" 'dlock_lock_held{name="mon:x"' "no stale lock state"
check "promtool accepts it" promtool_ok "$tmp/m9"
check "the exporter said so on stderr" grep -q "a pass failed: cannot connect to 127.0.0.1:$R_PORT" "$tmp/E4.log"
stop_exporter "$E4_PID"
check "an exporter starts with Redis down, and serves dlock_up 0" start_exporter E5 --url redis://127.0.0.1:1 --scrape-timeout 1s
scrape "$E5" >"$tmp/m10"
is "$(value "$tmp/m10" dlock_up)" "0" "dlock_up 0 from the start"
stop_exporter "$E5_PID"

echo "== the alert rule"
silent() { "$@" >"$tmp/promtool.out" 2>&1 || { sed 's/^/    /' "$tmp/promtool.out" | head -20; return 1; }; }
check "promtool check rules" silent promtool check rules "$SRC/docs/prometheus/dlock-alerts.yml"
check "promtool test rules: held over 60 s fires as it should" silent promtool test rules "$SRC/tests/cli/dlock-alerts.test.yml"

finish
