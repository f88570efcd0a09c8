#!/usr/bin/env bash
# The largest generated graph that trains on this GPU, per model and precision, in one device
# command (.device prepared: scripts/device_prepare.sh):
#   source .device/setup.sh; bash bench/gpu_max_graph.sh
# Builds build-gpu/adgnn (unless it exists), then runs one `adgnn bench --max-graph` per entry of
# SEARCHES, each "variant:precision:first_nodes:max_nodes" on csbm:$SHAPE (arxiv-scale) at depth
# $DEPTH (4), to $RESOLUTION (0.1). A search starts at first_nodes and doubles up to max_nodes, so
# a bracket that holds the answer (max_nodes <= 2 x first_nodes) costs two probes, then bisection.
# Each search runs under `timeout $BOX` seconds (default: none) and prints the probes it finished,
# so that one device call of 600 s can hold several searches; END (seconds since the start, e.g.
# 570) skips the searches that would start after it. FLAGS adds flags to every search (e.g.
# "--device cpu --memory-limit 2GiB" with ADGNN=build/adgnn: the script on a CPU build). Logs and
# JSON in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=../scripts/device_env.sh
source scripts/device_env.sh
device_script_start /tmp/adgnn_max_graph
SHAPE=${SHAPE:-arxiv-scale}
DEPTH=${DEPTH:-4}
RESOLUTION=${RESOLUTION:-0.1}
SEARCHES=${SEARCHES:-plain:fp32:24000000:48000000 plain:bf16:24000000:48000000 ad_fast:fp32:24000000:48000000 ad_fast:bf16:32000000:64000000}
ADGNN=${ADGNN:-build-gpu/adgnn}
if [ ! -x "$ADGNN" ]; then
  ensure_gpu_configure "$OUT" || exit 1
  { adgnn_gpu_configure build-gpu && cmake --build build-gpu -j"$(nproc)" --target adgnn; } >"$OUT/build.log" 2>&1 ||
    { grep -B2 -A12 error "$OUT/build.log" | head -60; exit 1; }
  elapsed "built adgnn"
fi
echo "card: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1); $(date -u '+%Y-%m-%d %H:%M UTC'); $(git rev-parse --short HEAD 2>/dev/null || echo 'commit unknown')"
for s in $SEARCHES; do
  IFS=: read -r variant precision first last <<<"$s"
  if [ -n "${END:-}" ] && [ $(( $(date +%s) - t0 )) -ge "$END" ]; then
    elapsed "skipped $s (END=$END s)"
    continue
  fi
  log="$OUT/max_graph_${variant}_$precision.log"
  ${BOX:+timeout "$BOX"} "$ADGNN" bench --max-graph --dataset "csbm:$SHAPE" --backbones gcn --depths "$DEPTH" \
    --variants "$variant" --precision "$precision" --nodes "$first" --max-nodes "$last" --resolution "$RESOLUTION" \
    ${FLAGS:-} --json "$OUT/max_graph_${variant}_$precision.json" >"$log" 2>&1
  rc=$?
  elapsed "$variant $precision: exit $rc${BOX:+ (time box $BOX s)}"
  grep -E '^\| (GCN|AD-GCN)|largest graph that trains has|does not train' "$log"
  [ "$rc" = 0 ] || [ "$rc" = 124 ] || tail -3 "$log"
done
