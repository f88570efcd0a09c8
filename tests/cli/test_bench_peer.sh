#!/usr/bin/env bash
# The PyG side of the GPU benchmark, on CPU: bench/pyg_gcn.py on a tiny generated graph (JSON
# fields, the symmetric view against our loader's), bench/bench_table.py on hand-written JSON
# (joined cells and ratios), and bench/gpu_bench.sh end to end with a scripted `adgnn bench`.
# `adgnn bench` itself is not tested here. Usage: test_bench_peer.sh <adgnn binary> <python>
set -u
adgnn=$1
py=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
export OMP_NUM_THREADS=1
if ! "$py" -c 'import torch, torch_geometric, h5py' 2>/dev/null; then
  echo "SKIP: $py lacks torch / torch_geometric / h5py (scripts/setup.sh installs them into .venv)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
check() {  # check <what> <command...>
  local what=$1; shift
  if "$@" >"$tmp/check.out" 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what"; cat "$tmp/check.out"; fi
}

# A tiny graph and its statistics from our loader.
"$adgnn" data generate --nodes 300 --classes 4 --features 16 --avg-degree 6 --degree-dist powerlaw \
  --seed 5 --threads 1 -o "$tmp/tiny.h5" >/dev/null 2>&1 || { echo "FAIL: data generate"; exit 1; }
"$adgnn" data stats "$tmp/tiny.h5" --json >"$tmp/tiny_stats.json" 2>/dev/null || { echo "FAIL: data stats"; exit 1; }

# pyg_gcn.py on CPU, 2 depths, 3 steps.
check "pyg_gcn.py runs" "$py" "$root/bench/pyg_gcn.py" "$tmp/tiny.h5" --device cpu --depths 1,3 \
  --steps 3 --warmup 1 --hidden 32 --json "$tmp/pyg.json"
check "pyg_gcn.py JSON" "$py" - "$tmp/pyg.json" "$tmp/tiny_stats.json" <<'EOF'
import json, math, sys
doc, st = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert doc['device'] == 'cpu', doc['device']
g = doc['graph']
want = dict(nodes=st['nodes'], edges=2 * st['undirected_edges'], features=st['features'],
            classes=st['classes'])
assert {k: g[k] for k in want} == want, (g, want)
assert isinstance(g['name'], str) and g['name']
rows = doc['rows']
assert sorted((r['variant'], r['depth']) for r in rows) == [
    ('pyg_edge_index', 1), ('pyg_edge_index', 3), ('pyg_sparse_csr', 1), ('pyg_sparse_csr', 3)], rows
for r in rows:
    assert r['model'] == 'PyG-GCN' and r['backbone'] == 'gcn' and r['hidden'] == 32, r
    t = (r['step_ms_p10'], r['step_ms_median'], r['step_ms_p90'])
    assert all(math.isfinite(v) and v > 0 for v in t) and t[0] <= t[1] <= t[2], r
    assert r['peak_bytes'] is None, r  # no peak counter on CPU
for d in (1, 3):
    at = [r for r in rows if r['depth'] == d]
    peers = [r for r in at if r['peer']]
    assert len(peers) == 1 and peers[0]['step_ms_median'] == min(r['step_ms_median'] for r in at), at
print('ok')
EOF

# The symmetric view on a stored graph with a self-loop, a duplicate, a reciprocal pair and
# one-way edges: PyG's edge count must equal our loader's (2 x undirected edges).
check "hand-made graph written" "$py" - "$tmp/hand.h5" <<'EOF'
import sys, h5py, numpy as np
n = 6
edges = [(0, 1), (1, 0), (0, 1), (2, 2), (2, 3), (3, 4), (4, 2), (5, 5), (1, 4)]
indptr = np.zeros(n + 1, np.int64)
for u, _ in edges:
    indptr[u + 1] += 1
