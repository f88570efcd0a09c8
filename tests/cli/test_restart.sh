#!/usr/bin/env bash
# Restartable jobs (docs/reliability.md): SIGUSR1, which Slurm sends before a time limit
# (--signal=B:USR1@120), sent to mpirun while `adgnn train` runs on 2 ranks stops both ranks after
# the same epoch with their checkpoint written and exit code 75. --resume then ends with the
# uninterrupted run's losses bit for bit, and resumed on one process within the distributed tests'
# tolerance (P ranks compute the one-process function up to float rounding). SIGTERM stops a
# one-process run the same way; without --checkpoint the message says there is nothing to resume.
# Usage: test_restart.sh <adgnn binary> ["extra mpirun flags"]
set -u
adgnn=$1
mpirun_extra=${2:-}
# shellcheck source=harness.sh
source "$(dirname "$0")/harness.sh"

epochs=400
train=(train csbm:demo --model gcn --variant ad_fast --layers 3 --hidden 16 --epochs "$epochs" --threads 1
       --no-progress --checkpoint-every 1000)

# The losses of a metrics file, one per line, as written (JSON's shortest round-trip form).
losses() { python3 -c 'import json,sys; [print(repr(json.loads(l)["loss"])) for l in open(sys.argv[1])]' "$1"; }

# interrupt <name> <signal> <lines> <command...>: starts the command in the background, sends the
# signal once its metrics file ($tmp/<name>.jsonl) has that many lines, and waits; the exit code
# goes to $tmp/<name>.rc.
interrupt() {
  local name=$1 sig=$2 lines=$3
  shift 3
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local pid=$!
  for _ in $(seq 1 600); do
    [ -s "$tmp/$name.jsonl" ] && [ "$(wc -l <"$tmp/$name.jsonl")" -ge "$lines" ] && break
    sleep 0.05
  done
  kill -s "$sig" "$pid"
  wait "$pid"
  echo $? >"$tmp/$name.rc"
}

# The uninterrupted run.
OMP_NUM_THREADS=1 mpirun -n 2 $mpirun_extra "$adgnn" "${train[@]}" --metrics "$tmp/ref.jsonl" \
  >"$tmp/ref.out" 2>"$tmp/ref.err"
[ $? = 0 ] && ok || bad "uninterrupted run: $(tail -3 "$tmp/ref.err")"

# SIGUSR1 to mpirun: both ranks stop after one epoch, rank 0 writes the checkpoint.
interrupt int USR1 20 env OMP_NUM_THREADS=1 mpirun -n 2 $mpirun_extra "$adgnn" "${train[@]}" \
  --checkpoint "$tmp/ck.h5" --metrics "$tmp/int.jsonl"
rc=$(cat "$tmp/int.rc")
[ "$rc" = 75 ] && ok || bad "SIGUSR1: exit $rc, want 75: $(tail -3 "$tmp/int.err")"
stopped=$(wc -l <"$tmp/int.jsonl")
if [ "$stopped" -ge 20 ] && [ "$stopped" -lt "$epochs" ]; then ok; else bad "SIGUSR1: $stopped epochs written"; fi
grep -q "adgnn: SIGUSR1: run 0 stopped after epoch $stopped; checkpoint $tmp/ck.h5 written; rerun with --resume" \
  "$tmp/int.err" && ok || bad "SIGUSR1: message: $(cat "$tmp/int.err")"
[ "$(grep -c 'stopped after' "$tmp/int.err")" = 1 ] && ok || bad "SIGUSR1: more than rank 0 reported the stop"
cp "$tmp/ck.h5" "$tmp/ck1.h5"
cp "$tmp/int.jsonl" "$tmp/one.jsonl"

# Resumed on 2 ranks: the whole trajectory equals the uninterrupted one, bit for bit.
OMP_NUM_THREADS=1 mpirun -n 2 $mpirun_extra "$adgnn" "${train[@]}" --checkpoint "$tmp/ck.h5" --resume \
  --metrics "$tmp/int.jsonl" >"$tmp/res.out" 2>"$tmp/res.err"
[ $? = 0 ] && ok || bad "resume on 2 ranks: $(tail -3 "$tmp/res.err")"
[ "$(wc -l <"$tmp/int.jsonl")" = "$epochs" ] && ok || bad "resume: $(wc -l <"$tmp/int.jsonl") metrics lines, want $epochs"
cmp -s <(losses "$tmp/ref.jsonl") <(losses "$tmp/int.jsonl") && ok ||
  bad "resume on 2 ranks: losses differ from the uninterrupted run's ($(losses "$tmp/int.jsonl" | tail -1) vs $(losses "$tmp/ref.jsonl" | tail -1))"

# Resumed on one process from the same checkpoint: the same trajectory within 1e-5 (relative).
OMP_NUM_THREADS=1 "$adgnn" "${train[@]}" --checkpoint "$tmp/ck1.h5" --resume --metrics "$tmp/one.jsonl" \
  >"$tmp/one.out" 2>"$tmp/one.err"
[ $? = 0 ] && ok || bad "resume on 1 process: $(tail -3 "$tmp/one.err")"
python3 - "$tmp/ref.jsonl" "$tmp/one.jsonl" <<'EOF' && ok || bad "resume on 1 process: not the 2-rank trajectory"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:])
assert len(a) == len(b), (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
assert worst < 1e-5, worst
EOF

# SIGTERM to one process, without --checkpoint: it stops after an epoch and says so.
interrupt term TERM 10 env OMP_NUM_THREADS=1 "$adgnn" "${train[@]}" --metrics "$tmp/term.jsonl"
rc=$(cat "$tmp/term.rc")
[ "$rc" = 75 ] && ok || bad "SIGTERM: exit $rc, want 75: $(tail -3 "$tmp/term.err")"
grep -q "adgnn: SIGTERM: run 0 stopped after epoch [0-9]* (no --checkpoint: nothing to resume from)$" "$tmp/term.err" &&
  ok || bad "SIGTERM: message: $(cat "$tmp/term.err")"
finish
