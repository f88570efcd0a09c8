#!/usr/bin/env python3
"""Every number of docs/results.md, the sweeps behind configs/<dataset>/<backbone>.yaml and
docs/model.md's band table, as one resumable, time-boxed job queue.

  scripts/results.py run     --bin build/adgnn --dir RESULTS [--device cuda] [--slots 15]
                             [--t0 EPOCH --stop-launch 500 --hard-stop 575] [--quick]
  scripts/results.py tables  --dir RESULTS          # Markdown tables (results.md, model.md)
  scripts/results.py configs --dir RESULTS [--configs configs]   # write the chosen configs

`run` starts `adgnn sweep` / `adgnn train` processes (1 intra-op thread per worker) up to --slots
at once, in priority order:
  1. GCN sweeps on every dataset (reduced paper grid, 3 runs, validation accuracy): plain GCN,
     AD-GCN_fast with linear and with log normalisation;
  2. the GCN / AD-GCN / AD-GCN_fast table (10 runs, --splits auto and geom-gcn, both
     normalisations) with the settings those sweeps chose;
  3. band against full estimator on Planetoid CiteSeer (docs/model.md);
  4. AD_fast sweeps (linear normalisation) of the other five backbones on every dataset;
  5. Platonov et al.'s binary benchmarks (minesweeper), scored by ROC AUC (`--metric auto`):
     GCN, SAGE and GAT sweeps on the paper-small grid (plain, AD_fast linear and log), then
     their 10-split rows of plain / AD_fast / AD under both normalisations;
  6. depth that adapts: GCN's collapsed forms (MLP, 1-hop) and the rank normalisation on every
     dataset, swept and tabled as in 1-2, against stage 2's rows.
Finished outputs are skipped (train: a complete JSON file; sweep: `adgnn sweep` itself skips
finished points), so a rerun with the same --dir continues. No job is started after --stop-launch
seconds from --t0, and every process still running at --hard-stop is killed (its sweep points
so far are kept), so that the results can be collected inside a fixed time limit.
"""
import argparse
import json
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jobqueue import launch, run_queue  # noqa: E402

DATASETS = ["cora_ml", "citeseer_planetoid", "citeseer", "photo", "dblp", "film", "squirrel",
            "chameleon", "cornell", "wisconsin", "texas"]
GEOM_GCN = ["citeseer_planetoid", "film", "cornell", "wisconsin", "texas"]  # have split files
BACKBONES = ["gcn", "gat", "sage", "mixhop", "gatv2", "dirgnn"]
LABELS = {"gcn": "GCN", "gat": "GAT", "sage": "SAGE", "mixhop": "MixHop", "gatv2": "GATv2",
          "dirgnn": "DirGNN"}
# Rough relative cost of a run, to start the long jobs first (nodes x features / edges matter).
COST = {"dblp": 8, "photo": 6, "cora_ml": 4, "citeseer_planetoid": 4, "film": 4, "squirrel": 3,
        "citeseer": 3, "chameleon": 2, "wisconsin": 1, "cornell": 1, "texas": 1}
BACKBONE_COST = {"gcn": 1, "sage": 1, "gat": 2, "gatv2": 2, "dirgnn": 2, "mixhop": 3}

# Settings every run shares. epochs/patience: the paper's grid has epochs {200, 500, 1000}; with
# best-validation selection and early stopping a 500-epoch cap with patience 50 covers them.
COMMON = {"layers": 2, "epochs": 500, "patience": 50, "seed": 0}
# The paper's grid (method.md) reduced to what fits the device budget: layers 2 (under linear
# normalisation T(v) <= 1 for >= 99.5% of nodes whatever t_max, method.md), hidden 128, lr
# {0.005, 0.01} (0.001 needs the 1000-epoch schedule), weight decay {5e-4, 0.1} and dropout
# {0.5, 0.6}; lambda {0, 0.8} under linear normalisation (every lambda in 0.1..0.9 gives the same
# masks there, method.md) and {0, 0.1, 0.8} under log, where lambda moves the depths.
GRID_BASE = {"hidden": [128], "lr": [0.005, 0.01], "weight_decay": [0.0005, 0.1],
             "dropout": [0.5, 0.6]}
LAMBDAS = {"plain": None, "linear": [0.0, 0.8], "log": [0.0, 0.1, 0.8], "mlp": None, "onehop": None,
           "rank": [0.0, 0.1, 0.8], "target": None}
# Stage 6's target depth distributions (--depth-target, shares of depths 0 / 1 / 2 at 2 layers):
# mostly 1-hop, even, mostly 2-hop; lambda 0, so that no node is forced to depth 0.
TARGETS = {"target": ["0,0.8,0.2", "0,0.5,0.5", "0,0.2,0.8"]}
# What a sweep tag trains: variant, normalisation, fixed flags. Stage 6's baselines are GCN's
# collapsed forms: an MLP (no node aggregates: the degree threshold above every degree) and the
# 1-hop model (AD_fast with every node at depth 1: lambda 0 and theta(2) = 1 - exp(-50) = 1, which
# only the node ranked first reaches).
TAGS = {"plain": ("plain", "linear", []), "linear": ("ad_fast", "linear", []), "log": ("ad_fast", "log", []),
        "mlp": ("plain", "linear", ["--degree-threshold", "1000000000"]),
        "onehop": ("ad_fast", "rank", ["--lambda", "0", "--theta-init", "50"]),
        "rank": ("ad_fast", "rank", []), "target": ("ad_fast", "rank", ["--lambda", "0"])}
