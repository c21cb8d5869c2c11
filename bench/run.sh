#!/usr/bin/env bash
# make bench: dlock, its peers and the references, side by side in one run.
# Starts a throwaway redis-server, runs every scenario BENCH_RUNS times (median
# reported), prints one table and writes it to bench/RESULTS.md.
#
# BENCH_PLACEMENT=split (default): redis-server on CPU 0, every client on CPU 1.
# BENCH_PLACEMENT=same: everything on CPU 0.
# BENCH_QUICK=1: short runs (a smoke test of the pipeline, not numbers to quote).
# BENCH_ONLY="refs uncontended handoff fair idle many readers striped held multilock sem latch async revoke tls cluster failover replicated spin python writerfirst revokereq": a subset (default: all).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${1:-$root/build}
runs=${BENCH_RUNS:-5}
placement=${BENCH_PLACEMENT:-split}
quick=${BENCH_QUICK:-0}
out=${BENCH_OUT:-$here/RESULTS.md}
results=$(mktemp /tmp/dlock-bench-XXXXXX.jsonl)
bench=$build/bench/dlock_bench

# shellcheck source=../scripts/redis-throwaway.sh
. "$root/scripts/redis-throwaway.sh"
trap 'redis_stop; extra_stop; rm -f "$results"; rm -rf "${certs:-}"' EXIT
trap 'echo; echo "interrupted"; exit 130' INT TERM

cpus=$(nproc)
if [ "$placement" = split ] && [ "$cpus" -ge 2 ]; then
  REDIS_CPU=0; client_cpu=1
else
  placement=same; REDIS_CPU=0; client_cpu=0
fi
pin() { taskset -c "$client_cpu" "$@"; }

if [ "$quick" = 1 ]; then
  secs=2; cycles=3000; peer_cycles=1000; rb_n=5000; rb50_n=20000; locks=10000; peer_locks=5000
else
  secs=5; cycles=20000; peer_cycles=5000; rb_n=20000; rb50_n=200000; locks=100000; peer_locks=20000
fi

# Peers (npm, from the committed lock file).
if [ ! -d "$here/peers/node_modules" ] || [ "$here/peers/package-lock.json" -nt "$here/peers/node_modules" ]; then
  echo "installing the peers (npm ci)..."
  (cd "$here/peers" && npm ci --no-audit --no-fund >/dev/null 2>&1) || { echo "npm ci failed"; exit 1; }
  touch "$here/peers/node_modules"
fi
peers=(node-redisson redlock redis-semaphore)

