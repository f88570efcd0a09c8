#!/usr/bin/env bash
# Our GCN / AD-GCN_fast / AD-GCN training step against PyG's GCN, on one GPU, in one command
# (device tool, one GPU; .device prepared by ../shared/device/prepare.sh --data):
#   bash bench/gpu_bench.sh
# Sources .device/setup.sh and .device/env.sh when the environment is not set up yet, builds
# build-gpu (CUDA), generates the arxiv-scale graph once, runs `adgnn bench` and
# bench/pyg_gcn.py on the same card one after the other, and prints one Markdown table
# (bench/bench_table.py) with the card name and the date. Logs, JSON and table.md go to $OUT.
# Knobs: DEPTHS (2,4,8), STEPS (30), WARMUP (5), HIDDEN (128), OUT (/tmp/adgnn_bench),
# GRAPH (another .h5 instead of $OUT/arxiv-scale.h5), SKIP_BUILD=1 (use build-gpu as it is),
# ADGNN (the binary, build-gpu/adgnn), PYTHON (python3), DEVICE (cuda), FDELTA (fp32,tf32,bf16: AD-GCN's
# f_delta precisions, one row each, where the binary has --fdelta-precision).
# REORDER (metis): also run both sides on the graph renumbered for locality (`adgnn data reorder
# --method $REORDER --block $BLOCK`, BLOCK 4096; REORDER=benefit: highest fast depth benefit first) and
# print a second table; none: skip it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/adgnn_bench}
DEPTHS=${DEPTHS:-2,4,8}
DEPTHS=$(echo "$DEPTHS" | tr ' ' ',' | sed 's/,,*/,/g; s/^,//; s/,$//')
STEPS=${STEPS:-30}
WARMUP=${WARMUP:-5}
HIDDEN=${HIDDEN:-128}
DEVICE=${DEVICE:-cuda}
PYTHON=${PYTHON:-python3}
ADGNN=${ADGNN:-build-gpu/adgnn}
mkdir -p "$OUT"
t0=$(date +%s)

if [ -z "${SKIP_BUILD:-}" ]; then
  # shellcheck source=../scripts/device_env.sh
  source scripts/device_env.sh && ensure_gpu_configure "$OUT" || exit 1
  adgnn_gpu_configure build-gpu >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build build-gpu -j16 --target adgnn >"$OUT/build.log" 2>&1 || {
    grep -B2 -A12 error "$OUT/build.log" | head -60; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
fi
[ -x "$ADGNN" ] || { echo "gpu_bench.sh: $ADGNN is not built (unset SKIP_BUILD, or set ADGNN)" >&2; exit 1; }

if [ -n "${GRAPH:-}" ]; then
  [ -f "$GRAPH" ] || { echo "gpu_bench.sh: GRAPH=$GRAPH: no such file" >&2; exit 1; }
else
  GRAPH=$OUT/arxiv-scale.h5
  if [ ! -f "$GRAPH" ]; then
    "$ADGNN" data generate --preset arxiv-scale -o "$GRAPH" >"$OUT/generate.log" 2>&1 || {
      tail -5 "$OUT/generate.log"; exit 1; }
    echo "generated $GRAPH: $(( $(date +%s) - t0 )) s"
  fi
fi

card=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)
[ -n "$card" ] || card="no nvidia-smi ($DEVICE)"
# Ours first, then PyG: each process has the card to itself. No stale JSON from an earlier run.
rm -f "$OUT/adgnn_bench.json" "$OUT/pyg_gcn.json"
status=0
# The three GCN models: `--models gcn,ad_fast,ad` where the binary has that flag, else its
# `--backbones gcn --variants plain,ad_fast,ad` form.
# shellcheck disable=SC2054  # the commas are inside one flag value
if "$ADGNN" bench --help 2>/dev/null | grep -q -- '--models'; then
  models=(--models gcn,ad_fast,ad)
else
  models=(--backbones gcn --variants plain,ad_fast,ad)
