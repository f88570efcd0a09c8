"""`adgnn export` read back by python/adgnn_torch: the rebuilt model computes what `adgnn predict` does.

Usage: test_export.py <adgnn binary>. Never downloads anything; exits non-zero on failure.

Fixtures: a generated graph (`adgnn data generate`, 300 nodes, power-law degrees, a few isolated
nodes) and a directed graph derived from it (each edge kept in one direction but for a fifth of
them, plus self-loops and duplicate edges, features stored as CSR; `adgnn data convert`), which
DirGNN and a few other cases read.

Every backbone (gcn gat sage mixhop gatv2 dirgnn) x variant (plain ad ad_fast ad_sharp), and a few
more cases (plain with --degree-threshold, 4 layers with --t-max 5, other backbones on the
directed graph): train 5 epochs (3 layers, hidden 8, 2 heads for GAT / GATv2, BatchNorm on some),
with log / rank normalisation and lambda > 0 on several AD cases; `adgnn predict` the graph,
`adgnn export`, adgnn_torch.load(..., dtype=torch.float64) and run it on the file's features and
stored edges (read with h5py). Checks:
- logits: |python - predict| <= 1e-5 * max(1, |predict|) per entry. The reference computes in
  float64 from the exported float32 weights; predict computes in float32, so the bound leaves
  float32's accumulated rounding (about 1e-7 relative) two orders of magnitude of room;
- depth: T(v) equal to predict's for every node (plain: L, or 0 below the degree threshold);
  AD cases: the normalised depth benefit eps within 1e-4 (EPS_TOLERANCE says why), and over all AD cases every depth
  0..3 occurs (so the self-only and frozen rows are exercised);
- refused: an HDF5 checkpoint, a torch file of another format and a text file raise ValueError
  "not an adgnn export"; an ad_fast model with --heuristic jaccard raises ValueError naming the
  heuristic.
Prints one line per case (its largest logit error) and a summary.
"""
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
try:
    import adgnn_torch
except ImportError as e:
    sys.exit(f"test_export.py: adgnn_torch is not importable by {sys.executable} ({e}); "
             "it needs torch and torch_geometric (scripts/setup.sh installs them into .venv)")

TOLERANCE = 1e-5
# eps is log|alpha| rescaled, alpha = (1 + 2 d+ - d) / (d + 1): where d+ is near (d - 1) / 2 the
# subtraction cancels and float32's rounding of d+ in predict grows by 1 / |alpha|; the depths,
# which eps decides, are compared exactly.
EPS_TOLERANCE = 1e-4
EPOCHS = 5

# (backbone, variant, extra training flags, graph: "g" generated / "d" directed).
CASES = [
    ("gcn", "plain", ["--batchnorm", "true"], "g"),
    ("gcn", "ad", ["--normalisation", "log"], "g"),
    ("gcn", "ad_fast", [], "g"),
    ("gcn", "ad_sharp", ["--normalisation", "rank"], "g"),
    ("gat", "plain", [], "g"),
    ("gat", "ad", ["--batchnorm", "true"], "g"),
    ("gat", "ad_fast", ["--normalisation", "log", "--lambda", "0.1"], "g"),
    ("gat", "ad_sharp", [], "g"),
    ("sage", "plain", [], "g"),
    ("sage", "ad", ["--normalisation", "rank"], "g"),
    ("sage", "ad_fast", ["--batchnorm", "true", "--normalisation", "rank"], "g"),
    ("sage", "ad_sharp", ["--normalisation", "log"], "g"),
    ("mixhop", "plain", ["--batchnorm", "true"], "g"),
    ("mixhop", "ad", ["--lambda", "0.2"], "g"),
    ("mixhop", "ad_fast", ["--normalisation", "log"], "g"),
    ("mixhop", "ad_sharp", ["--batchnorm", "true", "--normalisation", "log"], "g"),
    ("gatv2", "plain", ["--batchnorm", "true"], "g"),
    ("gatv2", "ad", ["--normalisation", "log", "--lambda", "0.1"], "g"),
    ("gatv2", "ad_fast", ["--normalisation", "rank", "--lambda", "0.1"], "g"),
    ("gatv2", "ad_sharp", ["--normalisation", "log"], "g"),
    ("dirgnn", "plain", [], "d"),
    ("dirgnn", "ad", ["--normalisation", "log", "--batchnorm", "true"], "d"),
    ("dirgnn", "ad_fast", ["--lambda", "0.1"], "d"),
    ("dirgnn", "ad_sharp", ["--normalisation", "rank"], "d"),
    ("dirgnn", "ad_fast", ["--normalisation", "log"], "g"),
    ("gcn", "plain", ["--degree-threshold", "3"], "g"),
    ("gcn", "ad_fast", ["--layers", "4", "--t-max", "5", "--normalisation", "log"], "g"),
    ("sage", "ad", ["--normalisation", "log"], "d"),
    ("gat", "ad_sharp", ["--normalisation", "rank"], "d"),
]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stderr[-2000:]}")
    return r


