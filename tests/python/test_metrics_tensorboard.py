#!/usr/bin/env python3
"""scripts/metrics_tensorboard.py: a training run's metrics file read back from the TensorBoard
event files it writes (every scalar of every epoch, per-layer lists and nested timings
included), two runs as two TensorBoard runs, and bad input refused with one line (exit 2).

Usage: test_metrics_tensorboard.py <adgnn binary>
"""
import json
import os
import subprocess
import sys
import tempfile

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, 'scripts', 'metrics_tensorboard.py')
failures = []


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + what)
    if not ok:
        failures.append(what)


def convert(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main():
    adgnn = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        g = os.path.join(tmp, 'g.h5')
        subprocess.run([adgnn, 'data', 'generate', '--nodes', '200', '--classes', '3', '--features', '8',
                        '--seed', '3', '-o', g], check=True, capture_output=True)
        metrics = os.path.join(tmp, 'm.jsonl')
        subprocess.run([adgnn, 'train', g, '--variant', 'ad_fast', '--layers', '3', '--epochs', '4', '--runs', '2',
                        '--hidden', '8', '--threads', '1', '--no-progress', '--metrics', metrics],
                       check=True, capture_output=True)
        files = [metrics, os.path.join(tmp, 'm-run1.jsonl')]
        out = os.path.join(tmp, 'tb')
        r = convert(*files, '--out', out)
        check(r.returncode == 0, f'converts 2 runs: {r.stdout.strip()} {r.stderr.strip()}')
        for path, run in zip(files, (0, 1)):
            lines = [json.loads(l) for l in open(path)]
            name = os.path.basename(path)[:-len('.jsonl')]
            acc = EventAccumulator(os.path.join(out, name, f'run{run}'))
            acc.Reload()
            tags = set(acc.Tags()['scalars'])
            for tag, get in [('loss', lambda o: o['loss']), ('val_acc', lambda o: o['val_acc']),
                             ('active_rows/layer2', lambda o: o['active_rows'][1]),
                             ('train_phase_ms/forward/max', lambda o: o['train_phase_ms']['forward']['max'])]:
                events = acc.Scalars(tag) if tag in tags else []
                got = [(e.step, e.value) for e in events]
                want = [(o['epoch'], get(o)) for o in lines]
                same = len(got) == len(want) and all(
                    s == ws and abs(v - wv) <= 1e-6 * max(1.0, abs(wv)) for (s, v), (ws, wv) in zip(got, want))
                check(same, f'run {run}: {tag} per epoch equals the metrics file ({len(got)} of {len(want)} steps)')
            check('metric' not in tags and 'epoch' not in tags, f'run {run}: no text or step fields as scalars')
        bad = os.path.join(tmp, 'bad.jsonl')
        with open(bad, 'w') as f:
            f.write('{"epoch": 1, "loss": 1.0}\n{"loss": 2\n')
        r = convert(bad, '--out', out)
        check(r.returncode == 2 and r.stderr.count('\n') == 1 and 'bad.jsonl:2: not JSON' in r.stderr,
              f'a broken line: exit {r.returncode}, {r.stderr.strip()}')
        r = convert(os.path.join(tmp, 'missing.jsonl'), '--out', out)
        check(r.returncode == 2 and 'missing.jsonl' in r.stderr, f'a missing file: exit {r.returncode}, {r.stderr.strip()}')
    print(f'{len(failures)} failed')
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
