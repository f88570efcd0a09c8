"""The graphs the model reads, derived from a graph's stored directed edges.

adgnn stores a graph's edges as given (self-loops and duplicates kept) and derives two views on
load (loaders' Graph::symmetric and Graph::directed_simple):

- the symmetric view, read by every backbone except DirGNN and by the depth benefit:
  E_sym = {(u, v), (v, u) : (u, v) stored, u != v}, each ordered pair once;
- the directed view, read by DirGNN: E_dir = {(u, v) stored : u != v}, each ordered pair once.

Messages flow along edge_index[0] -> edge_index[1] (PyTorch Geometric's convention): a stored
edge u -> v is v's incoming edge.
"""
from dataclasses import dataclass

import torch
from torch_geometric.utils import coalesce, remove_self_loops, to_undirected


def check_edge_index(edge_index: torch.Tensor, num_nodes: int) -> None:
    """Raises ValueError unless edge_index is an int64 [2, E] tensor of node ids in [0, num_nodes)."""
    if not isinstance(edge_index, torch.Tensor) or edge_index.dtype != torch.int64:
        raise ValueError("edge_index: expected an int64 tensor [2, E] (the stored directed edges)")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index: expected shape [2, E], got {list(edge_index.shape)}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(f"edge_index: node ids must lie in [0, {num_nodes}) (one row of x per node)")


def symmetric_edges(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """E_sym: both directions of every stored non-loop edge, each ordered pair once (sorted)."""
    sym = to_undirected(edge_index, num_nodes=num_nodes)
    return remove_self_loops(sym)[0]


def directed_edges(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """E_dir: the stored edges without self-loops, each ordered pair once (sorted)."""
    return coalesce(remove_self_loops(edge_index)[0], num_nodes=num_nodes)


@dataclass
class Graph:
    """One graph's views: sym / directed edge_index [2, E], and d_v = |{u : (u, v) in E_sym}|."""
    num_nodes: int
    sym: torch.Tensor
    directed: torch.Tensor
    degree: torch.Tensor  # int64 [N]

    @staticmethod
    def from_stored(edge_index: torch.Tensor, num_nodes: int) -> "Graph":
        check_edge_index(edge_index, num_nodes)
        sym = symmetric_edges(edge_index, num_nodes)
        degree = torch.bincount(sym[1], minlength=num_nodes)
        return Graph(num_nodes, sym, directed_edges(edge_index, num_nodes), degree)

    def empty(self) -> torch.Tensor:
        """An edgeless edge_index: a layer on it is the self-only update."""
        return self.sym.new_empty((2, 0))
