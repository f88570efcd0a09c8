#!/usr/bin/env bash
# A/B of two builds on one GPU machine: products-scale AD-GCN_fast (depth 4) on 1 GPU and on every
# GPU, this tree against an older commit's, one METIS partition shared by every run, the runs
# interleaved (old, new, new, old) so that drift of the machine shows as a difference between the
# two runs of one build. Steps differ by a few percent between machines, so a version is measured
# against its predecessor in one call rather than against an older table.
#   git archive <commit> | { mkdir -p build-ab/old && tar -x -C build-ab/old; }   # here, once
#   source .device/setup.sh; OUT=$OUT/ab bash scripts/device_ab.sh                # carry build-ab
# PROFILE_STEPS (default 3) profiles the last run of this tree on every GPU (per-rank summaries
# in $OUT/new2_p<P>/; KEEP_TRACES=1 keeps their Chrome traces: scripts/trace_by_op.py). RANKS
# (default: 1 and every GPU) picks the rank counts, RUNS (default "old1 new1 new2 old2") the
# runs per rank count.
# WORKLOAD=arxiv instead: one GPU, `adgnn bench` (GCN and AD-GCN_fast at depth 4 and 8) on the
# arxiv-scale graph, the same interleaving; TESTS=1 also builds and runs this tree's CUDA tests.
# VARIANTS (default plain,ad_fast) and FDELTA (e.g. fp32,tf32: --fdelta-precision, for AD-GCN)
# pick what that bench runs; OLD_FDELTA (default FDELTA) the old build's, where it lacks a
# precision. BENCH_FLAGS adds flags to both builds' bench (e.g. --kernels: SpMM against the copy
# bandwidth); STEPS (default 30) its timed steps: 100 steadies the AD variants' medians on a
# noisy host (their p10-p90 spans 1-3 ms on some machines). With TESTS=1 on several GPUs, the distributed tests also run on the GPUs (CUDA +
# NCCL, one rank per GPU) after the benches.
# GRAPH=arxiv: the `adgnn train` runs on the arxiv-scale graph instead (e.g. RANKS=1: a
# host-bound step). OLD_FLAGS="--flag value" instead of build-ab/old: the old runs are this tree's
# build with those flags added to EXTRA_FLAGS (one build with every core: a switch's A/B, e.g.
# OLD_FLAGS="--compact-halo off"); with WORKLOAD=arxiv, added to the old runs' bench.
# Time on a cold 2 x H200 machine (32 cores): both builds 160-270 s, once 472 s (give a call >= 300 s),
# products-scale METIS partition 125 s, a one-GPU run ~45 s (loading the 2.45 M-node graph), a
# 2-GPU run ~22 s: more than one 600 s call. Run RANKS=1 first, then RANKS=<P> in a second call
# while the machine is warm (the builds, /tmp/products.h5 and the partition stay). On a cold 4 x
# H200 (64 cores, 2026-11-28) one build took 189 s and the METIS partition into 4 122 s: budget
# ~330 s of device time before the first products run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
[ -n "${OLD_FLAGS:-}" ] || [ -f build-ab/old/CMakeLists.txt ] ||
  { echo "device_ab.sh: no build-ab/old and no OLD_FLAGS (see the header)" >&2; exit 2; }
# shellcheck source=device_env.sh
source scripts/device_env.sh
device_script_start /tmp/adgnn_ab
nvidia-smi -L >"$OUT/gpus.txt" 2>&1
ensure_gpu_configure "$OUT" || exit 1
jobs=$(( $(nproc) / 2 ))
[ -n "${OLD_FLAGS:-}" ] && jobs=$(nproc)
build() {  # build SRC_DIR BUILD_DIR TAG [more targets]
  (cd "$1" && adgnn_gpu_configure "$2" >"$OUT/configure_$3.log" 2>&1) &&
    cmake --build "$2" -j"$jobs" --target adgnn "${@:4}" >"$OUT/build_$3.log" 2>&1
}
build . "$PWD/build-gpu" new ${TESTS:+cuda_tests dist_tests} & new_pid=$!
[ -z "${OLD_FLAGS:-}" ] && { build build-ab/old "$PWD/build-gpu-old" old & old_pid=$!; }
wait $new_pid || { grep -B2 -A12 error "$OUT/build_new.log" | head -60; exit 1; }
[ -z "${OLD_FLAGS:-}" ] && { wait $old_pid || { grep -B2 -A12 error "$OUT/build_old.log" | head -60; exit 1; }; }
elapsed "built"
if [ -n "${TESTS:-}" ]; then
  build-gpu/tests/cuda_tests --gtest_brief=1 >"$OUT/cuda_tests.txt" 2>&1
  elapsed "CUDA tests (exit $?): $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/cuda_tests.txt" | tr '\n' ' ')"
