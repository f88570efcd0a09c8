"""AD-GNN in eval mode (../shared/docs/method.md, docs/model.md): message passing with a per-node
depth T(v), a reference of adgnn/src/model/forward_pass.cpp with hard masks and no dropout.

h^(0) = x; for t = 1..L, with m_t(v) = [t <= T(v)]:
  active  (m_t(v) = 1): h_v^(t) = post_t(layer_t(h^(t-1), E)_v)
  inactive, layer t keeps the width:    h_v^(t) = h_v^(t-1)  (frozen; a frozen neighbour
                                        contributes its last value)
  inactive, layer t changes the width (t = 1, t = L): h_v^(t) = post_t(layer_t(h^(t-1), {})_v),
                                        the self-only update (the layer on an edgeless graph)
post_t (BatchNorm, ReLU) applies to computed rows only, never to frozen copies.
"""
from typing import Optional

import torch

from . import depth as D
from .graph import Graph
from .layers import INPUT_TRANSFORM
from .stack import LayerStack


def masked_forward(stack: LayerStack, x: torch.Tensor, g: Graph, T: torch.Tensor) -> torch.Tensor:
    """The logits of the stack with per-node depths T (int64 [N]): the layer on the full graph for
    active rows, frozen or self-only rows for the others (module docstring)."""
    edges, none = stack.conv_edges(g), g.empty()
    h = x
    for t, conv in enumerate(stack.convs, start=1):
        active = (T >= t).unsqueeze(1)
        full = stack.post(t, conv(h, edges))
        if stack.width_changes(t):
            h = torch.where(active, full, stack.post(t, conv(h, none)))
        else:
            h = torch.where(active, full, h)
    return h


class AdaptiveGNN(LayerStack):
    """An exported AD model (variant ad, ad_fast or ad_sharp): model(x, edge_index) -> logits [N, C].

    After each call: last_depth (int64 [N]) holds T(v), last_eps the normalised depth benefit.
    """

    def __init__(self, config: dict, benefit_range: Optional[torch.Tensor]):
        super().__init__(config)
        self.variant = config["variant"]
        self.normalisation = config["normalisation"]
        self.t_max = float(config["t_max"])
        self.lam = float(config["lambda"])
        self.theta_a = torch.nn.Parameter(torch.zeros(self.num_layers - 1), requires_grad=False)
        if self.variant == "ad":
            # f_delta in our layout, reading z = x W_1 (H wide):
            # [z_u * z_v, |z_u - z_v|] @ w1 [2H, H] + b1 -> ReLU -> @ w2 [H, 1] + b2.
            z_width = self.convs[0].get_parameter(INPUT_TRANSFORM[self.backbone]).size(0)
            self.fd_w1 = torch.nn.Parameter(torch.zeros(2 * z_width, z_width), requires_grad=False)
            self.fd_b1 = torch.nn.Parameter(torch.zeros(z_width), requires_grad=False)
            self.fd_w2 = torch.nn.Parameter(torch.zeros(z_width, 1), requires_grad=False)
            self.fd_b2 = torch.nn.Parameter(torch.zeros(1), requires_grad=False)
        # Kept in float64 whatever the model's dtype (as adgnn keeps them), so not buffers:
        # AD#'s log beta / log gamma per degree bucket, and [min, max] of l over the training
        # graph (linear / log normalisation; None: none exported).
        self.sharp_log_beta = self.sharp_log_gamma = None
        self.benefit_range = None if benefit_range is None else tuple(float(v) for v in benefit_range.reshape(2))
        self.last_eps = None

    def load_adgnn_state(self, state):
        used = super().load_adgnn_state(state)
        params = {"theta.a": self.theta_a}
        if self.variant == "ad":
            params.update({"f_delta.w1": self.fd_w1, "f_delta.b1": self.fd_b1,
                           "f_delta.w2": self.fd_w2, "f_delta.b2": self.fd_b2})
        for name, p in params.items():
            if name == "theta.a" and self.num_layers == 1 and name not in state:
                continue  # one layer: theta has no parameters
            if name not in state:
                raise ValueError(f"state_dict: {name} missing (variant {self.variant})")
            if tuple(state[name].shape) != tuple(p.shape):
                raise ValueError(f"state_dict {name}: shape {list(state[name].shape)}, expected {list(p.shape)}")
            with torch.no_grad():
                p.copy_(state[name])
            used.add(name)
        if self.variant == "ad_sharp":
            for name in ("sharp.log_beta", "sharp.log_gamma"):
                if name not in state or tuple(state[name].shape) != (D.SHARP_BUCKETS,):
                    raise ValueError(f"state_dict: {name} missing or not [{D.SHARP_BUCKETS}] (variant ad_sharp)")
                used.add(name)
            self.sharp_log_beta = state["sharp.log_beta"].detach().to(torch.float64).clone()
            self.sharp_log_gamma = state["sharp.log_gamma"].detach().to(torch.float64).clone()
        return used

    def depth_benefit(self, x: torch.Tensor, g: Graph) -> torch.Tensor:
        """eps_v in [0, 1] (depth.py): d+ from the degree product (ad_fast, ad_sharp) or from f_delta
        on z = x W_1, the first layer's linear transform without bias (ad); AD#'s per-bucket offset;
        normalised by the exported training range (linear, log) or by rank over this graph."""
        degree = g.degree.to(x.dtype)
        if self.variant == "ad":
            z = x @ self.convs[0].get_parameter(INPUT_TRANSFORM[self.backbone]).t()
            d_plus = D.fdelta_same_label(g.sym, z, self.fd_w1, self.fd_b1, self.fd_w2, self.fd_b2)
        else:
            d_plus = D.degree_product_same_label(g.sym, degree)
        offset = None
        if self.variant == "ad_sharp":
            offset = D.sharp_offset(g.degree, self.sharp_log_beta.to(x.device), self.sharp_log_gamma.to(x.device),
                                    self.t_max)
        l = D.log_benefit(d_plus, degree, self.t_max, offset)
        if self.normalisation == "rank":
            return D.normalise_rank(l)
        if self.benefit_range is not None:
            lo, hi = self.benefit_range
        else:  # no training range exported: this graph's own (as adgnn does without one)
            lo, hi = float(l.min()), float(l.max())
        return D.normalise_minmax(l, lo, hi, log_scale=self.normalisation == "log")

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """Logits [N, C] of the nodes of x [N, in_dim] (cast to the model's dtype) over the stored
        directed edges edge_index [2, E]; sets last_depth and last_eps."""
        x = x.to(self.dtype)
        g = Graph.from_stored(edge_index, x.size(0))
        eps = self.depth_benefit(x, g)
        T = D.stopping_depth(eps, D.thresholds(self.theta_a, self.num_layers, self.lam))
        logits = masked_forward(self, x, g, T)
        self.last_depth, self.last_eps = T, eps
        return logits
