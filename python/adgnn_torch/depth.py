"""The depth benefit, its normalisation, the thresholds tau(t) and the stopping depth T(v)
(../shared/docs/method.md; adgnn/src/depth/). Every function works in its inputs' dtype.

Per node v of the symmetric graph (degree d_v):
  d+_v   estimated same-label neighbours (degree product, or f_delta)
  alpha_v = (1 + 2 d+_v - d_v) / (d_v + 1)
  l_v    = t_max (2 log max(|alpha_v|, 1e-12) + log(d_v + 1)) [+ AD#'s offset]   (= log eps_hat_v)
  eps_v  = l_v normalised to [0, 1] (linear, log, rank)
  tau(t) = lambda + (1 - lambda) theta(t),  theta(t) = 1 - exp(-sum_{s=2..t} softplus(a_s))
  T(v)   = #{t in 1..L : eps_v >= tau(t)}
"""
from typing import Optional

import torch

# AD#'s degree buckets b = floor(log2(d + 1)), clamped to 0..SHARP_BUCKETS - 1.
SHARP_BUCKETS = 32


def degree_product_same_label(sym: torch.Tensor, degree: torch.Tensor) -> torch.Tensor:
    """AD_fast: d+_v = sum_{u in N(v)} d_u d_v / max_{(i, j) in E_sym} d_i d_j (max 1 without edges)."""
    src, dst = sym
    max_product = (degree[src] * degree[dst]).max() if sym.size(1) else degree.new_ones(())
    neighbour_degrees = torch.zeros_like(degree).index_add_(0, dst, degree[src])
    return degree * neighbour_degrees / max_product


def fdelta_same_label(sym: torch.Tensor, z: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                      w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """AD (learned): d+_v = sum_{u in N(v)} sigmoid(f(z_u, z_v)), with
    f(z_u, z_v) = ReLU([z_u * z_v, |z_u - z_v|] w1 + b1) w2 + b2 (w1 [2H, H], w2 [H, 1], our layout)."""
    src, dst = sym
    pair = torch.cat([z[src] * z[dst], (z[src] - z[dst]).abs()], dim=1)
    logit = (torch.relu(pair @ w1 + b1) @ w2 + b2).squeeze(1)
    return torch.zeros(z.size(0), dtype=z.dtype, device=z.device).index_add_(0, dst, torch.sigmoid(logit))


def degree_bucket(degree: torch.Tensor) -> torch.Tensor:
    """AD#'s bucket of each node: floor(log2(d + 1)), clamped to 0..SHARP_BUCKETS - 1 (int64)."""
    return torch.log2(degree.to(torch.float64) + 1).floor().long().clamp(0, SHARP_BUCKETS - 1)


def sharp_offset(degree: torch.Tensor, log_beta: torch.Tensor, log_gamma: torch.Tensor,
                 t_max: float) -> torch.Tensor:
    """AD#: eps_hat = (beta alpha^2 (d + 1) / gamma)^t_max adds t_max (log beta_b - log gamma_b) to l."""
    b = degree_bucket(degree)
    return t_max * (log_beta[b] - log_gamma[b])


def log_benefit(d_plus: torch.Tensor, degree: torch.Tensor, t_max: float,
                offset: Optional[torch.Tensor] = None) -> torch.Tensor:
    """l = t_max (2 log max(|alpha|, 1e-12) + log(d + 1)) [+ offset], alpha = (1 + 2 d+ - d) / (d + 1)."""
    alpha = (1 + 2 * d_plus - degree) / (degree + 1)
    l = t_max * (2 * alpha.abs().clamp_min(1e-12).log() + (degree + 1).log())
    return l if offset is None else l + offset.to(l.dtype)


def normalise_minmax(l: torch.Tensor, lo: float, hi: float, log_scale: bool) -> torch.Tensor:
    """eps in [0, 1] from l and the training graph's min lo and max hi of l:
    linear: (exp(l - hi) - exp(lo - hi)) / (1 - exp(lo - hi)); log: (l - lo) / (hi - lo);
    clamped to [0, 1]; every node 1 when hi <= lo."""
    if not hi > lo:
        return torch.ones_like(l)
    if log_scale:
        eps = (l - lo) / (hi - lo)
    else:
        base = torch.exp(torch.tensor(lo - hi, dtype=torch.float64)).item()
        eps = (torch.exp(l - hi) - base) / (1 - base)
    return eps.clamp(0.0, 1.0)


def normalise_rank(l: torch.Tensor) -> torch.Tensor:
    """eps_v = (#{u : l_u < l_v} + (#{u : l_u == l_v} - 1) / 2) / (N - 1), the mid-rank of l_v among
    the graph's N nodes (1 when N <= 1)."""
    n = l.numel()
    if n <= 1:
        return torch.ones_like(l)
    s = l.sort().values
    below = torch.searchsorted(s, l, right=False)
    upto = torch.searchsorted(s, l, right=True)
    return (below.to(l.dtype) + (upto - below - 1).to(l.dtype) / 2) / (n - 1)


def thresholds(a: torch.Tensor, layers: int, lam: float) -> torch.Tensor:
    """tau(t) = lambda + (1 - lambda) theta(t), t = 1..L, computed as 1 - (1 - lambda) exp(-c_t) with
    c_t = sum_{s=2..t} softplus(a_s) (c_1 = 0: tau(1) = lambda)."""
    if a.numel() != layers - 1:
        raise ValueError(f"state_dict theta.a: {a.numel()} values for {layers} layers (expected {layers - 1})")
    c = torch.cat([a.new_zeros(1), torch.cumsum(torch.nn.functional.softplus(a), 0)])
    return 1 - (1 - lam) * torch.exp(-c)


def stopping_depth(eps: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """T(v) = #{t : eps_v >= tau(t)} (int64; tau increases, so node v is active at t <= T(v))."""
    return (eps.unsqueeze(0) >= tau.unsqueeze(1)).sum(0)
