#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, the loaders instrumented too) into
# build-fuzz/ and runs each for SECONDS (default 60) from a seed corpus of real files
# (../shared/data or $ADGNN_DATA when present). Not part of CI.
#   bash scripts/fuzz.sh [SECONDS]
#   JOBS=N             build jobs (default: nproc)
#   FUZZ_TARGETS="npy npz"   run only these targets (default: all six)
# Each target runs in libFuzzer's fork mode with crashes, timeouts and OOMs ignored, so one
# finding does not end the run; every finding is saved under build-fuzz/artifacts/<target>/,
# replayed, and listed with the top stack frame and whether it lies in our code or in HDF5.
# Replay one by hand: build-fuzz/fuzz/fuzz_<target> <artifact>
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
jobs=${JOBS:-$(nproc)}
targets=${FUZZ_TARGETS:-npy npz gzip edge_list geomgcn_nodes h5graph}
per_input_timeout=3  # seconds; a slower input is a timeout (inputs are <= 64 KiB)
rss_mb=2048           # memory limit (RSS, and any single malloc) per fuzzing process

# libFuzzer and the sanitizer runtimes ship in libclang-rt-<ver>-dev on Debian, clang's OpenMP
# in libomp-<ver>-dev; without them the link fails late and obscurely, so check first.
die() { printf 'fuzz.sh: %s\n' "$*" >&2; exit 1; }
command -v clang++ >/dev/null || die "clang++ not found: apt-get install clang"
clang_major=$(clang++ -dumpversion | cut -d. -f1)
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe/p.cpp"
clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err" ||
  die "clang++ cannot link -fsanitize=fuzzer,address,undefined (libFuzzer runtime missing):
  apt-get install libclang-rt-$clang_major-dev
$(head -3 "$probe/err")"
printf '#include <omp.h>\nint main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n' >"$probe/o.cpp"
clang++ -fopenmp "$probe/o.cpp" -o "$probe/o" 2>"$probe/err" ||
  die "clang++ -fopenmp does not work (clang's OpenMP runtime missing):
  apt-get install libomp-$clang_major-dev
$(head -3 "$probe/err")"

torch_prefix=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
mkdir -p build-fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DADGNN_FUZZ=ON -DADGNN_TESTS=OFF -DCMAKE_PREFIX_PATH="$torch_prefix" >build-fuzz/configure.log 2>&1 ||
  { cat build-fuzz/configure.log; exit 1; }
# shellcheck disable=SC2046,SC2086
cmake --build build-fuzz -j"$jobs" --target $(printf 'fuzz_%s ' $targets)

