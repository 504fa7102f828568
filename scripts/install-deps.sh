#!/usr/bin/env bash
# Installs what mrcemu needs on a fresh Debian 12 machine. Idempotent and quick
# when nothing is missing: apt is only touched when a package is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(mininet tcpdump tshark clang llvm libbpf-dev iproute2 nftables iperf bpftool)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: apt-get installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "install-deps: creating .venv"
  "$PY" -m venv .venv
fi
# Reinstall only when pyproject.toml changed since the last install.
stamp=.venv/.mrcemu-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "install-deps: pip install -e .[dev]"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".[dev]"
  touch "$stamp"
fi
