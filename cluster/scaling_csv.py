#!/usr/bin/env python3
"""Adds one run of cluster/scaling_study.sh to its CSV (standard library only).

  scaling_csv.py CSV OUTPUT TAGS GPUS LAYERS MODEL VARIANT PARTITION

OUTPUT is the launcher's stdout; TAGS says how the launcher marks each line with its rank
(openmpi "[1,0]<stdout>:", srun "0: ", hydra "[0] ", none). Rank 0's JSON summary (what
`adgnn train --json` prints, indented or on one line) gives the row; fields it lacks stay empty.
The CSV is rewritten atomically with speedup_vs_1 recomputed for every row.
"""
import csv
import json
import os
import re
import sys

COLUMNS = ["gpus", "layers", "model", "variant", "partition", "ms_per_epoch", "speedup_vs_1",
           "halo_bytes_active", "halo_bytes_full", "peak_mem_gib", "test_acc"]
KEY = COLUMNS[:5]
TAG_PATTERNS = {
    "openmpi": re.compile(r"^\[\d+,(\d+)\]<stdout>:"),
    "srun": re.compile(r"^\s*(\d+): "),
    "hydra": re.compile(r"^\[(\d+)\] "),
}


class Bad(Exception):
    pass


def rank0_text(output, tags):
    if tags == "none":
        return output
    pattern = TAG_PATTERNS[tags]
    lines = []
    for line in output.splitlines():
        m = pattern.match(line)
        if m and m.group(1) == "0":
            rest = line[m.end():]
            if tags == "openmpi":
                # mpirun tags each chunk it forwards, so a line the rank wrote in two writes
                # (stdio flushes a pipe every 4 KiB) carries a second tag in its middle.
                rest = re.sub(r"\[\d+,0\]<stdout>:", "", rest)
            lines.append(rest)
    if not lines:
        raise Bad("no output from rank 0")
    return "\n".join(lines)


def summary(text):
    """The last JSON value in text that looks like a training summary (a dict with test_mean, or
    a list of them: the first is taken, the study trains one model per run)."""
    candidates = []
    try:
        candidates.append(json.loads(text))
    except ValueError:
        decoder = json.JSONDecoder()
        offset = 0
        for line in text.splitlines(keepends=True):
            if line.lstrip().startswith(("[", "{")):
                start = offset + len(line) - len(line.lstrip())
                try:
                    candidates.append(decoder.raw_decode(text, start)[0])
                except ValueError:
                    pass
            offset += len(line)
    for value in reversed(candidates):
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0]
        if isinstance(value, dict) and "test_mean" in value:
            return value
    raise Bad("no JSON summary (a value with test_mean) in rank 0's output")


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
               test_acc=fmt(test, ".4f"))
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
    if len(argv) != 9:
        raise Bad("usage: scaling_csv.py CSV OUTPUT TAGS GPUS LAYERS MODEL VARIANT PARTITION")
    path, output, tags, *key_values = argv[1:]
    if tags not in TAG_PATTERNS and tags != "none":
        raise Bad(f"unknown tag style {tags}")
    with open(output, errors="replace") as f:
        s = summary(rank0_text(f.read(), tags))
    new = row_of(s, key_values)
    rows = [r for r in read_rows(path) if [r[k] for k in KEY] != key_values] + [new]
    add_speedups(rows)
    write_atomic(path, rows)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Bad as e:
        sys.exit(f"scaling_csv.py: {e}")
