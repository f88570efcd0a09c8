#!/usr/bin/env bash
# `mpirun -n 3 adgnn data generate` writes the graph one process writes (same stored fingerprint,
# same statistics); `mpirun -n P adgnn partition --method ptscotch` (P = 2, 4; also 2 processes
# into 4 parts) and `mpirun -n 4 adgnn partition --method coarse-metis` on it: valid folders (train reads them), the training under mpirun equals the
# one-process run (losses within 1e-4 relative), the cut is near the communities' own (4
# communities keep 98% of the edges: about 1.5% of the edges cross a 4-way split along them),
# a second run at the same seed writes the same parts (byte for byte), and the refusals: another
# method across processes, a file that is not ours.
# Usage: test_ptscotch.sh <adgnn binary> ["extra mpirun flags"]
set -u
adgnn=$1
mpirun_extra=${2:-}
# shellcheck source=harness.sh
source "$(dirname "$0")/harness.sh"
mpi() { mpirun -n "$1" $mpirun_extra "${@:2}"; }
train=(train --epochs 3 --hidden 16 --layers 2 --model gcn --variant ad_fast --threads 1 --json --no-progress)

generate=(data generate --nodes 20000 --classes 4 --avg-degree 8 --features 32 --homophily 0.5
  --communities 4 --locality 0.98 --seed 5 --threads 2)
run gen "$adgnn" "${generate[@]}" -o "$tmp/g.h5"
run gen3 mpi 3 "$adgnn" "${generate[@]}" -o "$tmp/g3.h5"
if grep -q "80000 undirected edges, by 3 processes" "$tmp/gen3.json"; then ok; else bad "gen3 said: $(tail -2 "$tmp/gen3.json")"; fi
run stats "$adgnn" data stats "$tmp/g.h5" --json
run stats3 "$adgnn" data stats "$tmp/g3.h5" --json
if cmp -s "$tmp/stats.json" "$tmp/stats3.json"; then ok; else bad "statistics of the 3-process graph differ"; fi
run metis "$adgnn" partition "$tmp/g.h5" --parts 4 --out "$tmp/metis4" --json
# The folders below are made from the 3-process file and trained against the one-process file.
run pt2 mpi 2 "$adgnn" partition "$tmp/g3.h5" --method ptscotch --parts 2 --out "$tmp/pt2" --json
run pt4 mpi 4 "$adgnn" partition "$tmp/g3.h5" --method ptscotch --parts 4 --out "$tmp/pt4" --json
run pt4again mpi 4 "$adgnn" partition "$tmp/g3.h5" --method ptscotch --parts 4 --out "$tmp/pt4again" --json
same=1
for f in "$tmp"/pt4/part-*.h5; do cmp -s "$f" "$tmp/pt4again/$(basename "$f")" || same=0; done
if [ "$same" = 1 ]; then ok; else bad "two PT-Scotch runs at one seed gave different parts"; fi
run pt2x4 mpi 2 "$adgnn" partition "$tmp/g3.h5" --method ptscotch --parts 4 --out "$tmp/pt2x4" --json
run cm4 mpi 4 "$adgnn" partition "$tmp/g3.h5" --method coarse-metis --coarse-nodes 256 --parts 4 --out "$tmp/cm4" --json
run one "$adgnn" "${train[@]}" "$tmp/g.h5" --metrics "$tmp/one.jsonl"
# Naming the one-process file beside a folder of the 3-process file: refused unless their stored
# fingerprints agree.
run train2 mpi 2 "$adgnn" "${train[@]}" "$tmp/g.h5" --partition-dir "$tmp/pt2" --metrics "$tmp/train2.jsonl"
run train4 mpi 4 "$adgnn" "${train[@]}" --partition-dir "$tmp/pt4" --metrics "$tmp/train4.jsonl"
run train2x4 mpi 4 "$adgnn" "${train[@]}" --partition-dir "$tmp/pt2x4" --metrics "$tmp/train2x4.jsonl"
run traincm4 mpi 4 "$adgnn" "${train[@]}" --partition-dir "$tmp/cm4" --metrics "$tmp/traincm4.jsonl"

if python3 - "$tmp" <<'PY'; then ok; else bad "folders, cut or equality (above)"; fi
import json, sys
tmp = sys.argv[1]
failures = 0
def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
def losses(name):
    return [json.loads(l)["loss"] for l in open(f"{tmp}/{name}.jsonl")]
metis = json.load(open(f"{tmp}/metis.json"))
for name, procs in (("pt2", 2), ("pt4", 4), ("pt2x4", 2), ("cm4", 4)):
    m = json.load(open(f"{tmp}/{name}.json"))
    edges = m["undirected_edges"]
    print(f"{name}: cut {m['edge_cut']} of {edges} ({m['edge_cut'] / edges:.2%}), node balance "
          f"{m['balance']['nodes']:.3f}, peaks {m['peak_rss_gib_per_process']} GiB; METIS into 4: "
          f"{metis['edge_cut'] / edges:.2%}")
    method = "coarse-metis" if name.startswith("cm") else "ptscotch"
    check(m["method"] == method and m["processes"] == procs, f"{name}: {m['method']} on {m['processes']}")
    check(len(m["peak_rss_gib_per_process"]) == procs, f"{name}: peaks of {len(m['peak_rss_gib_per_process'])} processes")
    check(sum(m["part_nodes"]) == m["nodes"], f"{name}: parts hold {sum(m['part_nodes'])} of {m['nodes']} nodes")
    check(m["edge_cut"] <= 0.03 * edges, f"{name}: cut {m['edge_cut'] / edges:.2%} over 3%")
    check(m["balance"]["nodes"] <= 1.05, f"{name}: node balance {m['balance']['nodes']}")
one = losses("one")
for name in ("train2", "train4", "train2x4", "traincm4"):
    s = json.load(open(f"{tmp}/{name}.json"))[0]
    check(s["graph_loading"].startswith("rank-local"), f"{name}: took the path '{s['graph_loading']}'")
    got = losses(name)
    check(len(got) == len(one) and all(abs(x - y) <= 1e-4 * abs(x) for x, y in zip(one, got)),
          f"{name}: losses {got} differ from the one-process run's {one}")
sys.exit(1 if failures else 0)
PY

# Refusals: one line, exit code 2.
refuse() {  # refuse <name> <expected text> <command...>
  local name=$1 text=$2; shift 2
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  if [ "$rc" -eq 2 ] && grep -q -- "$text" "$tmp/$name.err"; then ok
  else bad "$name: exit $rc, stderr: $(head -3 "$tmp/$name.err")"; fi
}
refuse metis_mpi "across processes use --partition ptscotch" mpi 2 "$adgnn" partition "$tmp/g.h5" --parts 2 --out "$tmp/x"
printf 'not a graph' >"$tmp/text.h5"
refuse not_ours "convert it first" "$adgnn" partition "$tmp/text.h5" --method ptscotch --parts 2 --out "$tmp/x"
finish
