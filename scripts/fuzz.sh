#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS (default 60)
# from a seed corpus of real files (../shared/data when present). Not part of CI.
#   bash scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
torch_prefix=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DADGNN_FUZZ=ON -DADGNN_TESTS=OFF -DCMAKE_PREFIX_PATH="$torch_prefix" >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_npy fuzz_npz fuzz_gzip fuzz_edge_list \
  fuzz_geomgcn_nodes fuzz_h5graph
data=${ADGNN_DATA:-../shared/data}
corpus=build-fuzz/corpus
mkdir -p "$corpus"/{npy,npz,gzip,edge_list,geomgcn_nodes,h5graph}
if [ -d "$data" ]; then
  cp "$data"/cornell/*.npz "$data"/chameleon/*.npz "$corpus/npz/" 2>/dev/null || true
  head -c 3000 "$data"/texas/out1_graph_edges.txt >"$corpus/edge_list/texas.txt"
  head -c 20000 "$data"/film/out1_node_feature_label.txt >"$corpus/geomgcn_nodes/film.txt"
  head -c 20000 "$data"/texas/out1_node_feature_label.txt >"$corpus/geomgcn_nodes/texas.txt"
  gzip -c "$data"/texas/out1_graph_edges.txt >"$corpus/gzip/texas.gz"
fi
build/adgnn data generate --nodes 50 --classes 2 --features 3 --avg-degree 2 -o "$corpus/h5graph/small.h5" 2>/dev/null || true
printf '| target | seconds | runs | result |\n|---|---:|---:|---|\n'
for t in npy npz gzip edge_list geomgcn_nodes h5graph; do
  log=build-fuzz/fuzz_$t.log
  if ASAN_OPTIONS=detect_leaks=0 build-fuzz/fuzz/fuzz_$t -max_total_time="$secs" -rss_limit_mb=4096 \
      -max_len=65536 "$corpus/$t" >"$log" 2>&1; then result=ok; else result="CRASH (see $log)"; fi
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}' || true)
  [ -n "$runs" ] || runs=$(grep -oE '#[0-9]+' "$log" | tail -1 | tr -d '#')
  printf '| fuzz_%s | %s | %s | %s |\n' "$t" "$secs" "${runs:-?}" "$result"
done