# Stage 6's rows: (sweep tag, table variant, table key); a row trains with its tag's normalisation
# and its table file is named by the key.
STUDY_ROWS = (("mlp", "mlp", "linear"), ("onehop", "onehop", "rank"), ("rank", "ad_fast", "rank"),
              ("rank", "ad", "rank"), ("target", "ad_fast", "target"), ("target", "ad", "target"))
SWEEP_RUNS, TABLE_RUNS, BAND_RUNS = 3, 10, 5
# Stage 5: Platonov et al.'s binary, imbalanced benchmarks (ICLR 2023), scored by ROC AUC as their
# field scores them; their published test ROC AUC (../shared/data/README.md) beside ours.
PLATONOV = ["minesweeper"]
PLATONOV_BACKBONES = ["gcn", "sage", "gat"]
PUBLISHED = {"minesweeper": {"gcn": "89.75 ± 0.52", "sage": "93.51 ± 0.57", "gat": "92.01 ± 0.68"}}
# `adgnn sweep --grid paper-small` (trainer/src/sweep.cpp), written out so that plain sweeps
# leave out lambda (it does not change a plain model).
PAPER_SMALL = {"layers": [2, 3], "dropout": [0.5], "lr": [0.005, 0.01], "hidden": [128],
               "weight_decay": [0.0005], "epochs": [200]}
PAPER_SMALL_LAMBDAS = [0.0, 0.1, 0.8, 0.9]
# docs/model.md's band comparison: the first pass's default settings (docs/results.md) and the
# 200 epochs its table states; both columns rerun with them, so they compare on one machine.
BAND_SETTINGS = {"layers": 2, "hidden": 64, "dropout": 0.5, "lr": 0.01, "weight_decay": 0.0005,
                 "epochs": 200, "patience": 0, "lambda": 0.0, "seed": 0}


def row_flags(tag, variant, chosen):
    """A table row's --variant, its sweep's chosen settings and the tag's fixed flags: a collapsed
    form (variant "mlp" / "onehop", a label) trains its tag's variant, and a fixed flag (the
    1-hop model's lambda 0) replaces the chosen setting of that name."""
    trained = TAGS[tag][0] if variant in ("mlp", "onehop") else variant
    fixed = TAGS[tag][2]
    chosen = {k: v for k, v in chosen.items() if "--" + k.replace("_", "-") not in fixed}
    return ["--variant", trained] + flags(chosen) + fixed


def grid_of(tag):
    g = dict(GRID_BASE)
    if LAMBDAS[tag] is not None:
        g["lambda"] = LAMBDAS[tag]
    if tag in TARGETS:
        g["depth_target"] = TARGETS[tag]
    return g


def grid_size(tag):
    return math.prod(len(v) for v in grid_of(tag).values())


def paper_small_grid(tag):
    g = dict(PAPER_SMALL)
    if LAMBDAS[tag] is not None:
        g["lambda"] = PAPER_SMALL_LAMBDAS
    return g


def platonov_table_path(d, m, variant, norm, root):
    return os.path.join(root, f"table_{d}_{m}_{variant}_{norm}.json")


def sweep_path(d, m, tag, root):
    return os.path.join(root, f"sweep_{d}_{m}_{tag}.jsonl")


def table_path(d, split, variant, norm, root):
    return os.path.join(root, f"table_{d}_{split}_{variant}_{norm}.json")


def band_path(variant, band, root):
    return os.path.join(root, f"band_citeseer_planetoid_{variant}_{band}.json")


def read_sweep(path):
    """Finished points of a sweep: key -> record (last one wins)."""
    pts = {}
    try:
        with open(path) as f:
            for line in f:
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                pts[j["key"]] = j
    except OSError:
        pass
    return pts


def setting(key, name):
    m = re.search(r"(?:^| )" + name + r"=([^ ]+)", key)
    return m.group(1) if m else None


def best_point(path):
    """The highest mean validation score (the sweep's --metric; first in file order on ties), or None."""
    best = None
    for j in read_sweep(path).values():
        if best is None or j["val_mean"] > best["val_mean"]:
            best = j
    return best


def chosen_settings(path):
    """lr, weight decay, dropout, hidden, lambda of a sweep's best point (flags)."""
    b = best_point(path)
    if b is None:
        return None
    k = b["key"]
    return {"hidden": int(setting(k, "hidden")), "lr": float(setting(k, "lr")),
            "weight_decay": float(setting(k, "weight_decay")),
            "dropout": float(setting(k, "dropout")), "lambda": float(setting(k, "lambda")),
            "normalisation": setting(k, "normalisation"), "layers": int(setting(k, "layers")),
            "epochs": int(setting(k, "epochs")), "depth_target": setting(k, "depth_target"),
            "metric": b.get("metric", "accuracy"), "val_mean": b["val_mean"],
            "val_std": b["val_std"], "test_mean": b["test_mean"], "test_std": b["test_std"]}


def flags(d):
    out = []
    for k, v in d.items():
        out += ["--" + k.replace("_", "-"), str(v)]
    return out


class Job:
    def __init__(self, name, out, slots, build, deps=(), complete=None, prio=0):
        self.name, self.out, self.slots, self.build, self.deps = name, out, slots, build, list(deps)
        self.complete = complete or (lambda: json_complete(out))
        self.prio = prio
        self.proc = None
        self.started = None
        self.log = None


def json_complete(path, runs=0):
    """A finished `adgnn train --summary` file; with runs > 0, every model in it has at least that
    many runs (an earlier pass with fewer runs is not a finished one)."""
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(d, list) and all(len(m.get("runs", [])) >= runs for m in d)


