#!/usr/bin/env bash
# `adgnn bench --max-graph` on the CPU: the search's answer fits and the next size does not, under
# a --memory-limit (peak resident memory) and under an address-space limit that makes the probes
# run out of memory (exit 3: a probe that does not fit, not a failed search); bounded by
# --max-nodes; stopped by SIGTERM, it leaves neither a probe nor a file; bad flags refused.
# Usage: test_bench_max_graph.sh <adgnn binary>
set -u
adgnn=$1
# shellcheck source=harness.sh
source "$(dirname "$0")/harness.sh"
probe=(bench --dataset csbm:demo --device cpu --backbones gcn --variants plain --depths 2 --hidden 16)

# check_search <json> <limit bytes or 0> <resolution> <result of a failing probe>: the JSON's search
# is consistent: probes double from the preset's size until one fails, then bisect; every fitting
# probe trains within the limit, every failing one ends with the given result; the answer is the
# largest fitting probe and the smallest failing one is within the resolution above it.
check_search() {
  python3 - "$@" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
limit, res, why = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
s = doc["searches"][0]
probes = s["probes"]
fit = [p for p in probes if p["fits"]]
fail = [p for p in probes if not p["fits"]]
assert fit and fail, probes
assert all(p["result"] == "trains" and p["step_ms"] > 0 for p in fit), fit
assert all(p["result"] == why for p in fail), fail
if limit:
    assert all(0 < p["peak_bytes"] <= limit for p in fit), fit
    assert all(p["peak_bytes"] > limit for p in fail), fail
first_fail = next(i for i, p in enumerate(probes) if not p["fits"])
assert all(probes[i + 1]["nodes"] == 2 * probes[i]["nodes"] for i in range(first_fail)), probes
assert s["precision"] == "fp32" and s["model"] == "GCN", s
assert s["largest_nodes"] == max(p["nodes"] for p in fit)
assert s["smallest_failing_nodes"] == min(p["nodes"] for p in fail)
assert s["largest_nodes"] < s["smallest_failing_nodes"] <= s["largest_nodes"] * (1 + res), s
best = next(p for p in fit if p["nodes"] == s["largest_nodes"])
assert s["largest_undirected_edges"] == best["undirected_edges"] == round(best["nodes"] * doc["shape"]["average_degree"] / 2), s
print(f"largest {s['largest_nodes']} nodes, first failing {s['smallest_failing_nodes']}, {len(probes)} probes")
PY
}

# Within a memory limit: the resident peak of each probe decides. The probes' JSON files go to
# $TMPDIR and are gone afterwards.
mkdir -p "$tmp/probes"
run limit env TMPDIR="$tmp/probes" "$adgnn" "${probe[@]}" --max-graph --memory-limit 400MiB --resolution 0.2 \
  --json "$tmp/limit.search.json"
[ -z "$(ls -A "$tmp/probes")" ] && ok || bad "probe files left in \$TMPDIR: $(ls "$tmp/probes")"
check_search "$tmp/limit.search.json" $((400 << 20)) 0.2 "over --memory-limit" && ok || bad "search under --memory-limit 400MiB"
grep -q "^GCN depth 2: the largest graph that trains has [0-9]* nodes" "$tmp/limit.json" && ok ||
  bad "the search's summary line is missing: $(tail -3 "$tmp/limit.json")"

# --max-nodes: the doubling stops there; a graph of that size that fits is the answer.
run cap "$adgnn" "${probe[@]}" --max-graph --memory-limit 400MiB --max-nodes 5000 --json "$tmp/cap.search.json"
python3 - "$tmp/cap.search.json" <<'PY' && ok || bad "--max-nodes 5000: $(cat "$tmp/cap.search.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
s = doc["searches"][0]
assert doc["max_nodes"] == 5000, doc
assert all(p["nodes"] <= 5000 and p["fits"] for p in s["probes"]), s
assert s["probes"][-1]["nodes"] == s["largest_nodes"] == 5000 and s["smallest_failing_nodes"] == 0, s
PY
grep -q "5000 nodes .*; --max-nodes is the limit" "$tmp/cap.json" && ok || bad "--max-nodes summary: $(tail -2 "$tmp/cap.json")"