# Seed corpus: real files, cut to what -max_len lets libFuzzer mutate anyway.
max_len=65536
data=${ADGNN_DATA:-../shared/data}
corpus=build-fuzz/corpus
mkdir -p "$corpus"/{npy,npz,gzip,edge_list,geomgcn_nodes,h5graph}
if [ -d "$data" ]; then
  for f in "$data"/cornell/cornell_split_0.6_0.2_0.npz "$data"/chameleon/*.npz "$data"/cora_ml/*.npz; do
    [ -f "$f" ] && head -c $max_len "$f" >"$corpus/npz/$(basename "$f")"
  done
  # NPY seeds: the members of a few .npz files (every dtype and order they use).
  python3 - "$corpus/npy" $max_len "$data"/cornell/cornell_split_0.6_0.2_0.npz \
      "$data"/chameleon/*.npz "$data"/cora_ml/*.npz <<'EOF' || true
import os, sys, zipfile
out, max_len = sys.argv[1], int(sys.argv[2])
for path in sys.argv[3:]:
    if not os.path.exists(path):
        continue
    with zipfile.ZipFile(path) as z:
        for m in z.namelist():
            stem = os.path.basename(path).split('.')[0]
            with open(os.path.join(out, f"{stem}-{m}"), "wb") as f:
                f.write(z.read(m)[:max_len])
EOF
  head -c 3000 "$data"/texas/out1_graph_edges.txt >"$corpus/edge_list/texas.txt"
  head -c 3000 "$data"/texas/out1_graph_edges.txt | tail -n +2 | tr '\t' , >"$corpus/edge_list/texas.csv"
  head -c 20000 "$data"/film/out1_node_feature_label.txt >"$corpus/geomgcn_nodes/film.txt"
  head -c 20000 "$data"/texas/out1_node_feature_label.txt >"$corpus/geomgcn_nodes/texas.txt"
  gzip -c "$data"/texas/out1_graph_edges.txt >"$corpus/gzip/texas.gz"
fi
# HDF5 seeds from our writer (build/ is the normal build); small, so whole files fit max_len.
if [ -x build/adgnn ]; then
  build/adgnn data generate --nodes 50 --classes 2 --features 3 --avg-degree 2 \
    -o "$corpus/h5graph/small.h5" >/dev/null 2>&1 || true
  build/adgnn data generate --nodes 40 --classes 3 --features 4 --avg-degree 3 --homophily 0.2 \
    --degree-dist powerlaw -o "$corpus/h5graph/powerlaw.h5" >/dev/null 2>&1 || true
fi

# Stack frames of a replayed finding, without libFuzzer, sanitizer runtimes, libc and allocators.
frames() {
  { grep -E '^ *#[0-9]+ 0x' "$1" || true; } |
    { grep -vE 'in (__sanitizer|__asan|__ubsan|__interceptor|fuzzer::|__libc|abort|raise|malloc|calloc|realloc|operator new|__cxa|LLVMFuzzerTestOneInput)|libc\.so|/compiler-rt/|libclang_rt' || true; } |
    sed -E 's/^ *#[0-9]+ 0x[0-9a-f]+ (in )?//; s/ \(BuildId: [0-9a-f]+\)//; s/\(anonymous namespace\)/{anon}/g' |
    sed -E "s/\([^/]*\)( const)? \//() \//; s#$PWD/##" 
}
# Where a finding lies. A libhdf5 frame inside our innermost frame means HDF5 itself, unless the
# memory ASan names (a stack frame, or the allocation) belongs to our code: then HDF5 wrote past a
# buffer our code sized, which is our bug. Else our loaders' innermost frame.
where_of() {
  local ours inner owner
  ours=$(frames "$1" | { grep -m1 'loaders/src/' || true; })
  inner=$(frames "$1" | sed '/loaders\/src\//,$d')
  sed -n '/is located in stack of thread\|allocated by thread/,/^$/p' "$1" >"$1.owner"
  owner=$(frames "$1.owner" | sed '/loaders\/src\//q')
  rm -f "$1.owner"
  if grep -q 'loaders/src/' <<<"$owner" && ! grep -q libhdf5 <<<"$owner"; then
    echo "our code: buffer of $(tail -1 <<<"$owner"), overrun inside HDF5"
  elif grep -q libhdf5 <<<"$inner"; then echo "HDF5 library (called from ${ours:-?})"
  elif [ -n "$ours" ]; then echo "our code: $ours"
  else frames "$1" | head -1 | grep . || echo "no stack"
  fi
}

# What failed: UBSan's message, else the sanitizer's or libFuzzer's summary kind.
failure_of() {
  local ub sum term
  ub=$({ grep -m1 -oE 'runtime error: .*' "$1" || true; } | cut -c1-120)
  sum=$({ grep -m1 -oE '^SUMMARY: [A-Za-z]+: [A-Za-z-]+' "$1" || true; } | sed 's/^SUMMARY: //')
  term=$({ grep -m1 -oE 'terminate called .*' "$1" || true; } | cut -c1-120)
  if [ -n "$ub" ]; then echo "$ub"
  elif [ -n "$term" ]; then echo "$term"
  elif [ -n "$sum" ]; then echo "$sum"
  else echo "no failure on replay"
  fi
}

summary=build-fuzz/summary.md
findings=build-fuzz/findings.md
printf '| target | seconds | executions | result |\n|---|---:|---:|---|\n' | tee "$summary"
: >"$findings"
for t in $targets; do
  log=build-fuzz/fuzz_$t.log
  art=build-fuzz/artifacts/$t
  rm -rf "$art" build-fuzz/tmp; mkdir -p "$art" build-fuzz/tmp
  rc=0
  TMPDIR=$PWD/build-fuzz/tmp ASAN_OPTIONS=detect_leaks=0 build-fuzz/fuzz/fuzz_"$t" -fork=1 \
    -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$secs" \
    -timeout=$per_input_timeout -rss_limit_mb=$rss_mb -max_len=$max_len \
    -artifact_prefix="$art/" "$corpus/$t" >"$log" 2>&1 || rc=$?
  stats=$({ grep -E '^#[0-9]+: cov:' "$log" || true; } | tail -1)
  runs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$stats")
  # Count the saved inputs (the last stats line can miss a finding in the final job).
  count() { find "$art" -type f -name "$1-*" ! -name '*.log' | wc -l; }
  crashes=$(count crash); timeouts=$(count timeout); ooms=$(count oom)
  [ "$rc" = 0 ] || [ $((crashes + timeouts + ooms)) != 0 ] ||
    echo "fuzz.sh: fuzz_$t exited with $rc and saved nothing; see $log" >&2
  if [ $((crashes + timeouts + ooms)) = 0 ]; then
    result=ok
  else
    result="$crashes crash, $timeouts timeout, $ooms OOM (inputs in $art/)"
  fi
  printf '| fuzz_%s | %s | %s | %s |\n' "$t" "$secs" "${runs:-?}" "$result" | tee -a "$summary"
  # Replay every saved input once and record what fails where.
  for f in $(find "$art" -type f ! -name '*.log' | sort); do
    TMPDIR=$PWD/build-fuzz/tmp UBSAN_OPTIONS=print_stacktrace=1 \
      ASAN_OPTIONS=detect_leaks=0:fast_unwind_on_malloc=0 timeout $((per_input_timeout * 3)) \
      build-fuzz/fuzz/fuzz_"$t" -timeout=$per_input_timeout -rss_limit_mb=$rss_mb \
      -malloc_limit_mb=$rss_mb "$f" >"$f.log" 2>&1 || true
    kind=$(failure_of "$f.log")
    printf '| fuzz_%s | %s | %s | %s |\n' "$t" "$(basename "$f")" "${kind:-no failure on replay}" \
      "$(where_of "$f.log")" >>"$findings"
  done
done
if [ -s "$findings" ]; then
  printf '\n| target | input | failure | where |\n|---|---|---|---|\n'
  cat "$findings"
  printf '\n"HDF5 library": a libhdf5 frame lies between the fault and our innermost frame, and\n'
  printf 'the memory involved is HDF5'"'"'s own (HDF5 1.10 on corrupt files); check the replay log.\n'
  printf 'Logs: build-fuzz/fuzz_<target>.log; replays: <input>.log\n'
fi
rm -rf build-fuzz/tmp
