#!/usr/bin/env bash
# Tenants of one Redis (issue 38): every dlock command works as a user limited
# to the generated least-privilege rule (scripts/acl-rule.sh, from
# docs/acl-rule.list) without one refusal in the ACL LOG, and fails with exit
# 77 naming the grant when one it needs is missing; a user of another prefix
# sees no command line in CLIENT LIST (the command is in a note beside the
# lock, readable by the lock's readers only); the command under dlock run
# gets no Redis credential in its environment; a listing without a pattern
# uses the configured prefix; --password-file readable by others warns; a
# fencing token past what a lock issues is refused.
# usage: test_cli_tenants.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
"$SRC/scripts/deps.sh" curl >/dev/null || { echo "FAIL: curl is needed"; exit 1; }
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

ADMIN_URL=$DLOCK_URL
# user NAME PREFIX [acl-rule.sh options...]: NAME (password pw-NAME) limited
# to the generated rule for PREFIX.
user() {
  local name=$1 prefix=$2 rule
  shift 2
  mapfile -t rule < <("$SRC/scripts/acl-rule.sh" "$@" "$prefix")
  [ "${#rule[@]}" -gt 10 ] || { echo "scripts/acl-rule.sh gave no rule"; return 1; }
  [ "$(rc acl setuser "$name" reset on ">pw-$name" "${rule[@]}")" = OK ]
}
url_of() { echo "redis://$1:pw-$1@127.0.0.1:$REDIS_PORT"; }
# as USER CMD...: CMD (a function too) with DLOCK_URL logging in as USER (in
# the background, env DLOCK_URL=... instead: $! is then CMD's pid)
as() {
  local u=$1; shift
  (export DLOCK_URL; DLOCK_URL=$(url_of "$u")
   if declare -F "$1" >/dev/null; then "$@"; else exec "$@"; fi)
}
rcu() { local u=$1; shift; redis-cli -p "$REDIS_PORT" --user "$u" --pass "pw-$u" --no-auth-warning "$@"; }
acl_log_empty() {
  local n; n=$(rc acl log | grep -c '^reason$')
  [ "$n" = 0 ] || { rc acl log | paste - - | head -12 | sed 's/^/    acl log: /'; return 1; }
}
# stop_bg: the background runs of a section, ended
stop_bg() { for p in "${bg[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; bg=(); }
# watch_once ARGS...: a watch quit ("q") after its first frames; its status,
# its output on stdout and stderr
watch_once() {
  rm -f "$tmp/keys"; mkfifo "$tmp/keys"
  "$D" watch --interval 100ms "$@" <"$tmp/keys" >"$tmp/wout" 2>"$tmp/werr" &
  local p=$! r
  exec 7>"$tmp/keys"; sleep 0.5
  (printf q >&7) 2>/dev/null   # a watch already gone: SIGPIPE to the subshell only
  exec 7>&-
  wait "$p"; r=$?
  cat "$tmp/wout"; cat "$tmp/werr" >&2
  return $r
}
# scrape_once ARGS...: an exporter's first /metrics into $tmp/out (its stderr in $tmp/err)
scrape_once() {
  "$D" exporter --listen 127.0.0.1:0 "$@" 2>"$tmp/err" &
  local p=$! port=
  for _ in $(seq 1 $((100 * SLOW))); do
    port=$(sed -n 's/.*serving http:\/\/127\.0\.0\.1:\([0-9]*\)\/metrics.*/\1/p' "$tmp/err")
    [ -n "$port" ] && break; sleep 0.05
  done
  curl -s --noproxy '*' --max-time $((10 * SLOW)) "http://127.0.0.1:$port/metrics" >"$tmp/out"
  kill "$p"; wait "$p"
}

check "a user limited to the generated rule for app: (fenced writes opted in)" user app app: --with fence
check "a user of another prefix" user other other:

echo "== every command as app, limited to the rule: works, nothing refused"
rc acl log reset >/dev/null
expect 0 as app "$D" run app:lock -- true
expect 0 as app "$D" run --fair app:fair -- true
expect 0 as app "$D" run --read app:rw -- true
expect 0 as app "$D" run --write app:rw -- true
expect 0 as app "$D" run app:m1 app:m2 -- true
expect 0 as app "$D" run --semaphore app:sem --permits 2 -- true
expect 0 as app "$D" run --stripes 4 app:st 17 -- true
expect 0 as app "$D" run --lock-delay 1s app:ld -- true
env DLOCK_URL="$(url_of app)" "$D" run app:wait -- sleep $((1 * SLOW)) & bg+=($!)
check "app:wait is held" until_ok held app:wait
expect 0 as app "$D" run -w $((10 * SLOW))s app:wait -- true   # waits for the release
expect 0 as app "$D" elect app:el -- true
expect 0 as app "$D" leader app:el
env DLOCK_URL="$(url_of app)" "$D" run app:held -- sleep $((30 * SLOW)) & bg+=($!)
env DLOCK_URL="$(url_of app)" "$D" run --semaphore app:sem --permits 2 -- sleep $((30 * SLOW)) & bg+=($!)
check "app:held is held" until_ok held app:held
permits_held() { [ "$(rc zcard '{app:sem}:timeout')" = "$1" ]; }
check "a permit of app:sem is held" until_ok permits_held 1
expect 0 as app "$D" status app:held
has "$tmp/out" "dlock run on $(hostname)" "status maps the holder to its process"
expect 0 as app "$D" status --json app:sem
expect 0 as app "$D" list 'app:*'
has "$tmp/out" "app:held" "list shows the held lock"
expect 0 as app watch_once 'app:*'
has "$tmp/out" "app:held" "watch shows the held lock"
expect 0 as app "$D" latch set app:latch 1
env DLOCK_URL="$(url_of app)" "$D" latch wait -w $((10 * SLOW))s app:latch >/dev/null 2>&1 & lw=$!
latch_awaiters() { [ "$(rc pubsub numsub 'redisson_countdownlatch__channel__{app:latch}' | tail -1)" = "$1" ]; }
check "a latch awaiter" until_ok latch_awaiters 1
expect 0 as app "$D" latch down app:latch
wait "$lw"; is "$?" 0 "latch wait returns once the latch is down"
expect 0 as app "$D" barrier app:bar 1 -- true
env DLOCK_URL="$(url_of app)" "$D" barrier -w $((10 * SLOW))s app:bar2 2 -- true >/dev/null 2>&1 & bw=$!
bar_waiters() { [ "$(rc pubsub numsub 'dlock_barrier__channel:{app:bar2}' | tail -1)" = "$1" ]; }
check "a barrier entrant" until_ok bar_waiters 1
expect 0 as app "$D" barrier app:bar2 2 -- true
wait "$bw"; is "$?" 0 "both parties pass the barrier"
expect 0 as app "$D" fence --token 5 SET app:data v1
expect 0 as app "$D" fence --guard app:data
is "$(cat "$tmp/out")" "5" "the fenced write raised the guard"
expect 0 as app "$D" check --held-over 1h 'app:*'
as app scrape_once 'app:*'
is "$(awk '$1 == "dlock_up" { print $2 }' "$tmp/out")" "1" "the exporter reads Redis as app"
expect 0 as app "$D" unlock --force app:lock
check "nothing in the ACL LOG: the rule has every grant these commands need" acl_log_empty
# doctor's own checks need more than the rule (CONFIG GET, ACL WHOAMI): said
# as warnings that name them, not a refusal of the whole command.
expect 1 as app "$D" doctor
has "$tmp/out" "this user lacks +config|get" "doctor names the grant it lacked"
hasnt "$tmp/out" "healthy" "and does not say healthy"

echo "== each command missing one grant it needs: 77, the grant named"
rc set app:latch 3 >/dev/null
# refused GRANT TEXT [--with GROUP] -- CMD...: as a user with the rule less
# GRANT, CMD exits 77 and its message holds TEXT.
refused() {
  local grant=$1 text=$2; shift 2
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done; shift
  user lack app: "${opts[@]}" --without "$grant" || { bad "user without $grant"; return; }
  expect 77 as lack "$@"
  has "$tmp/err" "$text" "without $grant, '$*' says which"
}
refused +evalsha "'evalsha'" -- "$D" run app:x -- true
refused +hincrby "'hincrby'" -- "$D" run app:x -- true
refused '~redisson_lock_queue:{app:*' 'redisson_lock_queue:{app:x}' -- "$D" run --fair app:x -- true
refused +zadd "'zadd'" -- "$D" run --semaphore app:sem2 --permits 2 -- true
refused '~dlock_lock_delay:{app:*' 'dlock_lock_delay:{app:x}' -- "$D" run --lock-delay 1s app:x -- true
refused '~dlock_election:{app:*' 'dlock_election:{app:x}' -- "$D" elect app:x -- true
refused +hmget "'hmget'" -- "$D" leader app:el
refused +evalsha "'evalsha'" -- "$D" status app:held
refused +scan "'scan'" -- "$D" list 'app:*'
refused +scan "'scan'" -- watch_once 'app:*'
refused +del "'del'" -- "$D" unlock --force app:held
refused +set "'set'" -- "$D" latch set app:latch2 1
refused +decr "'decr'" -- "$D" latch down app:latch
refused '~dlock_barrier:{app:*' 'dlock_barrier:{app:x}' -- "$D" barrier -w 1s app:x 1 -- true
refused +get "'get'" -- "$D" latch wait -w 1s app:latch
refused '~dlock_fence:{app:*' 'dlock_fence:{app:data}' --with fence -- "$D" fence --token 6 SET app:data v2
refused +scan "'scan'" -- "$D" check --held-over 1h 'app:*'
refused +ping "'ping'" -- "$D" doctor
# A URL naming a database needs the opt-in +select (SELECT reaches every
# database): without it, 77 naming it.
expect 77 env DLOCK_URL="$(url_of app)/3" "$D" status app:held
has "$tmp/err" "'select'" "a database in the URL without +select: the grant named"
user app3 app: --with select
expect 0 env DLOCK_URL="$(url_of app3)/3" "$D" run app:db3 -- true
# The exporter stays up (the grant may come): dlock_up 0, and why.
user lack app: --without +scan
as lack scrape_once 'app:*'
is "$(awk '$1 == "dlock_up" { print $2 }' "$tmp/out")" "0" "an exporter refused SCAN serves dlock_up 0"
has "$tmp/out" "'scan' command" "and dlock_error_info names the command"
has "$tmp/err" "a pass failed: " "and says it on stderr"

echo "== another prefix's user sees no command line"
env DLOCK_URL="$(url_of app)" "$D" run app:secret -- sh -c "sleep $((30 * SLOW)); echo TOPSECRET-pw" & bg+=($!)
check "app:secret is held" until_ok held app:secret
rcu other client list >"$tmp/cl"
has "$tmp/cl" "|run:" "CLIENT LIST shows other's user the run (host, pid, since when)"
hasnt "$tmp/cl" "TOPSECRET" "but not its command line"
hasnt "$tmp/cl" "sleep" "not a word of it"
rc client list >"$tmp/cl"
hasnt "$tmp/cl" "TOPSECRET" "nor to the administrator: the command is in no connection's name"
note=$(rc --scan --pattern '{app:secret}:dlock_note:*' | head -1)
check "the command is in a note beside the lock ($note)" test -n "$note"
case $(rcu other get "$note" 2>&1) in *NOPERM*) ok ;; *) bad "other's user read the note $note" ;; esac
expect 77 as other "$D" status app:secret
expect 0 as app "$D" status app:secret
has "$tmp/out" "TOPSECRET-pw" "the lock's own user sees the command in status"
expect 0 as app "$D" list 'app:secret'
has "$tmp/out" "TOPSECRET-pw" "and in list"
expect 1 as app "$D" check --held-over 0 'app:secret'
has "$tmp/out" "TOPSECRET-pw" "and in check"
stop_bg
no_note() { [ -z "$(rc --scan --pattern '{app:secret}:dlock_note:*')" ]; }
check "the note goes with the hold" until_ok no_note

