#!/usr/bin/env python3
"""PyTorch Geometric peer of `adgnn bench`: the same full-batch GCN training step, timed the same way.

Usage: pyg_gcn.py GRAPH.h5 [--depths 2,4,8] [--hidden 128] [--steps 30] [--warmup 5]
                  [--device cuda] [--variants edge_index,sparse_csr] [--split random]
                  [--json OUT.json]

Reads one graph of our HDF5 format (docs/hdf5-format.md) with h5py and derives the view our loader
gives the GCN backbone (Graph::symmetric(): both directions of every stored edge, self-loops
dropped, duplicates merged). GCNConv then adds one self-loop per node and normalises
symmetrically, as our GCN does.

Model at depth D: D GCNConv layers (in -> hidden -> ... -> hidden -> classes), dropout 0.5 before
every layer (the input included, as our model does), ReLU after every hidden layer. One step:
forward, cross entropy on the train mask of split 0 of the split family (--split; by default
`random`, else the graph's first family, as `adgnn bench` chooses), backward, Adam
(lr 0.01, weight decay 5e-4), then a device synchronisation. Reported: median, 10th and 90th
percentile of --steps steps after --warmup untimed ones, and torch.cuda.max_memory_allocated over
the depth's run (the peak counter is reset before each depth; graph and features stay resident
and count, as they do for our binary).

Adjacency variants (PyG 2.8 without torch_sparse):
  edge_index  int64 [2, E] with per-edge weights: gather + scatter-add message passing.
  sparse_csr  a torch.sparse_csr_tensor adjacency: GCNConv fuses message and aggregate into
              torch.sparse.mm (cuSPARSE on CUDA).
The GCN normalisation (PyG's gcn_norm, exactly what GCNConv(cached=True) computes and caches) is
computed once per variant, outside the timed steps, and shared by all layers (normalize=False):
per-layer caches would hold D copies of the normalised adjacency and inflate the peak memory,
while the timed work is the same. The row with the lowest median at each depth is marked
"peer": true.

The JSON mirrors `adgnn bench --json`: {"device", "graph": {name, nodes, edges (symmetric CSR
entries, no self-loops), features, classes}, "torch", "torch_geometric", "rows": [{model
"PyG-GCN", backbone "gcn", variant "pyg_edge_index" | "pyg_sparse_csr", depth, hidden,
step_ms_median, step_ms_p10, step_ms_p90, peak_bytes (null on CPU), peer}]}.
"""
import argparse
import json
import os
import sys
import time

import warnings

import numpy as np

# torch.sparse_csr_tensor warns that CSR support is beta and that invariant checks are off (the
# CSR is built here from a sorted, deduplicated view): noise in the log.
warnings.filterwarnings('ignore', message='Sparse CSR tensor support is in beta state')
warnings.filterwarnings('ignore', message='Sparse invariant checks are implicitly disabled')

try:
    import h5py
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    import torch_geometric
except ImportError as e:
    sys.exit(f'pyg_gcn.py: {e} (needs h5py, torch and torch_geometric in {sys.executable})')

VARIANTS = ('edge_index', 'sparse_csr')


def fail(msg):
    """Bad input: one line on stderr, exit 2 (as the adgnn CLI does)."""
    print(f'pyg_gcn.py: {msg}', file=sys.stderr)
    sys.exit(2)


def int_list(text, flag):
    try:
        vals = [int(t) for t in text.split(',') if t.strip()]
    except ValueError:
        fail(f'{flag} {text}: expected comma-separated integers')
    if not vals or min(vals) < 1:
        fail(f'{flag} {text}: expected positive integers')
    return vals


def symmetric_csr(indptr, indices, n):
    """Graph::symmetric(): both directions of every non-loop stored edge, sorted and deduplicated
    per row. Returns (row, col) of the entries in row-major order."""
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    col = indices.astype(np.int64)
    keep = row != col
    row, col = row[keep], col[keep]
    key = np.unique(np.concatenate([row * n + col, col * n + row]))
    return key // n, key % n