fi
if [ "${WORKLOAD:-products}" = arxiv ]; then
  [ -f /tmp/arxiv.h5 ] || build-gpu/adgnn data generate --preset arxiv-scale -o /tmp/arxiv.h5 >/dev/null
  for run in old1 new1 new2 old2; do
    bin=build-gpu/adgnn old_flags=
    if [ "${run#old}" != "$run" ]; then
      if [ -n "${OLD_FLAGS:-}" ]; then old_flags=$OLD_FLAGS; else bin=build-gpu-old/adgnn; fi
    fi
    fdelta=${FDELTA:-}
    [ "${run#old}" != "$run" ] && fdelta=${OLD_FDELTA:-$fdelta}
    # shellcheck disable=SC2086
    "$bin" bench --dataset /tmp/arxiv.h5 --variants "${VARIANTS:-plain,ad_fast}" --depths 4,8 \
      ${fdelta:+--fdelta-precision "$fdelta"} --steps "${STEPS:-30}" ${BENCH_FLAGS:-} $old_flags \
      --json "$OUT/$run.json" >"$OUT/${run}_arxiv.md" 2>&1
    elapsed "$run: $(grep -E '^\| (GCN|AD-GCN|SpMM (forward|backward).*all rows)' "$OUT/${run}_arxiv.md" | cut -d'|' -f2-4 | tr '\n' ' ')"
  done
  if [ -n "${TESTS:-}" ] && [ "$ngpu" -gt 1 ]; then
    ADGNN_DIST_DEVICE=cuda timeout 300 mpirun --allow-run-as-root --oversubscribe -n "$ngpu" build-gpu/tests/dist_tests \
      --gtest_brief=1 >"$OUT/dist_tests_cuda_np$ngpu.txt" 2>&1
    elapsed "distributed tests, CUDA + NCCL, $ngpu ranks (exit $?): $(grep -aE 'PASSED|FAILED' "$OUT/dist_tests_cuda_np$ngpu.txt" | sort | uniq -c | tr '\n' ' ')"
  fi
  exit 0
fi
graph=${GRAPH:-products}
case $graph in products | arxiv) ;; *) echo "device_ab.sh: GRAPH=$graph: expected products or arxiv" >&2; exit 2 ;; esac
[ -f "/tmp/$graph.h5" ] || build-gpu/adgnn data generate --preset "$graph-scale" -o "/tmp/$graph.h5" >/dev/null
if [ "${RANKS:-1 $ngpu}" != 1 ] && [ ! -d "/tmp/${graph}_parts/p$ngpu" ]; then
  mkdir -p "/tmp/${graph}_parts"
  build-gpu/adgnn partition "/tmp/$graph.h5" -p "$ngpu" -o "/tmp/${graph}_parts/p$ngpu" --json >"$OUT/partition.json" 2>&1
  elapsed "partitioned into $ngpu: exit $?"
fi
common=(DEVICE=cuda LAYERS=4 EPOCHS="${EPOCHS:-12}" VARIANTS=ad_fast PARTITION_DIR="/tmp/${graph}_parts")
for P in ${RANKS:-1 $ngpu}; do
  for run in ${RUNS:-old1 new1 new2 old2}; do
    bin=build-gpu/adgnn flags=
    if [ "${run#old}" != "$run" ]; then
      if [ -n "${OLD_FLAGS:-}" ]; then flags=$OLD_FLAGS; else bin=build-gpu-old/adgnn; fi
    fi
    prof=0
    [ "$run" = new2 ] && [ "$P" -gt 1 ] && prof=${PROFILE_STEPS:-3}
    env "${common[@]}" ADGNN="$bin" EXTRA_FLAGS="${EXTRA_FLAGS:-} $flags" RANKS="$P" PROFILE_STEPS="$prof" OUT_DIR="$OUT/${run}_p$P" \
      bash scripts/bench_distributed.sh "/tmp/$graph.h5" >"$OUT/${run}_p$P.md" 2>&1
    elapsed "$run, $P GPU(s): $(grep "^| $P " "$OUT/${run}_p$P.md" || tail -3 "$OUT/${run}_p$P.md")"
  done
done
[ -n "${KEEP_TRACES:-}" ] || rm -f "$OUT"/*/profile_*/*.trace.json