# Stopped by SIGTERM mid-search: its probe is killed with it and no probe file is left behind.
mkdir -p "$tmp/stopped"
TMPDIR="$tmp/stopped" "$adgnn" "${probe[@]}" --max-graph --memory-limit 100GiB >/dev/null 2>&1 &
searcher=$!
for _ in $(seq 300); do [ -n "$(ls -A "$tmp/stopped")" ] && break; sleep 0.1; done
probe_file=$(ls "$tmp/stopped")
[ -n "$probe_file" ] && ok || bad "no probe file appeared in \$TMPDIR"
sleep 0.5
kill -TERM $searcher
wait $searcher
rc=$?
sleep 0.5
[ $rc -eq 143 ] && ok || bad "the stopped search exited $rc (want 143: SIGTERM)"
[ -z "$(ls -A "$tmp/stopped")" ] && ok || bad "the stopped search left $(ls "$tmp/stopped")"
if [ -n "$probe_file" ] && pgrep -f -- "$tmp/stopped/$probe_file" >/dev/null; then
  bad "the stopped search's probe still runs"
else ok; fi

# Out of memory: an address-space limit below the host's memory makes large probes fail to
# allocate; they exit 3 and the search goes on.
run oom bash -c "ulimit -v 2000000; exec \"$adgnn\" ${probe[*]} --features 512 --max-graph --memory-limit 100GiB \
  --resolution 0.25 --json $tmp/oom.search.json"
check_search "$tmp/oom.search.json" 0 0.25 "out of memory" && ok || bad "search that runs out of memory"
# The probe's own failure: one line, exit 3.
bash -c "ulimit -v 2000000; exec \"$adgnn\" ${probe[*]} --features 512 --nodes 2000000 --steps 1 --warmup 0" \
  >"$tmp/one.out" 2>"$tmp/one.err"
rc=$?
[ $rc -eq 3 ] && [ "$(wc -l <"$tmp/one.err")" -eq 1 ] && grep -q "out of memory (host)" "$tmp/one.err" && ok ||
  bad "out of memory: exit $rc, $(cat "$tmp/one.err")"

# A resized generated graph benches like a preset.
run nodes "$adgnn" "${probe[@]}" --nodes 500 --avg-degree 4 --features 24 --steps 1 --warmup 0 --json "$tmp/nodes.bench.json"
python3 -c "import json,sys; g=json.load(open(sys.argv[1]))['graph']; assert (g['nodes'], g['edges'], g['features']) == (500, 2000, 24), g" \
  "$tmp/nodes.bench.json" && ok || bad "--nodes 500 --avg-degree 4 --features 24: $(cat "$tmp/nodes.bench.json")"

expect_error "--memory-limit" "$adgnn" "${probe[@]}" --max-graph
expect_error "$tmp/nosuch/adgnn-probe" env TMPDIR="$tmp/nosuch" "$adgnn" "${probe[@]}" --max-graph --memory-limit 1GiB
expect_error "--memory-limit lots" "$adgnn" "${probe[@]}" --max-graph --memory-limit lots
expect_error "--memory-limit 0GiB" "$adgnn" "${probe[@]}" --max-graph --memory-limit 0GiB
expect_error "--memory-limit: only with --max-graph" "$adgnn" "${probe[@]}" --memory-limit 1GiB
expect_error "--max-nodes: only with --max-graph" "$adgnn" "${probe[@]}" --max-nodes 5000
expect_error "--max-nodes 10: below the smallest probe" "$adgnn" "${probe[@]}" --max-graph --memory-limit 1GiB --max-nodes 10
expect_error "--dataset must be csbm" "$adgnn" bench --dataset cora_ml --device cpu --max-graph --memory-limit 1GiB
expect_error "resize a generated graph only" "$adgnn" bench --dataset cora_ml --device cpu --nodes 100
expect_error "--resolution 1" "$adgnn" "${probe[@]}" --max-graph --memory-limit 1GiB --resolution 1
expect_error "--precision: fp16 is not one of fp32, bf16" "$adgnn" "${probe[@]}" --max-graph --memory-limit 1GiB --precision fp16
# A probe refused as bad input ends the search with its one line.
expect_error "--avg-degree 5000" "$adgnn" "${probe[@]}" --max-graph --memory-limit 1GiB --avg-degree 5000
finish
