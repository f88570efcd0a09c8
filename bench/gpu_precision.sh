#!/usr/bin/env bash
# bf16 against fp32 on one GPU, in one device command (.device prepared: scripts/device_prepare.sh):
#   source .device/setup.sh; bash bench/gpu_precision.sh
# Builds build-gpu (adgnn, and cuda_tests unless TESTS=0: the CUDA tests run first, bfloat16
# kernels included), then `adgnn bench --precision fp32,bf16` of GCN and AD-GCN_fast at DEPTHS
# (4) on arxiv-scale and products-scale (GRAPHS), and GCN alone at depths 2, 4, 8 on arxiv-scale
# with PyG's GCN on cuSPARSE beside it (PEAKS=0: skip), each model in its own process so that no
# row carries another's caches. Prints the tables (bench/precision_table.py, bench/bench_table.py)
# with the card and the date; logs and JSON in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=../scripts/device_env.sh
source scripts/device_env.sh
device_script_start /tmp/adgnn_precision
DEPTHS=${DEPTHS:-4}
GRAPHS=${GRAPHS:-arxiv-scale,products-scale}
STEPS=${STEPS:-20}
ADGNN=build-gpu/adgnn
ensure_gpu_configure "$OUT" || exit 1
targets=(adgnn)
[ "${TESTS:-1}" = 0 ] || targets+=(cuda_tests)
{ adgnn_gpu_configure build-gpu && cmake --build build-gpu -j16 --target "${targets[@]}"; } >"$OUT/build.log" 2>&1 ||
  { grep -B2 -A12 error "$OUT/build.log" | head -60; exit 1; }
elapsed "built ${targets[*]}"
if [ "${TESTS:-1}" != 0 ]; then
  build-gpu/tests/cuda_tests --gtest_color=no >"$OUT/cuda_tests.log" 2>&1
  elapsed "cuda_tests: exit $? ($(grep -c '^\[       OK \]' "$OUT/cuda_tests.log") passed)"
  grep -E '^\[  FAILED  \]|Failure' "$OUT/cuda_tests.log" | head -20
fi
card=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)
day=$(date -u '+%Y-%m-%d %H:%M UTC')
jsons=()
for g in ${GRAPHS//,/ }; do
  "$ADGNN" data generate --preset "$g" -o "$OUT/$g.h5" >"$OUT/generate_$g.log" 2>&1 || { tail -3 "$OUT/generate_$g.log"; continue; }
  for v in plain ad_fast; do
    "$ADGNN" bench --dataset "$OUT/$g.h5" --backbones gcn --variants "$v" --depths "$DEPTHS" --precision fp32,bf16 \
      --steps "$STEPS" --warmup 5 --json "$OUT/bench_${g}_$v.json" >"$OUT/bench_${g}_$v.log" 2>&1 ||
      { tail -3 "$OUT/bench_${g}_$v.log"; continue; }
    jsons+=("$OUT/bench_${g}_$v.json")
  done
  elapsed "benched $g"
done
python3 bench/precision_table.py "${jsons[@]}" --card "$card" --date "$day" | tee "$OUT/precision_table.md"
if [ "${PEAKS:-1}" != 0 ] && [ -f "$OUT/arxiv-scale.h5" ]; then
  # GCN's peak by depth, one process per depth and precision, against PyG's on the same card.
  peaks=()
  for d in 2 4 8; do
    for p in fp32 bf16; do
      "$ADGNN" bench --dataset "$OUT/arxiv-scale.h5" --backbones gcn --variants plain --depths "$d" --precision "$p" \
        --steps "$STEPS" --warmup 5 --json "$OUT/gcn_${d}_$p.json" >"$OUT/gcn_${d}_$p.log" 2>&1 && peaks+=("$OUT/gcn_${d}_$p.json")
    done
  done
  python3 - "${peaks[@]}" >"$OUT/gcn_by_depth.json" <<'PY'
import json, sys
rows = []
for p in sys.argv[1:]:
    d = json.load(open(p))
    rows += d["rows"]
    keep = d
keep["rows"] = rows
print(json.dumps(keep))
PY
  python3 bench/pyg_gcn.py "$OUT/arxiv-scale.h5" --depths 2,4,8 --hidden 128 --steps "$STEPS" --warmup 5 \
    --device cuda --variants sparse_csr --json "$OUT/pyg_gcn.json" >"$OUT/pyg_gcn.log" 2>&1 || tail -3 "$OUT/pyg_gcn.log"
  elapsed "GCN and PyG by depth"
  python3 bench/precision_table.py "$OUT/gcn_by_depth.json" --card "$card" --date "$day" | tee "$OUT/gcn_by_depth.md"
  python3 - "$OUT/gcn_by_depth.json" "$OUT/pyg_gcn.json" <<'PY' | tee -a "$OUT/gcn_by_depth.md"
import json, sys
ours = json.load(open(sys.argv[1]))["rows"]
pyg = json.load(open(sys.argv[2]))["rows"]
print("\n| depth | GCN fp32 peak MiB | GCN bf16 peak MiB | PyG cuSPARSE peak MiB | fp32 / PyG | bf16 / fp32 |")
print("|---:|---:|---:|---:|---:|---:|")
for d in (2, 4, 8):
    f = next((r["peak_bytes"] for r in ours if r["depth"] == d and r["precision"] == "fp32"), None)
    b = next((r["peak_bytes"] for r in ours if r["depth"] == d and r["precision"] == "bf16"), None)
    p = next((r["peak_bytes"] for r in pyg if r["depth"] == d and r["variant"] == "pyg_sparse_csr"), None)
    m = lambda v: f"{v / 2**20:,.0f}" if v else "-"
    q = lambda a, c: f"{a / c:.2f}" if a and c else "-"
    print(f"| {d} | {m(f)} | {m(b)} | {m(p)} | {q(f, p)} | {q(b, f)} |")
PY
fi
