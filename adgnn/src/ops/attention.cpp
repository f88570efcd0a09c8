// GAT's and GATv2's attention over chosen rows (ops/attention.h).
#include <torch/torch.h>

#include <optional>
#include <tuple>
#include <vector>

#include "adgnn/ops.h"
#include "ops/attention.h"
#include "ops/csr.h"

namespace adgnn::detail {

at::Tensor attention_aggregate(const at::Tensor& rowptr, const at::Tensor& src, const at::Tensor& dst, bool cache,
                               const at::Tensor& score_edge, const at::Tensor& score_self,
                               const at::Tensor& z, const at::Tensor& z_self) {
  const int64_t heads = score_self.size(1), C = z.size(2);
  at::Tensor m = score_self.detach().clone();  // per-row max, for a stable exp (a max: any order)
  if (dst.numel() > 0)
    m = m.scatter_reduce(0, dst.unsqueeze(1).expand({-1, heads}), score_edge.detach(), "amax",
                         /*include_self=*/true);
  const at::Tensor a_edge = (score_edge - m.index_select(0, dst)).exp();
  const at::Tensor a_self = (score_self - m).exp();
  const at::Tensor ones = torch::ones({z.size(0), 1}, z.options());
  std::optional<TransientCsrScope> transient;
  if (!cache) transient.emplace();
  std::vector<at::Tensor> out;
  for (int64_t h = 0; h < heads; ++h) {
    // One pass per head gives numerator (columns < C) and denominator (column C).
    const at::Tensor zh = torch::cat({z.select(1, h), ones}, 1);
    const at::Tensor wh = a_edge.select(1, h);
    const at::Tensor sums = csr_aggregate(rowptr, src, wh, zh);
    const at::Tensor ah = a_self.select(1, h).unsqueeze(1);
    out.push_back((sums.slice(1, 0, C) + ah * z_self.select(1, h)) / (sums.slice(1, C, C + 1) + ah));
  }
  return torch::stack(out, 1);
}

Needed needed_rows(const MessageGraph& g, const EdgeList& e, const at::Tensor& rows) {
  Needed n;
  n.rows = std::get<0>(torch::_unique(torch::cat({rows, e.src}), /*sorted=*/true));
  n.src_pos = torch::searchsorted(n.rows, e.src);
  n.dst_pos = torch::searchsorted(n.rows, rows);
  // rows is sorted: all num_dst of them is 0..num_dst-1, and num_src needed rows is 0..num_src-1.
  n.graph_csr = rows.numel() == g.num_dst && n.rows.numel() == g.num_src;
  if (n.graph_csr) {
    n.csr_rowptr = g.rowptr;
    n.csr_src = g.col;
  } else {
    const at::Tensor counts = g.rowptr.index_select(0, rows + 1) - g.rowptr.index_select(0, rows);
    n.csr_rowptr = torch::cat({torch::zeros({1}, g.rowptr.options()), counts.cumsum(0)});
    n.csr_src = n.src_pos.to(torch::kInt32);
  }
  return n;
}

}  // namespace adgnn::detail