echo "== the command's environment holds no credential"
expect 0 env DLOCK_URL="$(url_of app)" DLOCK_PASSWORD=pw-app REDISCLI_AUTH=pw-app "$D" run app:env -- env
hasnt "$tmp/out" "pw-app" "no password in CMD's environment"
has "$tmp/out" "DLOCK_URL=redis://app@127.0.0.1:$REDIS_PORT" "DLOCK_URL without its password"
hasnt "$tmp/out" "DLOCK_PASSWORD" "DLOCK_PASSWORD removed"
hasnt "$tmp/out" "REDISCLI_AUTH" "REDISCLI_AUTH removed"
has "$tmp/out" "DLOCK_TOKEN=" "dlock's own variables are there"
expect 0 env DLOCK_URL="redis://app@127.0.0.1:$REDIS_PORT" DLOCK_PASSWORD=pw-app "$D" run app:env -- env
hasnt "$tmp/out" "pw-app" "a password from DLOCK_PASSWORD alone is removed too"
expect 0 env DLOCK_URL="$(url_of app)" DLOCK_PASSWORD=pw-app "$D" run --keep-env-secrets app:env -- env
has "$tmp/out" "DLOCK_PASSWORD=pw-app" "--keep-env-secrets keeps them"
has "$tmp/out" "DLOCK_URL=$(url_of app)" "the URL's password too"

