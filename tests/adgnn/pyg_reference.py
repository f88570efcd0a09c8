#!/usr/bin/env python3
"""PyTorch Geometric references for the backbone layers (tests/adgnn/test_layers.cpp).

Usage: pyg_reference.py <out_dir>

Builds one small fixed directed graph and, for every backbone configuration, the PyG layer in
float64 with fixed random parameters (biases and attention vectors included, so nothing is
zero), and writes <out_dir>/<config>.npz with (all float64 unless noted):

  src, dst              int64 [E]   the stored directed edges (no loops, no duplicate pairs)
  x                     [N, F]      input features
  probe                 [N, O]      loss = sum(out * probe)
  out                   [N, O]      the layer on the whole graph
  grad_x                [N, F]      d loss / d x
  param.<name>          PyG's parameter, in PyG's layout (Linear weights are [out, in])
  grad.<name>           d loss / d param
  sub_rows              int64 [R]   sorted destination rows
  sub_grad_x, sub_grad.<name>       gradients of sum(out[sub_rows] * probe[sub_rows])
  self_rows             int64 [S]   rows fed to the layer as an edgeless graph
  self_probe            [S, O]
  self_out              [S, O]      the layer on x[self_rows] with an empty edge_index
  self_grad_x, self_grad.<name>     gradients of sum(self_out * self_probe) (x: of x[self_rows])
  in_dim, channels, heads, concat   int64 [1]  the configuration
  alpha                 [1]         DirGNN's alpha (0 elsewhere)

Every backbone but DirGNN reads the symmetrised edge_index (to_undirected, loops removed), the
graph our symmetric CSR holds; DirGNN reads the stored directed edges.
"""
import os
import sys

import numpy as np
import torch

try:
    from torch_geometric.nn import (DirGNNConv, GATConv, GATv2Conv, GCNConv, MixHopConv,
                                    SAGEConv)
    from torch_geometric.utils import remove_self_loops, to_undirected
except ImportError as e:
    sys.exit(f'pyg_reference.py: torch_geometric is not importable by {sys.executable} ({e}); '
             'scripts/setup.sh installs it into .venv')

N = 30
F_IN = 5
ISOLATED = 29    # no edges at all
NO_IN = 0        # out-edges only
NO_OUT = 1       # in-edges only
SUB_ROWS = [0, 1, 2, 7, 8, 13, 21, 29]
SELF_ROWS = [0, 1, 4, 9, 17, 29]


def make_graph(seed=20260101, num_edges=90):
    rng = np.random.RandomState(seed)
    edges = set()
    # A few reciprocal pairs (u -> v and v -> u: one symmetric entry), then random pairs.
    for u, v in [(3, 4), (5, 6), (10, 11)]:
        edges.add((u, v))
        edges.add((v, u))
    edges.update({(NO_IN, 2), (NO_IN, 7), (NO_IN, 13), (8, NO_OUT), (21, NO_OUT)})
    while len(edges) < num_edges:
        u, v = (int(t) for t in rng.randint(0, N, size=2))
        if u == v or ISOLATED in (u, v) or v == NO_IN or u == NO_OUT:
            continue
        edges.add((u, v))
    edges = sorted(edges)
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    assert not np.any(src == dst)
    assert ISOLATED not in src and ISOLATED not in dst
    assert NO_IN not in dst and NO_IN in src and NO_OUT not in src and NO_OUT in dst
    return src, dst


# name -> (constructor, channels, heads, concat, alpha, directed)
CONFIGS = {
    'gcn': (lambda: GCNConv(F_IN, 4), 4, 1, 1, 0.0, False),
    'gat_h2_concat': (lambda: GATConv(F_IN, 3, heads=2, concat=True), 3, 2, 1, 0.0, False),
    'gat_h1_mean': (lambda: GATConv(F_IN, 4, heads=1, concat=False), 4, 1, 0, 0.0, False),
    'gat_h2_mean': (lambda: GATConv(F_IN, 3, heads=2, concat=False), 3, 2, 0, 0.0, False),
    'sage': (lambda: SAGEConv(F_IN, 4, aggr='mean'), 4, 1, 1, 0.0, False),
    'mixhop': (lambda: MixHopConv(F_IN, 3, powers=[0, 1, 2]), 3, 1, 1, 0.0, False),
    'gatv2_h2_concat': (lambda: GATv2Conv(F_IN, 3, heads=2, concat=True, share_weights=False),
                        3, 2, 1, 0.0, False),
    'gatv2_h2_mean': (lambda: GATv2Conv(F_IN, 3, heads=2, concat=False, share_weights=False),
                      3, 2, 0, 0.0, False),
    'dirgnn': (lambda: DirGNNConv(GCNConv(F_IN, 4), alpha=0.5, root_weight=True),
               4, 1, 1, 0.5, True),
}