def load_graph(path, split_family):
    if not os.path.isfile(path):
        fail(f'{path}: no such file')
    try:
        f = h5py.File(path, 'r')
    except OSError as e:
        fail(f'{path}: not readable as HDF5 ({e})')
    with f:
        if f.attrs.get('format') not in ('adgnn-graph', b'adgnn-graph'):
            fail(f'{path}: not an adgnn graph file (no format = adgnn-graph attribute)')
        n = int(f.attrs['num_nodes'])
        classes = int(f.attrs['num_classes'])
        name = f.attrs.get('name', os.path.basename(path))
        name = name.decode() if isinstance(name, bytes) else str(name)
        row, col = symmetric_csr(f['graph/indptr'][()], f['graph/indices'][()], n)
        feats = f['features']
        layout = feats.attrs['layout']
        layout = layout.decode() if isinstance(layout, bytes) else str(layout)
        if layout == 'dense':
            x = feats['values'][()].astype(np.float32)
        elif layout == 'csr':
            fp, fi, fd = feats['indptr'][()], feats['indices'][()], feats['data'][()]
            x = np.zeros((n, int(feats.attrs['cols'])), np.float32)
            x[np.repeat(np.arange(n), np.diff(fp)), fi] = fd
        else:
            fail(f'{path}: unknown feature layout {layout!r}')
        y = f['labels'][()].astype(np.int64)
        families = sorted(f['splits'].keys()) if 'splits' in f else []
        if split_family is None:
            # As `adgnn bench`: the random family, else the first one.
            if not families:
                fail(f'{path}: no split families (pass a graph with /splits)')
            split_family = 'random' if 'random' in families else families[0]
        elif split_family not in families:
            fail(f'--split {split_family}: {path} has no such split family '
                 f'(families: {", ".join(families) or "none"})')
        train = f[f'splits/{split_family}/train'][0].astype(bool)
    if not train.any():
        fail(f'{path}: split {split_family} 0 has an empty train set')
    return dict(name=name, n=n, classes=classes, row=row, col=col, x=x, y=y, train=train,
                split=split_family)


def adjacency(g, variant, device):
    """The normalised adjacency GCNConv(normalize=False) takes: (adj, edge_weight)."""
    n = g['n']
    # source_to_target flow aggregates at edge_index[1]; rows are sorted, so put them there
    # (the scatter then writes each target's entries contiguously).
    ei = torch.from_numpy(np.stack([g['col'], g['row']])).to(device)
    if variant == 'edge_index':
        return gcn_norm(ei, None, n, False, True, 'source_to_target', torch.float32)
    crow = torch.from_numpy(np.concatenate([[0], np.cumsum(np.bincount(g['row'], minlength=n))]))
    adj = torch.sparse_csr_tensor(crow.to(device), torch.from_numpy(g['col']).to(device),
                                  torch.ones(len(g['col']), device=device), size=(n, n),
                                  check_invariants=False)
    return gcn_norm(adj, None, n, False, True, 'source_to_target', torch.float32)


