#!/usr/bin/env bash
# Scaling study: `adgnn train` over a grid of GPU counts x depths x models x partition
# methods, one multi-rank run per point, one CSV row per run. Resumable: points already in the
# CSV are skipped, so rerunning after a time-out or a failed run does only what is missing.
#
#   cluster/scaling_study.sh [options] [-- extra adgnn train flags]
#     --graph NAME        dataset or csbm:<preset> (default csbm:products-scale)
#     --gpus "1 2 4 8"    rank counts (one rank per GPU; on --device cpu, one rank per process)
#     --layers "4 8"      depths
#     --models "gcn:plain gcn:ad_fast"   backbone:variant pairs
#     --partitions "metis stratified"    partition methods (runs with 1 rank use none)
#     --epochs E          epochs per run (default 20)
#     --device cuda|cpu   (default cuda); --backend auto|mpi|nccl (default nccl on cuda, mpi on cpu)
#     --out FILE          CSV (default scaling_<graph>_<device>.csv); logs go to FILE's .runs/
#     --adgnn PATH        the binary (default $ADGNN, else build-gpu/adgnn, else build/adgnn)
#     --launcher auto|mpirun|srun   auto: srun inside a Slurm allocation ($SLURM_JOB_ID), else mpirun
#     --launcher-args "..."         extra launcher flags, e.g. "--allow-run-as-root --oversubscribe"
#                                   or "--mpi=pmix" (default $LAUNCHER_ARGS)
#     --dry-run           print the commands (and which points are done); run nothing
# Inside an allocation: salloc -N1 --ntasks-per-node=8 --gpus-per-node=8 cluster/scaling_study.sh
# On one machine's CPUs: cluster/scaling_study.sh --device cpu --gpus "1 2" --graph csbm:demo
#   --layers 2 --epochs 3 --launcher-args "--oversubscribe"
# Then: cluster/plot_scaling.sh <the CSV>
#
# Columns: gpus, layers, model, variant, partition, ms_per_epoch (rank 0's mean over runs),
# speedup_vs_1 (the 1-rank row of the same layers/model/variant over this row; recomputed on every
# write), halo_bytes_active / halo_bytes_full (bytes per epoch summed over layers, active rows only
# vs every halo row), peak_mem_gib (max over ranks), test_score (the dataset's test metric:
# accuracy, or ROC AUC on minesweeper), from the file `adgnn train --summary` writes (FILE's
# .runs/<point>.json). A field the summary lacks is an empty cell.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
die() { echo "scaling_study.sh: $*" >&2; exit 2; }

graph=csbm:products-scale
gpus_list="1 2 4 8"
layers_list="4 8"
models_list="gcn:plain gcn:ad_fast"
partitions_list="metis stratified"
epochs=20
device=cuda
backend=""
out=""
adgnn=${ADGNN:-}
launcher=auto
launcher_args=${LAUNCHER_ARGS:-}
dry_run=0
extra=()
need() { [ $# -ge 2 ] || die "$1: needs a value"; }
while [ $# -gt 0 ]; do
  case $1 in
    --graph) need "$@"; graph=$2; shift 2 ;;
    --gpus) need "$@"; gpus_list=$2; shift 2 ;;
    --layers) need "$@"; layers_list=$2; shift 2 ;;
    --models) need "$@"; models_list=$2; shift 2 ;;
    --partitions) need "$@"; partitions_list=$2; shift 2 ;;
    --epochs) need "$@"; epochs=$2; shift 2 ;;
    --device) need "$@"; device=$2; shift 2 ;;
    --backend) need "$@"; backend=$2; shift 2 ;;
    --out) need "$@"; out=$2; shift 2 ;;
    --adgnn) need "$@"; adgnn=$2; shift 2 ;;
    --launcher) need "$@"; launcher=$2; shift 2 ;;
    --launcher-args) need "$@"; launcher_args=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