def make_jobs(a):
    root, dev = a.dir, a.device
    quick = a.quick
    common = dict(COMMON)
    if quick:  # plumbing test: tiny epochs and runs
        common.update(epochs=2, patience=0)
    sweep_runs = 1 if quick else SWEEP_RUNS
    table_runs = 2 if quick else TABLE_RUNS
    band_runs = 1 if quick else BAND_RUNS
    asked = a.datasets.split(",") if a.datasets else DATASETS + PLATONOV
    unknown = [d for d in asked if d not in DATASETS + PLATONOV]
    if unknown:
        sys.exit(f"--datasets: {','.join(unknown)} not among {','.join(DATASETS + PLATONOV)}")
    datasets = [d for d in asked if d in DATASETS]  # stages 1-4 and 6
    base = ["--threads", "1", "--device", dev, "--no-progress"]
    # A table row's runs train concurrently (`adgnn train --run-workers`): same numbers as one
    # after the other, and the row does not wait for 10 sequential runs.
    table_workers = max(1, min(a.table_workers, table_runs, a.slots))
    jobs = []

    grids = {f"grid_{tag}.yaml": grid_of(tag) for tag in LAMBDAS}
    for tag in ("plain", "linear", "log"):
        grids[f"grid_paper_small_{tag}.yaml"] = dict(paper_small_grid(tag), **({"epochs": [2]} if quick else {}))
    for name, grid in grids.items():
        with open(os.path.join(root, name), "w") as f:
            for k, v in grid.items():
                f.write(f"{k}: {json.dumps(v)}\n")

    def sweep_job(d, m, tag, prio):
        out = sweep_path(d, m, tag, root)
        variant, norm, fixed = TAGS[tag]
        n = grid_size(tag)
        workers = min(a.sweep_workers, n, a.slots)
        cmd = [a.bin, "sweep", d, "--model", m, "--variant", variant, "--normalisation", norm,
               "--splits", "auto", "--runs", str(sweep_runs), "--grid",
               os.path.join(root, f"grid_{tag}.yaml"), "--workers", str(workers), "-o", out] + \
            flags(common) + fixed + base
        return Job(f"sweep {d} {m} {tag}", out, workers, lambda: cmd,
                   complete=lambda: len(read_sweep(out)) >= n, prio=prio)

    # 1. GCN sweeps (the table's settings), expensive datasets first.
    for d in sorted(datasets, key=lambda d: -COST[d]):
        for tag in ("plain", "linear", "log"):
            jobs.append(sweep_job(d, "gcn", tag, 1))
    # 2. The table: 10 runs with the chosen settings, one process per variant and normalisation.
    for split in ("auto", "geom-gcn"):
        for d in sorted(datasets, key=lambda d: -COST[d]):
            if split == "geom-gcn" and d not in GEOM_GCN:
                continue
            for variant, norm in (("plain", "linear"), ("ad_fast", "linear"), ("ad", "linear"),
                                  ("ad_fast", "log"), ("ad", "log")):
                tag = "plain" if variant == "plain" else norm
                src = sweep_path(d, "gcn", tag, root)
                out = table_path(d, split, variant, norm, root)

                def build(d=d, variant=variant, norm=norm, split=split, src=src, out=out):
                    s = chosen_settings(src)
                    chosen = {k: s[k] for k in ("hidden", "lr", "weight_decay", "dropout", "lambda")}
                    return [a.bin, "train", d, "--model", "gcn", "--variant", variant,
                            "--normalisation", norm, "--splits", split, "--runs", str(table_runs),
                            "--run-workers", str(table_workers)] + flags(common) + \
                        flags(chosen) + base
                jobs.append(Job(f"table {d} {split} {variant} {norm}", out, table_workers, build,
                                deps=[f"sweep {d} gcn {tag}"], prio=2))
    # 3. Band (3 kappa, the default) against the full estimator (--band 0), log normalisation.
    if not a.datasets or "citeseer_planetoid" in datasets:
        for variant in ("ad_fast", "ad"):
            for band in (3, 0):
                s = dict(BAND_SETTINGS)
                if quick:
                    s.update(epochs=2)
                cmd = [a.bin, "train", "citeseer_planetoid", "--model", "gcn", "--variant", variant,
                       "--normalisation", "log", "--band", str(band), "--splits", "auto",
                       "--runs", str(band_runs)] + flags(s) + base
                jobs.append(Job(f"band {variant} {band}", band_path(variant, band, root), 1,
                                lambda cmd=cmd: cmd, prio=3))
    # 4. The other backbones: AD_fast, linear normalisation (the paper's), cheap ones first.
    others = [m for m in (a.backbones.split(",") if a.backbones else BACKBONES) if m != "gcn"]
    for m in sorted(others, key=lambda m: BACKBONE_COST[m]):
        for d in sorted(datasets, key=lambda d: -COST[d]):
            jobs.append(sweep_job(d, m, "linear", 4))
    # 6. Depth that adapts: GCN's collapsed forms (MLP, 1-hop) and the rank normalisation, swept
    #    and tabled as stages 1-2 do, against stage 2's GCN / linear / log rows.
    for d in sorted(datasets, key=lambda d: -COST[d]):
        for tag in ("mlp", "onehop", "rank", "target"):
            jobs.append(sweep_job(d, "gcn", tag, 6))
        for tag, variant, key in STUDY_ROWS:
            src, out = sweep_path(d, "gcn", tag, root), table_path(d, "auto", variant, key, root)

            def build(d=d, tag=tag, variant=variant, src=src):
                s = chosen_settings(src)
                chosen = {k: s[k] for k in ("hidden", "lr", "weight_decay", "dropout", "lambda", "depth_target")
                          if s[k] is not None}
                return [a.bin, "train", d, "--model", "gcn", "--normalisation", TAGS[tag][1], "--splits", "auto",
                        "--runs", str(table_runs), "--run-workers", str(table_workers)] + \
                    flags(common) + row_flags(tag, variant, chosen) + base
            jobs.append(Job(f"table {d} auto {variant} {key}", out, table_workers, build,
                            deps=[f"sweep {d} gcn {tag}"], prio=6))
    # 5. Platonov's binary benchmarks: paper-small sweeps, then 10-split rows (every split once).
    ps_common = {"seed": 0}
    for d in [d for d in asked if d in PLATONOV]:
        for m in [m for m in PLATONOV_BACKBONES if not a.backbones or m in a.backbones.split(",")]:
            for tag in ("plain", "linear", "log", "mlp", "onehop"):
                out = sweep_path(d, m, tag, root)
                n = math.prod(len(v) for v in paper_small_grid(tag).values())
                workers = min(a.sweep_workers, n, a.slots)
                variant, norm, fixed = TAGS[tag]
                cmd = [a.bin, "sweep", d, "--model", m, "--variant", variant, "--normalisation", norm,
                       "--splits", "auto", "--runs", str(sweep_runs), "--grid",
                       os.path.join(root, f"grid_paper_small_{'plain' if LAMBDAS[tag] is None else tag}.yaml"),
                       "--workers", str(workers), "-o", out] + flags(ps_common) + fixed + base
                jobs.append(Job(f"sweep {d} {m} {tag}", out, workers, lambda cmd=cmd: cmd,
                                complete=lambda out=out, n=n: len(read_sweep(out)) >= n, prio=5))
            for tag, variant, norm in (("plain", "plain", "linear"), ("linear", "ad_fast", "linear"),
                                       ("linear", "ad", "linear"), ("log", "ad_fast", "log"), ("log", "ad", "log"),
                                       ("mlp", "mlp", "linear"), ("onehop", "onehop", "rank")):
                src, out = sweep_path(d, m, tag, root), platonov_table_path(d, m, variant, norm, root)

                def build(d=d, m=m, tag=tag, variant=variant, norm=norm, src=src):
                    s = chosen_settings(src)
                    chosen = {k: s[k] for k in ("layers", "hidden", "lr", "weight_decay", "dropout", "lambda", "epochs")}
                    if quick:
                        chosen["epochs"] = 2
                    return [a.bin, "train", d, "--model", m, "--normalisation", norm, "--splits", "auto",
                            "--runs", str(table_runs), "--run-workers", str(table_workers), "--seed", "0",
                            ] + row_flags(tag, variant, chosen) + base
                jobs.append(Job(f"table {d} {m} {variant} {norm}", out, table_workers, build,
                                deps=[f"sweep {d} {m} {tag}"], prio=5))
    return jobs


