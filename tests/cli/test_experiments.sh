#!/usr/bin/env bash
# scripts/experiments.py end to end in --tiny mode (3 epochs, 1 run): every subcommand into a
# temporary folder; its Markdown, CSV, gnuplot script, PNG and raw JSON exist and parse, a rerun
# skips the finished runs, and a bad --heuristic is one clear error line.
# Usage: test_experiments.sh <adgnn binary> [shared data dir] [python with numpy and h5py]
set -u
adgnn=$1
data=${2:-}
py=${3:-}
[ -n "$py" ] || py=python3
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

cd "$root" || exit 1
have_data=0
if [ -n "$data" ] && [ -d "$data/texas" ] && [ -d "$data/wisconsin" ]; then
  have_data=1
  export ADGNN_DATA=$data
else
  echo "note: no datasets at '${data}' (../shared/data): exp1, exp3, exp4 and appendix are skipped"
fi

# check <experiment>: outputs exist and parse (CSV with a header and a data row, raw JSON summaries).
check() {
  local e=$1 out=$tmp/out
  [ -s "$out/$e.md" ] && ok || bad "$e: no $e.md"
  [ -s "$out/$e.gp" ] && ok || bad "$e: no $e.gp"
  if command -v gnuplot >/dev/null; then
    [ -s "$out/$e.png" ] && head -c 8 "$out/$e.png" | grep -q PNG && ok || bad "$e: no PNG"
  fi
  "$py" - "$out" "$e" <<'EOF' && ok || bad "$e: outputs do not parse"
import csv, glob, json, os, sys
out, e = sys.argv[1], sys.argv[2]
rows = list(csv.reader(open(os.path.join(out, e + ".csv"))))
assert len(rows) >= 2, f"{e}.csv has no data row"
assert all(len(r) == len(rows[0]) for r in rows), f"{e}.csv: ragged rows"
files = glob.glob(os.path.join(out, "raw", e, "**", "*.json"), recursive=True)
summaries = [f for f in files if not f.endswith(("meta.json", "_scores.json", "_per_degree.json"))]
assert summaries, "no raw summaries"
for f in files:
    json.load(open(f))
for f in summaries:
    s = json.load(open(f))
    assert isinstance(s, list) and s and 0 <= s[0]["test_mean"] <= 1, f
if e == "appendix":
    assert glob.glob(os.path.join(out, "raw", e, "embeddings", "*_scores.json")), "no embedding scores"
    assert glob.glob(os.path.join(out, "raw", e, "benefit", "*_per_degree.json")), "no per-degree benefit"
    assert not glob.glob(os.path.join(out, "raw", e, "**", "*.h5"), recursive=True), "HDF5 left behind"
text = open(os.path.join(out, e + ".md")).read()
assert "--tiny run" in text, "the tiny note is missing"
EOF
}

run() {
  "$py" scripts/experiments.py "$@" --tiny --bin "$adgnn" --out "$tmp/out" --slots 2 >"$tmp/log" 2>&1 ||
    { bad "experiments.py $* -> exit $?: $(tail -5 "$tmp/log")"; return 1; }
}

exps="exp2 exp5"
[ $have_data -eq 1 ] && exps="exp1 exp2 exp3 exp4 exp5"
if [ $have_data -eq 1 ]; then
  if "$py" -c 'import numpy, h5py' 2>/dev/null; then
    exps="$exps appendix"
  else
    echo "note: $py lacks numpy/h5py (pass the venv's python): appendix skipped"
  fi
fi
for e in $exps; do
  run "$e" && check "$e"
done

# A rerun starts nothing (every run finished) and rewrites the report.
if run exp2; then
  grep -q "0 to run" "$tmp/log" && ok || bad "exp2 rerun started runs again: $(head -3 "$tmp/log")"
fi

# Asking for more runs than a finished summary has makes it unfinished again; --dry-run lists
# those runs, starts none and adds no machine line to meta.json.
cp "$tmp/out/raw/exp2/meta.json" "$tmp/meta_before.json"
if "$py" scripts/experiments.py exp2 --tiny --runs 2 --dry-run --bin "$adgnn" --out "$tmp/out" >"$tmp/log" 2>&1; then
  grep -q "to run: exp2 gcn" "$tmp/log" && ok ||
    bad "--runs 2 after 1-run summaries: not listed as to run: $(head -3 "$tmp/log")"
  cmp -s "$tmp/meta_before.json" "$tmp/out/raw/exp2/meta.json" && ok || bad "--dry-run wrote a machine line"
  ls "$tmp/out/raw/exp2" | grep -q '\.tmp$' && bad "--dry-run started a run" || ok
else
  bad "experiments.py --dry-run -> $(tail -3 "$tmp/log")"
fi

# --run-workers: a setting's runs train concurrently in one adgnn process (the flag reaches it,
# every summary has its two runs).
if "$py" scripts/experiments.py exp2 --tiny --runs 2 --run-workers 2 --bin "$adgnn" --out "$tmp/rw" \
    --slots 2 >"$tmp/log" 2>&1; then
  grep -q -- "'--run-workers' '2'" "$tmp"/rw/raw/exp2/logs/*.log && ok || bad "--run-workers did not reach adgnn"
  "$py" - "$tmp/rw/raw/exp2" <<'EOF' && ok || bad "--run-workers: summaries without their 2 runs"
import glob, json, os, sys
files = [f for f in glob.glob(os.path.join(sys.argv[1], "**", "*.json"), recursive=True)
         if not f.endswith("meta.json")]
assert files and all(len(json.load(open(f))[0]["runs"]) == 2 for f in files), files
EOF
else
  bad "experiments.py exp2 --run-workers 2 -> $(tail -3 "$tmp/log")"
fi

# The heuristic flag: an unknown name is one line on stderr and exit 2.
"$adgnn" train csbm:demo --variant ad_fast --heuristic pagerank --epochs 1 --no-progress >"$tmp/o" 2>"$tmp/e"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -q -- "--heuristic pagerank: unknown" "$tmp/e" && ok ||
  bad "--heuristic pagerank -> exit $rc: $(cat "$tmp/e")"

echo "experiments: $pass passed, $fail failed"
[ $fail -eq 0 ]
