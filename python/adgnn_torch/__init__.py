"""adgnn_torch: models of `adgnn export` files rebuilt in PyTorch / PyTorch Geometric.

    import adgnn_torch
    model = adgnn_torch.load("model.pt")
    logits = model(x, edge_index)   # x [N, F]; edge_index: the stored directed edges [2, E]
    depth = model.last_depth        # T(v) per node

Plain models are stacks of PyG's layers with adgnn's weights (plain.py); AD models a reference
implementation of the per-node-depth forward pass in eval mode (adaptive.py, depth.py).
"""
from .adaptive import AdaptiveGNN
from .load import load, read_export
from .plain import PlainGNN

__all__ = ["load", "read_export", "PlainGNN", "AdaptiveGNN"]