def grads(loss, x, params):
    gs = torch.autograd.grad(loss, [x] + [p for _, p in params])
    return gs[0], gs[1:]


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: pyg_reference.py <out_dir>')
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_default_dtype(torch.float64)

    src, dst = make_graph()
    directed = torch.stack([torch.from_numpy(src), torch.from_numpy(dst)])
    symmetric, _ = remove_self_loops(to_undirected(directed, num_nodes=N))
    empty = torch.empty((2, 0), dtype=torch.int64)
    gen = torch.Generator().manual_seed(7)
    x0 = torch.randn(N, F_IN, generator=gen)
    sub_rows = torch.tensor(SUB_ROWS, dtype=torch.int64)
    self_rows = torch.tensor(SELF_ROWS, dtype=torch.int64)

    for k, (name, (make, channels, heads, concat, alpha, is_dir)) in enumerate(CONFIGS.items()):
        torch.manual_seed(1000 + k)
        layer = make().double()
        with torch.no_grad():  # every parameter random and non-zero (PyG zeroes biases)
            for _, p in layer.named_parameters():
                p.copy_(0.5 * torch.randn_like(p))
        params = list(layer.named_parameters())
        edge_index = directed if is_dir else symmetric
        arrays = {
            'src': src, 'dst': dst,
            'in_dim': np.array([F_IN], dtype=np.int64),
            'channels': np.array([channels], dtype=np.int64),
            'heads': np.array([heads], dtype=np.int64),
            'concat': np.array([concat], dtype=np.int64),
            'alpha': np.array([alpha], dtype=np.float64),
        }
        for pname, p in params:
            arrays['param.' + pname] = p.detach().numpy().copy()

        # Whole graph.
        x = x0.clone().requires_grad_(True)
        out = layer(x, edge_index)
        probe = torch.randn(out.shape, generator=gen)
        gx, gp = grads((out * probe).sum(), x, params)
        arrays.update(x=x0.numpy().copy(), probe=probe.numpy(), out=out.detach().numpy(),
                      grad_x=gx.numpy())
        for (pname, _), g in zip(params, gp):
            arrays['grad.' + pname] = g.numpy()

        # A subset of destination rows (the loss sees only those rows).
        x = x0.clone().requires_grad_(True)
        out = layer(x, edge_index)
        gx, gp = grads((out[sub_rows] * probe[sub_rows]).sum(), x, params)
        arrays.update(sub_rows=sub_rows.numpy(), sub_grad_x=gx.numpy())
        for (pname, _), g in zip(params, gp):
            arrays['sub_grad.' + pname] = g.numpy()

        # The rows as an edgeless graph (each node with its self-loop only).
        xs = x0[self_rows].clone().requires_grad_(True)
        out_s = layer(xs, empty)
        probe_s = torch.randn(out_s.shape, generator=gen)
        gx, gp = grads((out_s * probe_s).sum(), xs, params)
        arrays.update(self_rows=self_rows.numpy(), self_probe=probe_s.numpy(),
                      self_out=out_s.detach().numpy(), self_grad_x=gx.numpy())
        for (pname, _), g in zip(params, gp):
            arrays['self_grad.' + pname] = g.numpy()

        path = os.path.join(out_dir, name + '.npz')
        np.savez(path + '.tmp.npz', **arrays)
        os.replace(path + '.tmp.npz', path)
    print(f'wrote {len(CONFIGS)} references to {out_dir} '
          f'({N} nodes, {len(src)} directed edges, {symmetric.size(1)} symmetric entries)')


if __name__ == '__main__':
    main()
