# Shared by the dlock command's test scripts (sourced). Starts a throwaway
# redis-server on a free loopback port; every server and background process
# a script starts is stopped by pid at exit.
# Before sourcing: DLOCK (the binary) and SRC (the source tree).
set -u
# shellcheck source=../../scripts/redis-throwaway.sh
. "$SRC/scripts/redis-throwaway.sh"
# The slack of timing bounds, as the C harness measures it (th_slack in
# tests/harness_proc.c): DLOCK_TEST_SLOW times the load per CPU (1 to 4; for
# a slowed build 2 above 2 per CPU, else 1; the 1-minute average, or the run
# queue now when higher).
SLOW=$(awk -v base="${DLOCK_TEST_SLOW:-1}" -v cpus="$(nproc 2>/dev/null || echo 1)" '
  { split($4, q, "/"); a = q[1] - 1 > $1 ? q[1] - 1 : $1
    l = int(a / cpus + 0.999); if (l < 1) l = 1; if (l > 4) l = 4
    if (base < 1) base = 1; if (base > 1) l = l > 2 ? 2 : 1; print int(base) * l }' \
  /proc/loadavg 2>/dev/null || echo 1)
D=$DLOCK

pass=0
fail=0
bg=()
extra_pids=()
extra_dirs=()
tmp=$(mktemp -d /tmp/dlock-cli-XXXXXX)
cleanup() {
  for p in "${bg[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${extra_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  for d in "${extra_dirs[@]}"; do rm -rf "$d"; done
  redis_stop
  rm -rf "$tmp"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; [ -s "$tmp/err" ] && sed 's/^/    stderr: /' "$tmp/err" | head -5; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }
rc() { redis-cli -p "$REDIS_PORT" "$@"; }

# expect CODE CMD...: runs CMD, stdout in $tmp/out, stderr in $tmp/err
expect() {
  local want=$1; shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -eq "$want" ]; then ok; else bad "$* -> exit $got, want $want"; fi
}
# has FILE TEXT DESCRIPTION
has() { if grep -qF -- "$2" "$1"; then ok; else bad "$3: '$2' not in $(basename "$1")"; fi; }
hasnt() { if grep -qF -- "$2" "$1"; then bad "$3: '$2' found in $(basename "$1")"; else ok; fi; }
is() { if [ "$1" = "$2" ]; then ok; else bad "$3: got '$1', want '$2'"; fi; }
# check DESCRIPTION CMD...: CMD must succeed
check() { local d=$1; shift; if "$@"; then ok; else bad "$d"; fi; }
# waits until CMD succeeds (up to ~5 s, scaled)
until_ok() { for _ in $(seq 1 $((100 * SLOW))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }
held() { [ "$(rc exists "$1")" = "1" ]; }
free() { [ "$(rc exists "$1")" = "0" ]; }
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
gone() { ! alive "$1"; }
# children_of PID: pids whose parent is PID (from /proc; procps may be absent)
children_of() {
  local f s pid want=$1
  for f in /proc/[0-9]*/stat; do
    s=$(cat "$f" 2>/dev/null) || continue
    pid=${s%% *}; s=${s##*) }
    set -- $s
    [ "${2:-}" = "$want" ] && echo "$pid"
  done
}
# procs_with WORD: live processes one of whose arguments is exactly WORD
# (a unique word in the command line of what a test starts; no fork per
# process, and never this shell: a word passed as a variable is not an argument)
procs_with() {
  local f a args
  for f in /proc/[0-9]*/cmdline; do
    mapfile -d '' args 2>/dev/null <"$f" || continue
    for a in "${args[@]}"; do
      if [ "$a" = "$1" ]; then a=${f#/proc/}; a=${a%/cmdline}; alive "$a" && echo "$a"; break; fi
    done
  done
}
# the command a `dlock run` (pid $1) runs: the child of its guard
command_of() { local g; g=$(children_of "$1" | head -1); [ -n "$g" ] && children_of "$g" | head -1; }

# extra_redis VAR [redis-server args...]: one more throwaway server; sets
# ${VAR}_PORT and ${VAR}_PID. Stopped by pid at exit (or with stop_extra VAR).
extra_redis() {
  local var=$1; shift
  local dir port pid
  dir=$(mktemp -d /tmp/dlock-redis-XXXXXX); extra_dirs+=("$dir")
  for _ in $(seq 1 20); do
    port=$(( 20000 + RANDOM % 40000 ))
    port_in_use "$port" && continue
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
      --logfile "$dir/redis.log" --daemonize no "$@" &
    pid=$!
    for _ in $(seq 1 100); do
      if redis-cli -p "$port" ping 2>&1 | grep -qE "PONG|NOAUTH"; then
        extra_pids+=("$pid"); printf -v "${var}_PORT" %s "$port"; printf -v "${var}_PID" %s "$pid"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done
  echo "cannot start an extra redis-server"; return 1
}
stop_extra() { local p="${1}_PID"; kill "${!p}" 2>/dev/null; wait "${!p}" 2>/dev/null; }

finish() {
  echo
  echo "$(basename "$0"): $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}

redis_start || { echo "cannot start redis-server"; exit 1; }
export DLOCK_URL=$REDIS_URL
unset DLOCK_PASSWORD REDISCLI_AUTH DLOCK_OWNER DLOCK_OWNERS DLOCK_NAME DLOCK_TOKEN
