#!/usr/bin/env bash
# PNG plots of a scaling_study.sh CSV (gnuplot):
#   cluster/plot_scaling.sh CSV [OUTDIR]
# writes, next to the CSV or into OUTDIR, <name>_epoch_time.png (ms per epoch vs GPUs, log-log),
# <name>_speedup.png (speedup over 1 GPU vs GPUs, with the ideal line) and <name>_halo_bytes.png
# (halo MiB per epoch, active rows vs full halo, per multi-GPU configuration; skipped when the CSV
# has no halo columns filled). One line per layers/model/variant/partition; the 1-GPU row
# (partition none) starts every partition's line.
set -euo pipefail
die() { echo "plot_scaling.sh: $*" >&2; exit 2; }
case ${1:-} in
  -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") die "usage: plot_scaling.sh CSV [OUTDIR]" ;;
esac
csv=$1
command -v gnuplot >/dev/null || {
  echo "plot_scaling.sh: gnuplot not found: install it (Debian/Ubuntu: apt-get install -y gnuplot-nox; on a cluster: module load gnuplot)" >&2
  exit 1
}
[ -f "$csv" ] || die "$csv: no such file"
header="gpus,layers,model,variant,partition,ms_per_epoch,speedup_vs_1,halo_bytes_active,halo_bytes_full,peak_mem_gib,test_score"
[ "$(head -n1 "$csv")" = "$header" ] || die "$csv: header is not $header"
name=$(basename "$csv" .csv)
outdir=${2:-$(dirname "$csv")}
mkdir -p "$outdir" || die "$outdir: cannot create"
terminal="pngcairo size 1100,700 font ',11'"
if ! gnuplot -e "set terminal pngcairo" >/dev/null 2>&1; then
  terminal="png size 1100,700"
  gnuplot -e "set terminal png" >/dev/null 2>&1 || { echo "plot_scaling.sh: this gnuplot has no PNG terminal (pngcairo or png)" >&2; exit 1; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Series files: $tmp/s<N>.dat ("gpus ms speedup", sorted by gpus, ? = missing) and $tmp/series
# ("N<TAB>title"); $tmp/halo.dat ("label active_MiB full_MiB") for multi-GPU rows with both.
awk -F, -v dir="$tmp" '
  NR == 1 { next }
  NF != 11 { printf "plot_scaling.sh: %s line %d: %d fields, want 11\n", FILENAME, NR, NF > "/dev/stderr"; bad = 1; exit 2 }
  {
    lmv = $2 SUBSEP $3 SUBSEP $4
    point = $1 " " ($6 == "" ? "?" : $6) " " ($7 == "" ? "?" : $7)
    if ($1 == 1 && $5 == "none") { base[lmv] = point; next }
    key = lmv SUBSEP $5
    if (!(key in id)) { id[key] = ++n; title[n] = sprintf("L%s %s %s %s", $2, $3, $4, $5); group[n] = lmv }
    print point > (dir "/s" id[key] ".raw")
    if ($1 > 1 && $8 != "" && $9 != "")
      printf "\"G%s L%s %s %s %s\" %.6f %.6f\n", $1, $2, $3, $4, $5, $8 / 1048576, $9 / 1048576 > (dir "/halo.dat")
  }
  END {
    if (bad) exit 2
    for (i = 1; i <= n; ++i) {
      if (group[i] in base) print base[group[i]] > (dir "/s" i ".raw")
      used[group[i]] = 1
    }
    for (lmv in base) if (!(lmv in used)) {  # a 1-GPU row with no multi-GPU rows beside it
      split(lmv, p, SUBSEP)
      ++n; title[n] = sprintf("L%s %s %s", p[1], p[2], p[3])
      print base[lmv] > (dir "/s" n ".raw")
    }
    for (i = 1; i <= n; ++i) printf "%d\t%s\n", i, title[i] > (dir "/series")
  }' "$csv"
[ -s "$tmp/series" ] || die "$csv: no rows"
plot_ms="" plot_speedup=""
while IFS=$'\t' read -r i title; do
  sort -n -k1,1 "$tmp/s$i.raw" >"$tmp/s$i.dat"
  plot_ms+="'$tmp/s$i.dat' using 1:2 with linespoints lw 2 pt 7 title '$title', "
  plot_speedup+="'$tmp/s$i.dat' using 1:3 with linespoints lw 2 pt 7 title '$title', "
done <"$tmp/series"
max_gpus=$(awk -F, 'NR > 1 && $1 > m { m = $1 } END { print m }' "$csv")
xmax=$(awk -v m="$max_gpus" 'BEGIN { x = 1; while (x < m) x *= 2; print (x > 1 ? x : 2) }')

{
  echo "set terminal $terminal"
  echo "set termoption noenhanced"  # ad_fast, not ad with a subscript f
  echo "set datafile missing '?'"
  echo "set key outside right top"
  echo "set grid"
  echo "set logscale x 2"
  echo "set xrange [1:$xmax]"
  echo "set xlabel 'GPUs (ranks)'"
  echo "set output '$tmp/${name}_epoch_time.png'"
  echo "set title 'Epoch time ($name)'"
  echo "set logscale y"
  echo "set ylabel 'ms per epoch (log)'"
  echo "plot ${plot_ms%, }"
  echo "set output '$tmp/${name}_speedup.png'"
  echo "set title 'Speedup over 1 GPU ($name)'"
  echo "set logscale y 2"
  echo "set autoscale y"
  echo "set ylabel 'speedup (log2)'"
  echo "plot x with lines dt 2 lc rgb 'gray40' title 'ideal', ${plot_speedup%, }"
} >"$tmp/plot.gp"
if [ -s "$tmp/halo.dat" ]; then
  {
    echo "set output '$tmp/${name}_halo_bytes.png'"
    echo "set title 'Halo exchange per epoch, summed over layers ($name)'"
    echo "unset logscale"
    echo "set autoscale"
    echo "set yrange [0:*]"
    echo "set xlabel ''"
    echo "set ylabel 'MiB per epoch'"
    echo "set style data histogram"
    echo "set style histogram clustered gap 1"
    echo "set style fill solid 0.8 border -1"
    echo "set xtics rotate by -40 left"
    echo "set bmargin 13"
    echo "set grid ytics"
    echo "plot '$tmp/halo.dat' using 2:xtic(1) title 'active rows only', '' using 3 title 'full halo'"
  } >>"$tmp/plot.gp"
else
  echo "plot_scaling.sh: $csv has no halo byte columns filled: no halo plot" >&2
  rm -f "$outdir/${name}_halo_bytes.png"
fi
gnuplot "$tmp/plot.gp" 2>"$tmp/gnuplot.err" || die "gnuplot failed: $(head -n 3 "$tmp/gnuplot.err" | tr '\n' ' ')"
# Written in the scratch folder, then moved: a failed run leaves no half-drawn PNG behind.
for f in "$tmp/${name}"_*.png; do
  cp "$f" "$outdir/.$(basename "$f").tmp.$$" && mv -f "$outdir/.$(basename "$f").tmp.$$" "$outdir/$(basename "$f")"
  echo "$outdir/$(basename "$f")"
done
