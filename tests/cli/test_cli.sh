#!/usr/bin/env bash
# Command-line behaviour: --help everywhere, exit code 2 and exactly one stderr line for bad
# input, atomic outputs. Usage: test_cli.sh <adgnn binary> [shared data dir]
set -u
adgnn=$1
data=${2:-}
# shellcheck source=harness.sh
source "$(dirname "$0")/harness.sh"

expect_ok() {
  "$@" >"$tmp/out" 2>"$tmp/err" && ok || bad "$* -> exit $?: $(cat "$tmp/err")"
}

for sub in "" "data" "data stats" "data convert" "data reorder" "data generate" "data bench" "bench"; do
  # shellcheck disable=SC2086
  expect_ok "$adgnn" $sub --help
done
expect_ok "$adgnn" --version

# Flags and values.
expect_error "homophily" "$adgnn" data generate --preset demo --homophily 1.5 -o "$tmp/x.h5"
expect_error "--preset nosuch" "$adgnn" data generate --preset nosuch -o "$tmp/x.h5"
expect_error "--out" "$adgnn" data generate --preset demo -o "$tmp/no/such/dir/x.h5"
expect_error "--nodes" "$adgnn" data generate --nodes abc -o "$tmp/x.h5"
expect_error "--frobnicate" "$adgnn" data stats --frobnicate
expect_error "--dataset" "$adgnn" data stats
expect_error "nosuch.npz" "$adgnn" data stats "$tmp/nosuch.npz"
# Files: empty, corrupt, not our HDF5.
: >"$tmp/empty.npz"
expect_error "empty.npz: empty file" "$adgnn" data stats "$tmp/empty.npz"
head -c 3000 /dev/urandom >"$tmp/junk.npz"
expect_error "junk.npz" "$adgnn" data stats "$tmp/junk.npz"
echo hello >"$tmp/text.h5"
expect_error "text.h5: not an HDF5 file" "$adgnn" data stats "$tmp/text.h5"

# Generate, then stats / convert round trip; the output appears only complete (no temp left).
expect_ok "$adgnn" data generate --preset demo --seed 3 -o "$tmp/demo.h5"
expect_ok "$adgnn" data stats "$tmp/demo.h5" --json
grep -q '"nodes"' "$tmp/out" && ok || bad "stats --json lacks nodes"
# --nodes on a preset keeps its average degree (arxiv-scale's 13.77: 206,606 undirected edges at
# 30,000 nodes), not its edge count.
expect_ok "$adgnn" data generate --preset arxiv-scale --nodes 30000 --features 4 -o "$tmp/resized.h5"
grep -q '30000 nodes, 206606 undirected edges' "$tmp/err" "$tmp/out" && ok || bad "--nodes on a preset: $(cat "$tmp/err")"
expect_ok "$adgnn" data convert "$tmp/demo.h5" -o "$tmp/demo2.h5"
# Renumbering for locality: same statistics, original ids stored; bad method / block refused.
expect_ok "$adgnn" data reorder "$tmp/demo.h5" -o "$tmp/demo_ro.h5" --block 300
grep -q 'entries within a block of 300: .* -> .*%; wrote' "$tmp/out" && ok || bad "data reorder did not report locality: $(cat "$tmp/out")"
expect_ok "$adgnn" data reorder "$tmp/demo.h5" -o "$tmp/demo_rb.h5" --method benefit
grep -q 'reordered (benefit' "$tmp/out" && ok || bad "data reorder --method benefit: $(cat "$tmp/out")"
"$adgnn" data stats "$tmp/demo.h5" --json >"$tmp/s1.json" && "$adgnn" data stats "$tmp/demo_ro.h5" --json >"$tmp/s2.json" &&
  "$adgnn" data stats "$tmp/demo_rb.h5" --json >"$tmp/s3.json"
