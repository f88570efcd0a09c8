"""`adgnn train --metric` end to end on minesweeper, against scikit-learn.

Usage: test_metric.py <adgnn binary> <data dir>. Exits 77 (ctest: skipped) when the data dir has
no minesweeper. Trains a few epochs with --predictions and --metrics, then scores the written
logits with scikit-learn on the run's Platonov split and compares with what adgnn reported: the
last epoch's line (the predictions are that epoch's model) and the summary at the best epoch.
The JSON writer keeps 6 to 8 significant digits, hence the 1e-6 tolerance; the exact agreement
is trainer/test_scores.cpp's.
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
from sklearn.metrics import f1_score, roc_auc_score

TOL = 1e-6


def main() -> int:
    adgnn, data = sys.argv[1], sys.argv[2]
    npz = os.path.join(data, "minesweeper", "minesweeper.npz")
    if not os.path.exists(npz):
        print(f"skipped: {npz} is absent (../shared/data not beside the checkout)")
        return 77
    masks = np.load(npz)
    with tempfile.TemporaryDirectory() as tmp:
        for flag, key in [([], "roc_auc"), (["--metric", "macro_f1"], "macro_f1"), (["--metric", "accuracy"], "acc")]:
            pred, lines = os.path.join(tmp, f"{key}.h5"), os.path.join(tmp, f"{key}.jsonl")
            run = subprocess.run([adgnn, "train", "minesweeper", "--data-dir", data, "--epochs", "6", "--runs", "1",
                                  "--threads", "1", "--no-progress", "--json", "--predictions", pred,
                                  "--metrics", lines] + flag, check=True, capture_output=True, text=True)
            summary = json.loads(run.stdout)[0]
            metric = "accuracy" if key == "acc" else key
            assert summary["metric"] == metric, (flag, summary["metric"])
            epochs = [json.loads(line) for line in open(lines)]
            last = epochs[-1]
            assert all(e["metric"] == metric for e in epochs)
            with h5py.File(pred, "r") as f:
                logits, labels = f["logits"][()], f["labels"][()]
            for split in ["train", "val", "test"]:
                m = masks[f"{split}_masks"][0]
                if key == "roc_auc":
                    want = roc_auc_score(labels[m], logits[m, 1] - logits[m, 0])
                elif key == "macro_f1":
                    want = f1_score(labels[m], logits[m].argmax(1), average="macro")
                else:
                    want = float((logits[m].argmax(1) == labels[m]).mean())
                got = last[f"{split}_{key}"]
                assert abs(got - want) < TOL, (key, split, got, want)
            # Early stopping and the summary follow the metric: the best epoch has the highest val.
            best = max(epochs, key=lambda e: e[f"val_{key}"])
            assert summary["runs"][0]["best_epoch"] == best["epoch"], (key, summary["runs"][0]["best_epoch"])
            assert abs(summary["test_mean"] - best[f"test_{key}"]) < TOL, (key, summary["test_mean"])
            print(f"{metric}: adgnn and scikit-learn agree on train/val/test (last epoch {last['epoch']}); "
                  f"best epoch {best['epoch']} by validation {metric}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
