#!/usr/bin/env bash
# `adgnn` under torchrun (torch.distributed.run from the .venv's PyTorch): one worker trains as one
# process, bit for bit the plain run; several workers on CPU, and the commands that work over MPI
# (data generate, partition), are refused by every rank with one line that says to use mpirun,
# naming the rank and host, and torchrun ends at once. (Several workers train with --device cuda
# over NCCL, bootstrapped through torchrun's store: scripts/device_distributed.sh on a machine with 2 GPUs.)
# Usage: test_torchrun.sh <adgnn binary> <python with torch>
set -u
adgnn=$1
py=$2
# shellcheck source=harness.sh
source "$(dirname "$0")/harness.sh"
torchrun() { timeout 120 "$py" -m torch.distributed.run --standalone "$@"; }

"$adgnn" data generate --nodes 300 --classes 3 --avg-degree 5 --features 8 --seed 2 -o "$tmp/g.h5" >/dev/null
train=(train "$tmp/g.h5" --model gcn --variant ad_fast --epochs 5 --hidden 8 --threads 1 --no-progress --seed 4)

# One worker: the same losses as without torchrun.
run plain "$adgnn" "${train[@]}" --metrics "$tmp/plain.jsonl"
run one torchrun --nproc_per_node 1 --no-python "$adgnn" "${train[@]}" --metrics "$tmp/one.jsonl"
if cmp -s <(grep -o '"loss":[^,]*' "$tmp/plain.jsonl") <(grep -o '"loss":[^,]*' "$tmp/one.jsonl") &&
   [ -s "$tmp/one.jsonl" ]; then ok; else bad "one torchrun worker: losses differ from the plain run"; fi

# refused <name> <command...>: torchrun fails, and each of the 2 ranks said why in one line.
refused() {
  local name=$1; shift
  if torchrun --nproc_per_node 2 --no-python "$adgnn" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
    bad "$name: torchrun succeeded"; return
  fi
  local lines
  lines=$(grep -c '^adgnn: error (rank [01] on [^)]*): .*under torchrun (2 ranks): .*use mpirun -n 2' "$tmp/$name.err")
  if [ "$lines" = 2 ]; then ok; else bad "$name: expected one line per rank, got: $(grep '^adgnn' "$tmp/$name.err")"; fi
}
refused train_cpu "${train[@]}"
refused generate data generate --nodes 100 --classes 2 -o "$tmp/x.h5"
refused partition partition "$tmp/g.h5" --parts 2 --partition ptscotch -o "$tmp/parts"
[ ! -e "$tmp/x.h5" ] && [ ! -e "$tmp/parts" ] && ok || bad "a refused command wrote its output"
finish
