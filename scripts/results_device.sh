#!/usr/bin/env bash
# The GPU part of docs/results.md, as one device run (../shared/device/README.md): builds adgnn
# for CUDA from a snapshot of a commit, then runs scripts/results.py's job queue inside a fixed time
# limit and packs the results into $OUT. Here, before the run:
#   rm -rf build-ressrc && mkdir build-ressrc && git archive HEAD | tar -x -C build-ressrc &&
#     git rev-parse HEAD > build-ressrc/COMMIT
# (the commit under test, without edits in progress), then a device run with
# carry [".device", "build-ressrc", "build-resstate"] and the command
#   bash scripts/results_device.sh [LIMIT_S]
# LIMIT_S (default 600) is the run's limit: no job starts after LIMIT_S - 100 s and every process is
# stopped at LIMIT_S - 25 s, counted from the start of this script (the build included). Results
# accumulate in build-resstate/results; unpack $OUT/results.tgz there (tar -x -C build-resstate)
# and carry it again to continue where the last run stopped.
# DEVICE (default cuda), SLOTS (15), SWEEP_WORKERS (3) and RESULTS_ARGS (more scripts/results.py run
# flags, e.g. --datasets) set the job queue. On 2026-11-26, 15 trainings sharing the H200 from 5
# processes were slow on these small graphs (docs/results.md, "Compute"): DEVICE=cpu uses the
# machine's 16 cores instead.
set -u
T0=$(date +%s)
LIMIT=${1:-600}
SRC=build-ressrc
STATE=build-resstate/results
OUT=${OUT:?OUT: the output folder of the device run}
mkdir -p "$STATE"
pack() { tar -czf "$OUT/results.tgz" -C build-resstate results; }
trap pack EXIT
source .device/setup.sh >/dev/null
source .device/env.sh >/dev/null
(cd "$SRC" && adgnn_gpu_configure ../build-gpu -DADGNN_NCCL=OFF -DADGNN_TESTS=OFF) >"$OUT/build.log" 2>&1 &&
  cmake --build build-gpu -j16 --target adgnn >>"$OUT/build.log" 2>&1 ||
  { tail -40 "$OUT/build.log"; exit 1; }
echo "build done after $(($(date +%s) - T0)) s"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1), $(nproc) CPU cores"
  echo "commit: $(cat "$SRC/COMMIT" 2>/dev/null || echo unknown)"
  echo "device: ${DEVICE:-cuda}"
} >>"$STATE/meta.txt"
cat "$STATE/meta.txt"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader -l 5 >"$STATE/gpu_$T0.log" 2>&1 &
smi=$!
python3 scripts/results.py run --bin build-gpu/adgnn --dir "$STATE" --device "${DEVICE:-cuda}" \
  --slots "${SLOTS:-15}" --sweep-workers "${SWEEP_WORKERS:-3}" ${RESULTS_ARGS:-} --t0 "$T0" \
  --stop-launch $((LIMIT - 100)) --hard-stop $((LIMIT - 25)) >"$STATE/driver_$T0.log" 2>&1
kill "$smi"
tail -25 "$STATE/driver_$T0.log"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