def run(a):
    os.makedirs(a.dir, exist_ok=True)
    logs = os.path.join(a.dir, "logs")
    os.makedirs(logs, exist_ok=True)
    t0 = a.t0 or time.time()
    meta = os.path.join(a.dir, "meta.txt")
    if not os.path.exists(meta):  # results_device.sh writes its own, naming the card
        with open(meta, "w") as f:
            f.write(f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
                    f"machine: {os.uname().nodename}, {os.cpu_count()} CPU cores\n"
                    f"device: {a.device}\ncommit: see the binary {a.bin}\n")
    jobs = make_jobs(a)
    done = {j.name for j in jobs if j.complete()}
    if a.stages:  # the other stages' outputs still count as dependencies, complete or not
        keep = {int(x) for x in a.stages.split(",")}
        jobs = [j for j in jobs if j.prio in keep]
    jobs.sort(key=lambda j: j.prio)  # stable: the long sweeps first within a stage
    say = lambda msg: print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)
    say(f"{len(jobs)} jobs, {len(done & {j.name for j in jobs})} already complete, "
        f"{sum(j.name not in done for j in jobs)} to run, {a.slots} slots, device {a.device}")
    for j in jobs:
        j.start = lambda log, j=j: launch(j.build() + (["--summary", j.out] if j.out.endswith(".json") else []), log,
                                          _env())
    done, _ = run_queue(jobs, a.slots, lambda j: os.path.join(logs, j.name.replace(" ", "_") + ".log"), say,
                        stop_launch=a.stop_launch, hard_stop=a.hard_stop, t0=t0, done_elsewhere=done)
    left = [j.name for j in jobs if j.name not in done]
    say(f"finished: {len(jobs) - len(left)}/{len(jobs)} jobs complete; not complete: {len(left)}")
    with open(os.path.join(a.dir, "incomplete.txt"), "w") as f:
        f.write("".join(n + "\n" for n in left))


def _env():
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    return e


# ---- tables -----------------------------------------------------------------------------------

PAPER = {  # the paper's Exp-1 table (GCN, AD-GCN, AD-GCN_fast); its Citeseer = Planetoid CiteSeer
    "cora_ml": ("87.07 ± 1.21", "87.32 ± 1.25", "87.34 ± 1.35"),
    "citeseer_planetoid": ("76.68 ± 1.64", "79.14 ± 1.00", "79.13 ± 0.99"),
    "photo": ("89.30 ± 0.82", "94.10 ± 0.31", "94.10 ± 0.31"),
    "dblp": ("83.93 ± 0.34", "84.14 ± 0.44", "83.90 ± 0.97"),
    "film": ("30.26 ± 0.79", "42.54 ± 1.15", "41.39 ± 1.46"),
    "squirrel": ("39.47 ± 1.47", "40.04 ± 0.99", "40.88 ± 1.09"),
    "chameleon": ("40.89 ± 4.12", "43.66 ± 0.73", "43.40 ± 0.56"),
    "cornell": ("55.14 ± 8.46", "88.51 ± 4.87", "87.02 ± 3.49"),
    "wisconsin": ("61.60 ± 7.00", "93.88 ± 3.03", "94.38 ± 2.86"),
    "texas": ("60.00 ± 6.45", "92.30 ± 4.52", "91.64 ± 5.16"),
}