indptr = np.cumsum(indptr)
indices = np.array([v for u, v in sorted(edges, key=lambda e: e[0])], np.int32)
with h5py.File(sys.argv[1], 'w') as f:
    for k, v in dict(format='adgnn-graph', name='hand', source='test_bench_peer.sh',
                     source_sha256='0' * 64).items():
        f.attrs[k] = v
    for k, v in dict(format_version=1, directed=1, num_nodes=n, num_classes=2).items():
        f.attrs[k] = np.int64(v)
    f['graph/indptr'], f['graph/indices'] = indptr, indices
    feats = f.create_group('features')
    feats.attrs['layout'], feats.attrs['rows'], feats.attrs['cols'] = 'dense', np.int64(n), np.int64(3)
    feats['values'] = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    f['labels'] = np.array([0, 1, 0, 1, 0, 1], np.int64)
    for s, m in (('train', [1, 1, 1, 0, 0, 0]), ('val', [0, 0, 0, 1, 1, 0]), ('test', [0, 0, 0, 0, 0, 1])):
        f[f'splits/random/{s}'] = np.array([m], np.uint8)
EOF
"$adgnn" data stats "$tmp/hand.h5" --json >"$tmp/hand_stats.json" 2>"$tmp/hand_stats.err" \
  || { fail=$((fail + 1)); echo "FAIL: data stats on the hand-made graph: $(cat "$tmp/hand_stats.err")"; }
check "pyg_gcn.py on the hand-made graph" "$py" "$root/bench/pyg_gcn.py" "$tmp/hand.h5" --device cpu \
  --depths 2 --steps 1 --warmup 0 --hidden 4 --variants edge_index --json "$tmp/hand.json"
check "symmetric view matches our loader (0-1, 1-4, 2-3, 3-4, 4-2: 10 entries)" "$py" - \
  "$tmp/hand.json" "$tmp/hand_stats.json" <<'EOF'
import json, sys
doc, st = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert doc['graph']['edges'] == 10 == 2 * st['undirected_edges'], (doc['graph'], st['undirected_edges'])
EOF
check "symmetric_csr rows, columns" "$py" - "$root/bench" <<'EOF'
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from pyg_gcn import symmetric_csr
row, col = symmetric_csr(np.array([0, 3, 4, 6, 7]), np.array([1, 1, 0, 3, 2, 2, 2]), 4)
got = [(int(r), int(c)) for r, c in zip(row, col)]
# Stored: 0->1 twice, 0->0, 1->3, 2->2 twice, 3->2; row-major, both directions, no loops.
assert got == [(0, 1), (1, 0), (1, 3), (2, 3), (3, 1), (3, 2)], got
EOF

# Bad input: exit 2 and one stderr line naming the problem.
expect_error() {  # expect_error <fragment> <args...>
  local frag=$1; shift
  "$py" "$root/bench/pyg_gcn.py" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF -- "$frag" "$tmp/err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL: pyg_gcn.py $* -> exit $rc, stderr: $(cat "$tmp/err")"
  fi
}
expect_error "--depths" "$tmp/tiny.h5" --device cpu --depths 0
expect_error "--split nosuch" "$tmp/tiny.h5" --device cpu --split nosuch
expect_error "--variants coo" "$tmp/tiny.h5" --device cpu --variants coo
expect_error "nosuch.h5: no such file" "$tmp/nosuch.h5" --device cpu
echo junk >"$tmp/junk.h5"
expect_error "junk.h5" "$tmp/junk.h5" --device cpu

