# Sourced by the demo and bench scripts: starts a throwaway redis-server on a
# free loopback port and stops it by pid on exit (also on Ctrl-C).
# After `redis_start`: REDIS_PORT, REDIS_PID, REDIS_DIR, REDIS_URL.
# Optional: REDIS_CPU (taskset CPU list), REDIS_EXTRA (extra arguments).

redis_stop() {
  if [ -n "${REDIS_PID:-}" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
  fi
  REDIS_PID=""
  [ -n "${REDIS_DIR:-}" ] && rm -rf "$REDIS_DIR"
  REDIS_DIR=""
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

redis_start() {
  REDIS_DIR=$(mktemp -d /tmp/dlock-redis-XXXXXX)
  local pin=()
  [ -n "${REDIS_CPU:-}" ] && command -v taskset >/dev/null && pin=(taskset -c "$REDIS_CPU")
  for _ in $(seq 1 20); do
    REDIS_PORT=$(( 20000 + RANDOM % 40000 ))
    port_in_use "$REDIS_PORT" && continue
    # shellcheck disable=SC2086
    "${pin[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$REDIS_DIR" --logfile "$REDIS_DIR/redis.log" --daemonize no ${REDIS_EXTRA:-} &
    REDIS_PID=$!
    for _ in $(seq 1 100); do
      if redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
        REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
        return 0
      fi
      kill -0 "$REDIS_PID" 2>/dev/null || break
      sleep 0.05
    done
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
  done
  echo "could not start redis-server" >&2
  return 1
}