def load_summary(path):
    try:
        with open(path) as f:
            return json.load(f)[0]
    except (OSError, ValueError, IndexError):
        return None


def cell(s):
    if not s:
        return "–"
    return f"{100 * s['test_mean']:.2f} ± {100 * s['test_std']:.2f}"


def lam(s):
    return setting(s["config"], "lambda") if s else "–"


def target(s):
    """A row's --depth-target (shares of depths 0 / 1 / 2), or its lambda if it has none."""
    t = setting(s["config"], "depth_target") if s else None
    return f"target {t.replace(',', ' / ')}" if t else lam(s)


def hist(s):
    if not s:
        return "–"
    tot = None
    for r in s["runs"]:
        h = r["depth_histogram"]
        tot = h if tot is None else [x + y for x, y in zip(tot, h)]
    n = sum(tot)
    return " / ".join(f"{100 * x / n:.1f}%" for x in tot)


def short(s):
    """hidden/lr/wd/dropout of a summary's config, compactly."""
    if not s:
        return "–"
    c = s["config"]
    return (f"{setting(c, 'hidden')}/{setting(c, 'lr')}/{setting(c, 'weight_decay')}/"
            f"{setting(c, 'dropout')}")


def source_label(d):
    """'H200' / 'H100' / 'CPU' from a results folder's meta.txt."""
    try:
        with open(os.path.join(d, "meta.txt")) as f:
            m = f.read()
    except OSError:
        return "?"
    devices = re.findall(r"^device: *(\S+)", m, re.M)
    for card in ("H200", "H100"):
        if card in m:
            return card if not devices or devices[-1] != "cpu" else f"CPU of the {card} machine"
    return "CPU"


class Sources:
    """Several results folders (--dir A,B): each output is taken from the first folder that holds
    it complete (sweeps: the folder with the most points)."""

    def __init__(self, dirs):
        self.dirs = [d for d in dirs.split(",") if d]
        self.labels = {d: source_label(d) for d in self.dirs}

    def first(self, path_of, *key):
        """The summary at path_of(*key, folder) in the first folder that holds it, and its label."""
        for d in self.dirs:
            s = load_summary(path_of(*key, d))
            if s:
                return s, self.labels[d]
        return None, None

    def table(self, *key):
        return self.first(table_path, *key)

    def sweep(self, *key):
        best = (None, None, 0)
        for d in self.dirs:
            p = sweep_path(*key, d)
            n = len(read_sweep(p))
            if n > best[2]:
                best = (p, self.labels[d], n)
        return best

    def platonov_table(self, *key):
        return self.first(platonov_table_path, *key)

    def band(self, *key):
        return self.first(band_path, *key)