echo "== list, watch, check without a pattern: the configured prefix"
rc hset other:x 6f1c0d4e-1111-2222-3333-444455556666:1 1 >/dev/null
env DLOCK_URL="$(url_of app)" "$D" run app:pfx -- sleep $((30 * SLOW)) & bg+=($!)
check "app:pfx is held" until_ok held app:pfx
expect 77 as app "$D" list
has "$tmp/err" "--prefix" "a listing refused for keys of other users points to the prefix"
expect 0 as app env DLOCK_PREFIX=app: "$D" list
has "$tmp/out" "app:pfx" "with \$DLOCK_PREFIX: the prefix's locks"
hasnt "$tmp/out" "other:x" "and no other's"
expect 0 as app "$D" --prefix app: list
has "$tmp/out" "app:pfx" "--prefix likewise"
expect 0 as app "$D" --prefix app: check --held-over 1h
expect 0 env DLOCK_URL="$ADMIN_URL" "$D" --prefix 'other:' list
has "$tmp/out" "other:x" "a prefix narrows an administrator's list too"
hasnt "$tmp/out" "app:pfx" "to it alone"
stop_bg

echo "== --password-file readable by others, a token past what a lock issues"
printf 'pw-app\n' >"$tmp/pw"; chmod 644 "$tmp/pw"
expect 0 "$D" --url "redis://app@127.0.0.1:$REDIS_PORT" --password-file "$tmp/pw" status app:lock
has "$tmp/err" "may be read by any user (mode 0644)" "a password file others may read: a warning"
chmod 640 "$tmp/pw"
expect 0 "$D" --url "redis://app@127.0.0.1:$REDIS_PORT" --password-file "$tmp/pw" status app:lock
has "$tmp/err" "may be read by its group" "readable by its group: a warning"
chmod 600 "$tmp/pw"
expect 0 "$D" --url "redis://app@127.0.0.1:$REDIS_PORT" --password-file "$tmp/pw" status app:lock
hasnt "$tmp/err" "may be read" "mode 0600: no warning"
expect 64 "$D" fence --token 18446744073709551615 SET app:data v3
has "$tmp/err" "more than any lock issues" "a token past what a lock issues is refused"
expect 64 env DLOCK_TOKEN=9007199254740993 "$D" fence SET app:data v3
expect 0 "$D" fence --guard app:data
is "$(cat "$tmp/out")" "5" "the guard is as it was"
is "$(rc get app:data)" "v1" "and the data"

finish
