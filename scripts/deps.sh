#!/usr/bin/env bash
# Installs the Debian packages dlock needs to build, test and demo, when they
# are missing. As root it installs them; otherwise it says what to install.
# Usage: scripts/deps.sh [extra packages...]
set -euo pipefail

pkgs=(gcc g++ clang make cmake pkg-config redis-server redis-tools libhiredis-dev libuv1-dev libssl-dev
      openssl libcmocka-dev libasan8 libubsan1 libtsan2 jq iptables iproute2
      python3 python3-pytest python3-redis python3-venv python3-setuptools python3-wheel "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo="sudo"
  else
    echo "dlock needs these Debian packages: ${missing[*]}" >&2
    echo "install them with:  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine: update on failure.
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/dlock-apt.log 2>&1; then
  $sudo apt-get update >>/tmp/dlock-apt.log 2>&1 || true
  if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/dlock-apt.log 2>&1; then
    tail -20 /tmp/dlock-apt.log >&2
    echo "apt-get install failed (log: /tmp/dlock-apt.log)" >&2
    exit 1
  fi
fi