only=${BENCH_ONLY:-refs uncontended handoff fair idle many readers striped held multilock sem latch async revoke tls cluster failover replicated spin python writerfirst revokereq}
want() { case " $only " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# The servers a section starts beside the main one (a cluster, a failover's
# primary, replica and sentinels): in one throwaway folder (extra_dir), on the
# Redis CPU, stopped by pid (extra_pids) when the section ends or on exit.
extra_dir=; extra_pids=()
extra_begin() { extra_dir=$(mktemp -d "/tmp/dlock-bench-$1-XXXXXX"); extra_pids=(); }
extra_stop() {
  local p
  for p in "${extra_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  extra_pids=()
  [ -z "$extra_dir" ] || rm -rf "$extra_dir"
  extra_dir=
}
free_port() { # a loopback port nothing listens on
  local p
  for _ in $(seq 1 50); do
    p=$(( 20000 + RANDOM % 40000 ))
    port_in_use "$p" || { echo "$p"; return; }
  done
}
extra_redis() { # port sub-folder [redis-server arguments...]
  local port=$1 dir=$extra_dir/$2
  shift 2
  mkdir -p "$dir"
  taskset -c "$REDIS_CPU" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$dir" --logfile "$dir/redis.log" --daemonize no "$@" &
  extra_pids+=($!)
}

# TLS: the same server listens on a TLS port too (certificates made here with
# openssl; server authentication only, as managed services do).
tls_url=
if want tls; then
  certs=$(mktemp -d /tmp/dlock-bench-tls-XXXXXX)
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  if (cd "$certs" &&
      openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 2 -subj "/CN=bench CA" &&
      openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=localhost" &&
      printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >ext.cnf &&
      openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -out server.crt -days 2 -extfile ext.cnf) >/dev/null 2>&1; then
    tls_port=$(free_port)
    REDIS_EXTRA="--tls-port $tls_port --tls-cert-file $certs/server.crt --tls-key-file $certs/server.key --tls-ca-cert-file $certs/ca.crt --tls-auth-clients no"
    tls_url="rediss://127.0.0.1:$tls_port?cacert=$certs/ca.crt"
  else
    echo "  openssl failed: no TLS section" >&2
  fi
fi

redis_start || exit 1
url=$REDIS_URL
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$REDIS_PORT, pid $REDIS_PID;" \
     "placement: $placement (redis CPU $REDIS_CPU, clients CPU $client_cpu); $runs runs each"

record() { # appends the JSON line of a run, or a failure record
  local line
  line=$("$@" 2>/tmp/dlock-bench-err.txt | tail -1)
  if [ -n "$line" ] && [ "${line:0:1}" = "{" ]; then
    echo "$line" >> "$results"
  else
    echo "  failed: $*" >&2
    tail -3 /tmp/dlock-bench-err.txt >&2
  fi
}
flush() { redis-cli -p "$REDIS_PORT" flushall >/dev/null; redis-cli -p "$REDIS_PORT" script flush >/dev/null; }

# References: the acquire script's EVALSHA through redis-benchmark and a hiredis loop.
sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat "$build/gen/expanded/lock_acquire.lua")")
owner=00000000-0000-0000-0000-000000000000:1
rb() { # scenario clients n key
  local out v
  out=$(pin redis-benchmark -p "$REDIS_PORT" -c "$2" -n "$3" -r 10000 -q \
        evalsha "$sha" 3 "$4" "tok:$4" "next:$4" 30000 "$owner" 0 0 50 2>&1 | tr '\r' '\n')
  v=$(printf '%s\n' "$out" | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
  if [ -n "$v" ]; then
    echo "{\"peer\":\"redis-benchmark\",\"scenario\":\"$1\",\"calls_per_s\":$v}" >> "$results"
  else
    echo "  failed: redis-benchmark $1:" >&2
    printf '%s\n' "$out" | grep -v '^ *$' | tail -3 >&2
  fi
}
if want refs; then
  echo "references..."
  for i in $(seq "$runs"); do
    rb ceiling-c1 1 "$rb_n" bench:rb1
    rb ceiling-c50 50 "$rb50_n" "bench:rb50:__rand_int__"
    record pin "$bench" ceiling --url "$url" --cycles "$cycles"
    flush
    sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat "$build/gen/expanded/lock_acquire.lua")")
  done
fi

if want uncontended; then
echo "1. uncontended..."
for i in $(seq "$runs"); do
  # The references right beside dlock's run: a machine's fast and slow
  # moments then hit both sides of the ratio. redis-benchmark -c 1: two of its
  # round trips are the cycle the issue's target names.
  sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat "$build/gen/expanded/lock_acquire.lua")")
  rb ceiling-c1-paired 1 "$rb_n" bench:rb1
  record pin "$bench" ceiling --url "$url" --cycles "$cycles"
  record pin "$bench" uncontended --url "$url" --cycles "$cycles"
  for p in "${peers[@]}"; do record pin node "$here/peers/bench.js" --peer "$p" --scenario uncontended --url "$url" --cycles "$peer_cycles"; done
  flush
done

