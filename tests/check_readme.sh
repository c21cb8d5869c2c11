#!/usr/bin/env bash
# The README as a new user meets it: its C example is a whole program that
# builds as given (cc -std=c11, warnings as errors) and runs against a Redis
# once its port is changed, and so does its Python example; its package list names every package
# scripts/deps.sh installs; its crontab says PATH and DLOCK_URL.
# usage: check_readme.sh SOURCE_DIR PATH/TO/libdlock.so
set -u
src=$1 lib=$2
tmp=$(mktemp -d /tmp/dlock-readme-XXXXXX)
# shellcheck source=../scripts/redis-throwaway.sh
. "$src/scripts/redis-throwaway.sh"
trap 'redis_stop; rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
readme=$src/README.md

# The first ```c block after "## In C".
awk '/^## In C$/ {s=1} s && /^```c$/ {c=1; next} c && /^```$/ {exit} c {print}' "$readme" >"$tmp/app.c"
[ -s "$tmp/app.c" ] || bad "no C example under '## In C'"
grep -q 'redis://127.0.0.1:6379' "$tmp/app.c" || bad "the C example has no redis://127.0.0.1:6379 to change"
redis_start || { echo "FAIL: cannot start redis-server"; exit 1; }
sed "s#redis://127.0.0.1:6379#$REDIS_URL#" "$tmp/app.c" >"$tmp/run.c"
if cc -std=c11 -Wall -Wextra -Werror -I"$src/include" "$tmp/run.c" -o "$tmp/app" "$lib" \
     -Wl,-rpath,"$(dirname "$lib")"; then
  out=$("$tmp/app" 2>&1); rc=$?
  [ "$rc" -eq 0 ] || bad "the C example exited $rc: $out"
  [ "$out" = "orders: held" ] || bad "the C example printed '$out'"
  [ "$(redis-cli -p "$REDIS_PORT" exists orders)" = 0 ] || bad "the C example left its lock held"
else
  bad "the C example does not build with cc -std=c11 -Wall -Wextra -Werror"
fi

# The first ```python block after "## In Python", run as given (the URL
# changed) with the binding of this tree over this library.
awk '/^## In Python$/ {s=1} s && /^```python$/ {c=1; next} c && /^```$/ {exit} c {print}' "$readme" >"$tmp/app.py"
grep -q 'redis://127.0.0.1:6379' "$tmp/app.py" || bad "no Python example with redis://127.0.0.1:6379 under '## In Python'"
py=""
for c in python3 /usr/bin/python3; do
  command -v "$c" >/dev/null && "$c" -c 'import ctypes' 2>/dev/null && { py=$c; break; }
done
if [ -n "$py" ]; then
  sed -i "s#redis://127.0.0.1:6379#$REDIS_URL#" "$tmp/app.py"
  out=$(cd "$tmp" && DLOCK_LIBRARY=$lib PYTHONPATH="$src/python" PYTHONDONTWRITEBYTECODE=1 "$py" app.py 2>&1)
  rc=$?
  [ "$rc" -eq 0 ] && [ "$out" = "orders: held" ] || bad "the Python example: exit $rc, printed '$out'"
  [ "$(redis-cli -p "$REDIS_PORT" exists orders)" = 0 ] || bad "the Python example left its lock held"
else
  bad "no python3 to run the README's Python example"
fi

# Every package of deps.sh's list is named in the README's paragraph on it.
pkgs=$(sed -n '/^pkgs=(/,/)/p' "$src/scripts/deps.sh" | tr -d '()"' | sed 's/^pkgs=//; s/\$@//' | tr ' ' '\n' | grep -v '^$')
[ "$(echo "$pkgs" | wc -l)" -ge 10 ] || bad "deps.sh's package list was not read: $pkgs"
para=$(awk '/scripts\/deps.sh/ {p=1} p && /^$/ {exit} p {print}' "$readme" | tr '\n' ' ')
for p in $pkgs; do
  case " $para " in *[\ \(]"$p"[\ ,\)\;.]*) ;; *) bad "README does not name '$p', which deps.sh installs" ;; esac
done

# The crontab sets the PATH that finds make install's dlock, and DLOCK_URL.
cron=$(awk '/^## In the shell$/ {s=1} s && /^```sh$/ {c=1; next} c && /^```$/ {exit} c {print}' "$readme")
echo "$cron" | grep -qE '^PATH=([^:]*:)*/usr/local/bin(:|$)' || bad "the crontab does not set a PATH with /usr/local/bin"
echo "$cron" | grep -qE '^DLOCK_URL=redis' || bad "the crontab does not set DLOCK_URL"

[ "$fail" -eq 0 ] && echo "ok: README's C and Python examples, package list and crontab"
exit "$fail"
