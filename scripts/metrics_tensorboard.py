#!/usr/bin/env python3
"""Metrics JSON lines (`adgnn train --metrics`) as TensorBoard event files.

Usage: metrics_tensorboard.py METRICS.jsonl [METRICS-run1.jsonl ...] --out LOGDIR

Every file becomes one TensorBoard run per training run it holds: LOGDIR/<file name>/run<r>.
Each line is one epoch (the step). Every number becomes a scalar under its key; nested objects
join their keys with '/' (train_phase_ms/forward/max); per-layer lists become one scalar per
layer (active_rows/layer1, ...). Text fields (metric) are left out. Then:
  tensorboard --logdir LOGDIR
Bad input (a missing file, a line that is not a JSON object with an epoch) ends with one line
naming the file and line, exit code 2.
"""
import argparse
import json
import os
import sys


def fail(msg):
    print(f'metrics_tensorboard.py: {msg}', file=sys.stderr)
    sys.exit(2)


def scalars(obj, prefix=''):
    """(tag, value) for every number in a metrics line, flattened as the module docstring says."""
    for key, value in obj.items():
        tag = f'{prefix}{key}'
        if isinstance(value, bool):
            yield tag, float(value)
        elif isinstance(value, (int, float)):
            yield tag, float(value)
        elif isinstance(value, dict):
            yield from scalars(value, tag + '/')
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    yield f'{tag}/layer{i + 1}', float(v)


def read_lines(path):
    """The metrics lines of a file as dicts; exits 2 naming file:line on bad input."""
    try:
        with open(path) as f:
            text = f.read().splitlines()
    except OSError as e:
        fail(f'{path}: {e.strerror}')
    lines = []
    for n, line in enumerate(text, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            fail(f'{path}:{n}: not JSON ({e.msg})')
        if not isinstance(obj, dict) or not isinstance(obj.get('epoch'), int):
            fail(f'{path}:{n}: not a metrics line (a JSON object with an integer epoch)')
        lines.append(obj)
    if not lines:
        fail(f'{path}: no metrics lines')
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('metrics', nargs='+', help='metrics files of adgnn train --metrics')
    ap.add_argument('--out', required=True, help='TensorBoard log folder (created)')
    args = ap.parse_args()
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        fail(f'needs torch and tensorboard ({e}); scripts/setup.sh installs them into .venv')
    runs = {}
    for path in args.metrics:
        name = os.path.basename(path)
        if name.endswith('.jsonl'):
            name = name[:-len('.jsonl')]
        for obj in read_lines(path):
            runs.setdefault((name, int(obj.get('run', 0))), []).append(obj)
    written = 0
    for (name, run), lines in sorted(runs.items()):
        writer = SummaryWriter(log_dir=os.path.join(args.out, name, f'run{run}'))
        for obj in lines:
            for tag, value in scalars(obj):
                if tag not in ('epoch', 'run'):
                    writer.add_scalar(tag, value, global_step=obj['epoch'])
                    written += 1
        writer.close()
    print(f'{len(runs)} runs, {written} scalars -> {args.out} (tensorboard --logdir {args.out})')


if __name__ == '__main__':
    main()
