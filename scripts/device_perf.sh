#!/usr/bin/env bash
# The GPU machine's part of the performance and distributed issues that needs no long runs, in
# one command (device tool; .device prepared by ../shared/device/prepare.sh --data):
#   source .device/setup.sh; bash scripts/device_perf.sh
# Builds build-gpu (CUDA + NCCL), runs the CUDA kernel tests (GPU 0), the NCCL distributed tests
# on every GPU, bench/gpu_bench.sh on GPU 0 (ours against PyG on the arxiv-scale graph), the
# GAT / GATv2 bench on Photo, a Kineto profile of the depth-4 GCN / AD-GCN_fast steps, and
# AD-GCN_fast with --compact on (against gpu_bench, which runs the CUDA default, off).
# Logs and tables go to /tmp/adgnn_perf, and as perf.tgz into $OUT when set (the device tool);
# SKIP_BUILD=1 uses build-gpu as it is; QUICK=1 skips the --compact on and GAT / Photo runs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
RESULT=${OUT:-}  # the device tool's folder: everything comes back as one tarball (8 files at most)
OUT=/tmp/adgnn_perf
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
ngpu=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$OUT/gpus.txt"
t0=$(date +%s)
elapsed() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
if [ -z "${SKIP_BUILD:-}" ]; then
  # shellcheck source=device_env.sh
  source scripts/device_env.sh && ensure_gpu_configure "$OUT" || exit 1
  adgnn_gpu_configure build-gpu >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build build-gpu -j"$(nproc)" --target adgnn dist_tests cuda_tests nccl_tests >"$OUT/build.log" 2>&1 || {
    grep -B2 -A12 error "$OUT/build.log" | head -60; exit 1; }
  elapsed "built"
fi
CUDA_VISIBLE_DEVICES=0 build-gpu/tests/cuda_tests --gtest_color=no >"$OUT/cuda_tests.log" 2>&1
elapsed "cuda_tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "$OUT/cuda_tests.log" | tr '\n' ' ')"
timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$ngpu" build-gpu/tests/nccl_tests --gtest_color=no \
  >"$OUT/nccl_tests_np$ngpu.log" 2>&1
elapsed "nccl_tests, $ngpu ranks: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "$OUT/nccl_tests_np$ngpu.log" | sort | uniq -c | tr '\n' ' ')"
ADGNN_DIST_DEVICE=cuda timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$ngpu" build-gpu/tests/dist_tests \
  --gtest_color=no >"$OUT/dist_tests_np$ngpu.log" 2>&1
elapsed "dist_tests on CUDA + NCCL, $ngpu ranks: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "$OUT/dist_tests_np$ngpu.log" | sort | uniq -c | tr '\n' ' ')"
CUDA_VISIBLE_DEVICES=0 SKIP_BUILD=1 OUT=/tmp/adgnn_bench bash bench/gpu_bench.sh >"$OUT/gpu_bench.log" 2>&1
elapsed "gpu_bench: exit $?"
cp /tmp/adgnn_bench/table.md "$OUT/gpu_bench_table.md" 2>/dev/null
cp /tmp/adgnn_bench/table_reordered.md "$OUT/gpu_bench_table_reordered.md" 2>/dev/null
cp /tmp/adgnn_bench/*.json /tmp/adgnn_bench/reorder.log "$OUT/" 2>/dev/null
CUDA_VISIBLE_DEVICES=0 build-gpu/adgnn bench --dataset /tmp/adgnn_bench/arxiv-scale.h5 --backbones gcn \
  --variants plain,ad_fast,ad --depths 4 --steps 20 --warmup 5 --profile 3 --breakdown --device cuda \
  --fdelta-precision "${FDELTA:-bf16}" --json "$OUT/profile_d4.json" >"$OUT/profile_d4.md" 2>&1
elapsed "profile depth 4: exit $?"
# The SpMM kernels alone against the card's copy bandwidth and matmul rate (performance.md floors).
CUDA_VISIBLE_DEVICES=0 build-gpu/adgnn bench --dataset /tmp/adgnn_bench/arxiv-scale.h5 --backbones gcn \
  --variants plain --depths 4 --steps 10 --warmup 3 --kernels --device cuda >"$OUT/kernels.md" 2>&1
elapsed "kernels: exit $?"
if [ -z "${QUICK:-}" ]; then
# AD's compact deeper-layer input off (the CUDA default) against on, same binary and card.
CUDA_VISIBLE_DEVICES=0 build-gpu/adgnn bench --dataset /tmp/adgnn_bench/arxiv-scale.h5 --backbones gcn \
  --variants ad_fast --depths 4,8 --steps 30 --warmup 5 --compact on --device cuda \
  --json "$OUT/compact_on.json" >"$OUT/compact_on.md" 2>&1
elapsed "compact on (the default off is in gpu_bench above): exit $?"
if [ -n "${ADGNN_DATA:-}" ]; then
  CUDA_VISIBLE_DEVICES=0 build-gpu/adgnn bench --dataset photo --data-dir "$ADGNN_DATA" --backbones gat,gatv2 \
    --variants plain,ad_fast,ad --depths 2,4 --steps 30 --warmup 5 --device cuda --json "$OUT/bench_gat_photo.json" \
    >"$OUT/bench_gat_photo.md" 2>&1
  elapsed "GAT / GATv2 on Photo: exit $?"
fi
fi  # QUICK
[ -n "$RESULT" ] && tar czf "$RESULT/perf.tgz" -C /tmp adgnn_perf && elapsed "logs in $RESULT/perf.tgz"
