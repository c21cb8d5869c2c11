#!/usr/bin/env bash
# bench/ab.sh BASE_BUILD_DIR HEAD_BUILD_DIR: two revisions' dlock_bench, A
# (base) and B (head), interleaved A, B, A, B ... in one run against the same
# throwaway redis-server(s), so that the machine's fast and slow moments hit
# both sides. Prints per scenario and metric: A's and B's medians, B/A, and
# A's own spread (max/min of A's runs, the noise). A metric is flagged as a
# regression when B is worse than A by more than that spread.
#
# Build each side first (Release, no tests), e.g. for a base commit:
#   git worktree add --detach /tmp/ab-base COMMIT
#   cmake -S /tmp/ab-base -B /tmp/ab-base/build-bench -DCMAKE_BUILD_TYPE=Release -DDLOCK_BUILD_TESTS=OFF
#   cmake --build /tmp/ab-base/build-bench -j2 --target dlock_bench
# (and the same for the head), then: bench/ab.sh /tmp/ab-base/build-bench build-bench
#
# AB_RUNS=5: runs per side and scenario. AB_QUICK=1: short runs.
# AB_ONLY="uncontended handoff many asyncmany held multilock redlock permits": a subset.
# AB_OUT=FILE: keep the raw JSON lines ("A|B<TAB>run<TAB>json") there;
# bench/ab.sh --summary FILE prints their table again.
# "B worse in pairs": in how many runs B was worse than the A run right before
# it (a paired view of the same noise).
# Redis on CPU 0, every client on CPU 1 (as bench/run.sh's split placement).
# RedLock: both sides run the head's bench/redlock_bench.c (public headers
# only), compiled here against each side's own headers and libdlock.a, so a
# base without the redlock scenario is measured by the same harness.
set -uo pipefail
summarize() { # FILE of runs ("A|B<TAB>run<TAB>json"): the table
python3 - "$1" <<'EOF'
import json, statistics, sys
# scenario -> [(metric, +1 higher is better | -1 lower is better)]
M = {
    "uncontended": [("cycles_per_s", 1), ("p50_us", -1), ("p99_us", -1), ("client_cpu_us_per_cycle", -1)],
    "handoff-threads": [("gap_p50_us", -1), ("gap_p99_us", -1), ("acq_per_s", 1), ("waits_over_1s", -1)],
    "handoff-processes": [("gap_p50_us", -1), ("gap_p99_us", -1), ("acq_per_s", 1), ("waits_over_1s", -1)],
    "many": [("cycles_per_s", 1)],
    "asyncmany": [("cycles_per_s", 1)],
    "held": [("bytes_per_lock", -1), ("renewal_round_trips_per_period", -1),
             ("redis_commands_per_period", -1), ("acquire_s", -1), ("hold_cpu_ms", -1)],
    "multilock": [("cycles_per_s", 1), ("p50_us", -1), ("p99_us", -1), ("roundtrips_per_acquire", -1)],
    "redlock3-blocking": [("acquire_p50_us", -1), ("acquire_p99_us", -1), ("release_p50_us", -1), ("cycles_per_s", 1)],
    "redlock3-async": [("acquire_p50_us", -1), ("acquire_p99_us", -1), ("release_p50_us", -1), ("cycles_per_s", 1)],
    "permits4": [("cycles_per_s", 1), ("p50_us", -1), ("p99_us", -1), ("roundtrips_per_acquire", -1)],
}
runs = {}
for line in open(sys.argv[1]):
    side, run, js = line.rstrip("\n").split("\t", 2)
    r = json.loads(js)
    r["_run"] = run
    key = r["scenario"] + ("-" + r["mode"] if r["scenario"] == "handoff" else "")
    runs.setdefault(key, {"A": [], "B": []})[side].append(r)
def spread(v):
    return max(v) / min(v) if min(v) > 0 else (1.0 if max(v) == min(v) else float("inf"))
print("| scenario | metric | A median | B median | B/A | A/A spread | B/B spread | B worse in pairs | verdict |")
print("|---|---|---|---|---|---|---|---|---|")
regressions = []
for key in M:
    if key not in runs:
        continue
    for metric, better in M[key]:
        a = [r[metric] for r in runs[key]["A"] if metric in r]
        b = [r[metric] for r in runs[key]["B"] if metric in r]
        if not a or not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        pa = {r["_run"]: r[metric] for r in runs[key]["A"] if metric in r}
        pb = {r["_run"]: r[metric] for r in runs[key]["B"] if metric in r}
        pairs = [(pa[i], pb[i]) for i in pa if i in pb]   # run i: A, then B right after it
        bworse = sum(1 for x, y in pairs if (y < x if better > 0 else y > x))
        ratio = mb / ma if ma else (1.0 if mb == ma else float("inf"))
        worse = (1 / ratio if ratio else float("inf")) if better > 0 else ratio
        sa = spread(a)
        if worse > sa and worse > 1:
            verdict = "**worse, above noise**"
            regressions.append(f"{key} {metric}")
        elif worse < 1 and 1 / worse > sa:
            verdict = "better, above noise"
        else:
            verdict = "within noise"
        print(f"| {key} | {metric} | {ma:g} | {mb:g} | {ratio:.3f} | {sa:.3f} | {spread(b):.3f} "
              f"| {bworse}/{len(pairs)} | {verdict} |")
print()
print("B worse than A by more than A's own spread: " + (", ".join(regressions) if regressions else "none"))
EOF
}
if [ "${1:-}" = --summary ] && [ $# = 2 ]; then summarize "$2"; exit; fi
[ $# = 2 ] || { echo "usage: bench/ab.sh BASE_BUILD_DIR HEAD_BUILD_DIR | --summary RUNS_FILE" >&2; exit 64; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build_a=$(cd "$1" && pwd) || exit 64
build_b=$(cd "$2" && pwd) || exit 64
runs=${AB_RUNS:-5}
only=${AB_ONLY:-uncontended handoff many asyncmany held multilock redlock permits}
want() { case " $only " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
for b in "$build_a" "$build_b"; do
  [ -x "$b/bench/dlock_bench" ] || { echo "no $b/bench/dlock_bench: build it first" >&2; exit 64; }
done
src_of() { sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$1/CMakeCache.txt"; }
tmp=$(mktemp -d /tmp/dlock-ab-XXXXXX)
results=$tmp/runs.tsv

# shellcheck source=../scripts/redis-throwaway.sh disable=SC1091
. "$root/scripts/redis-throwaway.sh"
extra_pids=()
extra_stop() {
  local p
  for p in "${extra_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  extra_pids=()
}
trap 'redis_stop; extra_stop; rm -rf "$tmp"' EXIT
trap 'echo; echo "interrupted"; exit 130' INT TERM

if [ "$(nproc)" -ge 2 ]; then REDIS_CPU=0; client_cpu=1; else REDIS_CPU=0; client_cpu=0; fi
pin() { taskset -c "$client_cpu" "$@"; }
if [ "${AB_QUICK:-0}" = 1 ]; then
  secs=2; cycles=3000; locks=10000
else
  secs=5; cycles=20000; locks=100000
fi

# The RedLock harness for one side: the head's redlock_bench.c with a main
# of its own (the options, open_client, die and now_ns as dlock_bench has them).
rl_build() { # build_dir out
  local src
  src=$(src_of "$1")
  cat >"$tmp/rl_main.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench.h"
opts O = {NULL, "redis://127.0.0.1:6379", "threads", "lock", 20000, 8, 5, 7, 3000, 16, 10000,
          100000, 3000, 3, 0, 4, 100, 3, 0, 0, 4, "", NULL};
int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
void die(const char *what)
{
    fprintf(stderr, "redlock_ab: %s: %s\n", what, dlock_last_error());
    exit(1);
}
dlock_client *open_client(long watchdog_ms, int pool)
{
    dlock_config *cfg = dlock_config_new();
    if (dlock_config_set_url(cfg, O.url) != DLOCK_OK)
        die("url");
    if (watchdog_ms)
        dlock_config_set_watchdog_timeout(cfg, watchdog_ms);
    if (pool)
        dlock_config_set_pool_size(cfg, pool);
    dlock_client *c;
    if (dlock_client_open(&c, cfg) != DLOCK_OK)
        die("open");
    dlock_config_free(cfg);
    return c;
}
int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--url")) O.url = v;
        else if (!strcmp(k, "--kind")) O.kind = v;
        else if (!strcmp(k, "--cycles")) O.cycles = atol(v);
        else if (!strcmp(k, "--lease")) O.lease = atol(v);
        else return 64;
    }
    redlock();
    return 0;
}
EOF
  cc -O3 -DNDEBUG -std=c11 -D_GNU_SOURCE -I"$src/include" -I"$(src_of "$build_b")/bench" \
     -isystem /usr/include/hiredis -o "$2" "$tmp/rl_main.c" "$(src_of "$build_b")/bench/redlock_bench.c" \
     "$1/libdlock.a" -lhiredis -luv -lssl -lcrypto -lpthread -ldl -lrt
}
if want redlock; then
  if ! { rl_build "$build_a" "$tmp/redlock_a" && rl_build "$build_b" "$tmp/redlock_b"; }; then
    echo "  the RedLock harness did not build for both sides: no redlock section" >&2; only=${only/redlock/}
  fi
fi

redis_start || exit 1
url=$REDIS_URL
rl_urls=$url
extra_redis() { # dir: one more server on a free port (in xr_port; its pid in extra_pids), retried as redis_start does
  local p pid
  mkdir -p "$1"
  for _ in $(seq 1 20); do
    p=$(( 20000 + RANDOM % 40000 ))
    port_in_use "$p" && continue
    taskset -c "$REDIS_CPU" redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$1" --logfile "$1/redis.log" --daemonize no >/dev/null &
    pid=$!
    for _ in $(seq 1 100); do
      if redis-cli -p "$p" ping >/dev/null 2>&1; then xr_port=$p; extra_pids+=("$pid"); return 0; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done
  return 1
}
if want redlock; then   # the RedLock's two other servers, on the Redis CPU too
  for n in 1 2; do
    extra_redis "$tmp/rl$n" || { echo "could not start the RedLock's servers" >&2; exit 1; }
    rl_urls="$rl_urls,redis://127.0.0.1:$xr_port"
  done
fi
echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on CPU $REDIS_CPU, clients on CPU $client_cpu;" \
     "A=$build_a B=$build_b; $runs runs each, interleaved A, B; $([ "${AB_QUICK:-0}" = 1 ] && echo quick || echo full) sizes"

flush() {
  local p
  for p in ${rl_urls//,/ }; do
    p=${p##*:}
    redis-cli -p "$p" flushall >/dev/null; redis-cli -p "$p" script flush >/dev/null
  done
}
record() { # side run command...: appends the last JSON line of the run
  local side=$1 run=$2 line
  shift 2
  line=$(pin "$@" 2>"$tmp/err.txt" | tail -1)
  if [ -n "$line" ] && [ "${line:0:1}" = "{" ]; then
    printf '%s\t%s\t%s\n' "$side" "$run" "$line" >> "$results"
  else
    echo "  failed ($side): $*" >&2
    tail -3 "$tmp/err.txt" >&2
  fi
  flush
}
ab() { # name args...: the scenario on each side in turn, $runs times ("@" = the side's bench)
  local i side cmd a
  echo "$1..."
  shift
  for i in $(seq "$runs"); do
    for side in A B; do
      cmd=()
      for a in "$@"; do
        case $a in
          @) if [ $side = A ]; then cmd+=("$build_a/bench/dlock_bench"); else cmd+=("$build_b/bench/dlock_bench"); fi ;;
          @rl) cmd+=("$tmp/redlock_$(echo $side | tr AB ab)") ;;
          *) cmd+=("$a") ;;
        esac
      done
      record "$side" "$i" "${cmd[@]}"
    done
  done
}

flush
want uncontended && ab "uncontended" @ uncontended --url "$url" --cycles "$cycles"
if want handoff; then
  ab "handoff (threads)" @ handoff --url "$url" --mode threads --seconds "$secs"
  ab "handoff (processes)" @ handoff --url "$url" --mode processes --seconds "$secs"
fi
want many && ab "many names" @ many --url "$url" --seconds "$secs"
want asyncmany && ab "many names, asynchronous" @ asyncmany --url "$url" --seconds "$secs"
want held && ab "held ($locks locks)" @ held --url "$url" --locks "$locks"
want multilock && ab "multi-lock of 3 names" @ multilock --url "$url" --cycles "$cycles"
if want redlock; then
  ab "RedLock over 3 servers (blocking)" @rl --url "$rl_urls" --cycles "$((cycles / 4))" --kind blocking
  ab "RedLock over 3 servers (async)" @rl --url "$rl_urls" --cycles "$((cycles / 4))" --kind async
fi
want permits && ab "4 permits in one call" @ permits --url "$url" --cycles "$cycles"

[ -n "${AB_OUT:-}" ] && cp "$results" "$AB_OUT"
[ -s "$results" ] || { echo "no results" >&2; exit 1; }
summarize "$results"
