"""A plain exported model: the backbone's PyG layers stacked as adgnn stacks them (stack.py),
every node aggregating at every layer:

  h^(0) = x,  h^(t) = post_t(layer_t(h^(t-1), E)),  logits = h^(L)

With Exp-2's degree_threshold k > 0, nodes with d_v <= k never aggregate: T(v) = 0 (the self-only
update at width-changing layers, frozen elsewhere, as an AD node of depth 0) and T(v) = L for the
others (adaptive.masked_forward).
"""
import torch

from .adaptive import masked_forward
from .graph import Graph
from .stack import LayerStack


class PlainGNN(LayerStack):
    """model(x, edge_index) -> logits [N, C]; last_depth: T(v) of the last call (L, or 0 below the
    degree threshold)."""

    def __init__(self, config: dict):
        super().__init__(config)
        self.degree_threshold = int(config["degree_threshold"])

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Logits [N, C] of the nodes of x [N, in_dim] (cast to the model's dtype) over the stored
        directed edges edge_index [2, E]."""
        x = x.to(self.dtype)
        g = Graph.from_stored(edge_index, x.size(0))
        T = torch.full((g.num_nodes,), self.num_layers, dtype=torch.int64, device=x.device)
        if self.degree_threshold > 0:
            T = torch.where(g.degree > self.degree_threshold, T, torch.zeros_like(T))
            h = masked_forward(self, x, g, T)
        else:
            h, edges = x, self.conv_edges(g)
            for t, conv in enumerate(self.convs, start=1):
                h = self.post(t, conv(h, edges))
        self.last_depth = T
        return h