# Checks before anything runs.
is_count() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
for g in $gpus_list; do is_count "$g" || die "--gpus $gpus_list: $g is not a positive integer"; done
for l in $layers_list; do is_count "$l" || die "--layers $layers_list: $l is not a positive integer"; done
[ -n "${gpus_list// /}" ] || die "--gpus: empty list"
[ -n "${layers_list// /}" ] || die "--layers: empty list"
is_count "$epochs" || die "--epochs $epochs: not a positive integer"
for mv in $models_list; do
  [[ $mv =~ ^[a-z0-9]+:[a-z_]+$ ]] || die "--models $models_list: $mv is not backbone:variant (e.g. gcn:ad_fast)"
done
[ -n "${models_list// /}" ] || die "--models: empty list"
[ -n "${partitions_list// /}" ] || die "--partitions: empty list"
for p in $partitions_list; do
  [[ $p =~ ^[a-z_]+$ ]] || die "--partitions $partitions_list: $p is not a method name"
done
case $device in cuda | cpu) ;; *) die "--device $device: cpu or cuda" ;; esac
[ -n "$backend" ] || { [ "$device" = cuda ] && backend=nccl || backend=mpi; }
case $backend in auto | mpi | nccl) ;; *) die "--backend $backend: auto, mpi or nccl" ;; esac
case $launcher in
  auto) [ -n "${SLURM_JOB_ID:-}" ] && launcher=srun || launcher=mpirun ;;
  mpirun | srun) ;;
  *) die "--launcher $launcher: auto, mpirun or srun" ;;
esac
if [ -z "$adgnn" ]; then
  for c in build-gpu/adgnn build/adgnn; do [ -x "$c" ] && { adgnn=$c; break; }; done
  adgnn=${adgnn:-build-gpu/adgnn}
fi
[ -n "$out" ] || out="scaling_${graph//[^A-Za-z0-9._-]/-}_${device}.csv"
runs_dir="${out%.csv}.runs"
py=${PYTHON:-python3}
if [ "$dry_run" = 0 ]; then
  [ -x "$adgnn" ] || die "--adgnn $adgnn: not an executable (build it, or pass --adgnn)"
  command -v "$launcher" >/dev/null || die "--launcher $launcher: not found on PATH"
  "$py" -c 'import json, csv' 2>/dev/null || die "$py: python3 is needed to read the JSON summaries (set PYTHON)"
  mkdir -p "$runs_dir"
fi
# NVLink multicast stays off: it can put a host's shared GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1

# The distributed flags (--partition, --backend) of the lead's trainer; a binary without them
# trains the whole graph on every rank, so the rows say partition "none".
# (The help is read whole before grep: grep -q leaving early would stop the writer by SIGPIPE,
# which pipefail reports as a failure.)
dist_flags=1
if [ -x "$adgnn" ] && ! grep -q -- '--partition' <<<"$("$adgnn" train --help 2>/dev/null || true)"; then
  dist_flags=0
  echo "scaling_study.sh: warning: $adgnn train has no --partition/--backend: every rank trains" \
       "the whole graph; rows get partition none" >&2
  partitions_list=none
fi

# The launchers tag each line of the logs with its rank (a failed run's error names its rank).
launch_prefix=(srun --label)
if [ "$launcher" = mpirun ]; then
  version=$(mpirun --version 2>&1 || true)
  if [[ $version == *"Open MPI"* ]]; then
    launch_prefix=(mpirun --tag-output)
  elif [[ $version == *HYDRA* ]]; then
    launch_prefix=(mpirun -prepend-rank)
  else
    launch_prefix=(mpirun)
  fi
fi
read -r -a launcher_extra <<<"$launcher_args"

