#!/usr/bin/env bash
# dlock run --stripes N NAME KEY: the lock is KEY's stripe NAME:segment:S
# (S = KEY % N for an integer KEY, Java's sign; crc32(KEY) % N otherwise),
# the name a Java service computing NAME + ":segment:" + (id % N) locks too.
# usage: test_cli_stripes.sh PATH/TO/dlock SOURCE_DIR
DLOCK=$1
SRC=$2
# shellcheck source=lib.sh
. "$SRC/tests/cli/lib.sh"

echo "== the stripe's name"
expect 0 "$D" run --stripes 16 orders 42 -- sh -c 'echo "$DLOCK_NAME $(redis-cli -p '"$REDIS_PORT"' hlen "$DLOCK_NAME")"'
is "$(cat "$tmp/out")" "orders:segment:10 1" "42 % 16: held as orders:segment:10 while CMD runs"
check "released afterwards" free orders:segment:10
expect 0 "$D" run --stripes 16 orders -3 -- sh -c 'echo "$DLOCK_NAME"'
is "$(cat "$tmp/out")" "orders:segment:-3" "a negative id keeps its sign (Java's %)"
expect 0 "$D" run --stripes=16 orders 007 -- sh -c 'echo "$DLOCK_NAME"'
is "$(cat "$tmp/out")" "orders:segment:7" "leading zeros: the value counts"
expect 0 "$D" run --stripes 16 users user:alice -- sh -c 'echo "$DLOCK_NAME"'
is "$(cat "$tmp/out")" "users:segment:6" "a string key: crc32 % 16 (0x9D75D9F6)"
expect 0 "$D" run --stripes 16 users --name -x -- sh -c 'echo "$DLOCK_NAME"'
is "$(cat "$tmp/out")" "users:segment:14" "a key that begins with '-' through --name (crc32 0x3F2DB11E)"
expect 0 "$D" run --stripes 4 --read docs 7 -- sh -c 'redis-cli -p '"$REDIS_PORT"' hget "$DLOCK_NAME" mode; echo "$DLOCK_NAME"'
is "$(tr '\n' ' ' < "$tmp/out")" "read docs:segment:3 " "--read before NAME: the stripe's read lock"

echo "== keys of one stripe exclude each other, other stripes do not"
"$D" run --stripes 16 orders 42 -- sleep $((4 * SLOW)) & holder=$!; bg+=($holder)
check "the stripe is taken" until_ok held orders:segment:10
expect 75 "$D" run --stripes 16 orders 58 -n -- echo ran
hasnt "$tmp/out" "ran" "58 is in 42's stripe: not run"
has "$tmp/err" "orders:segment:10" "the message names the stripe"
expect 75 "$D" run orders:segment:10 -n -- echo ran
hasnt "$tmp/out" "ran" "a plain run on orders:segment:10 (what Redisson's getLock gives) waits too"
expect 0 "$D" run --stripes 16 orders 43 -n -- echo ran
has "$tmp/out" "ran" "43 is in another stripe: runs at once"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; bg=()

echo "== bad input"
for n in 0 -1 abc 16x '' +4 1048577 99999999999999999999; do
  expect 64 "$D" run --stripes "$n" orders 42 -- true
  has "$tmp/err" "give a whole number of stripes, 1 to 1048576" "--stripes '$n'"
done
expect 64 "$D" run --stripes 16 orders -- true
has "$tmp/err" "takes a lock NAME and a KEY" "KEY missing"
expect 64 "$D" run --stripes 16 orders 1 2 -- true
has "$tmp/err" "one of each" "two KEYs"
expect 64 "$D" run --stripes 16 --semaphore s --permits 2 -- true
has "$tmp/err" "not a --semaphore" "with --semaphore"
expect 64 "$D" run --stripes 16 orders --fair 1 -- true
has "$tmp/err" "before NAME, not KEY" "--fair before KEY"
expect 64 "$D" run --stripes 16 orders "" -- true
has "$tmp/err" "key is NULL or empty" "an empty KEY"
expect 64 "$D" elect --stripes 16 orders 1 -- true
has "$tmp/err" "--stripes" "elect takes no --stripes"
expect 64 "$D" run orders -5x -- true
has "$tmp/err" "unknown option '-5x'" "-5x is no number: an unknown option"
check "nothing was left held" test -z "$(rc keys 'orders*')"

finish
