#!/usr/bin/env bash
# The same function before and after a change: trains one fixed CPU configuration per backbone x
# variant (6 x 4, 4 epochs, depth 3, dropout on, one thread) with an older commit's adgnn and with
# this tree's build/adgnn, and compares the loss of every epoch and every prediction array bit for
# bit. Prints one line per difference and a summary; exit 1 if anything differs.
#   bash scripts/golden_compare.sh <old commit> [new adgnn binary, default build/adgnn]
# The old commit is built (target adgnn, Release, with ccache) in a git worktree beside this
# checkout, ../adgnn-golden-<commit>, kept for later calls. Needs scripts/setup.sh's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
old=$(git rev-parse --short "${1:?usage: golden_compare.sh <old commit> [new binary]}")
new=${2:-build/adgnn}
[ -x "$new" ] || { echo "golden_compare.sh: $new is not an executable (run scripts/setup.sh)" >&2; exit 2; }
py=$root/.venv/bin/python
tree=$(dirname "$root")/adgnn-golden-$old
if [ ! -x "$tree/build/adgnn" ]; then
  [ -d "$tree" ] || git worktree add -q "$tree" "$old"
  export CCACHE_BASEDIR=$(dirname "$root") CCACHE_NOHASHDIR=1
  cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    -DADGNN_PYTHON="$py" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >"$tree/configure.log" 2>&1
  cmake --build "$tree/build" --target adgnn -j"$(nproc)" >"$tree/build.log" 2>&1 ||
    { tail -20 "$tree/build.log"; exit 2; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$new" data generate --nodes 600 --classes 4 --avg-degree 6 --features 24 --homophily 0.4 --seed 3 \
  -o "$work/g.h5" >/dev/null
for side in old new; do
  bin=$new
  [ "$side" = old ] && bin=$tree/build/adgnn
  mkdir -p "$work/$side"
  for m in gcn gat sage mixhop gatv2 dirgnn; do
    for v in plain ad ad_fast ad_sharp; do
      "$bin" train "$work/g.h5" --model "$m" --variant "$v" --epochs 4 --hidden 16 --layers 3 --dropout 0.5 \
        --threads 1 --seed 7 --no-progress --metrics "$work/$side/$m-$v.jsonl" \
        --predictions "$work/$side/$m-$v.h5" >"$work/$side/$m-$v.out" 2>&1 ||
        { echo "$side $m $v failed: $(tail -1 "$work/$side/$m-$v.out")"; exit 1; }
    done
  done
done
"$py" - "$work" "$old" <<'PY'
import glob, json, os, sys
import h5py, numpy as np
work, old = sys.argv[1], sys.argv[2]
runs = arrays = diffs = 0
for path in sorted(glob.glob(f"{work}/old/*.jsonl")):
    name = os.path.basename(path)[:-len(".jsonl")]
    losses = [[json.loads(l)["loss"] for l in open(f"{work}/{side}/{name}.jsonl")] for side in ("old", "new")]
    runs += 1
    if losses[0] != losses[1]:
        diffs += 1
        print(f"{name}: losses differ: {losses[0]} against {losses[1]}")
    with h5py.File(f"{work}/old/{name}.h5") as a, h5py.File(f"{work}/new/{name}.h5") as b:
        for key in a:
            if isinstance(a[key], h5py.Dataset):
                arrays += 1
                if key not in b or not np.array_equal(a[key][()], b[key][()]):
                    diffs += 1
                    print(f"{name}: prediction array {key} differs")
print(f"{runs} runs and {arrays} prediction arrays against {old}: {diffs} differences")
sys.exit(1 if diffs else 0)
PY