# bench_table.py on hand-written JSON of both sides: every cell of the joined table.
cat >"$tmp/ours.json" <<'EOF'
{"device": "NVIDIA H100 80GB HBM3", "graph": {"name": "arxiv-scale", "nodes": 169343, "edges": 2332486, "features": 128, "classes": 40},
 "rows": [
  {"model": "GCN", "backbone": "gcn", "variant": "plain", "depth": 2, "hidden": 128, "step_ms_median": 10.0, "step_ms_p10": 9.5, "step_ms_p90": 11.0, "peak_bytes": 1048576000, "edges_per_layer": [2332486, 2332486], "active_edge_fraction": [1.0, 1.0]},
  {"model": "AD-GCN_fast", "backbone": "gcn", "variant": "ad_fast", "depth": 2, "hidden": 128, "step_ms_median": 5.0, "step_ms_p10": 4.5, "step_ms_p90": 6.0, "peak_bytes": 524288000, "edges_per_layer": [2332486, 1166243], "active_edge_fraction": [1.0, 0.5]},
  {"model": "AD-GCN", "backbone": "gcn", "variant": "ad", "depth": 2, "hidden": 128, "step_ms_median": 8.0, "step_ms_p10": 7.5, "step_ms_p90": 9.0, "peak_bytes": 786432000, "edges_per_layer": [1166243, 1166243], "active_edge_fraction": [0.5, 0.5]},
  {"model": "AD-GCN (f_delta tf32)", "backbone": "gcn", "variant": "ad", "fdelta_precision": "tf32", "depth": 2, "hidden": 128, "step_ms_median": 7.0, "step_ms_p10": 6.5, "step_ms_p90": 7.5, "peak_bytes": 786432000, "edges_per_layer": [1166243, 1166243], "active_edge_fraction": [0.5, 0.5]},
  {"model": "AD-GCN (f_delta bf16)", "backbone": "gcn", "variant": "ad", "fdelta_precision": "bf16", "depth": 2, "hidden": 128, "step_ms_median": 6.0, "step_ms_p10": 5.5, "step_ms_p90": 6.5, "peak_bytes": 686432000, "edges_per_layer": [1166243, 1166243], "active_edge_fraction": [0.5, 0.5]},
  {"model": "GCN", "backbone": "gcn", "variant": "plain", "depth": 4, "hidden": 128, "step_ms_median": 20.0, "step_ms_p10": 19.0, "step_ms_p90": 21.0, "peak_bytes": 2097152000, "edges_per_layer": [1, 1, 1, 1], "active_edge_fraction": [1.0, 1.0, 1.0, 1.0]},
  {"model": "AD-GCN", "backbone": "gcn", "variant": "ad", "depth": 4, "hidden": 128, "step_ms_median": 30.0, "step_ms_p10": 29.0, "step_ms_p90": 31.0, "peak_bytes": 3145728000, "edges_per_layer": [1, 1, 1, 1], "active_edge_fraction": [1.0, 0.5, 0.25, 0.25]}
 ]}
EOF
cat >"$tmp/pyg_fake.json" <<'EOF'
{"device": "NVIDIA H100 80GB HBM3", "graph": {"name": "arxiv-scale", "nodes": 169343, "edges": 2332486, "features": 128, "classes": 40},
 "rows": [
  {"model": "PyG-GCN", "backbone": "gcn", "variant": "pyg_edge_index", "depth": 2, "hidden": 128, "step_ms_median": 30.0, "step_ms_p10": 29.0, "step_ms_p90": 31.0, "peak_bytes": 2097152000, "peer": false},
  {"model": "PyG-GCN", "backbone": "gcn", "variant": "pyg_sparse_csr", "depth": 2, "hidden": 128, "step_ms_median": 25.0, "step_ms_p10": 24.0, "step_ms_p90": 26.0, "peak_bytes": 1572864000, "peer": true},
  {"model": "PyG-GCN", "backbone": "gcn", "variant": "pyg_edge_index", "depth": 4, "hidden": 128, "step_ms_median": 50.0, "step_ms_p10": 49.0, "step_ms_p90": 51.0, "peak_bytes": 4194304000, "peer": true},
  {"model": "PyG-GCN", "backbone": "gcn", "variant": "pyg_sparse_csr", "depth": 4, "hidden": 128, "step_ms_median": 60.0, "step_ms_p10": 59.0, "step_ms_p90": 61.0, "peak_bytes": 3145728000, "peer": false},
  {"model": "PyG-GCN", "backbone": "gcn", "variant": "pyg_sparse_csr", "depth": 8, "hidden": 128, "step_ms_median": 90.0, "step_ms_p10": 89.0, "step_ms_p90": 91.0, "peak_bytes": null, "peer": true}
 ]}
