"""The backbones' layers as PyTorch Geometric modules, and adgnn's weights in their layout.

One layer per backbone (adgnn/src/backbones/<name>.cpp), equal to:

- gcn:    GCNConv(in, C)                         h_v' = W^T sum_{u in N(v)+v} h_u / sqrt((d_u+1)(d_v+1)) + b
- gat:    GATConv(in, C, heads, concat)          hidden layers concatenate `heads` heads; the last
                                                 layer has one head (concat=False)
- sage:   SAGEConv(in, C, aggr="mean")           h_v' = W_l^T mean_{u in N(v)} h_u + b_l + W_r^T h_v
- mixhop: MixHopConv(in, C, powers=[0, 1, 2])    [W_0^T h, W_1^T A h, W_2^T A^2 h] + b (3C wide); the
                                                 last layer then projects 3C -> C (MixHopClassifier)
- gatv2:  GATv2Conv(in, C, heads, concat, share_weights=False), heads as GAT
- dirgnn: DirGNNConv(GCNConv(in, C), alpha, root_weight=True)
          h_v' = alpha GCN_out(h)_v + (1 - alpha) GCN_in(h)_v + W_root^T h_v + b_root

adgnn stores a linear map's weight as [in, out] (x @ W); PyG's Linear holds [out, in]: every
parameter whose name ends in "weight" is transposed on the way in.
"""
from typing import Dict, Tuple

import torch
from torch_geometric.nn import DirGNNConv, GATConv, GATv2Conv, GCNConv, MixHopConv, SAGEConv

BACKBONES = ("gcn", "gat", "sage", "mixhop", "gatv2", "dirgnn")

# The (PyG) weight of each backbone's first linear transform z = x W: the learned variant's
# f_delta input (the C++ layers' input_transform, without any bias).
INPUT_TRANSFORM = {
    "gcn": "lin.weight",
    "gat": "lin.weight",
    "sage": "lin_l.weight",
    "mixhop": "lins.1.weight",
    "gatv2": "lin_l.weight",
    "dirgnn": "conv_in.lin.weight",
}


class MixHopClassifier(MixHopConv):
    """adgnn's last MixHop layer: out = ([h W_0, (A h) W_1, (A^2 h) W_2] + b) W_c + b_c, 3C -> C."""

    def __init__(self, in_channels: int, channels: int):
        super().__init__(in_channels, channels, powers=[0, 1, 2])
        self.classifier = torch.nn.Linear(3 * channels, channels)

    def forward(self, x, edge_index, edge_weight=None):
        return self.classifier(super().forward(x, edge_index, edge_weight))


def make_layer(backbone: str, in_dim: int, channels: int, heads: int, last: bool,
               dirgnn_alpha: float) -> Tuple[torch.nn.Module, int]:
    """The PyG module of one layer and the width it emits."""
    if backbone == "gcn":
        return GCNConv(in_dim, channels), channels
    if backbone in ("gat", "gatv2"):
        h = 1 if last else heads
        if backbone == "gat":
            conv = GATConv(in_dim, channels, heads=h, concat=not last)
        else:
            conv = GATv2Conv(in_dim, channels, heads=h, concat=not last, share_weights=False)
        return conv, channels if last else h * channels
    if backbone == "sage":
        return SAGEConv(in_dim, channels, aggr="mean"), channels
    if backbone == "mixhop":
        if last:
            return MixHopClassifier(in_dim, channels), channels
        return MixHopConv(in_dim, channels, powers=[0, 1, 2]), 3 * channels
    if backbone == "dirgnn":
        return DirGNNConv(GCNConv(in_dim, channels), alpha=dirgnn_alpha, root_weight=True), channels
    raise ValueError(f"config backbone {backbone!r}: not one of {', '.join(BACKBONES)}")


def pyg_name(backbone: str, ours: str) -> str:
    """PyG's name of one of our layer parameters (adgnn names them after PyG, but for GCN's and
    DirGNN's convolutions, whose Linear sits in a submodule `lin`)."""
    if backbone == "gcn" and ours == "weight":
        return "lin.weight"
    if backbone == "dirgnn" and ours in ("conv_in.weight", "conv_out.weight"):
        return ours.split(".")[0] + ".lin.weight"
    return ours


def load_layer(conv: torch.nn.Module, backbone: str, ours: Dict[str, torch.Tensor], where: str) -> None:
    """Copies our parameters of one layer (names without the "layers.<t>." prefix) into conv,
    transposing [in, out] weights to PyG's [out, in]. ValueError on a missing, unknown or
    misshapen parameter."""
    theirs = dict(conv.named_parameters())
    mapped = {pyg_name(backbone, k): k for k in ours}
    missing = sorted(set(theirs) - set(mapped))
    unknown = sorted(mapped[k] for k in set(mapped) - set(theirs))
    if missing or unknown:
        raise ValueError(f"{where}: the {backbone} layer's parameters do not match "
                         f"(missing: {missing or 'none'}; unknown: {unknown or 'none'})")
    with torch.no_grad():
        for name, p in theirs.items():
            v = ours[mapped[name]]
            if name.endswith("weight"):
                v = v.t()
            if tuple(v.shape) != tuple(p.shape):
                raise ValueError(f"{where}.{mapped[name]}: shape {list(ours[mapped[name]].shape)} "
                                 f"does not fit the {backbone} layer")
            p.copy_(v)