fi
if want handoff; then
echo "2. forced handoff (threads, then processes)..."
for mode in threads processes; do
  for i in $(seq "$runs"); do
    record pin "$bench" handoff --url "$url" --mode "$mode" --seconds "$secs"
    for p in "${peers[@]}"; do record pin node "$here/peers/bench.js" --peer "$p" --scenario handoff --mode "$mode" --seconds "$secs" --url "$url"; done
    flush
  done
done

fi
if want fair; then
echo "2b. fair-lock handoff (processes; only the head of the queue is woken)..."
for i in $(seq "$runs"); do
  # The -c 1 round trip right beside it: the gap target is a ratio to it
  # (the script loaded first: the section before flushed the cache).
  sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat "$build/gen/expanded/lock_acquire.lua")")
  rb ceiling-c1 1 "$rb_n" bench:rb1
  record pin "$bench" handoff --kind fair --url "$url" --mode processes --seconds "$secs"
  flush
done

fi
if want idle; then
echo "3. idle waiters..."
for i in $(seq "$runs"); do
  record pin "$bench" idle --url "$url"
  for p in "${peers[@]}"; do record pin node "$here/peers/bench.js" --peer "$p" --scenario idle --url "$url"; done
  flush
done

fi
if want many; then
echo "4. many names..."
for i in $(seq "$runs"); do
  # The -c 50 ceiling right beside dlock's run, as for the uncontended one.
  sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat "$build/gen/expanded/lock_acquire.lua")")
  rb ceiling-c50 50 "$rb50_n" "bench:rb50:__rand_int__"
  record pin "$bench" many --url "$url" --seconds "$secs"
  for p in "${peers[@]}"; do record pin node "$here/peers/bench.js" --peer "$p" --scenario many --seconds "$secs" --url "$url"; done
  flush
done

fi
if want readers; then
echo "7. read lock, 8 readers on one name (beside the reentrant lock over many names)..."
for i in $(seq "$runs"); do
  record pin "$bench" readers --url "$url" --concurrency 8 --seconds "$secs"
  flush
done

fi
if want striped; then
echo "7b. striped lock: 16 workers on random keys, 16 stripes against one name..."
for i in $(seq "$runs"); do
  record pin "$bench" striped --url "$url" --concurrency 16 --seconds "$secs"
  flush
done

fi
if want held; then
echo "5. held locks..."
for i in $(seq "$runs"); do
  record pin "$bench" held --url "$url" --locks "$locks"
  flush
  record pin "$bench" held --url "$url" --locks "$peer_locks"
  flush
  for p in "${peers[@]}"; do
    record pin node --expose-gc "$here/peers/bench.js" --peer "$p" --scenario held --locks "$peer_locks" --no-fallback --url "$url"
    flush
  done
done

fi
if want multilock; then
echo "6. multi-lock of 3 names; RedLock over 3 servers; 4 permits in one call..."
# The RedLock's two other servers, on the Redis CPU as the main one.
extra_begin redlock
rl_urls=$url
for n in 1 2; do
  p=$(free_port)
  extra_redis "$p" "$n"
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
  rl_urls="$rl_urls,redis://127.0.0.1:$p"
done
for i in $(seq "$runs"); do
  record pin "$bench" multilock --url "$url" --cycles "$cycles"
  record pin "$bench" redlock --url "$rl_urls" --cycles "$((cycles / 4))" --kind blocking
  record pin "$bench" redlock --url "$rl_urls" --cycles "$((cycles / 4))" --kind async
  record pin "$bench" permits --url "$url" --cycles "$cycles"
  flush
done
extra_stop

