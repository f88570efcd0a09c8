#!/usr/bin/env bash
# cluster/ scripts: scaling_study.sh (commands, rank 0's JSON into CSV rows, missing fields,
# speedups, failed runs, resume) with a scripted adgnn under mpirun, then one real run of the
# adgnn binary with 1 and 2 CPU ranks; plot_scaling.sh's PNGs (skipped without gnuplot).
# Usage: test_cluster.sh <adgnn binary> ["extra mpirun flags"]
set -u
adgnn=$1
mpirun_extra=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
study=$root/cluster/scaling_study.sh
plot=$root/cluster/plot_scaling.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then ok; else bad "$what"; fi
}
field() {  # field <csv> <gpus,layers,model,variant,partition> <column>: one cell
  python3 - "$@" <<'PY'
import csv, sys
path, key, col = sys.argv[1:]
for r in csv.DictReader(open(path)):
    if ",".join([r["gpus"], r["layers"], r["model"], r["variant"], r["partition"]]) == key:
        print(r[col]); break
else:
    print("<no row>")
PY
}
expect_field() {  # expect_field <csv> <key> <column> <value>
  local got; got=$(field "$1" "$2" "$3")
  if [ "$got" = "$4" ]; then ok; else bad "$1 [$2] $3 = '$got', want '$4'"; fi
}

# A scripted adgnn: --help lists --partition; rank 0 writes its summary to --summary (the lead's
# per-rank-max fields on top; ms = 100 * layers / ranks) and prints noise that looks like one on
# stdout, as the other ranks do. layers 3 fails; FAKE_PLAIN=1 leaves out the lead's per-rank-max
# fields (the runs' times only).
fake=$tmp/fake-adgnn
cat >"$fake" <<'FAKE'
#!/usr/bin/env bash
[ "$1" = train ] || exit 2
shift
case " $* " in *" --help "*) echo "  --partition TEXT  metis, random, ..."; exit 0 ;; esac
layers=0 variant=plain summary=""
while [ $# -gt 0 ]; do
  case $1 in --layers) layers=$2; shift ;; --variant) variant=$2; shift ;; --summary) summary=$2; shift ;; esac
  shift
done
[ "$layers" = 3 ] && { echo "adgnn: error: simulated failure" >&2; exit 1; }
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
size=${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}
ms=$((100 * layers / size))
echo '[{"model": "GCN", "ms_per_epoch": 999999, "test_mean": 0.1, "runs": []}]'
[ "$rank" = 0 ] || exit 0
halo=""
if [ "${FAKE_PLAIN:-0}" != 1 ]; then
  halo="\"ms_per_epoch\": $ms, \"halo_bytes_per_layer\": [0, 1000, 500], \"halo_bytes_full_per_layer\": [0, 1000, 1000], \"peak_memory_bytes\": 2147483648,"
fi
cat >"$summary" <<JSON
[
  {
    "model": "GCN", $halo
    "test_mean": 0.75, "test_std": 0.0,
    "runs": [
      {"run": 0, "ms_per_epoch": $ms.0, "test": 0.75}
    ]
  }
]
JSON
FAKE
chmod +x "$fake"

run_study() { "$study" --launcher mpirun --launcher-args "$mpirun_extra" "$@"; }

# --dry-run: one command per point; one-rank points once per model, without --partition.
out=$tmp/s.csv
run_study --adgnn "$fake" --out "$out" --gpus "1 2 4" --layers "2 4" --partitions "metis stratified" \
  --dry-run >"$tmp/dry" 2>"$tmp/dry.err"
check "dry run exit 0" [ $? = 0 ]
check "dry run: 2 layers x 2 models x (1 + 2 partitions x 2) = 20 commands" [ "$(grep -c 'fake-adgnn train' "$tmp/dry")" = 20 ]
check "dry run: 1-rank commands have no --partition" [ "$(grep -- '-n 1 ' "$tmp/dry" | grep -c -- '--partition')" = 0 ]
check "dry run: 1-rank commands have no --backend (one process has no communicator)" \
  [ "$(grep -- '-n 1 ' "$tmp/dry" | grep -c -- '--backend')" = 0 ]
check "dry run: every 2-rank command names the backend" \
  [ "$(grep -- '-n 2 ' "$tmp/dry" | grep -vc -- '--backend nccl')" = 0 ]
check "dry run: --partition stratified on 4 ranks" grep -q -- "-n 4 .*--layers 4 .*--partition stratified" "$tmp/dry"
check "dry run: --backend nccl on cuda" grep -q -- "--device cuda --no-progress --summary [^ ]*\.json --backend nccl" "$tmp/dry"
check "dry run: rank tags" grep -q -- "--tag-output\|-prepend-rank" "$tmp/dry"
check "dry run writes nothing" [ ! -e "$out" ]

# Runs: layers 3 fails (reported, no row, exit 1); the others fill rows from rank 0's summary.
run_study --adgnn "$fake" --out "$out" --gpus "1 2 4" --layers "2 3" --models "gcn:ad_fast" \
  --partitions metis >"$tmp/run1" 2>&1