csv_header="gpus,layers,model,variant,partition,ms_per_epoch,speedup_vs_1,halo_bytes_active,halo_bytes_full,peak_mem_gib,test_score"
done_key() {  # done_key G L MODEL VARIANT PARTITION: 0 when the CSV has that row
  [ -f "$out" ] && grep -q "^$1,$2,$3,$4,$5," "$out"
}
if [ -s "$out" ] && [ "$(head -n1 "$out")" != "$csv_header" ]; then
  die "--out $out: its header is not $csv_header"
fi

read -r -a gpus_arr <<<"$gpus_list"
read -r -a layers_arr <<<"$layers_list"
read -r -a models_arr <<<"$models_list"
read -r -a partitions_arr <<<"$partitions_list"
ran=0 skipped=0 failed=0
for layers in "${layers_arr[@]}"; do
  for mv in "${models_arr[@]}"; do
    model=${mv%%:*} variant=${mv#*:}
    for part in "${partitions_arr[@]}"; do
      for g in "${gpus_arr[@]}"; do
        # One rank has nothing to partition: its row (partition none) is every method's baseline.
        p=$part
        [ "$g" = 1 ] && p=none
        if [ "$g" = 1 ] && [ "$part" != "${partitions_arr[0]}" ]; then continue; fi
        if done_key "$g" "$layers" "$model" "$variant" "$p"; then
          skipped=$((skipped + 1))
          [ "$dry_run" = 1 ] && echo "# done: gpus $g layers $layers $model $variant $p"
          continue
        fi
        name="g${g}_l${layers}_${model}_${variant}_${p}"
        cmd=("${launch_prefix[@]}" -n "$g" ${launcher_extra[@]+"${launcher_extra[@]}"} "$adgnn" train --dataset "$graph"
             --model "$model" --variant "$variant" --layers "$layers" --epochs "$epochs"
             --device "$device" --no-progress --summary "$runs_dir/$name.json")
        # One rank has no communicator: --backend and --partition only from two ranks on.
        if [ "$dist_flags" = 1 ] && [ "$g" != 1 ]; then
          cmd+=(--backend "$backend")
          [ "$p" != none ] && cmd+=(--partition "$p")
        fi
        cmd+=(${extra[@]+"${extra[@]}"})
        if [ "$dry_run" = 1 ]; then
          printf '%q ' "${cmd[@]}"
          echo
          continue
        fi
        echo "scaling_study.sh: gpus $g, layers $layers, $model $variant, partition $p" >&2
        start=$(date +%s)
        rc=0
        "${cmd[@]}" >"$runs_dir/$name.out" 2>"$runs_dir/$name.err" || rc=$?
        if [ "$rc" != 0 ]; then
          # adgnn's own one-line error (rank tag removed) rather than the launcher's banner.
          why=$(grep -m1 -E 'adgnn: (internal )?error' "$runs_dir/$name.err" |
                sed -E 's/^\[[0-9]+,[0-9]+\]<stderr>://; s/^ *[0-9]+: //; s/^\[[0-9]+\] //' || true)
          [ -n "$why" ] || why=$(grep -v -e '^-*$' "$runs_dir/$name.err" | tail -n 2 | tr '\n' ' ')
          echo "scaling_study.sh: failed (exit $rc): $why (logs: $runs_dir/$name.err)" >&2
          failed=$((failed + 1))
          continue
        fi
        if ! "$py" "$here/scaling_csv.py" "$out" "$runs_dir/$name.json" "$g" "$layers" \
             "$model" "$variant" "$p" 2>"$runs_dir/$name.parse"; then
          echo "scaling_study.sh: $(cat "$runs_dir/$name.parse") (output: $runs_dir/$name.out)" >&2
          failed=$((failed + 1))
          continue
        fi
        ran=$((ran + 1))
        echo "scaling_study.sh: done in $(($(date +%s) - start)) s: $(tail -n1 "$out")" >&2
      done
    done
  done
done
[ "$dry_run" = 1 ] && exit 0
echo "scaling_study.sh: $ran runs, $skipped already in $out, $failed failed" >&2
[ "$failed" = 0 ]
