#!/usr/bin/env bash
# Products-scale AD-GCN_fast (depth 4) on 1 GPU and on every GPU of the machine under several
# mpirun CPU bindings, one partition shared by the runs, in one device call:
#   source .device/setup.sh; OUT=$OUT/b bash scripts/device_binding.sh
# A rank's step is host-bound once its device work is split four ways (docs/distributed.md), so
# where mpirun places the ranks' threads matters. BINDINGS lists the mpirun flag sets, separated
# by ';' (default: mpirun's own, none, numa). Also records the machine's CPU / GPU topology and,
# unless SKIP_ARXIV=1, the one-GPU arxiv-scale bench (GCN, AD-GCN_fast at depth 4 and 8).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=device_env.sh
source scripts/device_env.sh
device_script_start /tmp/adgnn_binding
{ nvidia-smi -L; nvidia-smi topo -m; lscpu; } >"$OUT/topology.txt" 2>&1
if [ -z "${SKIP_BUILD:-}" ]; then
  ensure_gpu_configure "$OUT" || exit 1
  adgnn_gpu_configure build-gpu >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build build-gpu -j"$(nproc)" --target adgnn >"$OUT/build.log" 2>&1 || {
    grep -B2 -A12 error "$OUT/build.log" | head -60; exit 1; }
  elapsed "built"
fi
if [ -z "${SKIP_ARXIV:-}" ]; then
  build-gpu/adgnn data generate --preset arxiv-scale -o /tmp/arxiv.h5 >/dev/null
  CUDA_VISIBLE_DEVICES=0 build-gpu/adgnn bench --dataset /tmp/arxiv.h5 --backbones gcn --variants plain,ad_fast \
    --depths 4,8 --steps 30 --warmup 5 --device cuda --json "$OUT/arxiv_bench.json" >"$OUT/arxiv_bench.md" 2>&1
  elapsed "arxiv bench: exit $?"
fi
[ -f /tmp/products.h5 ] || build-gpu/adgnn data generate --preset products-scale -o /tmp/products.h5 >/dev/null
mkdir -p /tmp/products_parts
build-gpu/adgnn partition /tmp/products.h5 -p "$ngpu" -o "/tmp/products_parts/p$ngpu" --json >"$OUT/partition.json" 2>&1
elapsed "partitioned into $ngpu: exit $?"
common=(ADGNN=build-gpu/adgnn DEVICE=cuda LAYERS=4 EPOCHS="${EPOCHS:-12}" VARIANTS=ad_fast PARTITION_DIR=/tmp/products_parts)
env "${common[@]}" RANKS=1 OUT_DIR="$OUT/p1" bash scripts/bench_distributed.sh /tmp/products.h5 >"$OUT/p1.md" 2>&1
elapsed "1 GPU: $(grep '^| 1 ' "$OUT/p1.md")"
IFS=';' read -r -a bindings <<<"${BINDINGS:-default;--bind-to none;--map-by numa --bind-to numa}"
k=0
for b in "${bindings[@]}"; do
  k=$((k + 1))
  flags="--allow-run-as-root --oversubscribe --report-bindings"
  [ "$b" = default ] || flags="$flags $b"
  prof=0; [ "$k" = 1 ] && prof=${PROFILE_STEPS:-3}
  env "${common[@]}" RANKS="$ngpu" MPIRUN_FLAGS="$flags" PROFILE_STEPS="$prof" OUT_DIR="$OUT/b$k" \
    bash scripts/bench_distributed.sh /tmp/products.h5 >"$OUT/b$k.md" 2>&1
  elapsed "$ngpu GPUs, binding '$b': $(grep "^| $ngpu " "$OUT/b$k.md")"
done
rm -f "$OUT"/b*/profile_*/*.trace.json
