#!/usr/bin/env bash
# Installs what the project needs on Debian 12 (Debian packages, then PyTorch 2.11 from PyPI into
# .venv), configures and builds into build/. Safe to run again: every step is idempotent.
#   ADGNN_BUILD_TYPE=Release|RelWithDebInfo|Debug   (default Release)
#   ADGNN_SKIP_APT=1     skip apt-get (no root, packages already present)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

packages=(build-essential cmake ninja-build ccache pkg-config git python3 python3-venv
  libopenmpi-dev openmpi-bin libmetis-dev libhdf5-dev libgtest-dev libgmock-dev
  libopenblas0-openmp libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libyaml-cpp-dev zlib1g-dev libssl-dev gnuplot-nox libptscotch-dev)
if [ "${ADGNN_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# Python: the first interpreter that can make a venv (pyenv's python3 or Debian's).
if [ ! -x .venv/bin/python ]; then
  py=python3
  $py -c 'import venv, ensurepip' 2>/dev/null || py=/usr/bin/python3
  log "creating .venv with $($py --version)"
  $py -m venv .venv
fi
if ! .venv/bin/python -c 'import torch, numpy, h5py, torch_geometric, sklearn, tensorboard; assert torch.__version__.startswith("2.11")' 2>/dev/null; then
  log "pip install torch==2.11.* torch_geometric==2.8.* numpy h5py scikit-learn tensorboard (several GB on the first run; pip caches them)"
  .venv/bin/pip install -q --disable-pip-version-check "torch==2.11.*" "torch_geometric==2.8.*" numpy h5py scikit-learn \
    tensorboard
fi
torch_prefix=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')

export CCACHE_BASEDIR=$(dirname "$root") CCACHE_NOHASHDIR=1
log "configure build/"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="${ADGNN_BUILD_TYPE:-Release}" \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DADGNN_PYTHON="$root/.venv/bin/python" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DADGNN_MPIEXEC_EXTRA="--allow-run-as-root;--oversubscribe" \
  >build-configure.log 2>&1 || { cat build-configure.log; exit 1; }
log "build (ninja -j$(nproc))"
cmake --build build -j"$(nproc)"
log "done: build/adgnn"
