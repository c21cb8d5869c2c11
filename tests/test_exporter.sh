#!/usr/bin/env bash
# examples/stats_exporter.c: serves the client's statistics in Prometheus'
# text format: every counter and histogram is there, histogram buckets are
# cumulative and end with +Inf = _count, and the numbers move while its
# workers take turns on a lock.
# usage: tests/test_exporter.sh PATH/TO/example_stats_exporter
set -uo pipefail
EXP=$1
tmp=$(mktemp -d)
rpid=; epid=
cleanup() {
  [ -n "$epid" ] && kill "$epid" 2>/dev/null
  [ -n "$rpid" ] && kill "$rpid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
redis-server --port 0 --unixsocket "$tmp/redis.sock" --save "" --appendonly no --dir "$tmp" \
  >/dev/null 2>&1 &
rpid=$!
for _ in $(seq 100); do [ -S "$tmp/redis.sock" ] && break; sleep 0.05; done
"$EXP" "unix://$tmp/redis.sock" 0 20 >"$tmp/out" 2>&1 &
epid=$!
for _ in $(seq 100); do grep -q "serving" "$tmp/out" && break; sleep 0.05; done
port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\)\/metrics.*/\1/p' "$tmp/out")
[ -n "$port" ] || fail "no port: $(cat "$tmp/out")"
get() { curl -sf "http://127.0.0.1:$port/metrics"; }
sleep 0.5
get >"$tmp/m1" || fail "GET /metrics"
sleep 1
get >"$tmp/m2" || fail "GET /metrics (2)"
for m in acquisitions_total waits_total wakeups_total wakeups_taken_total renewals_total \
         renewal_roundtrips_total renewal_writes_total connects_total reconnects_total roundtrips_total; do
  grep -q "^# TYPE dlock_$m counter$" "$tmp/m2" || fail "no counter dlock_$m"
  grep -Eq "^dlock_$m [0-9]+$" "$tmp/m2" || fail "no value for dlock_$m"
done
for r in gone unreachable paused replicas; do
  grep -Eq "^dlock_lost_total\{reason=\"$r\"\} [0-9]+$" "$tmp/m2" || fail "no lost{reason=$r}"
done
for h in acquire_wait handoff_gap roundtrip; do
  grep -q "^# TYPE dlock_${h}_seconds histogram$" "$tmp/m2" || fail "no histogram $h"
  awk -v h="dlock_${h}_seconds" '
    index($0, h "_bucket{") == 1 { v = $2 + 0; if (v < prev) bad = 1; prev = v; last = $0; n++ }
    index($0, h "_count ") == 1 { count = $2 + 0 }
    END {
      if (bad) { print h ": buckets not cumulative"; exit 1 }
      if (last !~ /le="\+Inf"/) { print h ": last bucket is not +Inf"; exit 1 }
      if (prev != count) { print h ": +Inf " prev " != count " count; exit 1 }
      if (n != 28) { print h ": " n " buckets"; exit 1 }
    }' "$tmp/m2" || fail "histogram $h"
done
a1=$(sed -n 's/^dlock_acquisitions_total //p' "$tmp/m1")
a2=$(sed -n 's/^dlock_acquisitions_total //p' "$tmp/m2")
[ "$a2" -gt "$a1" ] || fail "acquisitions did not grow ($a1 -> $a2)"
h2=$(sed -n 's/^dlock_handoff_gap_seconds_count //p' "$tmp/m2")
[ "$h2" -ge 1 ] || fail "no handoff measured"
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/other" | grep -q 404 ||
  fail "another path is not a 404"
echo "ok: acquisitions $a1 -> $a2, handoffs $h2"
