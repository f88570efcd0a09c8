#!/usr/bin/env bash
# Data and build benchmarks; prints Markdown tables (docs/performance.md records a run).
#   ADGNN_DATA=../shared/data bash scripts/bench_data.sh [load] [gen] [build]   (default: all three)
#   load   build/adgnn data bench over every dataset found: upstream load vs HDF5 write/load,
#          median of 5
#   gen    the arxiv-scale and products-scale presets: wall time and peak RSS of
#          `adgnn data generate` (/usr/bin/time -v), file size, HDF5 load (median of 3)
#   build  a clean build of HEAD (git archive, so edits in progress do not count) with the CMake
#          flags of scripts/setup.sh, without ccache, `cmake --build -j2`; runs last
# Needs build/adgnn (scripts/setup.sh). Scratch files go to $BENCH_DIR (default /tmp/adgnn-bench,
# about 5 GB for products-scale); the clean build to $CLEAN_BUILD_DIR (default /tmp/adgnn-cleanbuild).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
adgnn=$root/build/adgnn
export ADGNN_DATA=${ADGNN_DATA:-$root/../shared/data}
work=${BENCH_DIR:-/tmp/adgnn-bench}
clean=${CLEAN_BUILD_DIR:-/tmp/adgnn-cleanbuild}
sections=${*:-load gen build}
[ -x "$adgnn" ] || { echo "bench_data.sh: $adgnn missing: run scripts/setup.sh first" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench_data.sh: /usr/bin/time missing: apt-get install time" >&2; exit 1; }
mkdir -p "$work"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

for s in $sections; do
  case $s in
  load)
    echo "### Data loading (median of 5; \$ADGNN_DATA=$ADGNN_DATA)"
    echo
    "$adgnn" data bench --repeat 5
    echo
    ;;
  gen)
    echo "### Synthetic graph generation (adgnn data generate --preset P, all cores)"
    echo
    echo "| preset | nodes | undirected edges | generate (s) | write (s) | wall (s) | peak RSS (GiB) | file (MiB) | HDF5 load (ms, median of 3) |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for p in arxiv-scale products-scale; do
      h5=$work/$p.h5
      rm -f "$h5"
      /usr/bin/time -v "$adgnn" data generate --preset "$p" -o "$h5" >"$work/$p.gen.log" 2>&1 ||
        { cat "$work/$p.gen.log" >&2; exit 1; }
      # spdlog line: "generated P: N nodes, E undirected edges in G s; wrote F in W s; peak ..."
      line=$(grep -m1 'generated ' "$work/$p.gen.log")
      nodes=$(sed -E 's/.*: ([0-9]+) nodes.*/\1/' <<<"$line")
      edges=$(sed -E 's/.* ([0-9]+) undirected edges.*/\1/' <<<"$line")
      t_gen=$(sed -E 's/.*undirected edges in ([0-9.]+) s.*/\1/' <<<"$line")
      t_write=$(sed -E 's/.*wrote .* in ([0-9.]+) s.*/\1/' <<<"$line")
      wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, a, ":"); s = 0;
        for (i = 1; i <= n; i++) s = s * 60 + a[i]; printf "%.1f", s }' "$work/$p.gen.log")
      rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.2f", $2 / 1048576 }' "$work/$p.gen.log")
      mib=$(stat -c %s "$h5" | awk '{ printf "%.0f", $1 / 1048576 }')
      # `data bench` on an .h5 file: its "upstream load" column is read_graph_h5 of that file.
      load=$("$adgnn" data bench "$h5" --repeat 3 | awk -F'|' 'NR == 3 { gsub(/ /, "", $5); print $5 }')
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$p" "$nodes" "$edges" "$t_gen" \
        "$t_write" "$wall" "$rss" "$mib" "$load"
      if [ "$p" = products-scale ]; then
        ok_t=$(awk -v w="$wall" 'BEGIN { print (w < 120) ? "met" : "NOT met" }')
        ok_m=$(awk -v r="$rss" 'BEGIN { print (r < 8) ? "met" : "NOT met" }')
        gen_note="products-scale targets: wall < 120 s: $ok_t ($wall s); peak RSS < 8 GiB: $ok_m ($rss GiB)"
      fi
      rm -f "$h5"
    done
    echo
    echo "${gen_note:-}"
    echo
    ;;
  build)
    commit=$(git rev-parse --short HEAD)
    torch_prefix=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
    rm -rf "$clean"
    mkdir -p "$clean/src"
    git archive HEAD | tar -x -C "$clean/src"
    t0=$(now)
    # scripts/setup.sh's flags, with the ccache launcher emptied.
    cmake -S "$clean/src" -B "$clean/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$torch_prefix" -DADGNN_PYTHON="$root/.venv/bin/python" \
      -DCMAKE_CXX_COMPILER_LAUNCHER= -DADGNN_MPIEXEC_EXTRA="--allow-run-as-root;--oversubscribe" \
      >"$clean/configure.log" 2>&1 || { cat "$clean/configure.log" >&2; exit 1; }
    t1=$(now)
    cmake --build "$clean/build" -j2 >"$clean/build.log" 2>&1 || { tail -30 "$clean/build.log" >&2; exit 1; }
    t2=$(now)
    steps=$(grep -cE '^\[[0-9]+/[0-9]+\]' "$clean/build.log" || true)
    echo "### Clean build (commit $commit, Release, no ccache, -j2)"
    echo
    echo "| step | time (s) |"
    echo "|---|---:|"
    echo "| configure (cmake -G Ninja) | $(secs "$t0" "$t1") |"
    echo "| build, $steps ninja steps (cmake --build -j2) | $(secs "$t1" "$t2") |"
    echo
    ;;
  *) echo "bench_data.sh: unknown section $s (load, gen, build)" >&2; exit 2 ;;
  esac
done
