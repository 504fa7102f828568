#!/usr/bin/env bash
# Installs what mrcemu needs on a fresh Debian 12 machine. Idempotent and quick
# when nothing is missing: apt is only touched when a package is absent.
set -euo pipefail
cd "$(dirname "$0")/.."

# libclang-rt-14-dev: libFuzzer and the sanitizers for `make fuzz` (the compiled parser).
# openssh-server: the sshd of `mrcemu cluster local`'s servers (its service is not started).
# libibverbs-dev, perftest, ibverbs-utils: the verbs shim's headers, and the RDMA programs
# (ib_write_bw, ib_write_lat, ibv_devinfo) that run on emulated hosts through it.
APT_PKGS=(mininet tcpdump tshark clang llvm libbpf-dev iproute2 nftables iperf bpftool gcc
          libclang-rt-14-dev openssh-server libibverbs-dev perftest ibverbs-utils)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: apt-get installing ${missing[*]}"
  $SUDO apt-get update -q
  # No package starts a service here (openssh-server would start sshd on port 22):
  # Debian's policy-rc.d convention, only while apt runs and only if none is there.
  policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  if [ -n "$policy" ]; then $SUDO rm -f "$policy"; trap - EXIT; fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "install-deps: creating .venv"
  "$PY" -m venv .venv
fi
# Reinstall only when pyproject.toml or the compiled data path's sources changed since
# the last install (pip builds the extension, mrcemu/datapath/_datapath*.so, in place).
stamp=.venv/.mrcemu-installed
changed=""
if [ -f "$stamp" ]; then
  changed=$(find pyproject.toml mrcemu/datapath mrcemu/bpf/mrc_wire.h -newer "$stamp" \
            \( -name '*.c' -o -name '*.h' -o -name pyproject.toml \) -print -quit)
fi
if [ ! -f "$stamp" ] || [ -n "$changed" ] || ! ls mrcemu/datapath/_datapath*.so >/dev/null 2>&1; then
  echo "install-deps: pip install -e .[dev]"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e ".[dev]"
  touch "$stamp"
fi