def read_graph(path):
    """(x float32 [N, F], edge_index int64 [2, E]: the stored directed edges) of a graph file."""
    with h5py.File(path, "r") as f:
        n = int(f.attrs["num_nodes"])
        indptr, indices = f["graph/indptr"][()], f["graph/indices"][()].astype(np.int64)
        feats = f["features"]
        if feats.attrs["layout"].decode() == "dense":
            x = feats["values"][()]
        else:  # csr: duplicate entries add up (Features::to_dense)
            fp, fi, fd = feats["indptr"][()], feats["indices"][()], feats["data"][()]
            x = np.zeros((n, int(feats.attrs["cols"])), np.float32)
            np.add.at(x, (np.repeat(np.arange(n), np.diff(fp)), fi), fd)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    return torch.from_numpy(x), torch.from_numpy(np.stack([src, indices]))


def write_directed(adgnn, generated, npz, out):
    """A directed graph from the generated one: each undirected pair kept as u -> v or v -> u (both
    for a fifth of them), plus self-loops and duplicate edges; features as CSR."""
    x, ei = read_graph(generated)
    x, ei = x.numpy(), ei.numpy()
    n = x.shape[0]
    rng = np.random.default_rng(5)
    pairs = ei[:, ei[0] < ei[1]].T
    flip = rng.random(len(pairs)) < 0.5
    one_way = np.where(flip[:, None], pairs[:, ::-1], pairs)
    both = pairs[rng.random(len(pairs)) < 0.2][:, ::-1]
    loops = np.repeat(rng.choice(n, 6, replace=False)[:, None], 2, axis=1)
    edges = np.concatenate([one_way, both, loops, one_way[:8]])  # the last: duplicates
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))]
    with h5py.File(generated, "r") as f:
        labels = f["labels"][()]
    np.savez(npz, adj_indptr=np.r_[0, np.cumsum(np.bincount(edges[:, 0], minlength=n))],
             adj_indices=edges[:, 1], adj_data=np.ones(len(edges), np.float32), adj_shape=np.array([n, n]),
             attr_indptr=np.arange(0, x.size + 1, x.shape[1]), attr_indices=np.tile(np.arange(x.shape[1]), n),
             attr_data=x.ravel(), attr_shape=np.array(x.shape), labels=labels)
    run([adgnn, "data", "convert", npz, "-o", out])


def expect_refused(what, call, says):
    try:
        call()
    except ValueError as e:
        assert says in str(e), (what, str(e))
        print(f"refused: {what}: ValueError: {e}")
        return
    raise AssertionError(f"{what}: loaded, expected ValueError ({says})")


