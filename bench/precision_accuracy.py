#!/usr/bin/env python3
"""The bf16-against-fp32 accuracy table from bench/precision_accuracy.sh's outputs.

Usage: precision_accuracy.py ACC_DIR [--card NAME] [--date TEXT]

ACC_DIR holds `adgnn train --summary` files named <dataset>_<variants>_<fp32|bf16>.json. One row
per dataset and model: the test score's mean and std over the runs in each precision, their
difference, and whether the bf16 mean lies within the fp32 runs' std ("yes"), and a last line
counting those.
"""
import argparse
import glob
import json
import os
import sys


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('acc_dir')
    ap.add_argument('--card', default='')
    ap.add_argument('--date', default='')
    a = ap.parse_args(argv)
    by = {}  # (dataset, model) -> precision -> summary
    for path in sorted(glob.glob(os.path.join(a.acc_dir, '*.json'))):
        prec = os.path.basename(path)[:-len('.json')].rsplit('_', 1)[1]
        with open(path) as f:
            for s in json.load(f):
                by.setdefault((s['dataset'], s['model']), {})[prec] = s
    order = {'GCN': 0, 'AD-GCN_fast': 1, 'AD-GCN': 2}
    out = []
    if a.card or a.date:
        out += ['; '.join(x for x in (a.card, a.date) if x), '']
    out += ['| dataset | model | runs | fp32 test | bf16 test | bf16 - fp32 | within fp32 std |',
            '|---|---|---:|---:|---:|---:|:---:|']
    within = total = 0
    for (d, m) in sorted(by, key=lambda k: (k[0], order.get(k[1], 9))):
        p = by[(d, m)]
        f, b = p.get('fp32'), p.get('bf16')
        cell = lambda s: '-' if not s else f"{100 * s['test_mean']:.2f} ± {100 * s['test_std']:.2f}"
        if f and b:
            diff = b['test_mean'] - f['test_mean']
            ok = abs(diff) <= f['test_std']
            within += ok
            total += 1
            verdict, delta = ('yes' if ok else 'no'), f'{100 * diff:+.2f}'
        else:
            verdict, delta = '-', '-'
        runs = len((f or b or {}).get('runs', []))
        out.append(f'| {d} | {m} | {runs} | {cell(f)} | {cell(b)} | {delta} | {verdict} |')
    out += ['', f'bf16 within the fp32 std: {within} of {total} (test score in %: accuracy, or ROC AUC where '
                'the dataset is scored by it)']
    print('\n'.join(out))
    return 0 if total else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
