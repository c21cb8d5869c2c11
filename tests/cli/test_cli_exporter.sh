#!/usr/bin/env bash
# dlock exporter against clients that misbehave, and big keys (issue 38):
# clients sending their request a byte at a time (slowloris), connections
# that send nothing, and clients that never read their answer do not delay a
# scrape beside them; one key of 200 000 holders costs a pass bounded time and
# memory (--max-holders) and is counted whole; a stop signal ends the exporter
# within a second, a pass in progress included; :PORT serves IPv4 and IPv6
# and warns that it is not loopback (in a network namespace of its own: no
# test listens on a wildcard address of the host); requests that are not
# HTTP/1.x are refused; label values escape ESC and C1 bytes.
# usage: test_cli_exporter.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
"$SRC/scripts/deps.sh" curl >/dev/null || { echo "FAIL: curl is needed"; exit 1; }
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

uuid=6f1c0d4e-1111-2222-3333-444455556666   # a Redisson client's id (made up)

# start_exporter VAR LISTEN ARGS...: an exporter; sets VAR (its port) and
# VAR_PID; its stderr in $tmp/VAR.log.
start_exporter() {
  local var=$1 listen=$2; shift 2
  "$D" exporter --listen "$listen" "$@" 2>"$tmp/$var.log" &
  local pid=$! port=
  extra_pids+=("$pid")
  for _ in $(seq 1 $((100 * SLOW))); do
    port=$(sed -n 's/.*serving http:\/\/[^ ]*:\([0-9]*\)\/metrics.*/\1/p' "$tmp/$var.log" 2>/dev/null)
    [ -n "$port" ] && break; sleep 0.05
  done
  printf -v "$var" %s "$port"; printf -v "${var}_PID" %s "$pid"
  [ -n "$port" ]
}
# stopped_within PID MS: SIGTERM ends PID with exit 0 within MS
stopped_within() {
  local t0 took st
  t0=$(now_ms); kill -TERM "$1"; wait "$1"; st=$?; took=$(( $(now_ms) - t0 ))
  echo "    (SIGTERM to exit: $took ms, status $st)"
  [ "$st" = 0 ] && [ "$took" -lt "$2" ]
}
curl_() { curl -s --noproxy '*' --max-time $((20 * SLOW)) "$@"; }
value() { awk -v m="$2" 'index($0, m " ") == 1 { print $NF }' "$1"; }
# scrape_ms PORT: one scrape's time in ms (its page in $tmp/page), or 99999
scrape_ms() {
  local t0; t0=$(now_ms)
  curl_ -f "http://127.0.0.1:$1/metrics" >"$tmp/page" || { echo 99999; return; }
  echo $(( $(now_ms) - t0 ))
}
# raw PORT REQUEST: the first line of the answer to REQUEST (bash's /dev/tcp)
raw() {
  local line
  exec 5<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf '%b' "$2" >&5
  IFS= read -r -t $((5 * SLOW)) line <&5
  exec 5>&-
  printf '%s\n' "${line%$'\r'}"
}
# slow_client PORT: sends a request a byte every 200 ms, again and again
# (reconnecting when dropped), until killed
slow_client() {
  trap '' PIPE
  local req=$'GET /metrics HTTP/1.1\r\nHost: x\r\nX-Padding: aaaaaaaaaaaaaaaaaaaa\r\n\r\n' i
  while :; do
    exec 3<>"/dev/tcp/127.0.0.1/$1" 2>/dev/null || { sleep 0.1; continue; }
    for ((i = 0; i < ${#req}; i++)); do
      printf '%s' "${req:i:1}" >&3 2>/dev/null || break
      sleep 0.2
    done
    exec 3>&-
  done
}
# silent_client PORT: connects and sends nothing (the connection is the
# sleep's, whose pid is the client's: a kill ends both)
silent_client() { exec 3<>"/dev/tcp/127.0.0.1/$1"; exec sleep $((60 * SLOW)); }
# deaf_client PORT: asks for /metrics and never reads the answer
deaf_client() {
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n' >&3
  exec sleep $((60 * SLOW))
}

echo "== slowloris, silent and deaf clients beside a scraper"
# A page of some size (3000 locks: a few hundred KB) for the deaf clients
# not to read.
rc eval "for i = 1, 3000 do redis.call('hset', 'page:' .. i, ARGV[1] .. ':1', 1) end" 0 "$uuid" >/dev/null
check "an exporter" start_exporter E1 127.0.0.1:0 --interval 100ms
is "$(scrape_ms "$E1" | awk '{ print ($1 < 99999) }')" "1" "a first scrape"
pages=$(wc -c <"$tmp/page")
check "the page is large ($pages bytes)" test "$pages" -gt 200000
clients=()
for _ in $(seq 1 16); do slow_client "$E1" & clients+=($!); done
for _ in $(seq 1 4); do silent_client "$E1" & clients+=($!); done
for _ in $(seq 1 4); do deaf_client "$E1" & clients+=($!); done
bg+=("${clients[@]}")
sleep 1.5   # all of them connected, the slow ones half-way through their heads
worst=0
for i in $(seq 1 8); do
  ms=$(scrape_ms "$E1")
  [ "$ms" -gt "$worst" ] && worst=$ms
  [ "$(value "$tmp/page" dlock_up)" = 1 ] || bad "scrape $i: dlock_up is not 1"
  sleep 0.3
done
# Served one at a time (before), each slow client held a scrape 5 s.
check "8 scrapes beside 16 slow, 4 silent and 4 deaf clients, each under 1 s ($worst ms; 1 s x $SLOW)" \
  test "$worst" -lt $((1000 * SLOW))
nfd=$(ls "/proc/$E1_PID/fd" | wc -l)
check "the exporter's descriptors stay bounded ($nfd)" test "$nfd" -lt 100
head_408() {
  local line
  exec 6<>"/dev/tcp/127.0.0.1/$E1"
  printf 'GET /metrics HTTP/1.1\r\n' >&6
  IFS= read -r -t $((10 * SLOW)) line <&6
  exec 6>&-
  [ "${line%$'\r'}" = "HTTP/1.1 408 Request Timeout" ]
}
check "a request whose head does not come in time is answered 408" head_408
for p in "${clients[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
bg=()
check "still serving" test "$(scrape_ms "$E1")" -lt 99999
stopped_within "$E1_PID" $((1000 * SLOW))
is "$?" 0 "SIGTERM: exit 0 within a second"
rc flushall >/dev/null

echo "== only HTTP/1.x, GET and HEAD"
check "an exporter" start_exporter E2 127.0.0.1:0
is "$(raw "$E2" 'GET /metrics HTTP/1.0\r\n\r\n')" "HTTP/1.1 200 OK" "HTTP/1.0: served"
is "$(raw "$E2" 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n')" "HTTP/1.1 200 OK" "HTTP/1.1: served"
is "$(raw "$E2" 'GET /metrics\r\n\r\n')" "HTTP/1.1 400 Bad Request" "HTTP/0.9 (no version): 400"
is "$(raw "$E2" 'GET /metrics HTTP/2.0\r\n\r\n')" "HTTP/1.1 505 HTTP Version Not Supported" "HTTP/2.0: 505"
is "$(raw "$E2" 'GET /metrics HTTP/1.1 extra\r\n\r\n')" "HTTP/1.1 400 Bad Request" "four words: 400"
is "$(raw "$E2" 'PUT /metrics HTTP/1.1\r\n\r\n')" "HTTP/1.1 405 Method Not Allowed" "PUT: 405"
hasnt "$tmp/E2.log" "not a loopback address" "127.0.0.1: no warning"
stopped_within "$E2_PID" $((1000 * SLOW))

echo "== :PORT listens on both families, and says it is not loopback"
# Wildcard addresses only inside a network namespace of our own (loopback
# alone): nothing a test starts is reachable from outside the machine
# (scripts/listen-check.sh). Redis is not reachable from there: the exporter
# serves dlock_up 0, which is all this needs.
if unshare -n true 2>/dev/null; then
  D="$D" T="$tmp" SLOW="$SLOW" unshare -n bash -c '
    ip link set lo up || exit 1
    "$D" exporter --url redis://127.0.0.1:1 --connect-timeout 1s --listen :0 2>"$T/E3.log" &
    p=$!
    for _ in $(seq 1 $((100 * SLOW))); do
      port=$(sed -n "s/.*serving http:\/\/0\.0\.0\.0:\([0-9]*\)\/metrics.*/\1/p" "$T/E3.log")
      [ -n "$port" ] && break; sleep 0.05
    done
    echo "port=$port"
    echo "v4=$(curl -s --noproxy "*" --max-time 10 -o /dev/null -w "%{http_code}" "http://127.0.0.1:$port/metrics")"
    echo "v6=$(curl -s --noproxy "*" --max-time 10 -g -o /dev/null -w "%{http_code}" "http://[::1]:$port/metrics")"
    kill "$p"; wait "$p"; echo "exit=$?"' >"$tmp/ns.out" 2>&1
  E3=$(sed -n 's/^port=//p' "$tmp/ns.out")
  has "$tmp/ns.out" "v4=200" "over IPv4"
  has "$tmp/ns.out" "v6=200" "over IPv6, on the same port"
  has "$tmp/ns.out" "exit=0" "SIGTERM: exit 0"
  has "$tmp/E3.log" "http://0.0.0.0:$E3/metrics is not a loopback address" "the IPv4 wildcard is said"
  has "$tmp/E3.log" "http://[::]:$E3/metrics is not a loopback address" "the IPv6 one too"
else
  echo "    (skipped: no network namespace of our own for a wildcard address: unshare -n refused)"
fi
check "an exporter on [::1]:0" start_exporter E4 '[::1]:0'
code=$(curl_ -o /dev/null -w '%{http_code}' -g "http://[::1]:$E4/metrics"); is "$code" "200" "[::1] serves"
hasnt "$tmp/E4.log" "not a loopback address" "::1 is loopback: no warning"
stopped_within "$E4_PID" $((1000 * SLOW))

echo "== label values: ESC and C1 escaped"
rc hset $'esc:\e[31mred' "$uuid:1" 1 >/dev/null
rc hset $'esc:c1\xc2\x9b31m' "$uuid:1" 1 >/dev/null
rc hset 'esc:plain"q\x' "$uuid:1" 1 >/dev/null
check "an exporter" start_exporter E5 127.0.0.1:0 'esc:*'
curl_ "http://127.0.0.1:$E5/metrics" >"$tmp/esc"
has "$tmp/esc" 'dlock_lock_held{name="esc:\\x1b[31mred",kind="lock"} 1' "ESC as \\x1b"
has "$tmp/esc" 'dlock_lock_held{name="esc:c1\\xc2\\x9b31m",kind="lock"} 1' "C1 (CSI) as \\xc2\\x9b"
has "$tmp/esc" 'dlock_lock_held{name="esc:plain\"q\\x",kind="lock"} 1' "a plain name keeps its bytes (quote and backslash escaped)"
check "no raw ESC byte in the page" bash -c '! LC_ALL=C grep -q $'"'"'\x1b'"'"' "$1"' _ "$tmp/esc"
check "no raw C1 byte" bash -c '! LC_ALL=C grep -q $'"'"'\xc2\x9b'"'"' "$1"' _ "$tmp/esc"
stopped_within "$E5_PID" $((1000 * SLOW))

echo "== one key of 200 000 holders: a bounded pass, counted whole"
rc eval "for i = 1, 200000 do redis.call('hset', KEYS[1], ARGV[1] .. ':' .. i, 1) end" 1 big:h "$uuid" >/dev/null
rc eval "for i = 1, 5000 do redis.call('hset', KEYS[1], ARGV[1] .. ':' .. i, 1) end" 1 big:small "$uuid" >/dev/null
is "$(rc hlen big:h)" "200000" "the key has 200 000 fields"
check "an exporter" start_exporter E6 127.0.0.1:0 --interval 200ms 'big:*'
hwm0=$(awk '/^VmHWM/ { print $2 }' "/proc/$E6_PID/status")
ms1=$(scrape_ms "$E6")
sleep 0.3
# The second pass finds the first one's holders in memory (quadratic in
# them before: over a minute for this key).
ms=$(scrape_ms "$E6")
hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$E6_PID/status")
cp "$tmp/page" "$tmp/big"
is "$(value "$tmp/big" dlock_up)" "1" "the pass read Redis"
is "$(value "$tmp/big" dlock_scan_passes_total)" "2" "a second pass"
is "$(value "$tmp/big" 'dlock_lock_holders{name="big:h"}')" "200000" "its holders counted whole"
is "$(value "$tmp/big" 'dlock_lock_holders{name="big:small"}')" "5000" "a key under the bound read whole"
is "$(value "$tmp/big" dlock_scan_holders_truncated)" "1" "the pass says one object was read in part"
is "$(value "$tmp/big" dlock_scan_max_holders)" "10000" "and the bound (--max-holders)"
check "the first pass took under a second ($ms1 ms; x $SLOW)" test "$ms1" -lt $((1000 * SLOW))
check "the second one too ($ms ms; x $SLOW)" test "$ms" -lt $((1000 * SLOW))
grow=$(( (hwm - hwm0) / 1024 ))
echo "    (passes: $ms1 ms, $ms ms; peak memory grew $grow MB)"
check "the exporter's peak memory grew by less than 32 MB ($grow MB)" test "$grow" -lt 32
stopped_within "$E6_PID" $((1000 * SLOW))
check "a stop ends it" test $? = 0
rc del big:h big:small >/dev/null

echo "== a stop signal during a pass: exit within a second"
# A pass of some seconds x $SLOW (a snapshot of each of the keys); SIGTERM
# used to wait for its end.
n=$((50000 * SLOW))
rc eval "for i = 1, tonumber(ARGV[2]) do redis.call('hset', 'many:' .. i, ARGV[1] .. ':1', 1) end" 0 "$uuid" "$n" >/dev/null
check "an exporter" start_exporter E7 127.0.0.1:0 --max-keys 1000000 --scrape-timeout 60s 'many:*'
curl_ -o /dev/null "http://127.0.0.1:$E7/metrics" & scr=$!
sleep 0.5   # in the pass
stopped_within "$E7_PID" $((1000 * SLOW))
is "$?" 0 "SIGTERM in the middle of a long pass: exit 0 within a second"
hasnt "$tmp/E7.log" "did not end" "the pass ended at its next step"
wait "$scr" 2>/dev/null
extra_redis R || bad "an extra redis-server"
redis-cli -p "$R_PORT" hset hung:x "$uuid:1" 1 >/dev/null
check "an exporter on it" start_exporter E8 127.0.0.1:0 --url "redis://127.0.0.1:$R_PORT" --scrape-timeout 30s
kill -STOP "$R_PID"
curl_ -o /dev/null "http://127.0.0.1:$E8/metrics" & scr=$!
sleep 0.3   # the pass waits for the hung server
stopped_within "$E8_PID" $((1000 * SLOW))
is "$?" 0 "SIGTERM while the pass waits for a hung Redis: exit 0 within a second"
has "$tmp/E8.log" "did not end within" "it says it left the pass"
kill -CONT "$R_PID"
wait "$scr" 2>/dev/null

finish