class GCN(torch.nn.Module):
    def __init__(self, in_dim, hidden, out_dim, depth, dropout=0.5):
        super().__init__()
        dims = [in_dim] + [hidden] * (depth - 1) + [out_dim]
        self.convs = torch.nn.ModuleList(
            GCNConv(a, b, normalize=False) for a, b in zip(dims[:-1], dims[1:]))
        self.dropout = dropout

    def forward(self, x, adj, weight):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            x = conv(x, adj, weight)
            if i + 1 < len(self.convs):
                x = F.relu(x)
        return x


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_depth(g, tensors, adj, weight, depth, args, device):
    x, y, train = tensors
    torch.manual_seed(0)
    model = GCN(x.size(1), args.hidden, g['classes'], depth).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    model.train()
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for step in range(args.warmup + args.steps):
        sync(device)
        t0 = time.perf_counter()
        opt.zero_grad()
        out = model(x, adj, weight)
        loss = F.cross_entropy(out[train], y[train])
        loss.backward()
        opt.step()
        sync(device)
        if step >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    if not np.isfinite(loss.item()):
        raise RuntimeError(f'depth {depth}: non-finite loss')
    peak = int(torch.cuda.max_memory_allocated(device)) if device.type == 'cuda' else None
    del model, opt, out, loss
    return times, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('graph', help='a .h5 graph of our format')
    ap.add_argument('--depths', default='2,4,8')
    ap.add_argument('--hidden', type=int, default=128)
    ap.add_argument('--steps', type=int, default=30)
    ap.add_argument('--warmup', type=int, default=5)
    ap.add_argument('--device', default='cuda')
    ap.add_argument('--variants', default=','.join(VARIANTS),
                    help='comma-separated subset of ' + ', '.join(VARIANTS))
    ap.add_argument('--split', help='split family, split 0 is used (default: random if the graph '
                    'has it, else its first family)')
    ap.add_argument('--json', help='write the results here')
    args = ap.parse_args()
    depths = int_list(args.depths, '--depths')
    if args.steps < 1 or args.warmup < 0 or args.hidden < 1:
        fail('--steps and --hidden must be >= 1, --warmup >= 0')
    variants = [v for v in args.variants.split(',') if v]
    for v in variants:
        if v not in VARIANTS:
            fail(f'--variants {v}: unknown (known: {", ".join(VARIANTS)})')
    try:
        device = torch.device(args.device)
    except RuntimeError as e:
        fail(f'--device {args.device}: {e}')
    if device.type == 'cuda' and not torch.cuda.is_available():
        fail(f'--device {args.device}: CUDA is not available to this torch')

    g = load_graph(args.graph, args.split)
    tensors = (torch.from_numpy(g['x']).to(device), torch.from_numpy(g['y']).to(device),
               torch.from_numpy(g['train']).to(device))
    dev_name = torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'
    print(f'# {g["name"]}: {g["n"]} nodes, {len(g["row"])} symmetric entries, '
          f'{g["x"].shape[1]} features, {g["classes"]} classes; train: split {g["split"]} 0, '
          f'{int(g["train"].sum())} nodes; {dev_name}; '
          f'torch {torch.__version__}, torch_geometric {torch_geometric.__version__}', flush=True)

    rows = []
    for variant in variants:
        adj, weight = adjacency(g, variant, device)
        for depth in depths:
            times, peak = time_depth(g, tensors, adj, weight, depth, args, device)
            rows.append(dict(model='PyG-GCN', backbone='gcn', variant='pyg_' + variant,
                             depth=depth, hidden=args.hidden,
                             step_ms_median=float(np.median(times)),
                             step_ms_p10=float(np.percentile(times, 10)),
                             step_ms_p90=float(np.percentile(times, 90)),
                             peak_bytes=peak, peer=False))
            r = rows[-1]
            mem = f'{peak / 2**20:.0f} MiB' if peak is not None else 'n/a'
            print(f'{r["variant"]:16s} depth {depth:2d}: median {r["step_ms_median"]:9.2f} ms '
                  f'(p10 {r["step_ms_p10"]:.2f}, p90 {r["step_ms_p90"]:.2f}), peak {mem}',
                  flush=True)
        del adj, weight
        if device.type == 'cuda':
            torch.cuda.empty_cache()
    for depth in depths:
        at = [r for r in rows if r['depth'] == depth]
        min(at, key=lambda r: r['step_ms_median'])['peer'] = True

    if args.json:
        doc = dict(device=dev_name,
                   graph=dict(name=g['name'], nodes=g['n'], edges=int(len(g['row'])),
                              features=int(g['x'].shape[1]), classes=g['classes']),
                   torch=torch.__version__, torch_geometric=torch_geometric.__version__,
                   split=g['split'], steps=args.steps, warmup=args.warmup, rows=rows)
        tmp = f'{args.json}.tmp.{os.getpid()}'
        with open(tmp, 'w') as out:
            json.dump(doc, out, indent=1)
            out.write('\n')
        os.replace(tmp, args.json)


if __name__ == '__main__':
    main()
