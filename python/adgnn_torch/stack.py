"""The layer stack every variant shares (adgnn/src/model/model.cpp): L layers, BatchNorm and ReLU
after each hidden layer.

Layer t = 1..L maps width_{t-1} -> width_t (width_0 = in_dim, width_L = out_dim); after a hidden
layer (t < L): h = ReLU(BN_t(h)) with BatchNorm1d in eval mode (running statistics,
eps = 1e-5) when configured, else h = ReLU(h).
"""
from typing import Dict

import torch

from .graph import Graph
from .layers import load_layer, make_layer


class LayerStack(torch.nn.Module):
    """The layers (`convs`, PyG modules) and BatchNorms (`bn`) of one exported model."""

    def __init__(self, config: dict):
        super().__init__()
        self.backbone = config["backbone"]
        self.num_layers = int(config["layers"])
        self.batchnorm = bool(config["batchnorm"])
        self.convs = torch.nn.ModuleList()
        self.bn = torch.nn.ModuleList()
        self.widths = [int(config["in_dim"])]
        for t in range(self.num_layers):
            last = t == self.num_layers - 1
            conv, width = make_layer(self.backbone, self.widths[-1],
                                     int(config["out_dim"]) if last else int(config["hidden"]),
                                     int(config["heads"]), last, float(config["dirgnn_alpha"]))
            self.convs.append(conv)
            self.widths.append(width)
            if not last and self.batchnorm:
                self.bn.append(torch.nn.BatchNorm1d(width, eps=1e-5, momentum=0.1))
        # The last call's per-node depth T(v) (int64 [N]); plain models: L everywhere.
        self.last_depth = None

    def load_adgnn_state(self, state: Dict[str, torch.Tensor]) -> set:
        """Copies the layers' and BatchNorms' entries of an export's state_dict; returns the names used."""
        used = set()
        for t, conv in enumerate(self.convs):
            prefix = f"layers.{t}."
            ours = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
            load_layer(conv, self.backbone, ours, f"state_dict[layers.{t}]")
            used.update(prefix + k for k in ours)
        for t, bn in enumerate(self.bn):
            with torch.no_grad():
                for part in ("weight", "bias", "running_mean", "running_var"):
                    name = f"bn.{t}.{part}"
                    if name not in state:
                        raise ValueError(f"state_dict: {name} missing (config batchnorm is true)")
                    getattr(bn, part).copy_(state[name])
                    used.add(name)
        return used

    @property
    def dtype(self) -> torch.dtype:
        """The floating type the model computes in (its parameters'; inputs are cast to it)."""
        return next(self.parameters()).dtype

    def conv_edges(self, g: Graph) -> torch.Tensor:
        """The edges the layers read: DirGNN the directed view, every other backbone the symmetric one."""
        return g.directed if self.backbone == "dirgnn" else g.sym

    def width_changes(self, t: int) -> bool:
        """Whether layer t (1-based) changes the width: the first, the last, and any in != out."""
        return t == 1 or t == self.num_layers or self.widths[t - 1] != self.widths[t]

    def post(self, t: int, h: torch.Tensor) -> torch.Tensor:
        """After layer t: ReLU(BN_t(h)) (ReLU(h) without BatchNorm) for hidden layers; the last is as is."""
        if t == self.num_layers:
            return h
        if self.batchnorm:
            h = self.bn[t - 1](h)
        return torch.relu(h)