fi
FDELTA=${FDELTA:-fp32,tf32,bf16}
case ${DEVICE:-cuda} in cuda*) ;; *) FDELTA=fp32 ;; esac  # TF32 / bf16 f_delta exist on CUDA only
if "$ADGNN" bench --help 2>/dev/null | grep -q -- '--fdelta-precision'; then
  models+=(--fdelta-precision "$FDELTA")
fi
"$ADGNN" bench --dataset "$GRAPH" "${models[@]}" --depths "$DEPTHS" --hidden "$HIDDEN" \
  --steps "$STEPS" --warmup "$WARMUP" --device "$DEVICE" --json "$OUT/adgnn_bench.json" \
  >"$OUT/adgnn_bench.log" 2>&1 || { status=1; echo "adgnn bench failed:"; tail -5 "$OUT/adgnn_bench.log"; }
echo "adgnn bench: $(( $(date +%s) - t0 )) s"
"$PYTHON" bench/pyg_gcn.py "$GRAPH" --depths "$DEPTHS" --hidden "$HIDDEN" --steps "$STEPS" \
  --warmup "$WARMUP" --device "$DEVICE" --json "$OUT/pyg_gcn.json" \
  >"$OUT/pyg_gcn.log" 2>&1 || { status=1; echo "pyg_gcn.py failed:"; tail -5 "$OUT/pyg_gcn.log"; }
echo "pyg_gcn.py: $(( $(date +%s) - t0 )) s"
echo
"$PYTHON" bench/bench_table.py --ours "$OUT/adgnn_bench.json" --pyg "$OUT/pyg_gcn.json" \
  --card "$card" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" | tee "$OUT/table.md"

# The same graph with its nodes renumbered for locality: both sides again, on that file.
REORDER=${REORDER:-metis}
BLOCK=${BLOCK:-4096}
if [ "$REORDER" != none ]; then
  RGRAPH="$OUT/$(basename "${GRAPH%.h5}")-$REORDER-$BLOCK.h5"
  if "$ADGNN" data reorder "$GRAPH" -o "$RGRAPH" --method "$REORDER" --block "$BLOCK" >"$OUT/reorder.log" 2>&1; then
    tail -1 "$OUT/reorder.log"
    rm -f "$OUT/adgnn_bench_reordered.json" "$OUT/pyg_gcn_reordered.json"
    "$ADGNN" bench --dataset "$RGRAPH" "${models[@]}" --depths "$DEPTHS" --hidden "$HIDDEN" \
      --steps "$STEPS" --warmup "$WARMUP" --device "$DEVICE" --json "$OUT/adgnn_bench_reordered.json" \
      >"$OUT/adgnn_bench_reordered.log" 2>&1 || { status=1; echo "adgnn bench (reordered) failed:"; tail -5 "$OUT/adgnn_bench_reordered.log"; }
    "$PYTHON" bench/pyg_gcn.py "$RGRAPH" --depths "$DEPTHS" --hidden "$HIDDEN" --steps "$STEPS" \
      --warmup "$WARMUP" --device "$DEVICE" --json "$OUT/pyg_gcn_reordered.json" \
      >"$OUT/pyg_gcn_reordered.log" 2>&1 || { status=1; echo "pyg_gcn.py (reordered) failed:"; tail -5 "$OUT/pyg_gcn_reordered.log"; }
    echo
    echo "Renumbered ($REORDER, block $BLOCK): both sides on $(basename "$RGRAPH")"
    "$PYTHON" bench/bench_table.py --ours "$OUT/adgnn_bench_reordered.json" --pyg "$OUT/pyg_gcn_reordered.json" \
      --card "$card" --date "$(date -u '+%Y-%m-%d %H:%M UTC')" | tee "$OUT/table_reordered.md"
  else
    status=1; echo "adgnn data reorder failed:"; tail -3 "$OUT/reorder.log"
  fi
fi
exit $status
