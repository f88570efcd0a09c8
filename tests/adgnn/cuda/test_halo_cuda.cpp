// A distributed pass's halo plan kernels on the GPU (distributed/halo_cuda.cu) against the CPU's.
// Skips without a GPU.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "../halo_boundary.h"
#include "cuda_test_util.h"
#include "ops/kernels.h"

namespace {

using namespace adgnn::cuda_test;

// A distributed pass's halo plan (halo.cpp) on the GPU: the CPU's read bits, masks, dirty state
// and per-peer counts, with peers of uneven sizes (warps that straddle two peers), a width change,
// every reader, and more (layer, peer) counters than the kernel keeps in shared memory.
TEST(Cuda, HaloPlanKernelsEqualTheCpu) {
  REQUIRE_GPU();
  namespace k = adgnn::kernels;
  torch::manual_seed(7);
  const int64_t owned = 5000, halo = 8000, entries = 100000, P = 5;
  const adgnn::testing::RandomBoundary b = adgnn::testing::random_boundary(owned, halo, entries, P);
  const at::Tensor &halo_owner = b.halo_owner, &boundary = b.boundary;
  const at::Tensor comp_owned = torch::randint(0, 256, {owned}, torch::kInt64);
  const at::Tensor comp_halo = torch::randint(0, 256, {halo}, torch::kInt64);
  // The definition, entry by entry (read_bits_by_definition): peer key = owned row * P + the halo row's owner; only the
  // asked layers' bits: layers >= 2 (a rank of every backbone but MixHop), layers 3-4
  // alone, and every layer (last: the masks below read its bits).
  at::Tensor bits[2][2];
  for (const uint64_t layers : {~uint64_t(1), uint64_t(0xc), ~uint64_t(0)}) {
    SCOPED_TRACE("layers " + std::to_string(layers));
    const auto [want_peer, want_halo] =
        adgnn::testing::read_bits_by_definition(b, owned, P, comp_owned, comp_halo, layers);
    for (int dev = 0; dev < 2; ++dev) {
      auto on = [&](const at::Tensor& x) { return dev ? x.cuda() : x; };
      bits[dev][0] = on(torch::zeros({owned * P}, torch::kInt64));
      bits[dev][1] = on(torch::zeros({halo}, torch::kInt64));
      k::halo_read_bits(on(boundary), on(halo_owner), P, on(comp_owned), on(comp_halo), bits[dev][0], bits[dev][1],
                        layers);
    }
    EXPECT_TRUE(torch::equal(bits[0][0], want_peer));
    EXPECT_TRUE(torch::equal(bits[0][1], want_halo));
    EXPECT_TRUE(torch::equal(bits[0][0], bits[1][0].cpu()));
    EXPECT_TRUE(torch::equal(bits[0][1], bits[1][1].cpu()));
    EXPECT_GT(bits[0][1].ne(0).sum().item<int64_t>(), halo / 2);
  }

  // Masks over a send list of uneven peers (offsets 0 .. n), for P = 5 and for P = 3000.
  for (const int64_t peers : {int64_t(5), int64_t(3000)}) {
    const int64_t n = 60000, t0 = 2, K = 5;
    at::Tensor offsets = std::get<0>(torch::sort(torch::randint(0, n + 1, {peers - 1}, torch::kInt64)));
    offsets = torch::cat({torch::zeros({1}, torch::kInt64), offsets, torch::full({1}, n, torch::kInt64)});
    const at::Tensor comp_idx = torch::randint(0, owned, {n}, torch::kInt64);
    const at::Tensor reads_idx = torch::randint(0, owned * P, {n}, torch::kInt64);
    const at::Tensor dirty0 = torch::rand({n}) < 0.3;
    for (const bool all_readers : {false, true}) {
      at::Tensor go[2], dirty[2], counts[2];
      for (int dev = 0; dev < 2; ++dev) {
        auto on = [&](const at::Tensor& x) { return dev ? x.cuda() : x; };
        dirty[dev] = on(dirty0.clone());
        go[dev] = on(torch::empty({K, n}, torch::kBool));
        counts[dev] = k::halo_keep_masks(on(comp_owned), on(comp_idx), bits[dev][0], on(reads_idx), on(offsets),
                                         t0, K, uint64_t(1) << 2, all_readers, dirty[dev], go[dev]);
      }
      const std::string what = "peers " + std::to_string(peers) + (all_readers ? ", every reader" : "");
      EXPECT_TRUE(torch::equal(go[0], go[1].cpu())) << what;
      EXPECT_TRUE(torch::equal(dirty[0], dirty[1].cpu())) << what;
      EXPECT_TRUE(torch::equal(counts[0], counts[1].cpu())) << what;
      EXPECT_EQ(counts[0].sum().item<int64_t>(), go[0].sum().item<int64_t>()) << what;
      EXPECT_GT(go[0].sum().item<int64_t>(), 0) << what;
    }
  }
}

}  // namespace
