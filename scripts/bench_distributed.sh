#!/usr/bin/env bash
# Distributed training-step time (median after 5 warm-up epochs, device-synchronised), halo
# traffic per layer (active-only against a full exchange) and peak memory, for GCN and
# AD-GCN_fast over rank counts and depths. Prints a Markdown table.
#
#   bash scripts/bench_distributed.sh GRAPH                   # GRAPH: a name, a path or csbm:<preset>
#   DEVICE=cuda RANKS="1 2" LAYERS="4 8" EPOCHS=20 bash scripts/bench_distributed.sh /tmp/arxiv.h5
#
# One `adgnn train --variant plain,ad_fast` per (ranks, depth): rank 0 partitions once (PARTITION,
# default metis) for both models. CPU runs use one intra-op thread per rank. PROFILE_STEPS=K
# profiles the last K epochs (`adgnn train --profile`, summaries in OUT_DIR/profile_p<P>_l<L>/);
# the median step then leaves them out (the profiler slows the host). EXTRA_FLAGS go to every
# `adgnn train` (e.g. EXTRA_FLAGS="--compact on"). VARIANTS (default plain,ad_fast) picks the
# models; PARTITION_DIR/p<P>, when it exists (made by `adgnn partition -k P`), is read instead of
# partitioning again; MPIRUN_FLAGS replaces the mpirun flags (e.g. to try CPU bindings).
set -euo pipefail
cd "$(dirname "$0")/.."
adgnn=${ADGNN:-build/adgnn}
graph=${1:?usage: bench_distributed.sh GRAPH}
device=${DEVICE:-cpu}
ranks_list=${RANKS:-1 2}
layers_list=${LAYERS:-4 8}
epochs=${EPOCHS:-20}
hidden=${HIDDEN:-128}
partition=${PARTITION:-metis}
profile_steps=${PROFILE_STEPS:-0}
variants=${VARIANTS:-plain,ad_fast}
read -r -a extra <<<"${EXTRA_FLAGS:-}"
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
py=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
mpirun_flags=${MPIRUN_FLAGS:---allow-run-as-root --oversubscribe}
threads=$([ "$device" = cpu ] && echo "--threads 1" || echo "")

echo "graph $graph; device $device; hidden $hidden; $epochs epochs (median train step after 5 warm-up); partition $partition; ${EXTRA_FLAGS:+flags $EXTRA_FLAGS; }$(date -u +%F)"
echo
echo "| ranks | layers | model | train step (ms) | speedup | halo rows sent per layer | full halo rows per layer | halo MiB sent / full (all layers) | halo rows held by layers >= 2 | peak mem (GiB, max rank) | test acc | host ms to issue a step | device ms per phase, slowest rank: forward / backward / allreduce / optimizer (fastest rank) |"
echo "|---:|---:|---|---:|---:|---|---|---|---:|---:|---:|---:|---|"
for L in $layers_list; do
  for P in $ranks_list; do
    tag="p${P}_l${L}"
    launcher=()
    [ "$P" -gt 1 ] && launcher=(mpirun $mpirun_flags -n "$P")
    profile=()
    [ "$profile_steps" -gt 0 ] && profile=(--profile "$out/profile_${tag}" --profile-steps "$profile_steps")
    parts=(--partition "$partition")
    [ -n "${PARTITION_DIR:-}" ] && [ -d "$PARTITION_DIR/p$P" ] && parts=(--partition-dir "$PARTITION_DIR/p$P")
    # Both models in one command, so rank 0 partitions once (metrics: <stem>-gcn-<variant>.jsonl).
    "${launcher[@]}" "$adgnn" train "$graph" --model gcn --variant "$variants" --device "$device" \
      --layers "$L" --hidden "$hidden" --epochs "$epochs" --lambda 0 --dropout 0.5 $threads \
      "${parts[@]}" --no-progress --summary "$out/${tag}.json" --metrics "$out/${tag}.jsonl" "${profile[@]}" \
      "${extra[@]}" >"$out/${tag}.log" 2>"$out/${tag}.err" || { echo "failed: $tag"; cat "$out/${tag}.err"; exit 1; }
  done
done
"$py" - "$out" "$ranks_list" "$layers_list" "$profile_steps" "$variants" <<'PY'
import json, os, statistics, sys
out, ranks, layers, prof = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4])
variants = sys.argv[5].split(",")
base = {}
for L in layers:
    for P in ranks:
        for k, v in enumerate(variants):
            # (one variant: `adgnn train` writes the metrics file as named, and one summary)
            one = len(variants) == 1
            rows = [json.loads(l) for l in open(f"{out}/p{P}_l{L}" + ("" if one else f"-gcn-{v}") + ".jsonl")]
            summary = json.load(open(f"{out}/p{P}_l{L}.json"))
            summary = summary if one and isinstance(summary, dict) else summary[k]
            run = summary["runs"][0]
            timed = rows[5:len(rows) - prof] or rows[:len(rows) - prof] or rows
            step = statistics.median([r["train_step_ms"] for r in timed])
            # The host's time to issue a step (older binaries: not recorded).
            issue = [r["train_issue_ms"] for r in timed if "train_issue_ms" in r]
            issue = f"{statistics.median(issue):.1f}" if issue else "–"
            # Each phase's median over the timed steps, for the slowest and the fastest rank
            # (events on the device's stream: waits for peers and idle time included).
            names = ["forward", "backward", "allreduce", "optimizer"]
            ph = [r["train_phase_ms"] for r in timed if all(n in r.get("train_phase_ms", {}) for n in names)]
            med = lambda n, side: statistics.median([p[n][side] for p in ph])
            phases = (" / ".join(f"{med(n, 'max'):.2f}" for n in names) + " (" +
                      " / ".join(f"{med(n, 'min'):.2f}" for n in names) + ")") if ph else "–"
            if P == ranks[0]: base[(L, v)] = step
            last = rows[-1]
            sent = last.get("halo_rows", [])
            full = last.get("halo_rows_full", [])
            mib = lambda k: sum(last.get(k, [])) / 2**20
            halo = f"{mib('halo_bytes'):.1f} / {mib('halo_bytes_full'):.1f}" if sent else "–"
            label = "GCN" if v == "plain" else "AD-GCN_fast"
            held = last.get("deep_halo_rows")  # summed over ranks (--compact-halo)
            held = f"{held:,}" if held is not None and sent else "–"
            print(f"| {P} | {L} | {label} | {step:.1f} | {base[(L, v)] / step:.2f} | {sent or '–'} | {full or '–'} | {halo} | {held} | "
                  f"{run.get('peak_memory_bytes', 0) / 2**30:.2f} | {100 * summary['test_mean']:.2f} | {issue} | {phases} |")
PY
