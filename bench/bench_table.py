#!/usr/bin/env python3
"""Join `adgnn bench --json` and `bench/pyg_gcn.py --json` into one Markdown table per depth.

Usage: bench_table.py [--ours ADGNN.json] [--pyg PYG.json] [--card NAME] [--date TEXT]

Either input may be missing (its columns then read "-"), so a failed run of one side still
shows the other. Columns: our GCN, AD-GCN_fast and AD-GCN median step (ms), the PyG peer (the
fastest PyG adjacency variant at that depth), PyG / our GCN (above 1: ours is faster), AD_fast /
GCN and AD / GCN, the mean active-edge fraction of the AD variants over their layers, and the
peak memory of each (MiB; "-" on the CPU). A second table lists every PyG variant. Warns when the two sides
report different graphs (they must read the same symmetric graph to be comparable).
"""
import argparse
import json
import os
import sys

OURS = (('plain', 'GCN'), ('ad_fast', 'AD-GCN_fast'), ('ad', 'AD-GCN'))


def load(path, what):
    if not path:
        return None
    if not os.path.isfile(path):
        print(f'> {what}: {path} missing')
        return None
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f'> {what}: {path} unreadable ({e})')
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get('rows'), list):
        print(f'> {what}: {path} has no "rows" list')
        return None
    return doc


def ms(v):
    return '-' if v is None else f'{v:.2f}'


def ratio(a, b):
    return '-' if a is None or b is None or b == 0 else f'{a / b:.2f}'


def mib(v):
    # No peak counter on the CPU: PyG writes null, adgnn bench 0.
    return '-' if not v else f'{v / 2**20:.0f}'


def mean(vals):
    vals = [float(v) for v in vals or []]
    return sum(vals) / len(vals) if vals else None


def graph_line(doc):
    g = doc.get('graph', {})
    return (f'{g.get("name", "?")}: {g.get("nodes", "?")} nodes, {g.get("edges", "?")} symmetric '
            f'entries, {g.get("features", "?")} features, {g.get("classes", "?")} classes')


def table(ours, pyg, card, date):
    out = []
    if card:
        out.append(f'Card: {card}' + (f'; {date}' if date else ''))
    elif date:
        out.append(date)
    for doc, what in ((ours, 'adgnn bench'), (pyg, 'PyG')):
        if doc:
            out.append(f'{what}: {graph_line(doc)} (device: {doc.get("device", "?")})')
    if ours and pyg:
        go, gp = ours.get('graph', {}), pyg.get('graph', {})
        for key in ('nodes', 'edges', 'features', 'classes'):
            if go.get(key) != gp.get(key):
                out.append(f'WARNING: graphs differ: {key} {go.get(key)} (adgnn) vs '
                           f'{gp.get(key)} (PyG): the timings are not comparable')
    out.append('')

    # (variant, depth) -> row, ours on the gcn backbone only; PyG: the peer row of each depth.
    our_rows = {}
    for r in (ours or {}).get('rows', []):
        if r.get('backbone', 'gcn') == 'gcn':
            v = r.get('variant')
            prec = r.get('fdelta_precision', 'fp32')
            if v == 'ad' and prec != 'fp32':
                v = 'ad_' + prec  # f_delta in TF32 or bfloat16 (--fdelta-precision): extra columns
            our_rows[(v, int(r['depth']))] = r
    pyg_rows = (pyg or {}).get('rows', [])
    peer = {}
    for r in pyg_rows:
        d = int(r['depth'])
        if d not in peer or r['step_ms_median'] < peer[d]['step_ms_median']:
            peer[d] = r
    depths = sorted({d for _, d in our_rows} | set(peer))
    low = sorted({v[3:] for v, _ in our_rows if v.startswith('ad_') and v != 'ad_fast'})

    out.append('| depth | GCN (ms) | AD-GCN_fast (ms) | AD-GCN (ms) | PyG GCN (ms) | PyG / GCN '
               '| AD_fast / GCN | AD / GCN | active edges AD_fast / AD '
               '| peak MiB GCN / AD_fast / AD / PyG |'
               + ''.join(f' AD-GCN, f_delta {p.upper()} (ms) | AD {p} / GCN |' for p in low))
    out.append('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|' + '---:|---:|' * len(low))
    for d in depths:
        t = {v: our_rows.get((v, d), {}).get('step_ms_median') for v, _ in OURS}
        p = peer.get(d, {})
        tp = p.get('step_ms_median')
        act = [mean(our_rows.get((v, d), {}).get('active_edge_fraction')) for v in ('ad_fast', 'ad')]
        peaks = [our_rows.get((v, d), {}).get('peak_bytes') for v, _ in OURS] + [p.get('peak_bytes')]
        out.append(f'| {d} | {ms(t["plain"])} | {ms(t["ad_fast"])} | {ms(t["ad"])} | {ms(tp)} '
                   f'| {ratio(tp, t["plain"])} | {ratio(t["ad_fast"], t["plain"])} '
                   f'| {ratio(t["ad"], t["plain"])} '
                   f'| {" / ".join("-" if a is None else f"{a:.2f}" for a in act)} '
                   f'| {" / ".join(mib(b) for b in peaks)} |'
                   + ''.join(f' {ms(our_rows.get(("ad_" + p, d), {}).get("step_ms_median"))} '
                             f'| {ratio(our_rows.get(("ad_" + p, d), {}).get("step_ms_median"), t["plain"])} |'
                             for p in low))

    if pyg_rows:
        out.append('')
        out.append('PyG variants (PyG GCN above is the fastest at each depth):')
        out.append('')
        out.append('| depth | variant | median (ms) | p10 | p90 | peak MiB |')
        out.append('|---:|---|---:|---:|---:|---:|')
        for r in sorted(pyg_rows, key=lambda r: (int(r['depth']), r['variant'])):
            out.append(f'| {r["depth"]} | {r["variant"]} | {ms(r["step_ms_median"])} '
                       f'| {ms(r.get("step_ms_p10"))} | {ms(r.get("step_ms_p90"))} '
                       f'| {mib(r.get("peak_bytes"))} |')
    return '\n'.join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--ours', help='adgnn bench --json output')
    ap.add_argument('--pyg', help='bench/pyg_gcn.py --json output')
    ap.add_argument('--card', default='', help='GPU name for the header')
    ap.add_argument('--date', default='', help='date for the header')
    args = ap.parse_args()
    ours, pyg = load(args.ours, 'adgnn bench'), load(args.pyg, 'PyG')
    if ours is None and pyg is None:
        print('bench_table.py: neither input is readable', file=sys.stderr)
        sys.exit(1)
    print(table(ours, pyg, args.card, args.date))


if __name__ == '__main__':
    main()
