#!/usr/bin/env bash
# The device part of docs/results.md, as one device run (../shared/device/README.md): builds adgnn
# for CUDA from a snapshot of a commit, then runs scripts/results.py's job queues inside a fixed
# time limit and packs the results into $OUT. Here, before the run:
#   rm -rf build-ressrc && mkdir build-ressrc && git archive HEAD | tar -x -C build-ressrc &&
#     git rev-parse HEAD > build-ressrc/COMMIT
# (the commit under test, without edits in progress), then a device run with
# carry [".device", "build-ressrc", "build-resstate"] and the command
#   GPU_DATASETS="dblp photo" CPU_DATASETS="film,citeseer" bash scripts/results_device.sh [LIMIT_S]
# GPU_DATASETS: one queue per word, each on its own GPU (CUDA_VISIBLE_DEVICES), results in
#   build-resstate/gpu-<word> ("a,b": one queue for both datasets, folder gpu-a+b); GPU_STAGES
#   (default 1,2) the scripts/results.py stages they run. On 2026-11-26 (4 x H200) a dataset's whole GCN part (three
#   sweeps, 8-way each, in one CUDA context apiece, then the 10-run rows) took 150-360 s this way;
#   15 trainings of several datasets from 5 processes on one card had been ~10x slower.
# BACKBONES (comma-separated): stages 4 and 5 train only these backbones.
# CPU_DATASETS: one queue for these (comma-separated) on the CPU cores, results in
#   build-resstate/results; CPU_SLOTS (default: cores - 8), CPU_STAGES (default 1,2).
# LIMIT_S (default 600) is the run's limit: no job starts after LIMIT_S - 100 s and every process is
# stopped at LIMIT_S - 25 s, counted from the start of this script (the build included). Unpack
# $OUT/results.tgz into build-resstate/ and carry it again to continue where the last run stopped.
set -u
T0=$(date +%s)
LIMIT=${1:-600}
SRC=build-ressrc
OUT=${OUT:?OUT: the output folder of the device run}
[ -n "${GPU_DATASETS:-}${CPU_DATASETS:-}" ] || { echo "GPU_DATASETS or CPU_DATASETS: give some datasets" >&2; exit 2; }
mkdir -p build-resstate
trap 'tar -czf "$OUT/results.tgz" -C build-resstate .' EXIT
source .device/setup.sh >/dev/null
source .device/env.sh >/dev/null
(cd "$SRC" && adgnn_gpu_configure ../build-gpu -DADGNN_NCCL=OFF -DADGNN_TESTS=OFF) >"$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target adgnn >>"$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
echo "build done after $(($(date +%s) - T0)) s"
meta() {  # meta.txt of a results folder: scripts/results.py labels its numbers with it
  mkdir -p "$2"
  { echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1), $(nproc) CPU cores"
    echo "commit: $(cat "$SRC/COMMIT" 2>/dev/null || echo unknown)"
    echo "device: $1"; } >>"$2/meta.txt"
}
queue() {  # DIR DEVICE SLOTS SWEEP_WORKERS TABLE_WORKERS DATASETS STAGES
  python3 scripts/results.py run --bin build-gpu/adgnn --dir "$1" --device "$2" --slots "$3" \
    --sweep-workers "$4" --table-workers "$5" --datasets "$6" --stages "$7" --t0 "$T0" \
    --stop-launch $((LIMIT - 100)) --hard-stop $((LIMIT - 25)) ${BACKBONES:+--backbones "$BACKBONES"} \
    >"$1/driver_$T0.log" 2>&1
}
pids=()
gpu=0
for d in ${GPU_DATASETS:-}; do
  dir=build-resstate/gpu-${d//,/+}
  meta "cuda (one GPU per dataset)" "$dir"
  CUDA_VISIBLE_DEVICES=$gpu queue "$dir" cuda 24 8 5 "$d" "${GPU_STAGES:-1,2}" &
  pids+=($!)
  gpu=$((gpu + 1))
done
if [ -n "${CPU_DATASETS:-}" ]; then
  meta cpu build-resstate/results
  CUDA_VISIBLE_DEVICES= queue build-resstate/results cpu "${CPU_SLOTS:-$(($(nproc) - 8))}" 24 10 \
    "$CPU_DATASETS" "${CPU_STAGES:-1,2}" &
  pids+=($!)
fi
nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader -l 10 \
  >"build-resstate/gpu_util_$T0.log" 2>&1 &
smi=$!
wait "${pids[@]}"
kill "$smi"
for f in build-resstate/*/driver_$T0.log; do echo "== $f"; tail -3 "$f"; done