fi
if want sem; then
echo "8. semaphore of one permit (uncontended, handoff in threads and processes, idle)..."
for i in $(seq "$runs"); do
  # The -c 1 round trip right beside it: the gap target is a ratio to it.
  sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat "$build/gen/expanded/lock_acquire.lua")")
  rb ceiling-c1 1 "$rb_n" bench:rb1
  record pin "$bench" uncontended --kind semaphore --url "$url" --cycles "$cycles"
  record pin node "$here/peers/bench.js" --peer redis-semaphore-sem --scenario uncontended --url "$url" --cycles "$peer_cycles"
  for mode in threads processes; do
    record pin "$bench" handoff --kind semaphore --url "$url" --mode "$mode" --seconds "$secs"
    record pin node "$here/peers/bench.js" --peer redis-semaphore-sem --scenario handoff --mode "$mode" --seconds "$secs" --url "$url"
  done
  record pin "$bench" idle --kind semaphore --url "$url"
  flush
done

fi
if want latch; then
echo "9. count-down latch: 100 awaiters over 4 processes, one count-down..."
for i in $(seq "$runs"); do
  sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat "$build/gen/expanded/lock_acquire.lua")")
  rb ceiling-c1 1 "$rb_n" bench:rb1
  record pin "$bench" latch --url "$url"
  # The same wake-up of as many threads without Redis or dlock: this
  # machine's floor, right beside it.
  record pin "$bench" latchfloor
  flush
done

fi
if want revoke; then
echo "10. revocation: a DEL of a held lock to its lost callback; tracking's cost for $locks held locks..."
# A 15 s watchdog (a renewal period of 5 s): 100 000 locks renewed every
# second (section 5's 3 s) leave this machine's Redis little room to spare,
# and the point here is the cost of tracking, per period.
for i in $(seq "$(( runs < 3 ? runs : 3 ))"); do
  record pin "$bench" revoke --url "$url" --locks "$locks" --watchdog-ms 15000 --periods 1
  flush
done

fi

if want async; then
echo "11. asynchronous API: many names from one thread; 10 000 pending waiters..."
for i in $(seq "$runs"); do
  # The -c 50 ceiling right beside each run, as for section 4.
  sha=$(redis-cli -p "$REDIS_PORT" script load "$(cat "$build/gen/expanded/lock_acquire.lua")")
  rb ceiling-c50 50 "$rb50_n" "bench:rb50:__rand_int__"
  record pin "$bench" asyncmany --url "$url" --seconds "$secs"
  flush
done
record pin "$bench" asyncidle --url "$url"
flush

fi

if want tls && [ -n "$tls_url" ]; then
echo "12. TLS against plain (the same server, its TLS port), round trips and uncontended cycles..."
for i in $(seq "$runs"); do
  # Each TLS run right after its plain twin: paired ratios.
  record pin "$bench" ping --url "$url" --cycles "$cycles" --tag -plain
  record pin "$bench" ping --url "$tls_url" --cycles "$cycles" --tag -tls
  record pin "$bench" uncontended --url "$url" --cycles "$cycles" --tag -plain
  record pin "$bench" uncontended --url "$tls_url" --cycles "$cycles" --tag -tls
  flush
done

fi

if want cluster || want revokereq; then
echo "13. a cluster of 3 primaries against one server: client CPU per cycle, many names, renewals per node;"
echo "18. revoke request -> the holder's handler, one server and the cluster, beside PING..."
# Three cluster-enabled servers (no replicas: the client's side is measured),
# all on the Redis CPU as the single server is; stopped by pid.
extra_begin cluster
cl_ports=()
cluster_ok=1
for n in 1 2 3; do
  p=$(free_port)
  extra_redis "$p" "$n" --cluster-enabled yes --cluster-config-file "$extra_dir/$n/nodes.conf"
  cl_ports+=("$p")
done
for p in "${cl_ports[@]}"; do
  for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
if ! redis-cli --cluster create "${cl_ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null 2>&1; then
  echo "  could not create the cluster: no cluster section" >&2; cluster_ok=0
fi
for _ in $(seq 1 200); do
  up=0
  for p in "${cl_ports[@]}"; do redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && up=$((up + 1)); done
  [ "$up" = 3 ] && break
  sleep 0.1
