#!/usr/bin/env bash
# Managed Redis from the command line: --password-command (run at every
# connect, its first line the password: a rotated token is fetched afresh; a
# refused one is exit 77 naming the node; a command that fails or prints
# nothing is exit 77, said plainly), redis-replicated:// URLs, and the
# address map (--map and the URL's ?map=, one parser).
# usage: test_cli_managed.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

echo "== --password-command"
rc ACL SETUSER rot on '>tok-1' '~*' '&*' '+@all' >/dev/null
echo tok-1 >"$tmp/token"
: >"$tmp/count"
cmd="echo run >>$tmp/count; cat $tmp/token"
url="redis://rot@127.0.0.1:$REDIS_PORT"
expect 0 "$D" --url "$url" --password-command "$cmd" run cli-pc -- sh -c 'redis-cli -p '"$REDIS_PORT"' exists cli-pc'
is "$(cat "$tmp/out")" "1" "held while CMD runs, logged in with the command's password"
check "the command ran" test -s "$tmp/count"
echo tok-2 >"$tmp/token"
rc ACL SETUSER rot resetpass '>tok-2' >/dev/null
expect 0 "$D" --url "$url" --password-command "$cmd" run cli-pc -- true
check "a rotated token is fetched afresh" test "$(wc -l <"$tmp/count")" -ge 2
echo not-the-token >"$tmp/token"
expect 77 "$D" --url "$url" --password-command "$cmd" run cli-pc -- echo ran
hasnt "$tmp/out" "ran" "refused: the command is not run"
has "$tmp/err" "authentication refused by 127.0.0.1:$REDIS_PORT" "a refused token names the node"
hasnt "$tmp/err" "not-the-token" "never the password"
expect 77 "$D" --url "$url" --password-command "false" run cli-pc -- echo ran
has "$tmp/err" "the credentials callback failed for 127.0.0.1:$REDIS_PORT" "a failing command"
expect 77 "$D" --url "$url" --password-command "true" run cli-pc -- echo ran
has "$tmp/err" "returned no password" "a command that prints nothing"
echo x >"$tmp/pwfile"
expect 64 "$D" --url "$url" --password-command "$cmd" --password-file "$tmp/pwfile" run cli-pc -- true
has "$tmp/err" "give one" "--password-file and --password-command together"
check "nothing was left held" test "$(rc exists cli-pc)" = "0"

echo "== redis-replicated://"
expect 0 "$D" --url "redis-replicated://127.0.0.1:$REDIS_PORT" run cli-rep -- sh -c 'redis-cli -p '"$REDIS_PORT"' exists cli-rep'
is "$(cat "$tmp/out")" "1" "held on the only node, the primary"
expect 64 "$D" --url "redis-replicated://127.0.0.1:$REDIS_PORT#x" run cli-rep -- true
has "$tmp/err" "takes none" "a master name in a replicated URL"

echo "== --map and ?map=: one syntax, one parser (the library's), the same errors"
expect 0 "$D" --map "10.0.0.5:6379=127.0.0.1:$REDIS_PORT" --map "[fd00::1]:7000=127.0.0.1:7000" --url "$REDIS_URL" run cli-map -- true
expect 0 "$D" --map "10.0.0.5:6379=127.0.0.1:$REDIS_PORT,[fd00::1]:7000=127.0.0.1:7000" --url "$REDIS_URL" run cli-map -- true
expect 0 "$D" --url "redis-replicated://127.0.0.1:$REDIS_PORT?map=10.0.0.5:6379=127.0.0.1:$REDIS_PORT,[fd00::1]:7000=127.0.0.1:7000" run cli-map -- true
for m in "10.0.0.5:6379" "10.0.0.5=127.0.0.1:1" "10.0.0.5:6379=127.0.0.1" ":6379=h:1" "h:0=h:1" "h:1=h:65536" "h:1=h:x1" "h:1=" \
         "h:1=h:2," "a:1=b:2,,c:3=d:4" "a:1=b:2=c:3" "u@a:1=b:2" "a:1=b:2/3" "bad%20host:1=b:2"; do
  expect 64 "$D" --map "$m" --url "$REDIS_URL" run cli-map -- echo ran
  has "$tmp/err" "give HOST:PORT=HOST:PORT" "--map '$m'"
  hasnt "$tmp/out" "ran" "--map '$m': nothing run"
  cli_msg=$(sed -n 's/^dlock: --map: address map entry //p' "$tmp/err")
  expect 64 "$D" --url "redis-replicated://127.0.0.1:$REDIS_PORT?map=$m" run cli-map -- echo ran
  has "$tmp/err" "give map=HOST:PORT=HOST:PORT" "?map=$m"
  hasnt "$tmp/out" "ran" "?map=$m: nothing run"
  url_msg=$(sed -n 's/^dlock: --url: invalid URL: map entry //p' "$tmp/err" | sed 's/give map=/give /')
  check "--map '$m': the library's message" test -n "$cli_msg"
  is "$cli_msg" "$url_msg" "'$m': --map and ?map= refuse it alike"
done

finish
