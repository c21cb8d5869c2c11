#!/usr/bin/env bash
# Nothing the tests start may be reachable from outside the machine: every
# listening socket of theirs is on loopback, or, inside a network namespace
# a test made, on an address it named explicitly (never a wildcard).
#
#   scripts/listen-check.sh watch ROOT_PID OUT   poll until killed; each
#       listener that breaks the rule, owned by a descendant of ROOT_PID or a
#       redis-server, is appended to OUT (one line each, once)
#   scripts/listen-check.sh now ROOT_PID         one look; exit 1 if any
#   scripts/listen-check.sh selftest             (root) a server on 0.0.0.0
#       inside a namespace made for it must be caught; one on loopback not
#
# Reads /proc/net/tcp{,6} (of each namespace under /var/run/netns through
# `ip netns exec`); no other tool needed in the host namespace.
set -uo pipefail

# LISTEN sockets of the current namespace: "ADDR PORT INODE", ADDR as
# v4:a.b.c.d or v6:<32 hex digits as the kernel prints them>. NET_DIR: where
# tcp and tcp6 are read (the selftest's made-up table; default /proc/net).
listeners() {
  cat "${NET_DIR:-/proc/net}/tcp" "${NET_DIR:-/proc/net}/tcp6" 2>/dev/null | awk '
    function hex(s,   i, n) {
      n = 0
      for (i = 1; i <= length(s); i++) n = n * 16 + index("0123456789ABCDEF", toupper(substr(s, i, 1))) - 1
      return n
    }
    $4 == "0A" {
      split($2, a, ":")
      h = a[1]
      if (length(h) == 8)
        addr = "v4:" hex(substr(h, 7, 2)) "." hex(substr(h, 5, 2)) "." hex(substr(h, 3, 2)) "." hex(substr(h, 1, 2))
      else
        addr = "v6:" h
      print addr, hex(a[2]), $10
    }'
}

V6_ANY=00000000000000000000000000000000
V6_LOOP=00000000000000000000000001000000
# ::ffff:127.x.y.z: the last word holds 127 in its low byte
is_v6_mapped_loop() { [[ $1 == 0000000000000000FFFF0000??????7F ]]; }

# ok_in_host ADDR: loopback only
ok_in_host() {
  case $1 in
    v4:127.*) return 0 ;;
    v6:$V6_LOOP) return 0 ;;
    v6:*) is_v6_mapped_loop "${1#v6:}" ;;
    *) return 1 ;;
  esac
}
# ok_in_netns ADDR: any address but a wildcard (the namespace's own, named)
ok_in_netns() { [ "$1" != "v4:0.0.0.0" ] && [ "$1" != "v6:$V6_ANY" ]; }