done
[ "${up:-0}" = 3 ] || { echo "  the cluster did not come up: no cluster section" >&2; cluster_ok=0; }
cluster_url="redis-cluster://127.0.0.1:${cl_ports[0]},127.0.0.1:${cl_ports[1]},127.0.0.1:${cl_ports[2]}"
cl_flush() { for p in "${cl_ports[@]}"; do redis-cli -p "$p" flushall >/dev/null; done; }
if want revokereq; then
  # Revocation on request (issue 36.2): request -> callback against PING, in
  # one run each, on the single server and (when it came up) the cluster.
  if [ "$quick" = 1 ]; then rq_cycles=500; else rq_cycles=2000; fi
  for i in $(seq "$runs"); do
    record pin "$bench" revokereq --url "$url" --cycles "$rq_cycles" --tag -single
    [ "$cluster_ok" = 1 ] &&
      record pin "$bench" revokereq --url "$cluster_url" --cycles "$rq_cycles" --tag -cluster
    flush; [ "$cluster_ok" = 1 ] && cl_flush
  done
fi
if [ "$cluster_ok" = 1 ] && want cluster; then
  for i in $(seq "$runs"); do
    # Each cluster run right after its single-server twin: paired ratios.
    record pin "$bench" uncontended --url "$url" --cycles "$cycles" --tag -single
    record pin "$bench" uncontended --url "$cluster_url" --cycles "$cycles" --tag -cluster
    record pin "$bench" many --url "$url" --seconds "$secs" --tag -single
    record pin "$bench" many --url "$cluster_url" --seconds "$secs" --tag -cluster
    flush; cl_flush
  done
  # About 10 000 held locks per primary (CRC16 spreads the names evenly).
  for i in $(seq "$(( runs < 3 ? runs : 3 ))"); do
    record pin "$bench" held --url "$cluster_url" --locks $(( locks < 30000 ? locks : 30000 )) --tag -cluster
    cl_flush
  done
fi
extra_stop

fi

if want failover; then
echo "14. Sentinel failover: the switch announced -> the first acquisition on the new primary..."
# A primary, one replica and three sentinels (quorum 2), stopped by pid. Each
# run is a SENTINEL FAILOVER (the roles swap; the next run swaps them back).
extra_begin failover
fo_dir=$extra_dir
fo_p0=$(free_port); fo_p1=$(free_port)
extra_redis "$fo_p0" 0
extra_redis "$fo_p1" 1 --replicaof 127.0.0.1 "$fo_p0"
fo_s=()
for n in 1 2 3; do
  sp=$(free_port); fo_s+=("$sp")
  printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor bench 127.0.0.1 %s 2\nsentinel down-after-milliseconds bench 1000\nsentinel failover-timeout bench 3000\n' \
    "$sp" "$fo_dir" "$fo_p0" > "$fo_dir/s$n.conf"
  taskset -c "$REDIS_CPU" redis-server "$fo_dir/s$n.conf" --sentinel --logfile "$fo_dir/s$n.log" --daemonize no &
  extra_pids+=($!)
done
fo_ok=0
for _ in $(seq 1 300); do   # every sentinel knows the replica and the other two
  ready=0
  for sp in "${fo_s[@]}"; do
    r=$(redis-cli -p "$sp" sentinel replicas bench 2>/dev/null | grep -c "^slave$")
    o=$(redis-cli -p "$sp" sentinel sentinels bench 2>/dev/null | grep -c "^name$")
    [ "${r:-0}" -ge 1 ] && [ "${o:-0}" -ge 2 ] && ready=$((ready + 1))
  done
  [ "$ready" = 3 ] && { fo_ok=1; break; }
  sleep 0.1
done
if [ "$fo_ok" = 1 ]; then
  fo_url="redis-sentinel://127.0.0.1:${fo_s[0]},127.0.0.1:${fo_s[1]},127.0.0.1:${fo_s[2]}#bench"
  for i in $(seq "$(( runs < 3 ? runs : 3 ))"); do
    record pin "$bench" failover --url "$fo_url" --sentinel "127.0.0.1:${fo_s[0]}"
  done
