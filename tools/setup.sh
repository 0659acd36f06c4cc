#!/usr/bin/env bash
# Installs what rlx-edge needs and is missing: Debian packages and the .venv.
# Idempotent: a second run checks and installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

# g++: Verilator compiles its simulation models as C++
APT_PACKAGES=(gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm iverilog yosys perl make gcc g++
              python3 python3-venv python3-dev)
EXTRAS="onnx,tflite,fpga,hil,farm,jax,plot,dev"

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 2; }
    SUDO=sudo
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  $PY -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
stamp=.venv/.rlx-edge-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing rlx-edge[$EXTRAS] into .venv"
  .venv/bin/python -m pip install -q -e ".[$EXTRAS]"
  touch "$stamp"
fi
