#!/usr/bin/env bash
# The paper's experiments (scripts/experiments.py) on the GPU machine, inside one device call:
#   source .device/setup.sh; LIMIT_S=560 bash scripts/device_experiments.sh \
#     'exp3 --datasets citeseer_planetoid --depths 16,32,64 --gpus 4 --slots 32 --run-workers 4' \
#     'exp5 --ranks 4 --runs 1 --slots 1'
# Each argument is one experiments.py invocation (--bin build-gpu/adgnn --device cuda are added;
# P > 1 ranks run under mpirun -n P, one GPU per local rank), run one after another. Builds
# build-gpu/adgnn unless it exists and SKIP_BUILD=1. No run starts after LIMIT_S - 60 s from this
# script's start and every process is stopped at LIMIT_S - 15 s (finished runs stay: a rerun
# continues). The raw results land in docs/results/raw/ of this copy and come back as
# $OUT/results_raw.tgz (unpack it in the repository root; experiments.py --report-only then
# writes the tables; `tar -czf docs/results/raw/<exp>.tar.gz -C docs/results/raw <exp>` makes the
# archive the repository keeps), the logs as $OUT/experiments.log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
T0=$(date +%s)
LIMIT=${LIMIT_S:-560}
RESULT=${OUT:-/tmp/adgnn_experiments}
mkdir -p "$RESULT"
log="$RESULT/experiments.log"
export NCCL_NVLS_ENABLE=0
trap 'tar -czf "$RESULT/results_raw.tgz" docs/results/raw' EXIT
if [ -z "${SKIP_BUILD:-}" ] || [ ! -x build-gpu/adgnn ]; then
  # shellcheck source=device_env.sh
  source scripts/device_env.sh && ensure_gpu_configure "$RESULT" || exit 1
  { adgnn_gpu_configure build-gpu && cmake --build build-gpu -j"$(nproc)" --target adgnn; } >"$RESULT/build.log" 2>&1 ||
    { grep -B2 -A12 error "$RESULT/build.log" | head -60; exit 1; }
fi
echo "[$(($(date +%s) - T0)) s] adgnn built; $(nvidia-smi -L | wc -l) GPUs" | tee -a "$log"
for spec in "$@"; do
  now=$(($(date +%s) - T0))
  box=$((LIMIT - 60 - now))
  stop=$((LIMIT - 15 - now))
  [ "$box" -gt 0 ] || { echo "no time left for: $spec" | tee -a "$log"; continue; }
  # shellcheck disable=SC2086  # the spec is a list of experiments.py arguments
  timeout -s TERM "$stop" python3 scripts/experiments.py $spec --bin build-gpu/adgnn --device cuda \
    --time-box "$box" --mpirun "mpirun -n {P} --allow-run-as-root --oversubscribe" >>"$log" 2>&1
  echo "[$(($(date +%s) - T0)) s] experiments.py $spec: exit $?" | tee -a "$log"
done
tail -5 "$log"