# Same statistics (sums over nodes in another order: equal to 1e-12).
python3 - "$tmp/s1.json" "$tmp/s2.json" "$tmp/s3.json" <<'EOF' && ok || bad "data reorder changed the statistics"
import json, math, sys
a, *others = (json.load(open(f)) for f in sys.argv[1:])
for b in others:
    for k, v in a.items():
        if k in ("source", "path", "file"):
            continue
        assert (math.isclose(v, b[k], rel_tol=1e-12) if isinstance(v, float) else v == b[k]), (k, v, b[k])
EOF
expect_error "--method rcm: unknown" "$adgnn" data reorder "$tmp/demo.h5" -o "$tmp/x.h5" --method rcm
expect_error "--block 0: must be >= 1" "$adgnn" data reorder "$tmp/demo.h5" -o "$tmp/x.h5" --block 0
expect_error "--out" "$adgnn" data reorder "$tmp/demo.h5" -o "$tmp/no/such/dir/x.h5"
ls "$tmp" | grep -q '\.tmp\.' && bad "temporary file left behind" || ok
# A failed write leaves an existing output untouched.
cp "$tmp/demo.h5" "$tmp/keep.h5"
expect_error "homophily" "$adgnn" data generate --preset demo --homophily -1 -o "$tmp/keep.h5"
cmp -s "$tmp/demo.h5" "$tmp/keep.h5" && ok || bad "failed run changed an existing output"

# Training: help, bad flags and configs, a short run.
expect_ok "$adgnn" train --help
expect_ok "$adgnn" sweep --help
expect_error "--model gin" "$adgnn" train csbm:demo --model gin --epochs 1
expect_error "--variant" "$adgnn" train csbm:demo --variant deep --epochs 1
expect_error "--epochs 0" "$adgnn" train csbm:demo --epochs 0
expect_error "--resume" "$adgnn" train csbm:demo --resume --epochs 1
printf 'model: gcn\nhiden: 3\n' >"$tmp/bad.yaml"
expect_error "unknown key 'hiden'" "$adgnn" train --config "$tmp/bad.yaml" --dataset csbm:demo
expect_error "--splits geom-gcn" "$adgnn" train csbm:demo --splits geom-gcn --epochs 1
expect_error "--compact sometimes" "$adgnn" train csbm:demo --variant ad_fast --compact sometimes --epochs 1
expect_error "--compact-halo sometimes" "$adgnn" train csbm:demo --variant ad_fast --compact-halo sometimes --epochs 1
expect_error "--fdelta-precision fp16: expected fp32, tf32 or bf16" "$adgnn" train csbm:demo --variant ad --fdelta-precision fp16 --epochs 1
# bf16 (like tf32) is f_delta's precision on the GPU; on the CPU the learned variant runs in float32,
# and train says so on stderr (one line), keeping stdout's table.
expect_ok "$adgnn" train csbm:demo --variant ad --fdelta-precision bf16 --epochs 2 --no-progress
grep -qF "warning: --fdelta-precision bf16: CUDA only; f_delta computes in float32 on cpu" "$tmp/err" &&
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^AD-GCN " "$tmp/out" && ok ||
  bad "train --fdelta-precision bf16 on the CPU: no one-line warning: $(cat "$tmp/err")"
expect_ok "$adgnn" train csbm:demo --variant ad_fast --fdelta-precision bf16 --epochs 2 --no-progress
[ ! -s "$tmp/err" ] && ok || bad "train without the learned variant warned about f_delta: $(cat "$tmp/err")"
# --precision bf16 (features, layer outputs, halo rows in bfloat16) runs on every device: the run's
# summary's settings name it, the checkpoint's model predicts in either precision, bad values are refused.
expect_error "--precision fp16: expected fp32 or bf16" "$adgnn" train csbm:demo --precision fp16 --epochs 1
expect_ok "$adgnn" train csbm:demo --variant ad_fast --precision bf16 --epochs 3 --no-progress --checkpoint "$tmp/bf16.h5" \
  --summary "$tmp/bf16.json"
