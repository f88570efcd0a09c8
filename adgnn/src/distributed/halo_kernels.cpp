// The halo plan's kernels on the CPU, and the dispatch to the CUDA ones (kernels.h).
#include <ATen/ATen.h>

#include <initializer_list>

#include "ops/kernels.h"

namespace adgnn::kernels {

namespace {

void check_index(const at::Tensor& t, const char* what) {
  TORCH_CHECK(!t.defined() || (t.scalar_type() == at::kLong && t.is_contiguous()), what,
              ": expected a contiguous int64 tensor");
}

}  // namespace

void halo_read_bits(const at::Tensor& boundary, const at::Tensor& halo_owner, int64_t P, const at::Tensor& comp_owned,
                    const at::Tensor& comp_halo, at::Tensor& peer_bits, at::Tensor& halo_bits, uint64_t layers) {
  const std::initializer_list<const at::Tensor*> all{&halo_owner, &comp_owned, &comp_halo, &peer_bits, &halo_bits};
  for (const at::Tensor* t : all) check_index(*t, "halo_read_bits");
  TORCH_CHECK(boundary.scalar_type() == at::kInt && boundary.is_contiguous() && boundary.dim() == 2 &&
                  boundary.size(0) == 2 && halo_owner.defined() && P >= 1,
              "halo_read_bits: boundary int32 [2, entries] (owned row; halo row), the halo rows' owners and P");
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (peer_bits.is_cuda())
    return halo_read_bits_cuda(boundary, halo_owner, P, comp_owned, comp_halo, peer_bits, halo_bits, layers);
#endif
  TORCH_CHECK(peer_bits.is_cpu(), "halo_read_bits: CUDA tensors need the CUDA kernels (configure with -DADGNN_CUDA=ON)");
  const int64_t entries = boundary.size(1);
  const int32_t* br = boundary.data_ptr<int32_t>();
  const int32_t* bh = br + entries;
  const int64_t* owner = halo_owner.data_ptr<int64_t>();
  const int64_t* co = comp_owned.defined() ? comp_owned.data_ptr<int64_t>() : nullptr;
  const int64_t* ch = comp_halo.defined() ? comp_halo.data_ptr<int64_t>() : nullptr;
  int64_t* pb = peer_bits.data_ptr<int64_t>();
  int64_t* hb = halo_bits.data_ptr<int64_t>();
  const auto wanted = int64_t(layers);
  for (int64_t e = 0; e < entries; ++e) {
    const int64_t r = br[e], h = bh[e];
    const int64_t read_there = (ch ? ch[h] : ~int64_t(0)) & wanted, read_here = (co ? co[r] : ~int64_t(0)) & wanted;
    if (read_there != 0) pb[r * P + owner[h]] |= read_there;
    if (read_here != 0) hb[h] |= read_here;
  }
}

at::Tensor halo_keep_masks(const at::Tensor& comp, const at::Tensor& comp_idx, const at::Tensor& reads,
                           const at::Tensor& reads_idx, const at::Tensor& offsets, int64_t t0, int64_t K,
                           uint64_t width_changed, bool all_readers, at::Tensor& dirty, at::Tensor& go) {
  for (const auto* t : {&comp, &comp_idx, &reads, &reads_idx, &offsets}) check_index(*t, "halo_keep_masks");
  TORCH_CHECK(comp.defined() && reads.defined() && offsets.defined() && offsets.numel() >= 2,
              "halo_keep_masks: comp, reads and the peers' offsets are needed");
  const int64_t n = dirty.numel();
  TORCH_CHECK(t0 >= 2 && K >= 1 && t0 + K - 1 <= 64, "halo_keep_masks: layers 2..64 (computed-layer bits are 64-bit)");
  TORCH_CHECK(dirty.scalar_type() == at::kBool && dirty.is_contiguous() && go.scalar_type() == at::kBool &&
                  go.is_contiguous() && go.dim() == 2 && go.size(0) == K && go.size(1) == n,
              "halo_keep_masks: dirty bool [n] and go bool [K, n], contiguous");
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (dirty.is_cuda())
    return halo_keep_masks_cuda(comp, comp_idx, reads, reads_idx, offsets, t0, K, width_changed, all_readers, dirty,
                                go);
#endif
  TORCH_CHECK(dirty.is_cpu(), "halo_keep_masks: CUDA tensors need the CUDA kernels (configure with -DADGNN_CUDA=ON)");
  const int64_t P = offsets.numel() - 1;
  const int64_t* off = offsets.data_ptr<int64_t>();
  TORCH_CHECK(off[0] == 0 && off[P] == n, "halo_keep_masks: the peers' offsets must run from 0 to the entries' count");
  const int64_t* c = comp.data_ptr<int64_t>();
  const int64_t* ci = comp_idx.defined() ? comp_idx.data_ptr<int64_t>() : nullptr;
  const int64_t* r = reads.data_ptr<int64_t>();
  const int64_t* ri = reads_idx.defined() ? reads_idx.data_ptr<int64_t>() : nullptr;
  bool* d = dirty.data_ptr<bool>();
  bool* g = go.data_ptr<bool>();
  at::Tensor counts = at::zeros({K, P}, offsets.options().device(at::kCPU));
  int64_t* cnt = counts.data_ptr<int64_t>();
  for (int64_t p = 0; p < P; ++p) {
    for (int64_t i = off[p]; i < off[p + 1]; ++i) {
      const uint64_t ci_bits = uint64_t(c[ci ? ci[i] : i]), read = uint64_t(r[ri ? ri[i] : i]);
      bool dirty_i = d[i];
      for (int64_t k = 0; k < K; ++k) {
        const int64_t t = t0 + k;
        dirty_i = dirty_i || ((width_changed >> (t - 1)) & 1) || ((ci_bits >> (t - 2)) & 1);
        const bool moves = dirty_i && (all_readers || ((read >> (t - 1)) & 1));
        g[k * n + i] = moves;
        if (moves) {
          dirty_i = false;
          ++cnt[k * P + p];
        }
      }
      d[i] = dirty_i;
    }
  }
  return counts;
}

}  // namespace adgnn::kernels
