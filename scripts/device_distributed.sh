#!/usr/bin/env bash
# The GPU machine's part of the distributed issue, in one command (device tool, 2 GPUs):
#   source .device/setup.sh; bash scripts/device_distributed.sh
# Builds with CUDA + NCCL, runs the distributed tests on CUDA with NCCL (2 ranks), the same
# training under torchrun (NCCL bootstrapped through torchrun's store, no MPI) against mpirun's
# losses bit for bit, then the distributed benchmark on the arxiv-scale and products-scale graphs. Logs go to $OUT.
# COMPACT_RANKS="1 4" adds products-scale depth-4 runs with AD's compact deeper-layer input
# forced on (`--compact on`; CUDA's default is off, docs/decisions/compact-deep-layers.md) on those rank counts.
# FULL_HALO_RANKS="4" adds products-scale depth-4 runs with `--compact-halo off` (every halo row
# at every layer; docs/distributed.md) on those rank counts.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/adgnn_device}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=4
ngpu=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$OUT/gpus.txt"
t0=$(date +%s)
# shellcheck source=device_env.sh
source scripts/device_env.sh && ensure_gpu_configure "$OUT" || exit 1
adgnn_gpu_configure build-gpu >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build build-gpu -j16 --target adgnn dist_tests >"$OUT/build.log" 2>&1 || { grep -B2 -A12 error "$OUT/build.log" | head -60; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
if [ -z "${SKIP_TESTS:-}" ]; then
ADGNN_DIST_DEVICE=cuda mpirun --allow-run-as-root --oversubscribe -n "$ngpu" build-gpu/tests/dist_tests --gtest_color=no \
  >"$OUT/dist_tests_cuda_np$ngpu.log" 2>&1
echo "dist_tests on CUDA + NCCL, $ngpu ranks: exit $?"; tail -4 "$OUT/dist_tests_cuda_np$ngpu.log"
fi
if [ "$ngpu" -ge 2 ]; then
  tr=(train csbm:demo --model gcn --variant ad_fast --layers 3 --epochs 20 --device cuda --no-progress --seed 5)
  mpirun --allow-run-as-root --oversubscribe -n 2 build-gpu/adgnn "${tr[@]}" --metrics "$OUT/tr_mpirun.jsonl" \
    >"$OUT/tr_mpirun.log" 2>&1
  python3 -m torch.distributed.run --standalone --nproc_per_node 2 --no-python build-gpu/adgnn "${tr[@]}" \
    --metrics "$OUT/tr_torchrun.jsonl" >"$OUT/tr_torchrun.log" 2>&1
  echo "torchrun, 2 ranks on NCCL: exit $?; losses equal mpirun's: $(cmp -s <(grep -o '"loss":[^,]*' "$OUT/tr_mpirun.jsonl") \
    <(grep -o '"loss":[^,]*' "$OUT/tr_torchrun.jsonl") && [ -s "$OUT/tr_torchrun.jsonl" ] && echo yes || echo NO)"
fi
ranks="1"; [ "$ngpu" -ge 2 ] && ranks="1 2"; [ "$ngpu" -ge 4 ] && ranks="1 2 4"
ranks=${RANKS_LIST:-$ranks}
if [ -z "${SKIP_ARXIV:-}" ]; then
build-gpu/adgnn data generate --preset arxiv-scale -o /tmp/arxiv.h5 >/dev/null
ADGNN=build-gpu/adgnn DEVICE=cuda RANKS="$ranks" LAYERS="4 8" EPOCHS=${EPOCHS:-20} OUT_DIR="$OUT/arxiv" \
  bash scripts/bench_distributed.sh /tmp/arxiv.h5 | tee "$OUT/arxiv.md"
echo "elapsed: $(( $(date +%s) - t0 )) s"
fi
build-gpu/adgnn data generate --preset products-scale -o /tmp/products.h5 >/dev/null
for L in ${PRODUCTS_LAYERS:-4 8}; do
  ADGNN=build-gpu/adgnn DEVICE=cuda RANKS="$ranks" LAYERS="$L" EPOCHS=${EPOCHS:-20} OUT_DIR="$OUT/products_l$L" \
    bash scripts/bench_distributed.sh /tmp/products.h5 2>&1 | head -c 20000 | tee "$OUT/products_l$L.md"
  echo "elapsed: $(( $(date +%s) - t0 )) s"
done
if [ -n "${FULL_HALO_RANKS:-}" ]; then
  ADGNN=build-gpu/adgnn DEVICE=cuda RANKS="$FULL_HALO_RANKS" LAYERS=4 EPOCHS=${EPOCHS:-20} EXTRA_FLAGS="--compact-halo off" \
    OUT_DIR="$OUT/products_l4_full_halo" bash scripts/bench_distributed.sh /tmp/products.h5 2>&1 | head -c 20000 |
    tee "$OUT/products_l4_full_halo.md"
  echo "elapsed: $(( $(date +%s) - t0 )) s"
fi
if [ -n "${COMPACT_RANKS:-}" ]; then
  ADGNN=build-gpu/adgnn DEVICE=cuda RANKS="$COMPACT_RANKS" LAYERS=4 EPOCHS=${EPOCHS:-20} EXTRA_FLAGS="--compact on" \
    OUT_DIR="$OUT/products_l4_compact" bash scripts/bench_distributed.sh /tmp/products.h5 2>&1 | head -c 20000 |
    tee "$OUT/products_l4_compact.md"
  echo "elapsed: $(( $(date +%s) - t0 )) s"
fi