check "a failed run makes the study fail" [ $? = 1 ]
check "the failure is reported" grep -q "failed (exit 1): adgnn: error: simulated failure" "$tmp/run1"
check "rows: header + 3" [ "$(wc -l <"$out")" = 4 ]
expect_field "$out" 1,2,gcn,ad_fast,none ms_per_epoch 200.000
expect_field "$out" 4,2,gcn,ad_fast,metis ms_per_epoch 50.000
expect_field "$out" 4,2,gcn,ad_fast,metis speedup_vs_1 4.000
expect_field "$out" 2,2,gcn,ad_fast,metis speedup_vs_1 2.000
expect_field "$out" 2,2,gcn,ad_fast,metis halo_bytes_active 1500
expect_field "$out" 2,2,gcn,ad_fast,metis halo_bytes_full 2000
expect_field "$out" 2,2,gcn,ad_fast,metis peak_mem_gib 2.000
expect_field "$out" 2,2,gcn,ad_fast,metis test_score 0.7500
expect_field "$out" 1,3,gcn,ad_fast,none ms_per_epoch "<no row>"

# Resume: done points are skipped (the dry run says so), a new point is added.
run_study --adgnn "$fake" --out "$out" --gpus "1 2 4" --layers 2 --models "gcn:ad_fast" \
  --partitions metis --dry-run >"$tmp/dry2" 2>&1
check "resume: the dry run has no commands left" [ "$(grep -c 'fake-adgnn train' "$tmp/dry2")" = 0 ]
check "resume: the dry run lists the done points" [ "$(grep -c '^# done' "$tmp/dry2")" = 3 ]
cp "$out" "$tmp/before.csv"
FAKE_PLAIN=1 run_study --adgnn "$fake" --out "$out" --gpus "1 2 4 8" --layers 2 --models "gcn:ad_fast" \
  --partitions metis >"$tmp/run2" 2>&1
check "resume run exit 0" [ $? = 0 ]
check "resume: 1 run, 3 skipped" grep -q "1 runs, 3 already in" "$tmp/run2"
check "resume: old rows unchanged" [ "$(head -n 4 "$out")" = "$(cat "$tmp/before.csv")" ]
# Today's output (no top-level ms, no halo, no memory): ms from the runs, empty cells.
expect_field "$out" 8,2,gcn,ad_fast,metis ms_per_epoch 25.000
expect_field "$out" 8,2,gcn,ad_fast,metis speedup_vs_1 8.000
expect_field "$out" 8,2,gcn,ad_fast,metis halo_bytes_active ""
expect_field "$out" 8,2,gcn,ad_fast,metis peak_mem_gib ""

# Bad input: one line, exit 2.
for args in "--gpus 0" "--layers x" "--models gcn" "--device tpu" "--frobnicate"; do
  # shellcheck disable=SC2086
  run_study --adgnn "$fake" --out "$tmp/bad.csv" $args >"$tmp/o" 2>"$tmp/e"
  rc=$?
  if [ $rc = 2 ] && [ "$(wc -l <"$tmp/e")" = 1 ]; then ok; else bad "study $args -> exit $rc: $(cat "$tmp/e")"; fi
done
echo "gpus,layers" >"$tmp/other.csv"
run_study --adgnn "$fake" --out "$tmp/other.csv" >"$tmp/o" 2>"$tmp/e"
check "a CSV with another header is refused" grep -q "header is not" "$tmp/e"

# The real binary on the CPU: 1 and 2 ranks on a small generated graph.
real=$tmp/real.csv
OMP_NUM_THREADS=1 run_study --adgnn "$adgnn" --out "$real" --device cpu --gpus "1 2" --layers 2 \
  --models "gcn:ad_fast" --partitions metis --graph csbm:demo --epochs 2 >"$tmp/real.log" 2>&1
check "real run exit 0 ($(tail -n 3 "$tmp/real.log" | tr '\n' ' '))" [ $? = 0 ]
check "real run: 2 rows ($(grep -h . "$tmp"/real.runs/*.err 2>/dev/null | grep -v '^\[' | tail -n 4 | tr '\n' ' '))" \
  [ "$(wc -l <"$real" 2>/dev/null)" = 3 ]
check "real run: ms and test score filled" \
  python3 -c 'import csv,sys; rows=list(csv.DictReader(open(sys.argv[1]))); sys.exit(not rows or not all(r["ms_per_epoch"] and r["test_score"] and r["speedup_vs_1"] for r in rows))' "$real"

# The step profile of a 2-rank run: one summary per rank, with the distributed scopes.
OMP_NUM_THREADS=1 mpirun $mpirun_extra -n 2 "$adgnn" train csbm:demo --model gcn --variant ad_fast --layers 3 \
  --epochs 3 --profile "$tmp/prof" --profile-steps 2 --device cpu --no-progress >"$tmp/prof.log" 2>&1
