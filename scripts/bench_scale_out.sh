#!/usr/bin/env bash
# Generation, partitioning and training of one generated graph at P = 1, 2, 4 MPI ranks: wall
# time and peak memory of each step, per rank for training (docs/scaling.md records the table).
# Usage: scripts/bench_scale_out.sh [nodes] [features] [work dir]   (defaults: 4000000 128 /tmp/adgnn-scale)
# Env: ADGNN (binary, default build/adgnn), MPIRUN_EXTRA (e.g. "--allow-run-as-root --oversubscribe"),
#      EPOCHS (default 3), RANKS (default "1 2 4"), PARTITIONERS (default "metis ptscotch coarse-metis"),
#      SKIP_TRAIN=1 (generation and partitioning only).
set -euo pipefail
nodes=${1:-4000000}
features=${2:-128}
dir=${3:-/tmp/adgnn-scale}
adgnn=${ADGNN:-build/adgnn}
epochs=${EPOCHS:-3}
ranks=${RANKS:-1 2 4}
mkdir -p "$dir"
timed() {  # timed <log> <command...>: wall seconds and peak RSS (GiB) of the command tree's largest process
  local log=$1; shift
  /usr/bin/time -f "%e %M" -o "$log.time" "$@" >"$log" 2>"$log.err"
  read -r secs kib <"$log.time"
  printf '%s %s' "$secs" "$(awk -v k="$kib" 'BEGIN{printf "%.2f", k / 1048576}')"
}
echo "| step | P | wall (s) | peak memory per process (GiB) |"
echo "|---|---:|---:|---|"
partitioners=${PARTITIONERS:-metis ptscotch coarse-metis}
per_process() {  # the "peak memory per process A, B GiB" a generate log ends with
  sed -n 's/.*peak memory per process \([0-9., ]*\) GiB.*/\1/p' "$1" | tail -1 | sed 's/, / \/ /g'
}
for p in $ranks; do
  read -r s m <<<"$(timed "$dir/gen$p.log" mpirun -n "$p" ${MPIRUN_EXTRA:-} "$adgnn" data generate --nodes "$nodes" \
    --classes 16 --avg-degree 10 --features "$features" --homophily 0.5 --communities 64 --locality 0.9 --seed 1 \
    --threads $(( $(nproc) / p > 0 ? $(nproc) / p : 1 )) -o "$dir/g$p.h5")"
  echo "| generate ($(du -h "$dir/g$p.h5" | cut -f1) file; features made while written) | $p | $s | $(per_process "$dir/gen$p.log") |"
done
mv "$dir/g$(echo "$ranks" | awk '{print $1}').h5" "$dir/g.h5"
for p in $ranks; do
  [[ " $partitioners " == *" metis "* ]] || break
  read -r s m <<<"$(timed "$dir/part$p.log" "$adgnn" partition "$dir/g.h5" --parts "$p" --out "$dir/parts$p")"
  echo "| partition into $p (METIS, one process, structure from the file) | 1 | $s | $m |"
done
for method in ptscotch coarse-metis; do
  [[ " $partitioners " == *" $method "* ]] || continue
  for p in $ranks; do
    [ "$p" -gt 1 ] || continue
    read -r s m <<<"$(timed "$dir/$method$p.log" mpirun -n "$p" ${MPIRUN_EXTRA:-} "$adgnn" partition "$dir/g.h5" \
      --method "$method" --parts "$p" --out "$dir/$method$p" --json)"
    peaks=$(python3 -c "import json,sys; print(' / '.join(f'{x:.2f}' for x in json.load(open(sys.argv[1]))['peak_rss_gib_per_process']))" "$dir/$method$p.log")
    cut=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(f\"{m['edge_cut'] / m['undirected_edges']:.2%}\")" "$dir/$method$p.log")
    echo "| partition into $p ($method, $p processes; cut $cut) | $p | $s | $peaks |"
  done
done
[ -z "${SKIP_TRAIN:-}" ] || exit 0
train=(train --epochs "$epochs" --hidden 64 --layers 4 --model gcn --variant ad_fast --no-progress)
read -r s m <<<"$(timed "$dir/one.log" "$adgnn" "${train[@]}" "$dir/g.h5" --summary "$dir/one.json")"
python3 - "$dir/one.json" "$s" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
print(f"| train, whole graph, one process | 1 | {sys.argv[2]} "
      f"({r['ms_per_epoch'] / 1e3:.1f} s/epoch) | {r['runs'][0]['peak_memory_bytes'] / 2**30:.2f} |")
PY
for p in $ranks; do
  read -r s m <<<"$(timed "$dir/local$p.log" mpirun -n "$p" ${MPIRUN_EXTRA:-} "$adgnn" "${train[@]}" --partition-dir "$dir/parts$p" \
    --summary "$dir/local$p.json")"
  python3 - "$dir/local$p.json" "$s" "$p" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
peaks = " / ".join(f"{x / 2**30:.2f}" for x in r["runs"][0]["peak_memory_bytes_per_rank"])
print(f"| train, rank-local | {sys.argv[3]} | {sys.argv[2]} ({r['ms_per_epoch'] / 1e3:.1f} s/epoch) | {peaks} |")
PY
done
