# shellcheck shell=bash
# Sourced by the GPU machine's scripts (bench/gpu_bench.sh, scripts/device_perf.sh,
# scripts/device_distributed.sh): makes adgnn_gpu_configure available, sourcing .device/setup.sh
# and .device/env.sh (../shared/device/prepare.sh --data, scripts/device_prepare.sh) when the
# caller has not; their output goes to $1/setup.log. Returns 1 with a message when they are missing.
ensure_gpu_configure() {
  declare -F adgnn_gpu_configure >/dev/null && return 0
  if [ ! -f .device/setup.sh ] || [ ! -f .device/env.sh ]; then
    echo "$(basename "$0"): no .device/setup.sh / env.sh (run bash scripts/device_prepare.sh here)" >&2
    return 1
  fi
  # shellcheck disable=SC1091
  { source .device/setup.sh && source .device/env.sh; } >"$1/setup.log" 2>&1 || { tail -20 "$1/setup.log"; return 1; }
}

# The common start of a device script (scripts/device_ab.sh, scripts/device_binding.sh): OUT
# (default $1) created, NCCL_NVLS_ENABLE=0, OMP_NUM_THREADS (default 4), ngpu, and elapsed()
# stamping its message with the seconds since this call.
device_script_start() {
  OUT=${OUT:-$1}
  mkdir -p "$OUT"
  export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
  # shellcheck disable=SC2034  # ngpu is for the scripts that source this file
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  t0=$(date +%s)
}
elapsed() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
