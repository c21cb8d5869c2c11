#!/usr/bin/env bash
# ctest's entry to the Python binding's tests: pytest on one file of
# python/tests against this build's libdlock.so and dlock command.
# usage: run.sh LIBDLOCK DLOCK_CLI TEST_FILE [pytest arguments...]
# The interpreter: $DLOCK_PYTHON, else the first of python3 (PATH) and
# /usr/bin/python3 that has pytest and redis-py (Debian: python3-pytest,
# python3-redis; scripts/deps.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=$1 cli=$2 file=$3
shift 3
py=${DLOCK_PYTHON:-}
if [ -z "$py" ]; then
  for c in python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import pytest, redis' 2>/dev/null; then
      py=$c
      break
    fi
  done
fi
if [ -z "$py" ]; then
  echo "FAIL: no python3 with pytest and redis-py (apt-get install python3-pytest python3-redis, or make deps)"
  exit 1
fi
export DLOCK_LIBRARY=$lib DLOCK_CLI=$cli PYTHONDONTWRITEBYTECODE=1
exec "$py" -m pytest -q -p no:cacheprovider -o faulthandler_timeout=200 "$here/$file" "$@"
