#!/usr/bin/env bash
# Training-step time per backbone x variant (median over epochs after a warm-up), printed as a
# Markdown table. CPU by default; DEVICE=cuda for the GPU machine.
#   bash scripts/bench_models.sh [datasets...]        (default: cora_ml film photo)
#   DEVICE=cuda EPOCHS=30 LAYERS=4 HIDDEN=128 bash scripts/bench_models.sh csbm:arxiv-scale
set -euo pipefail
cd "$(dirname "$0")/.."
adgnn=${ADGNN:-build/adgnn}
export ADGNN_DATA=${ADGNN_DATA:-../shared/data}
device=${DEVICE:-cpu}
epochs=${EPOCHS:-25}
layers=${LAYERS:-2}
hidden=${HIDDEN:-64}
backbones=${BACKBONES:-gcn gat sage mixhop gatv2 dirgnn}
variants=${VARIANTS:-plain ad ad_fast}
datasets=("$@")
[ ${#datasets[@]} -gt 0 ] || datasets=(cora_ml film photo)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
echo "device: $device; layers $layers, hidden $hidden, $epochs epochs (median train step after 5 warm-up epochs); $(date -u +%F)"
echo
echo "| dataset | model | train step (ms) | edges per layer (last epoch) | active rows per layer |"
echo "|---|---|---:|---|---|"
for d in "${datasets[@]}"; do
  for b in $backbones; do
    for v in $variants; do
      "$adgnn" train "$d" --model "$b" --variant "$v" --device "$device" --epochs "$epochs" \
        --layers "$layers" --hidden "$hidden" --lambda 0 --no-progress --metrics "$tmp/m.jsonl" >/dev/null
      "$py" - "$tmp/m.jsonl" "$d" "$b" "$v" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["train_step_ms"] for r in rows[5:]] or [r["train_step_ms"] for r in rows]
name = {"gcn": "GCN", "gat": "GAT", "sage": "SAGE", "mixhop": "MixHop", "gatv2": "GATv2", "dirgnn": "DirGNN"}[sys.argv[3]]
label = name if sys.argv[4] == "plain" else "AD-" + name + ("_fast" if sys.argv[4] == "ad_fast" else "")
print(f"| {sys.argv[2]} | {label} | {statistics.median(steps):.1f} | {rows[-1]['edges_processed']} | {rows[-1]['active_rows']} |")
PY
    done
  done
done
