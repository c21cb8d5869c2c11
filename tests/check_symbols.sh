#!/usr/bin/env bash
# The library must not end the process or write to the terminal: it may not
# import abort, exit, assert's handler or any stdio writer.
set -u
lib=$1
bad=$(nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//' |
      grep -E '^(abort|exit|_exit|_Exit|quick_exit|__assert_fail|printf|fprintf|vprintf|vfprintf|puts|fputs|putchar|fputc|perror|fwrite|dprintf|vdprintf|write)$')
if [ -n "$bad" ]; then
  echo "libdlock imports forbidden functions:"; echo "$bad"; exit 1
fi
exports=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^dlock_' || true)
if [ -n "$exports" ]; then
  echo "libdlock exports symbols outside the dlock_ namespace:"; echo "$exports"; exit 1
fi
echo "ok: $(nm -D --defined-only "$lib" | grep -c ' dlock_') exported dlock_ functions, no forbidden imports"