grep -q " precision=bf16" "$tmp/bf16.json" && ok || bad "train --precision bf16: not in the summary's settings: $(cat "$tmp/bf16.json")"
expect_ok "$adgnn" predict csbm:demo --checkpoint "$tmp/bf16.h5" --out "$tmp/bf16_pred.h5"
expect_ok "$adgnn" predict csbm:demo --checkpoint "$tmp/bf16.h5" --out "$tmp/fp32_pred.h5" --precision fp32
expect_error "--precision fp16: expected fp32 or bf16" "$adgnn" predict csbm:demo --checkpoint "$tmp/bf16.h5" \
  --out "$tmp/x.h5" --precision fp16
printf 'variant: ad_fast\ncompact: off\ncompact_halo: off\nepochs: 2\n' >"$tmp/compact.yaml"
expect_ok "$adgnn" train --config "$tmp/compact.yaml" --dataset csbm:demo --no-progress
expect_ok "$adgnn" train csbm:demo --model gcn --variant plain,ad_fast --epochs 3 --no-progress
grep -q "AD-GCN_fast" "$tmp/out" && ok || bad "train output lacks AD-GCN_fast"
# Concurrent runs: the same summary as one after the other (one thread each).
expect_error "--run-workers 0" "$adgnn" train csbm:demo --run-workers 0 --epochs 1
expect_ok "$adgnn" train csbm:demo --variant ad_fast --epochs 3 --runs 3 --threads 1 --json --no-progress
mv "$tmp/out" "$tmp/seq.json"
expect_ok "$adgnn" train csbm:demo --variant ad_fast --epochs 3 --runs 3 --run-workers 3 --json --no-progress \
  --summary "$tmp/summary.json"
cmp -s "$tmp/out" "$tmp/summary.json" && ok || bad "--summary's file differs from what --json printed"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))[0]; assert (s["backbone"], s["variant"], s["layers"]) == ("gcn", "ad_fast", 2), s' \
  "$tmp/summary.json" && ok || bad "--summary lacks backbone/variant/layers"
python3 - "$tmp/seq.json" "$tmp/out" <<'EOF' && ok || bad "--run-workers 3 changed the runs"
import json, sys
a, b = (json.load(open(f))[0] for f in sys.argv[1:])
key = lambda s: [(r["run"], r["best_epoch"], r["best_val"]) for r in s["runs"]]
assert len(a["runs"]) == 3 and key(a) == key(b) and a["test_mean"] == b["test_mean"], (key(a), key(b))
EOF
expect_error "--summary $tmp/no/such/s.json: folder" "$adgnn" train csbm:demo --epochs 1 --summary "$tmp/no/such/s.json"

# Step profile: a Markdown summary with the trainer's and the model's scopes, and a Chrome trace.
expect_ok "$adgnn" train csbm:demo --variant ad_fast --layers 3 --epochs 4 --profile "$tmp/prof" --profile-steps 2 --no-progress
grep -q "epochs 3-4" "$tmp/prof/gcn-ad_fast-rank0.md" && grep -q "Profiled steps: 2\." "$tmp/prof/gcn-ad_fast-rank0.md" && ok || bad "profile summary lacks its steps"
for scope in forward backward optimizer "layer 2" "depth benefit" "aten::mm"; do
  grep -q "| $scope |" "$tmp/prof/gcn-ad_fast-rank0.md" && ok || bad "profile summary lacks '$scope'"
done
python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert t["traceEvents"]' "$tmp/prof/gcn-ad_fast-rank0.trace.json" \
  && ok || bad "profile trace is not a Chrome trace"
ls "$tmp/prof" | grep -q '\.tmp' && bad "temporary file left in the profile folder" || ok
expect_error "--profile-steps 0" "$adgnn" train csbm:demo --epochs 2 --profile "$tmp/prof" --profile-steps 0
expect_error "--profile" "$adgnn" train csbm:demo --epochs 2 --runs 2 --run-workers 2 --profile "$tmp/prof"
: >"$tmp/afile"
expect_error "--profile $tmp/afile/p" "$adgnn" train csbm:demo --epochs 2 --profile "$tmp/afile/p"