else
  echo "  the sentinels did not come up: no failover section" >&2
fi
extra_stop

fi

if want replicated; then
echo "15. Replicated (no Sentinel): the roles swapped with REPLICAOF -> the first acquisition on the new primary..."
# A primary and a replica under redis-replicated://, stopped by pid. Each run
# swaps the roles (the next run swaps them back).
extra_begin replicated
rp_p0=$(free_port); rp_p1=$(free_port)
extra_redis "$rp_p0" 0
extra_redis "$rp_p1" 1 --replicaof 127.0.0.1 "$rp_p0"
rp_ok=0
for _ in $(seq 1 300); do
  redis-cli -p "$rp_p1" info replication 2>/dev/null | grep -q "master_link_status:up" && { rp_ok=1; break; }
  sleep 0.1
done
if [ "$rp_ok" = 1 ]; then
  for i in $(seq "$(( runs < 3 ? runs : 3 ))"); do
    record pin "$bench" replicated --url "redis-replicated://127.0.0.1:$rp_p0,127.0.0.1:$rp_p1" \
      --workers 4 --periods 3
  done
else
  echo "  the replica did not come up: no replicated section" >&2
fi
extra_stop

fi
if want spin; then
echo "16. spin lock beside the pub/sub lock: waiters on as many held names (subscriptions, attempts/s); handoffs against the back-off..."
if [ "$quick" = 1 ]; then spin_names=1000; spin_cycles=10; else spin_names=10000; spin_cycles=60; fi
for i in $(seq "$(( runs < 3 ? runs : 3 ))"); do
  record pin "$bench" spin --url "$url" --names "$spin_names" --cycles "$spin_cycles" --hold-ms 300
  flush
done

fi
if want writerfirst; then
echo "17. read-write lock: 8 readers with overlapping 100 ms holds and one writer, writer-first off and on..."
if [ "$quick" = 1 ]; then wf_secs=5; else wf_secs=30; fi
# One run: each takes twice --seconds (off, then on).
record pin "$bench" writerfirst --url "$url" --workers 8 --hold-ms 100 --seconds "$wf_secs"
flush

fi

if want python; then
echo "19. Python: the binding beside redis-py's Lock and the C library (bench/python/RESULTS.md)..."
py=
for c in python3 /usr/bin/python3; do
  command -v "$c" >/dev/null && "$c" -c 'import redis' 2>/dev/null && { py=$c; break; }
done
if [ -z "$py" ]; then
  echo "  no python3 with redis-py (python3-redis): no Python section" >&2
elif ! DLOCK_LIBRARY=$build/libdlock.so.0 pin "$py" "$here/python/bench.py" --url "$url" \
       --dlock-bench "$bench" --runs "$runs" --client-cpu "$client_cpu" \
       $([ "$quick" = 1 ] && echo --quick) --out "$here/python/RESULTS.md" >/tmp/dlock-bench-py.txt 2>&1; then
  echo "  failed:" >&2; tail -5 /tmp/dlock-bench-py.txt >&2
else
  sed -n '/^| /p; /^The binding/p' /tmp/dlock-bench-py.txt
fi
flush

fi

meta=$(printf '{"cpus":%s,"redis":"%s","placement":"%s","redis_cpu":%s,"client_cpu":%s,"runs":%s,"node":"%s","date":"%s","quick":%s}' \
  "$cpus" "$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')" "$placement" "$REDIS_CPU" "$client_cpu" "$runs" \
  "$(node --version)" "$(date -u +%Y-%m-%dT%H:%MZ)" "$quick")
cp "$results" "${out%.md}.jsonl"   # the raw runs, to re-summarize or check
node "$here/summarize.js" "$results" "$meta" "$out"
