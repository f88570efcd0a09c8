// A rank's boundary for the halo plan's kernel tests (CPU and CUDA): random boundary entries
// (owned row, halo row) with halo rows owned by peers in rank order, and the read bits the
// kernels must produce, computed entry by entry from their definition.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>

namespace adgnn::testing {

struct RandomBoundary {
  at::Tensor halo_owner;  // int64 [halo], sorted: each peer's halo rows together
  at::Tensor row, halo;   // int64 [entries]: the owned row and the halo row of each entry
  at::Tensor boundary;    // int32 [2, entries]: (row, halo) as the kernels take them
};

inline RandomBoundary random_boundary(int64_t owned, int64_t halo, int64_t entries, int64_t peers) {
  RandomBoundary b;
  b.halo_owner = std::get<0>(torch::sort(torch::randint(0, peers, {halo}, torch::kInt64)));
  b.row = torch::randint(0, owned, {entries}, torch::kInt64);
  b.halo = torch::randint(0, halo, {entries}, torch::kInt64);
  b.boundary = torch::stack({b.row, b.halo}).to(torch::kInt32);
  return b;
}

// {peer words [owned * peers], halo words [halo]}: a peer reads owned row r at the layers its halo
// row's computed bits say (key r * peers + owner), a halo row is read at the layers of the owned
// rows that read it; only the bits in `layers`. Undefined computed bits (a plain model): every
// layer.
inline std::pair<at::Tensor, at::Tensor> read_bits_by_definition(const RandomBoundary& b, int64_t owned,
                                                                 int64_t peers, const at::Tensor& comp_owned,
                                                                 const at::Tensor& comp_halo, uint64_t layers) {
  const int64_t halo = b.halo_owner.numel(), entries = b.row.numel();
  at::Tensor peer = torch::zeros({owned * peers}, torch::kInt64), held = torch::zeros({halo}, torch::kInt64);
  const int64_t *r = b.row.data_ptr<int64_t>(), *h = b.halo.data_ptr<int64_t>(), *owner = b.halo_owner.data_ptr<int64_t>();
  const int64_t* co = comp_owned.defined() ? comp_owned.data_ptr<int64_t>() : nullptr;
  const int64_t* ch = comp_halo.defined() ? comp_halo.data_ptr<int64_t>() : nullptr;
  int64_t *wp = peer.data_ptr<int64_t>(), *wh = held.data_ptr<int64_t>();
  for (int64_t e = 0; e < entries; ++e) {
    wp[r[e] * peers + owner[h[e]]] |= (ch ? ch[h[e]] : ~int64_t(0)) & int64_t(layers);
    wh[h[e]] |= (co ? co[r[e]] : ~int64_t(0)) & int64_t(layers);
  }
  return {peer, held};
}

}  // namespace adgnn::testing
