#!/usr/bin/env bash
# METIS (one process, the graph's structure read from the file, features copied part by part)
# against PT-Scotch and coarse-metis across 1, 2, 4 processes on one of our HDF5 graph files: edge cut, balance,
# halo rows, wall time and peak memory per process (docs/scaling.md records the table).
# Usage: scripts/bench_partition.sh GRAPH.h5 [parts] [work dir]   (defaults: 4, /tmp/adgnn-partition)
# Env: ADGNN (binary, default build/adgnn), MPIRUN_EXTRA (e.g. "--allow-run-as-root --oversubscribe"),
#      PROCS (process counts, default "1 2 4"), METHODS (default "ptscotch coarse-metis"),
#      SKIP_METIS=1.
set -euo pipefail
graph=$1
parts=${2:-4}
dir=${3:-/tmp/adgnn-partition}
adgnn=${ADGNN:-build/adgnn}
procs=${PROCS:-1 2 4}
mkdir -p "$dir"
row() {  # row <name> <processes> <json> <wall s>
  python3 - "$@" <<'PY'
import json, sys
name, procs, path, wall = sys.argv[1:]
m = json.load(open(path))
peaks = m.get("peak_rss_gib_per_process") or [max(m["peak_rss_gib"].values())]
print(f"| {name} | {procs} | {m['parts']} | {m['edge_cut'] / m['undirected_edges']:.2%} | "
      f"{m['balance']['nodes']:.3f} | {sum(m['halo_rows']) / m['nodes']:.2f} | {wall} | "
      f"{' / '.join(f'{p:.2f}' for p in peaks)} | {m['graph_memory_gib']:.2f} |")
PY
}
echo "| method | processes | parts | edge cut | node balance | halo rows / N | wall (s) | peak memory per process (GiB) | whole graph in memory (GiB) |"
echo "|---|---:|---:|---:|---:|---:|---:|---|---:|"
if [ -z "${SKIP_METIS:-}" ]; then
  start=$(date +%s.%N)
  "$adgnn" partition "$graph" --parts "$parts" --out "$dir/metis" --json >"$dir/metis.json"
  row "METIS" 1 "$dir/metis.json" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}')"
fi
for method in ${METHODS:-ptscotch coarse-metis}; do
  for p in $procs; do
    start=$(date +%s.%N)
    mpirun -n "$p" ${MPIRUN_EXTRA:-} "$adgnn" partition "$graph" --method "$method" --parts "$parts" \
      --out "$dir/$method$p" --json >"$dir/$method$p.json"
    row "$method" "$p" "$dir/$method$p.json" "$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}')"
  done
done