EOF
"$py" "$root/bench/bench_table.py" --ours "$tmp/ours.json" --pyg "$tmp/pyg_fake.json" --card "NVIDIA H100" \
  --date 2026-11-26 >"$tmp/table.md" 2>&1 || { fail=$((fail + 1)); echo "FAIL: bench_table.py"; cat "$tmp/table.md"; }
has() { grep -qxF -- "$1" "$tmp/table.md" && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL: table lacks: $1"; cat "$tmp/table.md"; }; }
has "Card: NVIDIA H100; 2026-11-26"
has "| depth | GCN (ms) | AD-GCN_fast (ms) | AD-GCN (ms) | PyG GCN (ms) | PyG / GCN | AD_fast / GCN | AD / GCN | active edges AD_fast / AD | peak MiB GCN / AD_fast / AD / PyG | AD-GCN, f_delta BF16 (ms) | AD bf16 / GCN | AD-GCN, f_delta TF32 (ms) | AD tf32 / GCN |"
has "| 2 | 10.00 | 5.00 | 8.00 | 25.00 | 2.50 | 0.50 | 0.80 | 0.75 / 0.50 | 1000 / 500 / 750 / 1500 | 6.00 | 0.60 | 7.00 | 0.70 |"
has "| 4 | 20.00 | - | 30.00 | 50.00 | 2.50 | - | 1.50 | - / 0.50 | 2000 / - / 3000 / 4000 | - | - | - | - |"
has "| 8 | - | - | - | 90.00 | - | - | - | - / - | - / - / - / - | - | - | - | - |"
has "| 2 | pyg_sparse_csr | 25.00 | 24.00 | 26.00 | 1500 |"
check "no graph warning when the graphs agree" bash -c "! grep -q WARNING '$tmp/table.md'"
# Different graphs: warned. One side missing: the other still tabled.
sed 's/"edges": 2332486/"edges": 2332480/' "$tmp/pyg_fake.json" >"$tmp/pyg_other.json"
check "graph mismatch warned" bash -c "'$py' '$root/bench/bench_table.py' --ours '$tmp/ours.json' --pyg '$tmp/pyg_other.json' | grep -q 'WARNING: graphs differ: edges 2332486 (adgnn) vs 2332480 (PyG)'"
check "ours missing" bash -c "'$py' '$root/bench/bench_table.py' --ours '$tmp/none.json' --pyg '$tmp/pyg_fake.json' | grep -qxF '| 2 | - | - | - | 25.00 | - | - | - | - / - | - / - / - / 1500 |'"
check "both missing fails" bash -c "! '$py' '$root/bench/bench_table.py' --ours '$tmp/none.json' --pyg '$tmp/none2.json'"

# gpu_bench.sh end to end on CPU: a scripted adgnn answers `bench` (its --help offers the flags in
# $FAKE_FLAGS; a run records its arguments and writes fake rows for the requested models and
# depths), the real adgnn everything else. Both model-selection forms are checked.
cat >"$tmp/fake_adgnn" <<EOF
#!/usr/bin/env bash
if [ "\$1" != bench ]; then exec "$adgnn" "\$@"; fi
if [ "\$2" = --help ]; then echo "Options: --dataset \$FAKE_FLAGS --depths --json"; exit 0; fi
echo "\$@" >>"$tmp/bench_args"
"$py" - "\$@" <<'PY'
import json, sys
a = sys.argv[1:]
arg = lambda k: a[a.index(k) + 1]
variants = (arg('--variants') if '--variants' in a else arg('--models').replace('gcn', 'plain')).split(',')
label = dict(plain=('GCN', 4.0), ad_fast=('AD-GCN_fast', 2.0), ad=('AD-GCN', 3.0))
rows = [dict(model=label[v][0], backbone='gcn', variant=v, depth=int(d), hidden=int(arg('--hidden')),
             step_ms_median=label[v][1] * int(d), step_ms_p10=1.0, step_ms_p90=9.0, peak_bytes=0,
             edges_per_layer=[1] * int(d), active_edge_fraction=[1.0] * int(d))
        for d in arg('--depths').split(',') for v in variants]
json.dump(dict(device='cpu', graph=dict(name='x', nodes=0, edges=0, features=0, classes=0), rows=rows),
          open(arg('--json'), 'w'))
PY
EOF
chmod +x "$tmp/fake_adgnn"
for flags in "--backbones --variants" "--models"; do
  rm -f "$tmp/bench_args"
  FAKE_FLAGS=$flags SKIP_BUILD=1 ADGNN="$tmp/fake_adgnn" PYTHON="$py" DEVICE=cpu GRAPH="$tmp/tiny.h5" \
    DEPTHS="1 2" STEPS=2 WARMUP=1 HIDDEN=16 BLOCK=64 OUT="$tmp/gb" bash "$root/bench/gpu_bench.sh" >"$tmp/gb.out" 2>&1
  rc=$?
  check "gpu_bench.sh ($flags) exit 0 (rc $rc; $(tail -3 "$tmp/gb.out"))" test $rc -eq 0
  models="--backbones gcn --variants plain,ad_fast,ad"
  [ "$flags" = --models ] && models="--models gcn,ad_fast,ad"
  check "gpu_bench.sh ($flags) passes the flags to adgnn bench ($(cat "$tmp/bench_args" 2>&1))" grep -qxF \
    "bench --dataset $tmp/tiny.h5 $models --depths 1,2 --hidden 16 --steps 2 --warmup 1 --device cpu --json $tmp/gb/adgnn_bench.json" \
    "$tmp/bench_args"
  # ... and again on the renumbered copy, which the real adgnn wrote (same graph, new ids).
  check "gpu_bench.sh ($flags) benches the renumbered graph too" grep -qxF \
    "bench --dataset $tmp/gb/tiny-metis-64.h5 $models --depths 1,2 --hidden 16 --steps 2 --warmup 1 --device cpu --json $tmp/gb/adgnn_bench_reordered.json" \
    "$tmp/bench_args"
  check "gpu_bench.sh ($flags) renumbered file: same statistics" cmp -s <("$adgnn" data stats "$tmp/tiny.h5" --json) \
    <("$adgnn" data stats "$tmp/gb/tiny-metis-64.h5" --json | sed 's|tiny-metis-64.h5|tiny.h5|g')
  check "gpu_bench.sh ($flags) second table" grep -qxF "Renumbered (metis, block 64): both sides on tiny-metis-64.h5" "$tmp/gb.out"
  check "gpu_bench.sh ($flags) table: depth 1 joined" \
    grep -qE '^\| 1 \| 4\.00 \| 2\.00 \| 3\.00 \| [0-9.]+ \| [0-9.]+ \| 0\.50 \| 0\.75 \|' "$tmp/gb.out"
  check "gpu_bench.sh ($flags) table: depth 2 joined" \
    grep -qE '^\| 2 \| 8\.00 \| 4\.00 \| 6\.00 \| [0-9.]+ \| [0-9.]+ \| 0\.50 \| 0\.75 \|' "$tmp/gb.out"
  check "gpu_bench.sh ($flags) warns: the fake's graph differs" grep -q "WARNING: graphs differ" "$tmp/gb.out"
  for t in table table_reordered; do
    check "gpu_bench.sh ($flags) wrote $t.md, as printed" "$py" -c \
      "import sys; t = open(sys.argv[1]).read(); assert t.startswith('Card:') and t in open(sys.argv[2]).read()" \
      "$tmp/gb/$t.md" "$tmp/gb.out"
  done
done

echo "test_bench_peer: $pass passed, $fail failed"
[ $fail -eq 0 ]