def tables(a):
    src = Sources(a.dir)
    T = lambda d, sp, v, n: src.table(d, sp, v, n)[0]
    for split, title in (("auto", "Paper protocol (`--splits auto`: seeded random 60/20/20; "
                                  "Platonov splits for chameleon/squirrel)"),
                         ("geom-gcn", "Geom-GCN split files (`--splits geom-gcn`, 48/32/20; "
                                      "no paper numbers on this protocol)")):
        rows = []
        for d in DATASETS:
            got = [src.table(d, split, v, n) for v, n in (("plain", "linear"), ("ad", "linear"),
                   ("ad_fast", "linear"), ("ad", "log"), ("ad_fast", "log"))]
            p, l1, l2, g1, g2 = (s for s, _ in got)
            if not any((p, l1, l2, g1, g2)):
                continue
            where = "/".join(sorted({w for _, w in got if w}))
            runs = sorted({len(s["runs"]) for s in (p, l1, l2, g1, g2) if s})
            pp = PAPER.get(d, ("–",) * 3) if split == "auto" else ("–",) * 3
            rows.append(f"| {d} | {where} | {'/'.join(map(str, runs))} | {cell(p)} | {cell(l1)} | "
                        f"{cell(l2)} | {lam(l2)} | {cell(g1)} | {cell(g2)} | {lam(g2)} | {pp[0]} | "
                        f"{pp[1]} | {pp[2]} |")
        if not rows:
            continue
        print(f"\n### {title}\n")
        print("| dataset | ran on | runs | GCN | AD-GCN lin | AD-GCN_fast lin | λ lin | AD-GCN log | "
              "AD-GCN_fast log | λ log | paper GCN | paper AD-GCN | paper AD-GCN_fast |")
        print("|---|---|---:|---|---|---|---:|---|---|---:|---|---|---|")
        print("\n".join(rows))
    print("\n### GCN sweeps: the chosen point (hidden/lr/weight decay/dropout, λ) and its "
          f"validation / test accuracy ({SWEEP_RUNS} runs, mean ± std)\n")
    print("| dataset | ran on | GCN | val / test | AD-GCN_fast lin | λ | val / test | AD-GCN_fast log | λ | val / test |")
    print("|---|---|---|---|---|---:|---|---|---:|---|")
    for d in DATASETS:
        row, where = [d], set()
        for tag in ("plain", "linear", "log"):
            path, w, n = src.sweep(d, "gcn", tag)
            s = chosen_settings(path) if path else None
            if s is None:
                row += ["–", "–"] + ([] if tag == "plain" else ["–"])
                continue
            where.add(w)
            part = "" if n >= grid_size(tag) else f" ({n}/{grid_size(tag)} points)"
            row.append(f"{s['hidden']}/{s['lr']:g}/{s['weight_decay']:g}/{s['dropout']:g}{part}")
            if tag != "plain":
                row.append(f"{s['lambda']:g}")
            row.append(f"{100 * s['val_mean']:.1f} / {100 * s['test_mean']:.1f} ± {100 * s['test_std']:.1f}")
        if where:
            row.insert(1, "/".join(sorted(where)))
            print("| " + " | ".join(row) + " |")
    print("\n### Depth histogram T(v) at the best validation epoch (T = 0 / 1 / 2, all runs; "
          "`--splits auto`)\n")
    print("| dataset | variant | linear | log |")
    print("|---|---|---|---|")
    for d in DATASETS:
        for v, name in (("ad_fast", "AD-GCN_fast"), ("ad", "AD-GCN")):
            l, g = T(d, "auto", v, "linear"), T(d, "auto", v, "log")
            if l or g:
                print(f"| {d} | {name} | {hist(l)} | {hist(g)} |")
    print("\n### Mean ms per epoch as run (training step + evaluation, one thread per training) and "
          "median best epoch\n\nMany trainings shared each machine (\"ran on\"; docs/results.md says how "
          "many), so these are wall times under load, not benchmarks (docs/performance.md has those).\n")
    print("| dataset | ran on | GCN | AD-GCN lin | AD-GCN_fast lin | best epoch (GCN, median) |")
    print("|---|---|---:|---:|---:|---:|")
    for d in DATASETS:
        (p, w), l1, l2 = src.table(d, "auto", "plain", "linear"), T(d, "auto", "ad", "linear"), T(d, "auto", "ad_fast", "linear")
        if not (p or l1 or l2):
            continue
        ms = lambda s: f"{sum(r['ms_per_epoch'] for r in s['runs']) / len(s['runs']):.1f}" if s else "–"
        ep = "–"
        if p:
            e = sorted(r["best_epoch"] for r in p["runs"])
            ep = str(e[len(e) // 2])
        print(f"| {d} | {w} | {ms(p)} | {ms(l1)} | {ms(l2)} | {ep} |")
    bands = [(v, name, src.band(v, 3), src.band(v, 0)) for v, name in (("ad_fast", "AD-GCN_fast"), ("ad", "AD-GCN"))]
    if any(b[0] or f[0] for _, _, b, f in bands):
        print("\n### Band (3 kappa) against the full estimator (`--band 0`), Planetoid CiteSeer\n")
        print("| dataset | variant | band 3 kappa: test (val) | full: test (val) | ms/epoch band / full |")
        print("|---|---|---|---|---|")
        for v, name, (b, _), (f, _) in bands:
            c = lambda s: (f"{100 * s['test_mean']:.1f} +- {100 * s['test_std']:.1f} "
                           f"({100 * s['val_mean']:.1f})") if s else "not run"
            ms = lambda s: f"{sum(r['ms_per_epoch'] for r in s['runs']) / len(s['runs']):.1f}" if s else "–"
            print(f"| CiteSeer (Planetoid) | {name} | {c(b)} | {c(f)} | {ms(b)} / {ms(f)} |")
    print("\n### AD_fast sweeps of every backbone (linear normalisation): the chosen point's "
          f"validation / test accuracy ({SWEEP_RUNS} runs) and λ\n")
    rows = []
    for d in DATASETS:
        row, any_ = [], False
        for m in BACKBONES:
            path, w, n = src.sweep(d, m, "linear")
            s = chosen_settings(path) if path else None
            if s is None:
                row.append("–")
            else:
                any_ = True
                part = "" if n >= grid_size("linear") else f" ({n}/{grid_size('linear')} points)"
                row.append(f"{100 * s['val_mean']:.1f} / {100 * s['test_mean']:.1f}, λ {s['lambda']:g}{part}")
        if any_:
            rows.append(f"| {d} | " + " | ".join(row) + " |")
    if rows:
        print("| dataset | " + " | ".join(BACKBONES) + " |")
        print("|---|" + "---|" * len(BACKBONES))
        print("\n".join(rows))
    platonov_tables(src)
    study_tables(src)


def study_tables(src):
    """Stage 6: does per-node depth beat the plain backbone and its collapsed forms?"""
    T = lambda d, v, n: src.table(d, "auto", v, n)[0]
    options = (("AD_fast lin", "ad_fast", "linear"), ("AD lin", "ad", "linear"), ("AD_fast log", "ad_fast", "log"),
               ("AD log", "ad", "log"), ("AD_fast rank", "ad_fast", "rank"), ("AD rank", "ad", "rank"),
               ("AD_fast target", "ad_fast", "target"), ("AD target", "ad", "target"))
    rows, hists, wins = [], [], {name: [] for name, _, _ in options}
    for d in DATASETS:
        base = {"GCN": T(d, "plain", "linear"), "MLP": T(d, "mlp", "linear"), "1-hop": T(d, "onehop", "rank")}
        if not (base["MLP"] or base["1-hop"]):
            continue
        have = {k: v for k, v in base.items() if v}
        best_name = max(have, key=lambda k: have[k]["test_mean"])
        best = have[best_name]
        cells = []
        for name, v, n in options:
            s = T(d, v, n)
            won = bool(s) and len(have) == 3 and \
                s["test_mean"] - best["test_mean"] > max(s["test_std"], best["test_std"])
            if won:
                wins[name].append(d)
            cells.append(("**" + cell(s) + "**") if won else cell(s))
            if n in ("rank", "target") and s:
                hists.append(f"| {d} | {name} | {target(s) if n == 'target' else lam(s)} | {hist(s)} |")
        if base["1-hop"]:
            hists.append(f"| {d} | 1-hop | 0 | {hist(base['1-hop'])} |")
        rows.append(f"| {d} | " + " | ".join(cell(base[k]) for k in ("GCN", "MLP", "1-hop")) +
                    f" | {best_name} | " + " | ".join(cells) + " |")
    if not rows:
        return
    print("\n### Depth that adapts: AD against GCN and its collapsed forms (test accuracy %, 10 runs, "
          "`--splits auto`)\n")
    print("Bold: beats the best of GCN, MLP and 1-hop by more than the larger of the two stds. "
          "Every column tuned by its own sweep (3 runs; λ from {0, 0.1, 0.8} for rank; target: rank "
          "normalisation, λ 0 and `--depth-target` from {" + ", ".join(TARGETS["target"]) + "}).\n")
    print("| dataset | GCN | MLP | 1-hop | best baseline | " + " | ".join(n for n, _, _ in options) + " |")
    print("|---|---|---|---|---|" + "---|" * len(options))
    print("\n".join(rows))
    print("\nDatasets won (beyond one std): " +
          "; ".join(f"{name} {len(ds)}" + (f" ({', '.join(ds)})" if ds else "") for name, ds in wins.items()) + "\n")
    print("| dataset | model | λ or target | T = 0 / 1 / 2 (all runs) |")
    print("|---|---|---:|---|")
    print("\n".join(hists))


METRIC_TITLES = {"accuracy": "accuracy", "roc_auc": "ROC AUC", "macro_f1": "macro F1"}
VARIANTS = (("plain", "linear"), ("ad_fast", "linear"), ("ad", "linear"), ("ad_fast", "log"), ("ad", "log"))
COLLAPSED = (("mlp", "linear"), ("onehop", "rank"))  # the backbone's collapsed forms (stage 6's TAGS)


def platonov_tables(src):
    """Stage 5: test score of every backbone and variant on the 10 splits, the published number
    beside it, the chosen settings and the depth histograms."""
    rows, hists, chosen = [], [], []
    metrics = set()
    for d in PLATONOV:
        for m in PLATONOV_BACKBONES:
            got = [src.platonov_table(d, m, v, n) for v, n in VARIANTS + COLLAPSED]
            if not any(s for s, _ in got):
                continue
            metrics |= {s["metric"] for s, _ in got if s}
            where = "/".join(sorted({w for _, w in got if w}))
            runs = "/".join(map(str, sorted({len(s["runs"]) for s, _ in got if s})))
            name = LABELS[m]
            rows.append(f"| {d} | {name} | {where} | {runs} | " + " | ".join(cell(s) for s, _ in got) +
                        f" | {lam(got[2][0])} | {lam(got[4][0])} | {PUBLISHED[d][m]} |")
            for (v, n), (s, _) in zip(VARIANTS, got):  # the AD rows (the collapsed ones: their own table)
                if v != "plain" and s:
                    hists.append(f"| {d} | AD-{name}{'_fast' if v == 'ad_fast' else ''} | {n} | "
                                 f"{lam(s)} | {hist(s)} |")
            for tag in ("plain", "linear", "log", "mlp", "onehop"):
                path, _, n = src.sweep(d, m, tag)
                c = chosen_settings(path) if path else None
                if c:
                    size = math.prod(len(v) for v in paper_small_grid(tag).values())
                    part = "" if n >= size else f" ({n}/{size} points)"
                    chosen.append(f"| {d} | {name} | {tag} | {c['layers']} | {c['lr']:g} | "
                                  f"{c['lambda']:g} | {100 * c['val_mean']:.1f} / {100 * c['test_mean']:.1f}{part} |")
    if not rows:
        return
    metric = "/".join(METRIC_TITLES.get(x, x) for x in sorted(metrics))
    print(f"\n### Platonov et al.'s binary benchmarks: test {metric} (%), 10 splits, mean ± std\n")
    print(f"Every number here is {metric} (`--metric auto`), selected by validation {metric}; "
          "published: Platonov et al. (ICLR 2023), their models (residual connections, "
          "layer norm, tuned depth and width), not ours.\n")
    print("| dataset | backbone | ran on | runs | plain | AD_fast lin | AD lin | AD_fast log | AD log | "
          "MLP | 1-hop | λ lin | λ log | published |")
    print("|---|---|---|---:|---|---|---|---|---|---|---|---:|---:|---|")
    print("\n".join(rows))
    print(f"\nThe sweeps' chosen points (paper-small grid, {SWEEP_RUNS} splits; hidden 128, dropout 0.5, "
          f"weight decay 5e-4, 200 epochs): validation / test {metric} (%)\n")
    print("| dataset | backbone | sweep | layers | lr | λ | val / test |")
    print("|---|---|---|---:|---:|---:|---|")
    print("\n".join(chosen))
    print("\nDepth histograms T(v) at the best validation epoch (T = 0 / 1 / ..., all runs)\n")
    print("| dataset | model | normalisation | λ | T = 0 / 1 / ... |")
    print("|---|---|---|---:|---|")
    print("\n".join(hists))


# ---- configs ----------------------------------------------------------------------------------

def write_yaml(path, header, settings):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    body = "".join(f"# {h}\n" if h else "#\n" for h in header)
    for k, v in settings.items():
        body += f"{k}: {v}\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(body)
    os.replace(tmp, path)


def read_meta(d):
    meta = {}
    try:
        with open(os.path.join(d, "meta.txt")) as f:
            for line in f:  # a folder resumed on several days keeps every line; the last wins
                k, _, v = line.partition(":")
                meta[k.strip()] = v.strip()
    except OSError:
        pass
    return meta


def meta_all(d, key):
    """Every value of `key` in a results folder's meta.txt, in order (one per run that wrote it)."""
    try:
        with open(os.path.join(d, "meta.txt")) as f:
            return [v.strip() for k, _, v in (l.partition(":") for l in f) if k.strip() == key]
    except OSError:
        return []


def configs(a):
    src = Sources(a.dir)
    written = 0
    for d in DATASETS:
        for m in BACKBONES:
            for tag, fname, variant in (("linear", f"{m}.yaml", "ad_fast"),
                                        ("plain", f"{m}.plain.yaml", "plain"),
                                        ("log", f"{m}.log.yaml", "ad_fast")):
                path, _, n = src.sweep(d, m, tag)
                s = chosen_settings(path) if path else None
                borrowed, own_points = False, 0
                if s is not None and tag == "linear" and m != "gcn" and 2 * n < grid_size(tag):
                    # Fewer than half the grid: too few points to trust (on DBLP the first points
                    # of a cut-short sweep were all weight decay 0.1, a constant prediction).
                    s, own_points = None, n
                if s is None and tag == "linear" and m != "gcn":
                    # No sweep of this backbone yet: start it from what AD-GCN_fast's sweep chose,
                    # and say so, so that `adgnn train -c` has a file for every dataset x backbone.
                    path, _, n = src.sweep(d, "gcn", tag)
                    s = chosen_settings(path) if path else None
                    borrowed = s is not None
                if s is None:
                    continue
                meta = read_meta(os.path.dirname(path))
                dev = f" (--device {meta['device'].split()[0]})" if meta.get("device") else ""
                # A folder resumed by several runs lists each run's date and commit: name them all.
                dates, commits = meta_all(os.path.dirname(path), "date"), meta_all(os.path.dirname(path), "commit")
                when = dates[0] if len(dates) <= 1 else f"between {dates[0]} and {dates[-1]}"
                at = ", ".join(dict.fromkeys(c[:7] for c in commits)) or "?"
                where = (f"{when or '?'} on {meta.get('machine', '?')}{dev}, adgnn at commit"
                         f"{'s' if ',' in at else ''} {at}")
                size = grid_size(tag)
                name = LABELS[m]
                what = {"linear": f"AD-{name}_fast, linear normalisation (the paper's)",
                        "plain": f"plain {name}",
                        "log": f"AD-{name}_fast, log normalisation"}[tag]
                grid = "; ".join(f"{k} {v}" for k, v in grid_of(tag).items())
                swept = "gcn" if borrowed else m
                header = [f"{d} x {m}: the settings that won a sweep by validation accuracy, for {what}."]
                if borrowed:
                    why = (f"its own sweep finished only {own_points} of {grid_size(tag)} points" if own_points
                           else "no time was left for it")
                    header = [f"{d} x {m}: NOT SWEPT for {name} ({why}): the settings that won "
                              f"AD-GCN_fast's sweep (linear normalisation), a starting point, not a tuned choice.",
                              f"To tune it: the sweep below with --model {m} (scripts/results.py run --stages 4)."]
                header += [f"Sweep: adgnn sweep {d} --model {swept} --variant {variant} --normalisation "
                          f"{'linear' if tag == 'plain' else tag} --splits auto --runs {SWEEP_RUNS}",
                          f"  --layers {COMMON['layers']} --epochs {COMMON['epochs']} --patience "
                          f"{COMMON['patience']} --seed {COMMON['seed']}, grid: {grid}.",
                          f"Points finished: {n} of {size}" +
                          ("." if n >= size else " (INCOMPLETE: stopped by a time limit; the best of those)."),
                          f"Chosen point: validation {100 * s['val_mean']:.2f} ± {100 * s['val_std']:.2f}, "
                          f"test {100 * s['test_mean']:.2f} ± {100 * s['test_std']:.2f} (mean ± std, {SWEEP_RUNS} runs).",
                          f"Ran {where}.",
                          "Made by scripts/results.py configs (docs/results.md says how to rerun)."]
                settings = {"dataset": d, "model": m, "variant": variant, "splits": "auto",
                            "layers": COMMON["layers"], "hidden": s["hidden"], "dropout": s["dropout"],
                            "lr": s["lr"], "weight_decay": s["weight_decay"], "epochs": COMMON["epochs"],
                            "patience": COMMON["patience"]}
                if tag != "plain":
                    settings.update({"lambda": s["lambda"], "normalisation": tag})
                settings["runs"] = TABLE_RUNS
                write_yaml(os.path.join(a.configs, d, fname), header, settings)
                written += 1
    print(f"wrote {written} configs under {a.configs}/")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--bin", required=True)
    r.add_argument("--dir", required=True)
    r.add_argument("--device", default="cuda")
    r.add_argument("--slots", type=int, default=15)
    r.add_argument("--table-workers", type=int, default=5,
                   help="runs of one table row trained concurrently (slots it takes; default 5)")
    r.add_argument("--sweep-workers", type=int, default=3)
    r.add_argument("--t0", type=float, default=0)
    r.add_argument("--stop-launch", type=float, default=1e9)
    r.add_argument("--hard-stop", type=float, default=1e9)
    r.add_argument("--datasets", default="")
    r.add_argument("--backbones", default="", help="stages 4 and 5: these backbones only (default: all)")
    r.add_argument("--stages", default="", help="only these stages (1 GCN sweeps, 2 table, 3 band, "
                   "4 other backbones' sweeps, 5 Platonov's binary benchmarks, 6 depth that adapts; default all)")
    r.add_argument("--quick", action="store_true")
    t = sub.add_parser("tables")
    t.add_argument("--dir", required=True)
    c = sub.add_parser("configs")
    c.add_argument("--dir", required=True)
    c.add_argument("--configs", default="configs")
    a = ap.parse_args()
    {"run": run, "tables": tables, "configs": configs}[a.cmd](a)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (jobqueue): the finished jobs' files stay
        print("interrupted: the jobs in flight were stopped; rerun the same command to continue", file=sys.stderr)
        sys.exit(130)