# Partitioning: a folder with a manifest and one file per part; bad flags exit 2 with one line.
expect_ok "$adgnn" partition --help
expect_ok "$adgnn" partition csbm:demo --parts 2 --out "$tmp/parts"
grep -q "edge cut" "$tmp/out" && ok || bad "partition output lacks the edge cut"
[ -f "$tmp/parts/manifest.json" ] && [ -f "$tmp/parts/part-0.h5" ] && [ -f "$tmp/parts/part-1.h5" ] \
  && ok || bad "partition folder incomplete: $(ls "$tmp/parts")"
expect_ok "$adgnn" partition csbm:demo --parts 3 --partition stratified --strata 3 --balance-train \
  --seed 2 --out "$tmp/parts3" --json
grep -q '"halo_rows"' "$tmp/out" && grep -q '"train"' "$tmp/out" && ok || bad "partition --json lacks halo_rows / train balance"
ls "$tmp/parts3" | grep -q '\.tmp\.' && bad "temporary file left in the partition folder" || ok
expect_error "--parts 0" "$adgnn" partition csbm:demo --parts 0 --out "$tmp/p0"
expect_error "--parts 5000" "$adgnn" partition csbm:demo --parts 5000 --out "$tmp/p0"
expect_error "--partition" "$adgnn" partition csbm:demo --parts 2 --partition spectral --out "$tmp/p0"
expect_error "--objective" "$adgnn" partition csbm:demo --parts 2 --objective ratio --out "$tmp/p0"
expect_error "--imbalance 1: must be in (1, 2]" "$adgnn" partition csbm:demo --parts 2 --imbalance 1 --out "$tmp/p0"
expect_error "--imbalance: METIS's tolerance" "$adgnn" partition csbm:demo --parts 2 --partition random \
  --imbalance 1.01 --out "$tmp/p0"
expect_error "--strata 0" "$adgnn" partition csbm:demo --parts 2 --partition stratified --strata 0 --out "$tmp/p0"
expect_error "--strata-spacing" "$adgnn" partition csbm:demo --parts 2 --strata-spacing cubic --out "$tmp/p0"
expect_error "--strata 6" "$adgnn" partition csbm:demo --parts 2 --partition stratified --strata 6 --strata-spacing log --out "$tmp/p0"
expect_error "--splits nosuch" "$adgnn" partition csbm:demo --parts 2 --splits nosuch --out "$tmp/p0"
expect_error "--out" "$adgnn" partition csbm:demo --parts 2 --out "$tmp/no/such/dir/p"
expect_error "--out" "$adgnn" partition csbm:demo --parts 2
expect_error "--out $tmp/demo.h5: exists and is not a folder" "$adgnn" partition csbm:demo --parts 2 --out "$tmp/demo.h5"
expect_error "--dataset" "$adgnn" partition --parts 2 --out "$tmp/p0"
[ -e "$tmp/p0" ] && bad "a failed partition run created its output folder" || ok

# bench: every model x depth gets a row with its per-layer edges; JSON written; bad flags refused.
expect_ok "$adgnn" bench --dataset csbm:demo --device cpu --depths 1,3 --steps 2 --warmup 1 --hidden 16 \
  --breakdown --kernels --json "$tmp/bench.json"
[ "$(grep -c '^| \(GCN\|AD-GCN_fast\|AD-GCN\) | [13] |' "$tmp/out")" -eq 6 ] && ok || bad "bench table lacks rows: $(cat "$tmp/out")"
grep -q "SpMM backward" "$tmp/out" && grep -q "| dropout, input \[" "$tmp/out" && ok || bad "bench --kernels lacks the kernel table"
python3 - "$tmp/bench.json" <<'PY' && ok || bad "bench JSON incomplete"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert len(rows) == 6, rows
for r in rows:
    assert len(r["edges_per_layer"]) == r["depth"] and len(r["step_ms"]) == 2
    assert r["step_ms_median"] > 0 and 0 <= min(r["active_edge_fraction"]) <= max(r["active_edge_fraction"]) <= 1
    assert r["edges_per_layer"][0] == d["graph"]["edges"]  # layer 1 aggregates every row
    if r["variant"] == "plain":
        assert r["active_edge_fraction"] == [1.0] * r["depth"]
