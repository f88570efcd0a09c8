#!/usr/bin/env python3
"""bf16 against fp32 from `adgnn bench --precision fp32,bf16 --json` files: one Markdown table.

Usage: precision_table.py BENCH.json [BENCH.json ...] [--card NAME] [--date TEXT]

One row per graph, model and depth: the median training step and the peak device memory of each
precision, and bf16 / fp32 for both (below 1: bf16 takes less). A model with only one precision
in a file shows "-" for the other.
"""
import argparse
import json
import sys


def ms(v):
    return '-' if v is None else f'{v:.2f}'


def mib(v):
    return '-' if not v else f'{v / 2**20:,.0f}'


def ratio(a, b):
    return '-' if not a or not b else f'{a / b:.2f}'


def rows_of(path):
    with open(path) as f:
        doc = json.load(f)
    g = doc.get('graph', {})
    name = f'{g.get("name", "?")} ({g.get("nodes", "?"):,} nodes, {g.get("edges", "?"):,} entries)'
    by = {}
    for r in doc.get('rows', []):
        base = r['model'].replace(' bf16', '')
        key = (base, r['depth'])
        by.setdefault(key, {})[r.get('precision', 'fp32')] = r
    return name, by


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('bench', nargs='+', help='adgnn bench --json outputs')
    ap.add_argument('--card', default='')
    ap.add_argument('--date', default='')
    a = ap.parse_args(argv)
    out = []
    if a.card or a.date:
        out.append('; '.join(x for x in (a.card, a.date) if x))
        out.append('')
    out.append('| graph | model | depth | fp32 step ms | bf16 step ms | bf16 / fp32 | fp32 peak MiB | '
               'bf16 peak MiB | bf16 / fp32 |')
    out.append('|---|---|---:|---:|---:|---:|---:|---:|---:|')
    for path in a.bench:
        name, by = rows_of(path)
        for (model, depth), p in by.items():
            f32, b16 = p.get('fp32', {}), p.get('bf16', {})
            s32, s16 = f32.get('step_ms_median'), b16.get('step_ms_median')
            m32, m16 = f32.get('peak_bytes'), b16.get('peak_bytes')
            out.append(f'| {name} | {model} | {depth} | {ms(s32)} | {ms(s16)} | {ratio(s16, s32)} | '
                       f'{mib(m32)} | {mib(m16)} | {ratio(m16, m32)} |')
    print('\n'.join(out))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
