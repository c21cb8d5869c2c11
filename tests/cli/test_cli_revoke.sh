#!/usr/bin/env bash
# dlock revoke NAME and dlock run --on-revoke term|ignore|CMD: revocation on
# request from the shell (issue 36.2).
# usage: test_cli_revoke.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

listening() { [ "$(rc pubsub numsub "dlock_revoke_request__channel:{$1}" | tail -1)" -ge 1 ]; }

echo "== revoke of a free lock: exit 1, nothing written"
expect 1 "$D" revoke t:rfree
has "$tmp/out" "is free" "says it is free"
is "$(rc exists 'dlock_revoke_request:{t:rfree}')" 0 "no request record"

echo "== usage errors"
expect 64 "$D" revoke
expect 64 "$D" revoke a b
expect 64 "$D" run --on-revoke "" t:rx -- true
rc set t:rstr x >/dev/null
expect 65 "$D" revoke t:rstr
rc del t:rstr >/dev/null

echo "== held by a holder without a handler (redis-cli, Redisson-like): exit 2"
rc hset t:rplain "00000000-0000-0000-0000-000000000000:1" 1 >/dev/null
expect 2 "$D" revoke t:rplain
has "$tmp/out" "nobody listens" "says nobody listens"
rc del t:rplain >/dev/null

echo "== --on-revoke term (the default): SIGTERM to the tree, released normally"
"$D" run t:rterm -- sh -c "trap 'echo got-term > $tmp/term; exit 3' TERM; while :; do sleep 0.05; done" \
  >/dev/null 2>"$tmp/term.err" & p=$!
check "the run holds the lock" until_ok held t:rterm
check "the run listens" until_ok listening t:rterm
t0=$(now_ms)
expect 0 "$D" revoke --note "deploy" t:rterm
has "$tmp/out" "asked the holder" "says it asked"
wait "$p"; st=$?
took=$(( $(now_ms) - t0 ))
is "$st" 3 "exit status: the command's own (it trapped SIGTERM, exit 3), not 76"
is "$(cat "$tmp/term" 2>/dev/null)" got-term "the command got SIGTERM"
[ "$took" -le $((2000 * SLOW)) ] && ok || bad "the run ended $took ms after the request"
check "released" free t:rterm
has "$tmp/term.err" "revoke requested" "the run says why it ended the command"
hasnt "$tmp/term.err" "lost" "not reported lost"
is "$(rc exists 'dlock_lock_delay:{t:rterm}')" 0 "no lock-delay marker left (a normal release)"

echo "== a command that dies of the SIGTERM: 143"
"$D" run t:rterm2 -- sleep 30 >/dev/null 2>&1 & p=$!
check "the run listens" until_ok listening t:rterm2
until_ok held t:rterm2
expect 0 "$D" revoke t:rterm2
wait "$p"; is "$?" 143 "128 + SIGTERM"
check "released" free t:rterm2

echo "== --on-revoke ignore: the command carries on, the lock stays held"
"$D" run --on-revoke ignore t:rign -- sh -c "sleep 1; echo done > $tmp/ign" \
  >/dev/null 2>"$tmp/ign.err" & p=$!
check "the run listens" until_ok listening t:rign
until_ok held t:rign
expect 0 "$D" revoke t:rign
sleep_ms 200
check "still held after the request" held t:rign
wait "$p"; is "$?" 0 "the command's status"
is "$(cat "$tmp/ign" 2>/dev/null)" done "the command ran to its end"
has "$tmp/ign.err" "--on-revoke ignore" "the run says it ignored a request"
check "released at the end" free t:rign

echo "== --on-revoke CMD: run once per request, with the note; the lock kept"
"$D" run --on-revoke "echo \"\$DLOCK_NAME \$DLOCK_REVOKE_NOTE\" >> $tmp/cmd" t:rcmd -- sleep 2 \
  >/dev/null 2>"$tmp/cmd.err" & p=$!
check "the run listens" until_ok listening t:rcmd
until_ok held t:rcmd
expect 0 "$D" revoke --note first t:rcmd
check "the command ran" until_ok grep -q "t:rcmd first" "$tmp/cmd"
expect 0 "$D" revoke --note second t:rcmd
check "again for the second request" until_ok grep -q "t:rcmd second" "$tmp/cmd"
check "still held" held t:rcmd
wait "$p"; is "$?" 0 "the command's status"
is "$(wc -l < "$tmp/cmd")" 2 "once per request"
check "released at the end" free t:rcmd

finish
