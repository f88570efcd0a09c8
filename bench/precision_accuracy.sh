#!/usr/bin/env bash
# bf16 against fp32 in test score: GCN, AD-GCN_fast and AD-GCN on every dataset of $ADGNN_DATA,
# 10 runs each, the settings of configs/ (Exp-1's: configs/<dataset>/gcn.plain.yaml for GCN,
# gcn.yaml for the AD variants, else configs/<dataset>.yaml), both precisions on one device.
#   source .device/setup.sh; bash bench/precision_accuracy.sh      (GPU machine; DEVICE=cpu elsewhere)
# Builds build-gpu/adgnn unless ADGNN names a binary. Starts no training after LIMIT_S (540) s;
# finished outputs stay in $OUT/acc and are skipped by a rerun. Prints the table
# (bench/precision_accuracy.py): a bf16 mean within the fp32 runs' std is marked "yes".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=../scripts/device_env.sh
source scripts/device_env.sh
device_script_start /tmp/adgnn_precision_accuracy
DEVICE=${DEVICE:-cuda}
LIMIT=${LIMIT_S:-540}
RUNS=${RUNS:-10}
DATA=${ADGNN_DATA:-../shared/data}
if [ -z "${ADGNN:-}" ]; then
  ADGNN=build-gpu/adgnn
  ensure_gpu_configure "$OUT" || exit 1
  { adgnn_gpu_configure build-gpu && cmake --build build-gpu -j16 --target adgnn; } >"$OUT/build.log" 2>&1 ||
    { grep -B2 -A12 error "$OUT/build.log" | head -60; exit 1; }
  elapsed "built"
fi
mkdir -p "$OUT/acc"
config() {  # config <dataset> <file in configs/<dataset>/>: that file, else configs/<dataset>.yaml, else none
  if [ -f "configs/$1/$2" ]; then echo "--config configs/$1/$2"
  elif [ -f "configs/$1.yaml" ]; then echo "--config configs/$1.yaml"; fi
}
for d in $(ls "$DATA"); do
  [ -d "$DATA/$d" ] || continue
  for p in fp32 bf16; do
    for job in "plain gcn.plain.yaml" "ad_fast,ad gcn.yaml"; do
      set -- $job
      out="$OUT/acc/${d}_${1/,/_}_$p.json"
      [ -s "$out" ] && continue
      [ $(( $(date +%s) - t0 )) -lt "$LIMIT" ] || { elapsed "time is up before $d $1 $p"; continue; }
      # shellcheck disable=SC2046  # config's words are flags
      "$ADGNN" train "$d" --data-dir "$DATA" --model gcn --variant "$1" $(config "$d" "$2") --splits auto \
        --runs "$RUNS" --run-workers 4 --precision "$p" --device "$DEVICE" --no-progress --summary "$out" \
        >"$OUT/acc/${d}_${1/,/_}_$p.log" 2>&1 || { elapsed "$d $1 $p failed: $(tail -1 "$OUT/acc/${d}_${1/,/_}_$p.log")"; rm -f "$out"; }
    done
  done
  elapsed "$d"
done
python3 bench/precision_accuracy.py "$OUT/acc" --card "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" \
  --date "$(date -u '+%Y-%m-%d')" | tee "$OUT/precision_accuracy.md"
