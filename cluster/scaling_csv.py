#!/usr/bin/env python3
"""Adds one run of cluster/scaling_study.sh to its CSV (standard library only).

  scaling_csv.py CSV SUMMARY GPUS LAYERS MODEL VARIANT PARTITION

SUMMARY is the file `adgnn train --summary` wrote (rank 0's JSON summary: a list with one entry
per model, the study trains one); fields it lacks stay empty. The CSV is rewritten atomically
with speedup_vs_1 recomputed for every row.
"""
import csv
import json
import os
import sys

COLUMNS = ["gpus", "layers", "model", "variant", "partition", "ms_per_epoch", "speedup_vs_1",
           "halo_bytes_active", "halo_bytes_full", "peak_mem_gib", "test_score"]
KEY = COLUMNS[:5]


class Bad(Exception):
    pass


def summary(path):
    """The summary's first model (a dict with test_mean)."""
    try:
        with open(path) as f:
            value = json.load(f)
    except OSError as e:
        raise Bad(f"{path}: {e.strerror}")
    except ValueError as e:
        raise Bad(f"{path}: not JSON ({e})")
    if isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, dict) or "test_mean" not in value:
        raise Bad(f"{path}: not an adgnn train summary (no model with test_mean)")
    return value


def field(s, key):
    """Top-level value, else the per-run values (a list), else None."""
    if key in s:
        return s[key]
    runs = [r[key] for r in s.get("runs", []) if isinstance(r, dict) and key in r]
    return runs or None


def number(v, reduce):
    if v is None:
        return None
    if isinstance(v, list):
        vals = [number(x, reduce) for x in v]
        vals = [x for x in vals if x is not None]
        return reduce(vals) if vals else None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Bad(f"not a number: {v!r}")
    return float(v)


def mean(vals):
    return sum(vals) / len(vals)


def per_layer_total(s, key):
    """Bytes per epoch summed over layers; a per-run list of per-layer lists is averaged over runs."""
    v = field(s, key)
    if v is None:
        return None
    if key in s:  # one per-layer list
        return number(v, sum)
    return mean([number(x, sum) for x in v])


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def row_of(s, key_values):
    ms = number(field(s, "ms_per_epoch"), mean)
    active = per_layer_total(s, "halo_bytes_per_layer")
    full = per_layer_total(s, "halo_bytes_full_per_layer")
    peak = number(field(s, "peak_memory_bytes"), max)
    test = number(s.get("test_mean"), mean)
    row = dict(zip(KEY, key_values))
    row.update(ms_per_epoch=fmt(ms, ".3f"), speedup_vs_1="", halo_bytes_active=fmt(active, ".0f"),
               halo_bytes_full=fmt(full, ".0f"),
               peak_mem_gib=fmt(None if peak is None else peak / 2**30, ".3f"),
               test_score=fmt(test, ".4f"))
    return row


def add_speedups(rows):
    """ms of the 1-rank row with the same layers/model/variant (partition none, else the same
    partition) over this row's ms."""
    base = {}
    for r in rows:
        if r["gpus"] == "1" and r["ms_per_epoch"]:
            base[(r["layers"], r["model"], r["variant"], r["partition"])] = float(r["ms_per_epoch"])
    for r in rows:
        k = (r["layers"], r["model"], r["variant"])
        b = base.get(k + ("none",)) or base.get(k + (r["partition"],))
        ms = float(r["ms_per_epoch"]) if r["ms_per_epoch"] else 0.0
        r["speedup_vs_1"] = fmt(b / ms, ".3f") if b and ms > 0 else ""


def read_rows(path):
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            raise Bad(f"{path}: header is not {','.join(COLUMNS)}")
        return list(reader)


def write_atomic(path, rows):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv):
    if len(argv) != 8:
        raise Bad("usage: scaling_csv.py CSV SUMMARY GPUS LAYERS MODEL VARIANT PARTITION")
    path, summary_path, *key_values = argv[1:]
    new = row_of(summary(summary_path), key_values)
    rows = [r for r in read_rows(path) if [r[k] for k in KEY] != key_values] + [new]
    add_speedups(rows)
    write_atomic(path, rows)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Bad as e:
        sys.exit(f"scaling_csv.py: {e}")