# pid owning socket inode $1 (first found), or nothing
owner_of() {
  local fd
  for fd in /proc/[0-9]*/fd/*; do
    [ "$(readlink "$fd" 2>/dev/null)" = "socket:[$1]" ] && { fd=${fd#/proc/}; echo "${fd%%/*}"; return; }
  done
}

# is_ours PID ROOT: PID descends from ROOT, or is a redis-server
is_ours() {
  local p=$1 root=$2 comm stat
  comm=$(cat "/proc/$1/comm" 2>/dev/null) || return 1
  case $comm in redis-server | redis-sentinel) return 0 ;; esac
  while [ -n "$p" ] && [ "$p" -gt 1 ]; do
    [ "$p" = "$root" ] && return 0
    stat=$(cat "/proc/$p/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    set -- $stat
    p=$2
  done
  return 1
}

# Sockets judged not ours (someone else's service): not looked up again.
declare -A others=()

# scan ROOT: prints one line per listener that breaks the rule
scan() {
  local root=$1 addr port inode pid ns
  while read -r addr port inode; do
    ok_in_host "$addr" && continue
    [ -n "${others[$inode]:-}" ] && continue
    pid=$(owner_of "$inode")
    if [ -z "$pid" ] || ! is_ours "$pid" "$root"; then
      others[$inode]=1
      continue
    fi
    echo "host namespace: $addr port $port: pid $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-160)"
  done < <(listeners)
  [ -d /var/run/netns ] || return 0
  for ns in /var/run/netns/*; do
    [ -e "$ns" ] || continue
    ns=$(basename "$ns")
    while read -r addr port inode; do
      ok_in_netns "$addr" && continue
      # The namespace's processes are not told apart: a wildcard there is ours
      # to avoid whoever made it (a test's namespaces are named by it).
      echo "namespace $ns: $addr port $port (a wildcard address)"
    done < <(ip netns exec "$ns" bash -c "$(declare -f listeners); listeners" 2>/dev/null)
  done
}

case ${1:-} in
  watch)
    root=$2 out=$3
    : >>"$out"
    found=$(mktemp)
    trap 'rm -f "$found"' EXIT
    trap 'exit 0' TERM INT
    while :; do
      scan "$root" >"$found"   # in this shell: its cache lives on
      while read -r line; do
        key=${line%%: pid *}
        grep -qF -- "$key" "$out" || echo "$(date +%T) $line" >>"$out"
      done <"$found"
      sleep 0.3
    done
    ;;
  now)
    found=$(scan "$2")
    [ -z "$found" ] && exit 0
    echo "$found"
    exit 1
    ;;
  selftest)
    [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null || { echo "selftest: needs root and ip"; exit 77; }
    rc=0
    ns=dlchk$$
    dir=$(mktemp -d /tmp/dlock-listen-XXXXXX)
    ip netns add "$ns" || exit 1
    ip -n "$ns" link set lo up
    # A wildcard server, reachable only inside a namespace made for it.
    ip netns exec "$ns" redis-server --port 6390 --bind 0.0.0.0 --save "" --daemonize no \
      --dir "$dir" --logfile "$dir/log" &
    wild=$!
    port=$(( 20000 + RANDOM % 40000 ))
    redis-server --port "$port" --bind 127.0.0.1 --save "" --daemonize no --dir "$dir" \
      --logfile "$dir/log2" &
    loop=$!
    for _ in $(seq 100); do
      ip netns exec "$ns" bash -c "$(declare -f listeners); listeners" | grep -q " 6390 " &&
        listeners | grep -q " $port " && break
      sleep 0.1
    done
    out=$(scan $$)
    if grep -q "namespace $ns: v4:0.0.0.0 port 6390" <<<"$out"; then
      echo "ok: a server on 0.0.0.0 in namespace $ns is caught"
    else
      echo "FAIL: the wildcard server in a namespace was not caught: $out"; rc=1
    fi
    if grep -q "host namespace" <<<"$out"; then
      echo "FAIL: a loopback listener was reported: $out"; rc=1
    else
      echo "ok: the loopback server is not reported"
    fi
    # The host namespace's rule, without opening a port to the world: a
    # made-up table where the loopback server's socket is on 0.0.0.0.
    inode=$(listeners | awk -v p="$port" '$1 == "v4:127.0.0.1" && $2 == p {print $3}')
    mkdir "$dir/net"
    printf '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 %s\n' \
      "$port" "$inode" >"$dir/net/tcp"
    : >"$dir/net/tcp6"
    out=$(NET_DIR=$dir/net scan $$)
    if grep -q "host namespace: v4:0.0.0.0 port $port: pid $loop " <<<"$out"; then
      echo "ok: a server of ours on 0.0.0.0 in the host namespace is caught"
    else
      echo "FAIL: the made-up wildcard listener was not caught (inode ${inode:-?}): $out"; rc=1
    fi
    kill "$wild" "$loop" 2>/dev/null
    wait "$wild" "$loop" 2>/dev/null
    ip netns del "$ns"
    rm -rf "$dir"
    exit $rc
    ;;
  *)
    echo "usage: $0 watch ROOT_PID OUT | now ROOT_PID | selftest" >&2
    exit 2
    ;;
esac
