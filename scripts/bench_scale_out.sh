#!/usr/bin/env bash
# Generation, partitioning and training of one generated graph at P = 1, 2, 4 MPI ranks: wall
# time and peak memory of each step, per rank for training (docs/scaling.md records the table).
# Usage: scripts/bench_scale_out.sh [nodes] [features] [work dir]   (defaults: 4000000 128 /tmp/adgnn-scale)
# Env: ADGNN (binary, default build/adgnn), MPIRUN_EXTRA (e.g. "--allow-run-as-root --oversubscribe"),
#      EPOCHS (default 3), RANKS (default "1 2 4").
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
read -r s m <<<"$(timed "$dir/gen.log" "$adgnn" data generate --nodes "$nodes" --classes 16 --avg-degree 10 \
  --features "$features" --homophily 0.5 --communities 64 --locality 0.9 --seed 1 -o "$dir/g.h5")"
echo "| generate ($(du -h "$dir/g.h5" | cut -f1) file; features made while written) | 1 | $s | $m |"
for p in $ranks; do
  read -r s m <<<"$(timed "$dir/part$p.log" "$adgnn" partition "$dir/g.h5" --parts "$p" --out "$dir/parts$p")"
  echo "| partition into $p (METIS, one process, structure from the file) | 1 | $s | $m |"
done
for p in $ranks; do
  [ "$p" -gt 1 ] || continue
  read -r s m <<<"$(timed "$dir/pt$p.log" mpirun -n "$p" ${MPIRUN_EXTRA:-} "$adgnn" partition "$dir/g.h5" \
    --method ptscotch --parts "$p" --out "$dir/pt$p" --json)"
  peaks=$(python3 -c "import json,sys; print(' / '.join(f'{x:.2f}' for x in json.load(open(sys.argv[1]))['peak_rss_gib_per_process']))" "$dir/pt$p.log")
  echo "| partition into $p (PT-Scotch, $p processes) | $p | $s | $peaks |"
done
train=(train --epochs "$epochs" --hidden 64 --layers 4 --model gcn --variant ad_fast --json --no-progress)
read -r s m <<<"$(timed "$dir/one.log" "$adgnn" "${train[@]}" "$dir/g.h5")"
python3 - "$dir/one.log" "$s" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
print(f"| train, whole graph, one process | 1 | {sys.argv[2]} "
      f"({r['ms_per_epoch'] / 1e3:.1f} s/epoch) | {r['runs'][0]['peak_memory_bytes'] / 2**30:.2f} |")
PY
for p in $ranks; do
  read -r s m <<<"$(timed "$dir/local$p.log" mpirun -n "$p" ${MPIRUN_EXTRA:-} "$adgnn" "${train[@]}" --partition-dir "$dir/parts$p")"
  python3 - "$dir/local$p.log" "$s" "$p" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
peaks = " / ".join(f"{x / 2**30:.2f}" for x in r["runs"][0]["peak_memory_bytes_per_rank"])
print(f"| train, rank-local | {sys.argv[3]} | {sys.argv[2]} ({r['ms_per_epoch'] / 1e3:.1f} s/epoch) | {peaks} |")
PY
done