assert d["kernels"]["copy_bandwidth_GBps"] > 0 and len(d["kernels"]["gcn_step_floors"]) == 2
for k in ("dropout_input", "dropout_5pct_rows", "dropout_5pct_rows_gradient"):
    assert d["kernels"][k + "_ms"] > 0 and d["kernels"][k + "_bytes"] > 0, k
PY
# Without --breakdown: the host's issue time per step, a column and in the JSON.
expect_ok "$adgnn" bench --dataset csbm:demo --device cpu --depths 2 --variants ad --steps 2 --warmup 1 --hidden 16 \
  --json "$tmp/bench_host.json"
grep -q "| host ms |" "$tmp/out" && python3 - "$tmp/bench_host.json" <<'PY' && ok || bad "bench lacks the host issue times"
import json, sys
(r,) = json.load(open(sys.argv[1]))["rows"]
h = r["host_issue_ms"]
assert 0 < h["forward"] <= h["step"] and 0 < h["backward"] <= h["step"] <= max(r["step_ms"]) * 1.01, h
PY
expect_error "--depths" "$adgnn" bench --dataset csbm:demo --device cpu --depths 0
expect_error "--variants" "$adgnn" bench --dataset csbm:demo --device cpu --variants fancy
expect_error "--steps" "$adgnn" bench --dataset csbm:demo --device cpu --steps 0
# A bf16 or tf32 row would be mislabelled off CUDA: refused.
expect_error "--fdelta-precision bf16: CUDA only (this bench runs on cpu)" "$adgnn" bench --dataset csbm:demo \
  --device cpu --variants plain,ad --fdelta-precision fp32,bf16 --steps 2
# One row per --precision entry, labelled and recorded.
expect_ok "$adgnn" bench --dataset csbm:demo --device cpu --variants plain,ad_fast --depths 2 --precision fp32,bf16 \
  --steps 2 --warmup 1 --json "$tmp/bench_bf16.json"
grep -q "^| GCN bf16 | 2 |" "$tmp/out" && grep -q "^| AD-GCN_fast bf16 | 2 |" "$tmp/out" && grep -q "^| GCN | 2 |" "$tmp/out" && ok ||
  bad "bench --precision fp32,bf16: rows missing: $(cat "$tmp/out")"
python3 - "$tmp/bench_bf16.json" <<'PY' && ok || bad "bench --precision: JSON rows"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert sorted((r["model"], r["precision"]) for r in rows) == [
    ("AD-GCN_fast", "fp32"), ("AD-GCN_fast bf16", "bf16"), ("GCN", "fp32"), ("GCN bf16", "bf16")], rows
PY
expect_error "--precision: fp16 is not one of fp32, bf16" "$adgnn" bench --dataset csbm:demo --device cpu --precision fp16

if [ -n "$data" ] && [ -d "$data" ]; then
  expect_ok "$adgnn" data stats --dataset texas --data-dir "$data"
  grep -q "183" "$tmp/out" && ok || bad "texas stats lack 183 nodes"
  expect_ok env ADGNN_DATA="$data" "$adgnn" data convert chameleon -o "$tmp/ch.h5"
  expect_error "--dataset nosuch" "$adgnn" data stats nosuch --data-dir "$data"
  expect_ok "$adgnn" train texas --data-dir "$data" --splits geom-gcn --epochs 5 --no-progress --json
  grep -q '"test_mean"' "$tmp/out" && ok || bad "train --json lacks test_mean"
else
  echo "SKIP: shared data absent, dataset CLI checks skipped"
fi

finish