check "profiled 2-rank run exit 0 ($(tail -n 3 "$tmp/prof.log" | tr '\n' ' '))" [ $? = 0 ]
for r in 0 1; do
  check "rank $r profile names the halo exchange" grep -q "| halo exchange |" "$tmp/prof/gcn-ad_fast-rank$r.md"
  check "rank $r profile names the gradient allreduce" grep -q "| allreduce gradients |" "$tmp/prof/gcn-ad_fast-rank$r.md"
  check "rank $r profile says rank $r of 2" grep -q "rank $r of 2 (host" "$tmp/prof/gcn-ad_fast-rank$r.md"
done

# adgnn.sbatch's time limit: SIGUSR1 to the batch shell (Slurm's --signal=B:USR1@120) reaches the
# ranks through srun; they checkpoint and stop (exit 75), the job requeues itself, and the requeued
# job resumes and finishes. srun is mpirun here, scontrol records what it was asked.
fakes=$tmp/fakes
mkdir -p "$fakes"
cat >"$fakes/srun" <<FAKE
#!/usr/bin/env bash
args=()
for a in "\$@"; do case \$a in --mpi=* | --cpus-per-task=*) ;; *) args+=("\$a") ;; esac; done
exec mpirun -n 2 $mpirun_extra "\${args[@]}"
FAKE
printf '#!/usr/bin/env bash\necho "$*" >>"%s/scontrol.log"\n' "$tmp" >"$fakes/scontrol"
chmod +x "$fakes/srun" "$fakes/scontrol"
printf 'dataset: csbm:demo\nvariant: ad_fast\nlayers: 3\nhidden: 16\nepochs: 600\nthreads: 1\n' >"$tmp/job.yaml"
sbatch_job() {  # the batch shell, as Slurm starts it (exec: $! below is that shell, which gets the signal)
  cd "$tmp" && PATH="$fakes:$PATH" MODULES="" ADGNN="$adgnn" CONFIG="$tmp/job.yaml" DEVICE=cpu BACKEND=mpi \
    SLURM_JOB_ID=42 SLURM_CPUS_PER_TASK=1 exec "$BASH" "$root/cluster/adgnn.sbatch" --no-progress \
    --metrics "$tmp/job.jsonl"
}
sbatch_job >"$tmp/job1.log" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  [ -s "$tmp/job.jsonl" ] && [ "$(wc -l <"$tmp/job.jsonl")" -ge 10 ] && break
  sleep 0.05
done
kill -USR1 "$job"
wait "$job"
check "sbatch: exit 0 after requeueing ($(tail -n 3 "$tmp/job1.log" | tr '\n' ' '))" [ $? = 0 ]
check "sbatch: the ranks stopped with the checkpoint" grep -q "requeueing job 42" "$tmp/job1.log"
check "sbatch: scontrol requeue 42" grep -qx "requeue 42" "$tmp/scontrol.log"
check "sbatch: stopped before the end" [ "$(wc -l <"$tmp/job.jsonl")" -lt 600 ]
(sbatch_job) >"$tmp/job2.log" 2>&1
check "sbatch: the requeued job finishes ($(tail -n 3 "$tmp/job2.log" | tr '\n' ' '))" [ $? = 0 ]
check "sbatch: the requeued job resumed" grep -q "resuming from adgnn-42.h5" "$tmp/job2.log"
check "sbatch: every epoch once in the metrics" [ "$(wc -l <"$tmp/job.jsonl")" = 600 ]

# Plots.
if command -v gnuplot >/dev/null; then
  "$plot" "$out" "$tmp/plots" >"$tmp/plot.out" 2>&1
  check "plot exit 0 ($(cat "$tmp/plot.out"))" [ $? = 0 ]
  for p in epoch_time speedup halo_bytes; do
    f=$tmp/plots/s_$p.png
    check "$p.png is a PNG" [ "$(head -c 8 "$f" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
  done
  "$plot" "$real" "$tmp/plots" >"$tmp/plot.out" 2>&1
  check "plot of the real run: exit 0" [ $? = 0 ]
  # The 2-rank rows of the real run report halo bytes (active-only and full): a halo plot.
  check "plot of the real run: halo PNG" [ -s "$tmp/plots/real_halo_bytes.png" ]
  "$plot" "$tmp/other.csv" >"$tmp/o" 2>"$tmp/e"
  check "plot refuses another header" [ $? = 2 ]
else
  echo "SKIP: plot_scaling.sh (no gnuplot; apt-get install -y gnuplot-nox)"
fi
PATH=/nonexistent "$BASH" "$plot" "$out" >"$tmp/o" 2>"$tmp/e"
check "plot without gnuplot: exit 1" [ $? = 1 ]
check "plot without gnuplot: one line" [ "$(wc -l <"$tmp/e")" = 1 ]
check "plot without gnuplot: names it" grep -q "gnuplot not found" "$tmp/e"

echo "cluster scripts: $pass passed, $fail failed"
[ "$fail" = 0 ]
