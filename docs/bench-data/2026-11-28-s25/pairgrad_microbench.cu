// Scratch microbenchmark (not built with the product; kept as the source of docs/performance.md v61): variants of f_delta's per-node input-gradient loop on a random graph of arxiv-scale's size. nvcc -O3 -arch=sm_90 pairgrad_microbench.cu && ./a.out [skew]
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <random>
#include <algorithm>
template <typename T, int V> struct alignas(sizeof(T) * V) Vec { T v[V]; };
__device__ float tof(float x) { return x; }
__device__ float tof(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ float sgn(float d) { return float((d > 0.f) - (d < 0.f)); }
constexpr int V = 4;
// U pairs in flight; PF: indices of 32 pairs prefetched by the lanes and broadcast.
template <typename S, int U, bool PF>
__global__ void k(const int64_t* prow, const int32_t* pcol, const int64_t* trow, const int64_t* tpair,
                  const int32_t* tother, int64_t n, const float* z, const S* gx, int64_t F, float* out) {
  using VT = Vec<float, V>; using VS = Vec<S, V>;
  const int lane = threadIdx.x % 32;
  const int64_t u = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (u >= n) return;
  const int64_t ob = prow[u], own = prow[u + 1] - ob, tb = trow[u], total = own + trow[u + 1] - tb;
  const int64_t v = lane;  // F = 128: one chunk
  float acc[V] = {0, 0, 0, 0};
  const VT a = reinterpret_cast<const VT*>(z + u * F)[v];
  if (PF) {
    for (int64_t base = 0; base < total; base += 32) {
      const int64_t i = base + lane;
      int64_t mp = 0, mo = 0;
      if (i < total) { if (i < own) { mp = ob + i; mo = pcol[mp]; } else { mp = tpair[tb + i - own]; mo = tother[tb + i - own]; } }
      const int batch = total - base < 32 ? int(total - base) : 32;
      for (int j0 = 0; j0 < batch; j0 += U) {
        VT b[U]; VS m[U], d[U];
#pragma unroll
        for (int q = 0; q < U; ++q) {
          const int j = j0 + q;
          const int64_t p = __shfl_sync(0xffffffffu, mp, j & 31), o = __shfl_sync(0xffffffffu, mo, j & 31);
          if (j < batch) { b[q] = reinterpret_cast<const VT*>(z + o * F)[v]; m[q] = reinterpret_cast<const VS*>(gx + p * 2 * F)[v]; d[q] = reinterpret_cast<const VS*>(gx + p * 2 * F + F)[v]; }
        }
#pragma unroll
        for (int q = 0; q < U; ++q) if (j0 + q < batch)
#pragma unroll
          for (int kk = 0; kk < V; ++kk) acc[kk] += tof(m[q].v[kk]) * b[q].v[kk] + tof(d[q].v[kk]) * sgn(a.v[kk] - b[q].v[kk]);
      }
    }
  } else {
    for (int64_t i = 0; i < total; ++i) {
      int64_t p, o;
      if (i < own) { p = ob + i; o = pcol[p]; } else { p = tpair[tb + i - own]; o = tother[tb + i - own]; }
      const VT b = reinterpret_cast<const VT*>(z + o * F)[v];
      const VS m = reinterpret_cast<const VS*>(gx + p * 2 * F)[v], d = reinterpret_cast<const VS*>(gx + p * 2 * F + F)[v];
#pragma unroll
      for (int kk = 0; kk < V; ++kk) acc[kk] += tof(m.v[kk]) * b.v[kk] + tof(d.v[kk]) * sgn(a.v[kk] - b.v[kk]);
    }
  }
  VT o; for (int kk = 0; kk < V; ++kk) o.v[kk] = acc[kk];
  reinterpret_cast<VT*>(out + u * F)[v] = o;
}
// Pair-parallel: each pair's two gradient rows (the old way's first pass), for a bandwidth reference.
template <typename S>
__global__ void pairpar(const int32_t* prr, const int32_t* pcol, int64_t P, const float* z, const S* gx, int64_t F, float* gr, float* gc) {
  using VT = Vec<float, V>; using VS = Vec<S, V>;
  const int lane = threadIdx.x % 32;
  const int64_t p = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (p >= P) return;
  const VT a = reinterpret_cast<const VT*>(z + int64_t(prr[p]) * F)[lane], b = reinterpret_cast<const VT*>(z + int64_t(pcol[p]) * F)[lane];
  const VS m = reinterpret_cast<const VS*>(gx + p * 2 * F)[lane], d = reinterpret_cast<const VS*>(gx + p * 2 * F + F)[lane];
  VT r, c;
  for (int kk = 0; kk < V; ++kk) { const float s = sgn(a.v[kk] - b.v[kk]); r.v[kk] = tof(m.v[kk]) * b.v[kk] + tof(d.v[kk]) * s; c.v[kk] = tof(m.v[kk]) * a.v[kk] - tof(d.v[kk]) * s; }
  reinterpret_cast<VT*>(gr + p * F)[lane] = r; reinterpret_cast<VT*>(gc + p * F)[lane] = c;
}
template <typename F_> float timeit(F_ f) {
  cudaEvent_t s, e; cudaEventCreate(&s); cudaEventCreate(&e);
  f(); cudaDeviceSynchronize();
  cudaEventRecord(s); for (int i = 0; i < 20; ++i) f(); cudaEventRecord(e); cudaEventSynchronize(e);
  float ms; cudaEventElapsedTime(&ms, s, e); return ms / 20;
}
int main(int argc, char** argv) {
  const int64_t n = 169343, P = 1166243, F = 128;
  const double skew = argc > 1 ? atof(argv[1]) : 2.0;
  std::mt19937_64 rng(1); std::uniform_real_distribution<double> U01(0, 1);
  std::vector<std::pair<int32_t, int32_t>> pr(P);
  for (auto& x : pr) { int32_t a = int32_t(n * std::pow(U01(rng), skew)), b = int32_t(n * U01(rng)); if (a > n - 1) a = n - 1; if (a > b) std::swap(a, b); x = {a, b}; }
  std::sort(pr.begin(), pr.end());
  std::vector<int64_t> prow(n + 1, 0), trow(n + 1, 0), tpair(P); std::vector<int32_t> pcol(P), prr(P), tother(P);
  for (int64_t p = 0; p < P; ++p) { prow[pr[p].first + 1]++; trow[pr[p].second + 1]++; pcol[p] = pr[p].second; prr[p] = pr[p].first; }
  for (int64_t i = 0; i < n; ++i) { prow[i + 1] += prow[i]; trow[i + 1] += trow[i]; }
  std::vector<int64_t> fill(trow.begin(), trow.end() - 1);
  for (int64_t p = 0; p < P; ++p) { const int64_t q = fill[pr[p].second]++; tpair[q] = p; tother[q] = pr[p].first; }
  int64_t maxdeg = 0; for (int64_t i = 0; i < n; ++i) maxdeg = std::max(maxdeg, prow[i + 1] - prow[i] + trow[i + 1] - trow[i]);
  printf("n %ld pairs %ld max pairs per node %ld (skew %.1f)\n", n, P, maxdeg, skew);
  auto up = [](auto& v) { using T = typename std::decay_t<decltype(v)>::value_type; T* d; cudaMalloc(&d, v.size() * sizeof(T)); cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice); return d; };
  int64_t *dprow = up(prow), *dtrow = up(trow), *dtpair = up(tpair); int32_t *dpcol = up(pcol), *dtother = up(tother), *dprr = up(prr);
  std::vector<float> zh(n * F); for (auto& x : zh) x = float(U01(rng) - 0.5); float* dz = up(zh);
  std::vector<float> gh(P * 2 * F); for (auto& x : gh) x = float(U01(rng) - 0.5); float* dg = up(gh);
  std::vector<__nv_bfloat16> gb(P * 2 * F); for (size_t i = 0; i < gb.size(); ++i) gb[i] = __float2bfloat16(gh[i]); __nv_bfloat16* dgb = up(gb);
  float *dout, *dgr, *dgc; cudaMalloc(&dout, n * F * 4); cudaMalloc(&dgr, P * F * 4); cudaMalloc(&dgc, P * F * 4);
  const unsigned blocks = unsigned((n * 32 + 255) / 256), pblocks = unsigned((P * 32 + 255) / 256);
  const double gb32 = (2.0 * P * (512 + 1024)) / 1e9, gb16 = (2.0 * P * (512 + 512)) / 1e9;
#define RUN(name, S, U_, PF_, ptr, gbytes) { float ms = timeit([&] { k<S, U_, PF_><<<blocks, 256>>>(dprow, dpcol, dtrow, dtpair, dtother, n, dz, ptr, F, dout); }); printf("%-28s %7.3f ms  %6.0f GB/s\n", name, ms, gbytes / ms * 1e3); }
  RUN("fp32 simple", float, 1, false, dg, gb32); RUN("fp32 pf U1", float, 1, true, dg, gb32); RUN("fp32 pf U2", float, 2, true, dg, gb32); RUN("fp32 pf U4", float, 4, true, dg, gb32); RUN("fp32 pf U8", float, 8, true, dg, gb32);
  RUN("bf16 simple", __nv_bfloat16, 1, false, dgb, gb16); RUN("bf16 pf U1", __nv_bfloat16, 1, true, dgb, gb16); RUN("bf16 pf U2", __nv_bfloat16, 2, true, dgb, gb16); RUN("bf16 pf U4", __nv_bfloat16, 4, true, dgb, gb16); RUN("bf16 pf U8", __nv_bfloat16, 8, true, dgb, gb16);
  { float ms = timeit([&] { pairpar<float><<<pblocks, 256>>>(dprr, dpcol, P, dz, dg, F, dgr, dgc); }); printf("%-28s %7.3f ms\n", "fp32 pair-parallel pass", ms); }
  { float ms = timeit([&] { pairpar<__nv_bfloat16><<<pblocks, 256>>>(dprr, dpcol, P, dz, dgb, F, dgr, dgc); }); printf("%-28s %7.3f ms\n", "bf16 pair-parallel pass", ms); }
  { float ms = timeit([&] { cudaMemcpyAsync(dgr, dg, P * F * 4, cudaMemcpyDeviceToDevice); }); printf("copy %.2f GB: %.3f ms = %.0f GB/s\n", P * F * 4 / 1e9, ms, 2 * P * F * 4 / 1e9 / ms * 1e3); }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
