"""`adgnn predict` end to end: a checkpoint's model on the training graph and on others.

Usage: test_predict.py <adgnn binary> ["extra mpirun flags"]. For GCN plain, AD_fast (linear) and
AD (log normalisation):
- on the training graph, predict gives the training run's own --predictions (its last epoch's
  model, as the checkpoint holds) bit for bit: the stored settings and depth-benefit range rebuild
  the same function;
- the CSV holds the HDF5 file's rows;
- on 2 ranks of a partition folder (mpirun), the one-process logits within 1e-5 (relative);
- an updated graph (another generated graph of the same widths) is predicted, AD models with the
  training graph's depth-benefit range (stored in the checkpoint); a graph of another
  feature width or class count, and a file that is not a checkpoint, are refused with one line
  naming them (exit 2).
"""
import csv
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np


def run(cmd, want=0):
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == want, (cmd, r.returncode, r.stderr[-2000:])
    return r


def read(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f.keys()}


def main() -> int:
    adgnn = sys.argv[1]
    mpirun = ["mpirun", "-n", "2"] + (sys.argv[2].split() if len(sys.argv) > 2 else [])
    with tempfile.TemporaryDirectory() as tmp:
        p = lambda name: os.path.join(tmp, name)
        run([adgnn, "data", "generate", "--preset", "demo", "--seed", "3", "-o", p("g.h5")])
        run([adgnn, "data", "generate", "--preset", "demo", "--seed", "4", "--nodes", "2500", "-o", p("new.h5")])
        run([adgnn, "data", "generate", "--preset", "demo", "--seed", "3", "--features", "7", "-o", p("narrow.h5")])
        run([adgnn, "data", "generate", "--preset", "demo", "--seed", "3", "--classes", "3", "-o", p("three.h5")])
        run([adgnn, "partition", p("g.h5"), "--parts", "2", "-o", p("parts")])
        for variant, norm in [("plain", "linear"), ("ad_fast", "linear"), ("ad", "log")]:
            tag = f"{variant}_{norm}"
            ck, trained = p(f"{tag}.ck.h5"), p(f"{tag}.train.h5")
            run([adgnn, "train", p("g.h5"), "--variant", variant, "--normalisation", norm, "--layers", "3",
                 "--hidden", "16", "--epochs", "7", "--threads", "1", "--no-progress", "--checkpoint", ck,
                 "--predictions", trained])
            out, csv_path = p(f"{tag}.pred.h5"), p(f"{tag}.csv")
            r = run([adgnn, "predict", p("g.h5"), "--checkpoint", ck, "-o", out, "--csv", csv_path, "--threads", "1"])
            assert "epoch 7" in r.stdout, r.stdout
            got, want = read(out), read(trained)
            for key in ("logits", "prediction", "depth"):
                assert np.array_equal(got[key], want[key]), (tag, key, np.abs(got[key] - want[key]).max())
            probs = got["probabilities"]
            assert probs.shape == want["logits"].shape and np.allclose(probs.sum(1), 1, atol=1e-6), tag
            assert np.array_equal(probs.argmax(1), got["prediction"]), tag
            with open(csv_path) as f:
                rows = list(csv.DictReader(f))
            assert len(rows) == len(got["prediction"]), (tag, len(rows))
            assert [int(r["node"]) for r in rows] == list(range(len(rows))), tag
            assert np.array_equal([int(r["prediction"]) for r in rows], got["prediction"]), tag
            assert np.array_equal([int(r["depth"]) for r in rows], got["depth"]), tag
            c = probs.shape[1]
            assert np.allclose([[float(r[f"p_{k}"]) for k in range(c)] for r in rows], probs, rtol=1e-7, atol=1e-9), tag

            # Two ranks, each reading its part of the folder: the one-process function.
            index, joined = p(f"{tag}.dist.h5"), p(f"{tag}.joined.h5")
            run(mpirun + [adgnn, "predict", "--partition-dir", p("parts"), "--checkpoint", ck, "-o", index,
                          "--threads", "1"])
            run([adgnn, "predictions", "gather", index, "-o", joined])
            dist = read(joined)
            scale = np.abs(got["logits"]).max()
            assert np.abs(dist["logits"] - got["logits"]).max() <= 1e-5 * scale, tag
            assert np.array_equal(dist["depth"], got["depth"]), tag

            # An updated graph of the same widths.
            r = run([adgnn, "predict", p("new.h5"), "--checkpoint", ck, "-o", p(f"{tag}.new.h5"), "--json"])
            new = read(p(f"{tag}.new.h5"))
            assert new["prediction"].shape == (2500,) and new["probabilities"].shape == (2500, c), tag
            assert np.isfinite(new["logits"]).all(), tag
            if variant != "plain":
                # Normalised with the training graph's min and max, not its own: its depth benefit
                # then does not span exactly [0, 1] (its own range would put one node at each end).
                with h5py.File(ck, "r") as f:
                    assert "benefit_range" in f, tag
                eps = new["eps"]
                assert 0 <= eps.min() and eps.max() <= 1 and not (eps.min() == 0 and eps.max() == 1), (tag, eps.min(), eps.max())

            # Graphs the model cannot take.
            for bad, says in [("narrow.h5", "7 features per node, but the model of"),
                              ("three.h5", "3 classes, but the model of")]:
                r = run([adgnn, "predict", p(bad), "--checkpoint", ck, "-o", p("x.h5")], want=2)
                assert says in r.stderr and r.stderr.count("\n") == 1, (bad, r.stderr)
            print(f"{tag}: predict equals training's predictions; CSV, 2 ranks, an updated graph; bad graphs refused")
        r = run([adgnn, "predict", p("g.h5"), "--checkpoint", p("plain_linear.train.h5"), "-o", p("x.h5")], want=2)
        assert "not an adgnn checkpoint" in r.stderr and r.stderr.count("\n") == 1, r.stderr
        r = run([adgnn, "predict", p("g.h5"), "--checkpoint", p("missing.h5"), "-o", p("x.h5")], want=2)
        assert "missing.h5" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    return 0


if __name__ == "__main__":
    sys.exit(main())