def main() -> int:
    if len(sys.argv) != 2:
        sys.exit("usage: test_export.py <adgnn binary>")
    adgnn = sys.argv[1]
    torch.set_num_threads(1)
    start = time.time()
    failures, depths_seen = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        p = lambda name: os.path.join(tmp, name)
        run([adgnn, "data", "generate", "--nodes", "300", "--classes", "3", "--avg-degree", "5",
             "--degree-dist", "powerlaw", "--features", "8", "--seed", "1", "-o", p("g.h5")])
        write_directed(adgnn, p("g.h5"), p("d.npz"), p("d.h5"))
        graphs = {k: read_graph(p(f"{k}.h5")) for k in ("g", "d")}
        for i, (backbone, variant, extra, graph) in enumerate(CASES):
            tag = f"{backbone} {variant} {' '.join(extra)} on {'directed' if graph == 'd' else 'generated'}"
            ck, pred, pt = p(f"{i}.ck.h5"), p(f"{i}.pred.h5"), p(f"{i}.pt")
            heads = ["--heads", "2"] if backbone in ("gat", "gatv2") else []
            layers = [] if "--layers" in extra else ["--layers", "3"]
            flags = layers + ["--hidden", "8"] + heads + extra
            run([adgnn, "train", p(f"{graph}.h5"), "--model", backbone, "--variant", variant,
                 "--epochs", str(EPOCHS), "--threads", "1", "--no-progress", "--checkpoint", ck] + flags)
            run([adgnn, "predict", p(f"{graph}.h5"), "--checkpoint", ck, "-o", pred, "--threads", "1"])
            run([adgnn, "export", "--checkpoint", ck, "-o", pt])
            with h5py.File(pred, "r") as f:
                want = {k: f[k][()] for k in f.keys()}
            model = adgnn_torch.load(pt, dtype=torch.float64)
            x, edge_index = graphs[graph]
            with torch.no_grad():
                logits = model(x, edge_index).numpy()
            depth = model.last_depth.numpy()
            err = np.abs(logits - want["logits"])
            worst = float((err / np.maximum(1.0, np.abs(want["logits"]))).max())
            problems = []
            if logits.shape != want["logits"].shape or worst > TOLERANCE:
                problems.append(f"logits off by {worst:.2e} (relative)")
            if not np.array_equal(depth, want["depth"]):
                problems.append(f"depth differs at {int((depth != want['depth']).sum())} nodes")
            if variant != "plain":
                eps_err = float(np.abs(model.last_eps.numpy() - want["eps"]).max())
                if eps_err > EPS_TOLERANCE:
                    problems.append(f"eps off by {eps_err:.2e}")
                depths_seen.update(int(t) for t in np.unique(depth))
            hist = np.bincount(depth, minlength=model.num_layers + 1)
            line = (f"{tag}: max |logit error| {err.max():.2e} (relative {worst:.2e}); "
                    f"T = 0..{model.num_layers}: {'/'.join(map(str, hist))}")
            print(("FAIL " if problems else "ok   ") + line + ("; " + "; ".join(problems) if problems else ""),
                  flush=True)
            if problems:
                failures.append(tag)

        # Files that are not exports, and a setting the reference does not implement.
        expect_refused("a checkpoint", lambda: adgnn_torch.load(p("0.ck.h5")), "not an adgnn export")
        torch.save({"format": "something-else"}, p("other.pt"))
        expect_refused("another torch file", lambda: adgnn_torch.load(p("other.pt")), "not an adgnn export")
        Path(p("text.pt")).write_text("not a model\n")
        expect_refused("a text file", lambda: adgnn_torch.load(p("text.pt")), "not an adgnn export")
        run([adgnn, "train", p("g.h5"), "--model", "gcn", "--variant", "ad_fast", "--heuristic", "jaccard",
             "--epochs", "1", "--layers", "2", "--hidden", "4", "--threads", "1", "--no-progress",
             "--checkpoint", p("jaccard.ck.h5")])
        run([adgnn, "export", "--checkpoint", p("jaccard.ck.h5"), "-o", p("jaccard.pt")])
        expect_refused("--heuristic jaccard", lambda: adgnn_torch.load(p("jaccard.pt")), "heuristic 'jaccard'")

    if not {0, 1, 2, 3} <= depths_seen:
        failures.append(f"AD cases reached only depths {sorted(depths_seen)}: the fixture no longer covers 0..3")
    print(f"{len(CASES) - len([f for f in failures if ' on ' in f])} of {len(CASES)} cases within "
          f"{TOLERANCE:g} with equal depths; AD depths seen {sorted(depths_seen)}; refusals ok; "
          f"{time.time() - start:.0f} s")
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
