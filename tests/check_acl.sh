#!/usr/bin/env bash
# Fails when a Lua script of dlock calls a Redis command that the documented
# least-privilege rule (docs/acl-rule.txt) does not allow: Redis would refuse
# that call at run time for a user limited to the rule.
# usage: tests/check_acl.sh SOURCE_DIR
set -euo pipefail
src=${1:-.}
rule="$src/docs/acl-rule.txt"
allowed=$(grep -v '^#' "$rule" | tr ' ' '\n' | sed -n 's/^+\([a-z|]*\)$/\1/p' | sort -u)
called=$(grep -rhoE "redis\.p?call\(['\"][A-Za-z]+['\"]" "$src/src/scripts" |
         sed -E "s/.*\(['\"]([A-Za-z]+)['\"]/\1/" | tr 'A-Z' 'a-z' | sort -u)
[ -n "$called" ] || { echo "no redis.call found under $src/src/scripts"; exit 1; }
missing=$(comm -23 <(echo "$called") <(echo "$allowed"))
if [ -n "$missing" ]; then
  echo "commands called by scripts but not allowed by $rule:"
  echo "$missing"
  exit 1
fi
echo "all $(echo "$called" | wc -l) commands the scripts call are allowed by the rule"
