"""Writes scikit-learn's scores of fixture predictions for tests/trainer/test_scores.cpp.

Usage: sklearn_reference.py <out dir>. Writes <out dir>/scores.json: a list of cases, each with
its logits (rows x classes), labels, a mask of the rows scored, the metric, and scikit-learn's
value on the masked rows (roc_auc_score, f1_score(average="macro"), accuracy_score). The cases
have ties (repeated scores and repeated rows), heavy imbalance, classes absent from the labels or
the predictions, and scores far apart in magnitude. Every float is written as repr() gives it,
so the C++ test reads exactly the numbers scikit-learn saw.
"""
import json
import os
import sys

import numpy as np
from scipy.special import softmax
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score


def binary_case(rng, n, positive_share, levels):
    """Two classes: logits (0, s) so that logit_1 - logit_0 == s exactly; `levels` distinct
    score values (few: many ties)."""
    y = (rng.random(n) < positive_share).astype(np.int64)
    s = rng.integers(0, levels, n).astype(np.float64) / 4 + 0.75 * y * rng.random(n)
    s[rng.random(n) < 0.3] = 1.25  # one heavily tied value across both classes
    logits = np.stack([np.zeros(n), s], axis=1)
    return logits, y


def multiclass_case(rng, n, classes):
    """More classes: random logits with some rows repeated (tied probabilities)."""
    y = rng.integers(0, classes, n)
    logits = rng.normal(size=(n, classes)) + 1.5 * np.eye(classes)[y]
    dup = rng.choice(n, n // 5, replace=False)
    logits[dup] = logits[dup[0]]
    return logits, y


def main() -> int:
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20261207)
    cases = []

    def add(name, metric, logits, y, mask):
        m = mask.astype(bool)
        if metric == "roc_auc":
            if logits.shape[1] == 2:
                value = roc_auc_score(y[m], logits[m, 1] - logits[m, 0])
            else:
                value = roc_auc_score(y[m], softmax(logits[m], axis=1), multi_class="ovr", average="macro")
        elif metric == "macro_f1":
            value = f1_score(y[m], logits[m].argmax(1), average="macro")
        else:
            value = accuracy_score(y[m], logits[m].argmax(1))
        cases.append({"name": name, "metric": metric, "logits": logits.tolist(), "labels": y.tolist(),
                      "mask": m.astype(int).tolist(), "expected": float(value)})

    for k, (n, share, levels) in enumerate([(400, 0.2, 6), (1000, 0.5, 3), (300, 0.03, 40), (50, 0.5, 2)]):
        logits, y = binary_case(rng, n, share, levels)
        mask = rng.random(n) < 0.7
        mask[np.flatnonzero(y == 1)[:1]] = True  # at least one positive scored
        mask[np.flatnonzero(y == 0)[:1]] = True
        add(f"binary-{k}", "roc_auc", logits, y, mask)
        add(f"binary-{k}", "accuracy", logits, y, mask)
    # Scores far apart in magnitude (exactness does not depend on their scale).
    y = np.array([0, 1, 0, 1, 1, 0, 0, 1])
    s = np.array([-1e300, 1e-300, 0.0, 1e300, -0.0, 5e-324, 1e300, -1e300])
    add("binary-extremes", "roc_auc", np.stack([np.zeros(8), s], axis=1), y, np.ones(8))
    for k, (n, c) in enumerate([(600, 5), (200, 3)]):
        logits, y = multiclass_case(rng, n, c)
        add(f"multiclass-{k}", "roc_auc", logits, y, rng.random(n) < 0.8)
        add(f"multiclass-{k}", "macro_f1", logits, y, rng.random(n) < 0.8)
        add(f"multiclass-{k}", "accuracy", logits, y, rng.random(n) < 0.8)
    # Macro F1 where a class is only predicted, one only a label, one neither.
    y = np.array([0, 0, 1, 1, 1, 2, 2, 0, 1, 2])
    pred = np.array([0, 3, 1, 1, 0, 2, 3, 0, 1, 1])
    add("f1-absent-classes", "macro_f1", np.eye(5)[pred] * 2.0, y, np.ones(10))

    with open(os.path.join(out_dir, "scores.json.tmp"), "w") as f:
        json.dump(cases, f)
    os.replace(os.path.join(out_dir, "scores.json.tmp"), os.path.join(out_dir, "scores.json"))
    print(f"{len(cases)} cases in {out_dir}/scores.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
