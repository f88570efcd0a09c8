// Contextual stochastic block model: balanced classes, degree-corrected edges with an exact edge
// homophily, Gaussian class-conditional features and a random 60/20/20 split; optionally a
// locality structure: communities of consecutive node ids, independent of the classes, that an
// exact share of the edges stays within (what lets a partitioner find a small cut, as on real
// graphs).
//
// Reproducibility: every random draw comes from a small counter-seeded generator keyed by
// (seed, stream, index) - one per block of edge candidates, per feature row, per class mean - so
// the graph depends on the seed only, never on the thread count or the OpenMP schedule.
#include <omp.h>

#include <memory>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "adgnn/loaders.h"
#include "adgnn/mix64.h"
#include "adgnn/process_group.h"
#include "fmt/format.h"
#include "internal.h"

namespace adgnn {

namespace {

// ---- random numbers -----------------------------------------------------------------------------

// Independent streams: a seed for (seed, stream, index) through chained splitmix64 mixing.
uint64_t stream_seed(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t z = mix64(seed + 0x9E3779B97F4A7C15ull * (stream + 1));
  return mix64(z ^ mix64(index + 0x632BE59BD9B4E019ull));
}

// xoshiro256** (Blackman & Vigna), state filled from splitmix64 as its authors recommend.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      w = mix64(seed);
    }
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Unbiased integer in [0, bound) (Lemire's multiply-and-reject).
  uint64_t below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    if (static_cast<uint64_t>(m) < bound) {
      const uint64_t floor = (0 - bound) % bound;
      while (static_cast<uint64_t>(m) < floor) m = static_cast<unsigned __int128>(next()) * bound;
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Two independent standard normals (Marsaglia's polar method: no trigonometry).
  void gauss2(double& a, double& b) {
    double x, y, s;
    do {
      x = 2.0 * uniform() - 1.0;
      y = 2.0 * uniform() - 1.0;
      s = x * x + y * y;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s);
    a = x * f;
    b = y * f;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

enum Stream : uint64_t { kLabels = 1, kWeights, kIntra, kInter, kMeans, kFeatures, kSplits, kIntraLocal, kInterLocal };

std::vector<int64_t> permutation(int64_t n, uint64_t seed, uint64_t stream) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  Rng rng(stream_seed(seed, stream, 0));
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(perm[i], perm[rng.below(static_cast<uint64_t>(i) + 1)]);
  return perm;
}

// ---- weighted sampling --------------------------------------------------------------------------

// Walker/Vose alias table over a list of nodes. One 64-bit draw gives both the slot (high half of
// draw * size) and the acceptance test (low half, uniform within the slot).
struct AliasEntry {
  uint64_t threshold;  // accept `node` when the low half is below this
  int32_t node, alias;
};

void build_alias(const int32_t* nodes, const double* w, int64_t size, AliasEntry* out) {
  double total = 0;
  for (int64_t i = 0; i < size; ++i) total += w[nodes[i]];
  std::vector<double> scaled(static_cast<size_t>(size));
  std::vector<int64_t> small, large;
  for (int64_t i = 0; i < size; ++i) {
    scaled[i] = w[nodes[i]] * static_cast<double>(size) / total;
    (scaled[i] < 1.0 ? small : large).push_back(i);
  }
  auto set = [&](int64_t i, double p, int64_t alias) {
    out[i].node = nodes[i];
    out[i].alias = nodes[alias];
    out[i].threshold =
        p >= 1.0 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(std::ldexp(p, 64));
  };
  while (!small.empty() && !large.empty()) {
    const int64_t s = small.back(), l = large.back();
    small.pop_back();
    set(s, scaled[s], l);
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // Leftovers are 1 up to rounding: always accept (alias = itself, so the rare miss is harmless).
  for (auto i : large) set(i, 1.0, i);
  for (auto i : small) set(i, 1.0, i);
}

inline int32_t alias_sample(const AliasEntry* table, uint64_t size, uint64_t r) {
  const unsigned __int128 m = static_cast<unsigned __int128>(r) * size;
  const AliasEntry& e = table[static_cast<uint64_t>(m >> 64)];
  return static_cast<uint64_t>(m) < e.threshold ? e.node : e.alias;
}

// ---- sorting ------------------------------------------------------------------------------------

// Parallel LSD radix sort of keys below 2^bits (11-bit digits). Sorting bare keys gives one answer
// whatever the thread count.
void radix_sort(std::vector<uint64_t>& a, int bits, int threads) {
  const size_t n = a.size();
  if (n < (size_t{1} << 16)) {
    std::sort(a.begin(), a.end());
    return;
  }
  constexpr int kDigit = 11;
  constexpr size_t kRadix = size_t{1} << kDigit;
  std::vector<uint64_t> tmp(n);
  std::vector<size_t> hist(static_cast<size_t>(threads) * kRadix);
  uint64_t* src = a.data();
  uint64_t* dst = tmp.data();
  for (int shift = 0; shift < bits; shift += kDigit) {
    int team = 1;
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
#pragma omp single
      team = omp_get_num_threads();
      const size_t lo = n * t / team, hi = n * (t + 1) / team;
      size_t* h = &hist[t * kRadix];
      std::fill(h, h + kRadix, 0);
      for (size_t i = lo; i < hi; ++i) ++h[(src[i] >> shift) & (kRadix - 1)];
#pragma omp barrier
#pragma omp single
      {
        size_t off = 0;
        for (size_t d = 0; d < kRadix; ++d)
          for (int u = 0; u < team; ++u) {
            const size_t c = hist[u * kRadix + d];
            hist[u * kRadix + d] = off;
            off += c;
          }
      }
      for (size_t i = lo; i < hi; ++i) dst[h[(src[i] >> shift) & (kRadix - 1)]++] = src[i];
    }
    std::swap(src, dst);
  }
  if (src != a.data()) a.swap(tmp);
}

// Sends every key of `keys` (emptied) to process dest(key); returns the keys sent here.
template <class Dest>
std::vector<uint64_t> group_by(std::vector<uint64_t>& keys, int P, Dest dest, ProcessGroup& group) {
  std::vector<int64_t> counts(static_cast<size_t>(P), 0);
  for (uint64_t k : keys) ++counts[dest(k)];
  std::vector<int64_t> at(static_cast<size_t>(P), 0);
  for (int p = 1; p < P; ++p) at[p] = at[p - 1] + counts[p - 1];
  std::vector<uint64_t> send(keys.size());
  for (uint64_t k : keys) send[at[dest(k)]++] = k;
  keys = {};
  return group.all_to_all(send, counts);
}

// ---- edges --------------------------------------------------------------------------------------

// Which edges a draw makes: both ends in one class or not, both ends in one community or anywhere.
enum class EdgeKind { kIntra, kInter, kIntraLocal, kInterLocal };

struct EdgeSampler {
  int64_t n = 0;
  int bits = 1;  // key = min << bits | max
  uint64_t seed = 0;
  int threads = 1;
  const int32_t* label = nullptr;
  const AliasEntry* global = nullptr;
  const AliasEntry* by_class = nullptr;  // classes' tables back to back
  const int64_t* class_off = nullptr;    // class c: by_class[class_off[c] .. class_off[c + 1])
  // Communities (local kinds only): node v is in community v / community_size; its nodes'
  // table is by_community[v0 .. v0 + size) (v0 its first node), and the members of class c in
  // community m are by_cell[cell_off[m * classes + c] .. cell_off[m * classes + c + 1]).
  int64_t community_size = 1, classes = 1;
  const AliasEntry* by_community = nullptr;
  const AliasEntry* by_cell = nullptr;
  const int64_t* cell_off = nullptr;

  uint64_t key(uint64_t u, uint64_t v) const {
    return u < v ? (u << bits) | v : (v << bits) | u;
  }
  uint64_t draw(Rng& rng, EdgeKind kind) const {
    if (kind == EdgeKind::kIntraLocal || kind == EdgeKind::kInterLocal) return draw_local(rng, kind == EdgeKind::kIntraLocal);
    const bool intra = kind == EdgeKind::kIntra;
    while (true) {  // rejections redraw both ends, so a kept pair's chance is ~ w_u w_v
      const int32_t u = alias_sample(global, static_cast<uint64_t>(n), rng.next());
      const int32_t c = label[u];
      int32_t v;
      if (intra) {
        v = alias_sample(by_class + class_off[c],
                         static_cast<uint64_t>(class_off[c + 1] - class_off[c]), rng.next());
        if (v != u) return key(static_cast<uint64_t>(u), static_cast<uint64_t>(v));
      } else {
        v = alias_sample(global, static_cast<uint64_t>(n), rng.next());
        if (label[v] != c) return key(static_cast<uint64_t>(u), static_cast<uint64_t>(v));
      }
    }
  }
  // One end anywhere, the other in its community (of its class, or of another); a node whose
  // community offers no partner is redrawn (the sizes check guarantees that partners exist).
  uint64_t draw_local(Rng& rng, bool intra) const {
    while (true) {
      const int32_t u = alias_sample(global, static_cast<uint64_t>(n), rng.next());
      const int64_t m = u / community_size, first = m * community_size;
      const int64_t size = std::min(n, first + community_size) - first;
      int32_t v;
      if (intra) {
        const int64_t cell = m * classes + label[u];
        const int64_t members = cell_off[cell + 1] - cell_off[cell];
        if (members < 2) continue;
        v = alias_sample(by_cell + cell_off[cell], static_cast<uint64_t>(members), rng.next());
        if (v != u) return key(static_cast<uint64_t>(u), static_cast<uint64_t>(v));
      } else {
        if (cell_off[m * classes + label[u] + 1] - cell_off[m * classes + label[u]] == size) continue;
        v = alias_sample(by_community + first, static_cast<uint64_t>(size), rng.next());
        if (label[v] != label[u]) return key(static_cast<uint64_t>(u), static_cast<uint64_t>(v));
      }
    }
  }

  // Which process keeps key k while edges are drawn: a hash spreads the keys evenly (an owner by
  // endpoint would load the low ids).
  static int owner(uint64_t k, int processes) {
    return processes == 1 ? 0 : static_cast<int>(mix64(k) % static_cast<uint64_t>(processes));
  }

  // The sorted keys of `have` (sorted, distinct) plus new distinct edges of one kind, `target`
  // in all. Rounds draw as many candidates as edges are missing and keep the new distinct ones;
  // a round can then never overshoot, so the result is the first new distinct keys of the
  // candidate sequence. Only a tiny final top-up draws a fixed minimum batch and keeps its
  // earliest new keys.
  //
  // Across processes: each draws its share of a round's candidate blocks and sends every key to
  // its owner, which keeps the new distinct ones; `have` and the result are this process's owned
  // keys, `target` counts all processes' keys. The rounds, their blocks and seeds depend only on
  // the global counts, so the union of the results is the same graph for any number of processes.
  std::vector<uint64_t> sample(int64_t target, EdgeKind kind, ProcessGroup& group,
                               std::vector<uint64_t> have = {}) const {
    constexpr int64_t kBlock = 1 << 16;     // candidates per RNG block
    constexpr int64_t kMinBatch = 1 << 12;  // smallest round
    constexpr uint64_t kMaxRounds = 100000;
    const int P = group.size(), me = group.rank();
    const uint64_t stream = kind == EdgeKind::kIntra ? kIntra : kind == EdgeKind::kInter ? kInter
                            : kind == EdgeKind::kIntraLocal ? kIntraLocal : kInterLocal;
    for (uint64_t round = 0;; ++round) {
      std::vector<int64_t> total{static_cast<int64_t>(have.size())};
      group.sum(total);
      if (total[0] >= target) break;
      if (round == kMaxRounds)
        throw std::runtime_error("csbm: edge sampling did not converge (graph too dense)");
      const int64_t missing = target - total[0];
      const int64_t count = std::max(missing, kMinBatch);
      // A full round: this process's blocks; a top-up (one block): every process draws it all.
      const int64_t blocks = (count + kBlock - 1) / kBlock;
      const bool topup = count != missing;
      const int64_t b_lo = topup ? 0 : blocks * me / P, b_hi = topup ? blocks : blocks * (me + 1) / P;
      const int64_t c_lo = b_lo * kBlock, c_hi = std::min(count, b_hi * kBlock);
      std::vector<uint64_t> cand(static_cast<size_t>(std::max<int64_t>(c_hi - c_lo, 0)));
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
      for (int64_t b = b_lo; b < b_hi; ++b) {
        Rng rng(stream_seed(seed, stream, (round << 32) | static_cast<uint64_t>(b)));
        const int64_t end = std::min(count, (b + 1) * kBlock);
        for (int64_t i = b * kBlock; i < end; ++i) cand[i - c_lo] = draw(rng, kind);
      }
      std::vector<uint64_t> fresh;
      if (!topup) {
        if (P > 1) cand = group_by(cand, P, [P](uint64_t k) { return owner(k, P); }, group);
        radix_sort(cand, 2 * bits, threads);
        cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
        fresh = without(std::move(cand), have);
      } else {
        // Earliest occurrence of each key, minus the keys any process has, then the `missing`
        // earliest; this process keeps those it owns.
        std::vector<std::pair<uint64_t, uint64_t>> kp(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) kp[i] = {cand[i], static_cast<uint64_t>(i)};
        std::sort(kp.begin(), kp.end());
        std::vector<std::pair<uint64_t, uint64_t>> distinct;  // (key, position)
        for (size_t i = 0; i < kp.size(); ++i)
          if (i == 0 || kp[i].first != kp[i - 1].first) distinct.push_back(kp[i]);
        std::vector<int64_t> held(distinct.size(), 0);
        for (size_t i = 0; i < distinct.size(); ++i)
          held[i] = owner(distinct[i].first, P) == me &&
                    std::binary_search(have.begin(), have.end(), distinct[i].first);
        group.sum(held);
        std::vector<std::pair<uint64_t, uint64_t>> first;  // (position, key)
        for (size_t i = 0; i < distinct.size(); ++i)
          if (held[i] == 0) first.emplace_back(distinct[i].second, distinct[i].first);
        if (static_cast<int64_t>(first.size()) > missing) {
          std::sort(first.begin(), first.end());
          first.resize(static_cast<size_t>(missing));
        }
        for (const auto& f : first)
          if (owner(f.second, P) == me) fresh.push_back(f.second);
        std::sort(fresh.begin(), fresh.end());
      }
      if (have.empty()) {
        have = std::move(fresh);
      } else {
        const auto mid = static_cast<std::ptrdiff_t>(have.size());
        have.insert(have.end(), fresh.begin(), fresh.end());
        std::inplace_merge(have.begin(), have.begin() + mid, have.end());
      }
    }
    return have;
  }

  // Sorted `keys` minus sorted `have`.
  static std::vector<uint64_t> without(std::vector<uint64_t> keys,
                                       const std::vector<uint64_t>& have) {
    if (have.empty()) return keys;
    size_t out = 0;
    if (keys.size() * 16 < have.size()) {  // few keys: binary search
      auto it = have.begin();
      for (size_t i = 0; i < keys.size(); ++i) {
        it = std::lower_bound(it, have.end(), keys[i]);
        if (it == have.end() || *it != keys[i]) keys[out++] = keys[i];
      }
    } else {
      size_t j = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        while (j < have.size() && have[j] < keys[i]) ++j;
        if (j == have.size() || have[j] != keys[i]) keys[out++] = keys[i];
      }
    }
    keys.resize(out);
    return keys;
  }
};

// Symmetric CSR from two disjoint sorted key lists. Walking the keys in merged order appends, to
// every row r, first its neighbours u < r in increasing order, then its v > r in increasing
// order: rows come out sorted without a sort.
Csr symmetric_csr(int64_t n, int bits, const std::vector<uint64_t>& a,
                  const std::vector<uint64_t>& b) {
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  Csr c;
  c.rows = c.cols = n;
  c.indptr.assign(static_cast<size_t>(n) + 1, 0);
  for (const auto* list : {&a, &b})
    for (uint64_t k : *list) {
      ++c.indptr[(k >> bits) + 1];
      ++c.indptr[(k & mask) + 1];
    }
  for (int64_t i = 0; i < n; ++i) c.indptr[i + 1] += c.indptr[i];
  c.indices.resize(static_cast<size_t>(c.indptr[n]));
  std::vector<int64_t> fill(c.indptr.begin(), c.indptr.end() - 1);
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    const uint64_t k = (j == b.size() || (i < a.size() && a[i] < b[j])) ? a[i++] : b[j++];
    const int64_t u = static_cast<int64_t>(k >> bits), v = static_cast<int64_t>(k & mask);
    c.indices[fill[u]++] = static_cast<int32_t>(v);
    c.indices[fill[v]++] = static_cast<int32_t>(u);
  }
  return c;
}

// ---- parameters ---------------------------------------------------------------------------------

// The process that holds row r when n rows are cut into P equal ranges [n p / P, n (p + 1) / P).
int row_owner(int64_t r, int64_t n, int P) {
  int p = static_cast<int>(r * P / n);
  while (p + 1 < P && n * (p + 1) / P <= r) ++p;
  while (p > 0 && n * p / P > r) --p;
  return p;
}

// Rows [n r / P, n (r + 1) / P) (this process's) of the symmetric CSR of the keys that all
// processes hold between them, each key on one process: a key goes to the holders of both its
// ends' rows, which sort what they receive. Columns are global ids; rows come out sorted.
Csr symmetric_rows(int64_t n, int bits, std::vector<uint64_t> a, std::vector<uint64_t> b,
                   ProcessGroup& group, int threads) {
  const int P = group.size(), me = group.rank();
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  // Both directions of every key, to the holders of their rows (counted first, so that the send
  // buffer is the only copy).
  auto dest = [&](uint64_t k) { return row_owner(static_cast<int64_t>(k >> bits), n, P); };
  auto flip = [&](uint64_t k) { return ((k & mask) << bits) | (k >> bits); };
  std::vector<int64_t> counts(static_cast<size_t>(P), 0), at(static_cast<size_t>(P), 0);
  for (const auto* list : {&a, &b})
    for (uint64_t k : *list) ++counts[dest(k)], ++counts[dest(flip(k))];
  for (int p = 1; p < P; ++p) at[p] = at[p - 1] + counts[p - 1];
  std::vector<uint64_t> send(2 * (a.size() + b.size()));
  for (auto* list : {&a, &b}) {
    for (uint64_t k : *list) {
      send[at[dest(k)]++] = k;
      send[at[dest(flip(k))]++] = flip(k);
    }
    *list = {};
  }
  std::vector<uint64_t> got = group.all_to_all(send, counts);
  send = {};
  radix_sort(got, 2 * bits, threads);
  const int64_t lo = n * me / P, hi = n * (me + 1) / P;
  Csr c;
  c.rows = hi - lo;
  c.cols = n;
  c.indptr.assign(static_cast<size_t>(c.rows) + 1, 0);
  c.indices.resize(got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t r = static_cast<int64_t>(got[i] >> bits);
    if (r < lo || r >= hi) throw std::logic_error("csbm: an edge reached the wrong process");
    ++c.indptr[r - lo + 1];
    c.indices[i] = static_cast<int32_t>(got[i] & mask);
  }
  for (int64_t r = 0; r < c.rows; ++r) c.indptr[r + 1] += c.indptr[r];
  return c;
}

struct Sizes {
  int64_t edges = 0, intra = 0, inter = 0;
  int64_t intra_local = 0, inter_local = 0;  // of intra / inter: both ends in one community
  int64_t community_size = 1;                // nodes per community (the last may have fewer)
};

// Validates `p` and returns the edge counts. Each kind of edge may use at most half of its node
// pairs: beyond that, drawing distinct pairs by rejection slows down like a coupon collector.
Sizes check(const CsbmParams& p) {
  auto fail = [](const std::string& m) { throw InputError(m); };
  if (p.nodes <= 0) fail(fmt::format("--nodes {}: must be positive", p.nodes));
  if (p.nodes > INT32_MAX)
    fail(fmt::format("--nodes {}: exceeds the 32-bit index range ({})", p.nodes, INT32_MAX));
  if (p.classes < 1 || p.classes > p.nodes)
    fail(fmt::format("--classes {}: must be in [1, {}] (at least one node per class)", p.classes,
                     p.nodes));
  if (p.degree_dist != "constant" && p.degree_dist != "powerlaw")
    fail(fmt::format("--degree-dist {}: expected constant or powerlaw", p.degree_dist));
  if (p.degree_dist == "powerlaw" &&
      !(p.powerlaw_exponent > 2.0 && std::isfinite(p.powerlaw_exponent)))
    fail(fmt::format("--exponent {}: must be > 2 for powerlaw (finite mean degree)",
                     p.powerlaw_exponent));
  if (!(p.homophily >= 0.0 && p.homophily <= 1.0))
    fail(fmt::format("--homophily {}: must be in [0, 1]", p.homophily));
  if (p.features < 1) fail(fmt::format("--features {}: must be positive", p.features));
  if (p.features > std::numeric_limits<int64_t>::max() / 4 / p.nodes)
    fail(fmt::format("--features {}: {} x {} features do not fit in memory", p.features, p.nodes,
                     p.features));
  if (!(p.separation >= 0.0 && std::isfinite(p.separation)))
    fail(fmt::format("--separation {}: must be a finite number >= 0", p.separation));
  if (!(p.noise >= 0.0 && std::isfinite(p.noise)))
    fail(fmt::format("--noise {}: must be a finite number >= 0", p.noise));
  if (p.threads < 0) fail(fmt::format("--threads {}: must be >= 0", p.threads));
  if (p.communities < 1 || p.communities > p.nodes)
    fail(fmt::format("--communities {}: must be in [1, {}] (the node count)", p.communities, p.nodes));
  if (!(p.locality >= 0.0 && p.locality <= 1.0))
    fail(fmt::format("--locality {}: must be in [0, 1]", p.locality));

  const int64_t n = p.nodes, k = p.classes;
  const int64_t pairs = n * (n - 1) / 2;
  const std::string flag = p.undirected_edges >= 0
                               ? fmt::format("--edges {}", p.undirected_edges)
                               : fmt::format("--avg-degree {}", p.avg_degree);
  Sizes s;
  if (p.undirected_edges >= 0) {
    s.edges = p.undirected_edges;
  } else {
    if (!(p.avg_degree > 0.0 && std::isfinite(p.avg_degree)))
      fail(fmt::format("--avg-degree {}: must be a positive number", p.avg_degree));
    const double m = static_cast<double>(n) * p.avg_degree / 2.0;
    if (m > static_cast<double>(pairs) / 2.0)
      fail(fmt::format("{}: {:.0f} undirected edges exceed half of the {} node pairs", flag, m,
                       pairs));
    s.edges = std::llround(m);
  }
  if (s.edges > pairs / 2)
    fail(fmt::format("{}: {} undirected edges exceed half of the {} node pairs", flag, s.edges,
                     pairs));
  s.intra = std::llround(p.homophily * static_cast<double>(s.edges));
  s.inter = s.edges - s.intra;
  // Balanced classes: k - n % k classes of n / k nodes, n % k of n / k + 1.
  const int64_t q = n / k, r = n % k;
  const int64_t intra_pairs = (k - r) * (q * (q - 1) / 2) + r * ((q + 1) * q / 2);
  const int64_t inter_pairs = pairs - intra_pairs;
  if (s.intra > intra_pairs / 2)
    fail(fmt::format("--homophily {}: {} intra-class edges exceed half of the {} intra-class node "
                     "pairs ({}; {} classes)",
                     p.homophily, s.intra, intra_pairs, flag, k));
  if (s.inter > inter_pairs / 2)
    fail(fmt::format("--homophily {}: {} inter-class edges exceed half of the {} inter-class node "
                     "pairs ({}; {} classes)",
                     p.homophily, s.inter, inter_pairs, flag, k));
  if (p.communities > 1 && p.locality > 0) {
    // Consecutive blocks of ceil(n / communities) ids; classes are a random permutation, so
    // every block holds about size / k nodes of each class: count the local pairs as if exactly.
    s.community_size = (n + p.communities - 1) / p.communities;
    s.intra_local = std::llround(p.locality * static_cast<double>(s.intra));
    s.inter_local = std::llround(p.locality * static_cast<double>(s.inter));
    int64_t local_intra_pairs = 0, local_pairs = 0;
    for (int64_t first = 0; first < n; first += s.community_size) {
      const int64_t size = std::min(n, first + s.community_size) - first, q1 = size / k, r1 = size % k;
      local_pairs += size * (size - 1) / 2;
      local_intra_pairs += (k - r1) * (q1 * (q1 - 1) / 2) + r1 * ((q1 + 1) * q1 / 2);
    }
    // A quarter, not a half: the classes within a community are only about balanced.
    if (s.intra_local > local_intra_pairs / 4 || s.inter_local > (local_pairs - local_intra_pairs) / 4)
      fail(fmt::format("--locality {}: {} + {} edges within communities exceed a quarter of the node pairs "
                       "there ({} communities of {} nodes; use fewer communities or a lower locality)",
                       p.locality, s.intra_local, s.inter_local, p.communities, s.community_size));
  }
  return s;
}

// Degree propensities. Power law: Pareto w = (1 - U)^(-1/(exponent - 1)), w >= 1, capped so that
// no node's expected degree exceeds sqrt(2M) (and n - 1). That is the Chung-Lu condition
// d_u d_v / 2M <= 1: no pair is expected more than once, so hubs stay feasible, duplicates stay
// rare and the realised degrees follow the weights. The cap depends on the mean of the capped
// weights, hence the short fixed-point iteration.
std::vector<double> degree_weights(const CsbmParams& p, int64_t edges, int threads) {
  const int64_t n = p.nodes;
  std::vector<double> w(static_cast<size_t>(n), 1.0);
  if (p.degree_dist != "powerlaw" || edges == 0) return w;
  const double inv = -1.0 / (p.powerlaw_exponent - 1.0);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t v = 0; v < n; ++v) {
    const uint64_t r = stream_seed(p.seed, kWeights, static_cast<uint64_t>(v));
    const double u = static_cast<double>(r >> 11) * 0x1.0p-53;  // [0, 1)
    w[v] = std::pow(1.0 - u, inv);
  }
  const double avg_degree = 2.0 * static_cast<double>(edges) / static_cast<double>(n);
  const double max_degree =
      std::min(std::sqrt(2.0 * static_cast<double>(edges)), static_cast<double>(n - 1));
  double cap = std::numeric_limits<double>::infinity();
  for (int it = 0; it < 8; ++it) {
    double sum = 0;  // serial: a parallel sum would depend on the thread count
    for (double x : w) sum += std::min(x, cap);
    const double next = max_degree * (sum / static_cast<double>(n)) / avg_degree;
    if (next >= cap) break;
    cap = next;
  }
  if (std::isfinite(cap))
    for (auto& x : w) x = std::min(x, cap);
  return w;
}

int bit_width(uint64_t x) {
  int b = 0;
  while (x) {
    ++b;
    x >>= 1;
  }
  return std::max(b, 1);
}

}  // namespace

// ---- presets ------------------------------------------------------------------------------------

std::vector<std::string> csbm_presets() { return {"arxiv-scale", "demo", "papers100m-scale", "products-scale"}; }

CsbmParams csbm_at_nodes(CsbmParams p, int64_t nodes) {
  if (p.undirected_edges >= 0 && p.nodes > 0) p.avg_degree = 2.0 * double(p.undirected_edges) / double(p.nodes);
  // Fewer nodes: fewer communities, each at least the preset's size (smaller ones hold too few
  // node pairs for the preset's locality); more nodes: the preset's count, so that a partition
  // into a few parts cuts the same share of the edges.
  if (p.nodes > 0 && nodes < p.nodes) p.communities = p.communities * nodes / p.nodes;
  p.communities = std::max<int64_t>(1, std::min(p.communities, nodes));
  p.undirected_edges = -1;
  p.nodes = nodes;
  return p;
}

CsbmParams csbm_preset(const std::string& preset) {
  CsbmParams p;
  p.name = preset;
  if (preset == "arxiv-scale") {
    // ogbn-arxiv's size, classes, feature width and edge homophily (0.65), with a power-law
    // degree tail; features: 40 classes need a wider mean spacing to stay partly separable.
    p.nodes = 169343;
    p.undirected_edges = 1166243;
    p.classes = 40;
    p.features = 128;
    p.homophily = 0.65;
    p.degree_dist = "powerlaw";
    p.powerlaw_exponent = 2.5;
    p.separation = 3.0;
    p.noise = 1.0;
    // Locality calibrated to METIS into 4 on ogbn-arxiv, which leaves 74,114 halo rows in all
    // (0.44 |V|): 64 communities keeping 94.5% of the edges give 73,315 (cut 4.1%).
    p.communities = 64;
    p.locality = 0.945;
  } else if (preset == "products-scale") {
    // ogbn-products' size, classes, feature width and edge homophily (0.81).
    p.nodes = 2449029;
    p.undirected_edges = 61859140;
    p.classes = 47;
    p.features = 100;
    p.homophily = 0.81;
    p.degree_dist = "powerlaw";
    p.powerlaw_exponent = 2.5;
    p.separation = 3.0;
    p.noise = 1.0;
    // Locality calibrated to METIS into 4 on ogbn-products, which leaves 1.01M halo rows of
    // 2.45M nodes (0.41 |V|); found on a 1/8-size copy (8 communities of the same size: 0.985
    // gave 0.45 |V|, 0.99 gave 0.32).
    p.communities = 64;
    p.locality = 0.986;
  } else if (preset == "papers100m-scale") {
    // ogbn-papers100M's size (111,059,956 nodes, 1,615,685,872 undirected edges: average degree
    // 29.1), classes and feature width, from OGB's dataset card. Its labels cover 1.4% of the
    // nodes and no edge homophily or METIS halo figure is published for it, so homophily (0.65)
    // and locality are ogbn-arxiv's, the same kind of graph (MAG citations, arXiv CS being a
    // subset); communities of about 27k nodes; the power-law tail as the other presets.
    p.nodes = 111059956;
    p.undirected_edges = 1615685872;
    p.classes = 172;
    p.features = 128;
    p.homophily = 0.65;
    p.degree_dist = "powerlaw";
    p.powerlaw_exponent = 2.5;
    p.separation = 3.0;
    p.noise = 1.0;
    p.communities = 4096;
    p.locality = 0.945;
  } else if (preset == "demo") {
    // Small and heterophilic: 0.1 < 1/classes, so a neighbour is less likely than chance to share
    // the node's class (at 0.2 = 1/classes the edges would carry no class information at all).
    // Features separate the classes fairly (as on the real heterophilic benchmarks, where an MLP
    // is strong), so adaptive depth has something to gain by not aggregating.
    p.nodes = 3000;
    p.classes = 5;
    p.avg_degree = 10.0;
    p.homophily = 0.1;
    p.features = 32;
    p.degree_dist = "powerlaw";
    p.powerlaw_exponent = 2.5;
    p.separation = 3.0;
    p.noise = 1.0;
  } else {
    std::string known;
    for (const auto& k : csbm_presets()) known += (known.empty() ? "" : ", ") + k;
    throw InputError(fmt::format("--preset {}: unknown (known: {})", preset, known));
  }
  return p;
}

// ---- generator ----------------------------------------------------------------------------------

CsbmGraph generate_csbm_structure(const CsbmParams& p, ProcessGroup& group) {
  const Sizes sizes = check(p);
  const int threads = p.threads > 0
                            ? p.threads
                            : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int64_t n = p.nodes, k = p.classes, f = p.features;

  Graph g;
  g.name = p.name;
  g.source = fmt::format(
      "csbm v1 nodes={} classes={} edges={} intra_edges={} degree_dist={} exponent={} "
      "homophily={} features={} separation={} noise={} seed={}",
      n, k, sizes.edges, sizes.intra, p.degree_dist, p.powerlaw_exponent, p.homophily, f,
      p.separation, p.noise, p.seed);
  if (sizes.intra_local + sizes.inter_local > 0)
    g.source += fmt::format(" communities={} locality={}", p.communities, p.locality);
  g.source_sha256 = sha256_hex(g.source);
  g.directed = false;
  g.num_nodes = n;
  g.num_classes = k;

  // Balanced classes: the i-th node of a random permutation gets class i mod k.
  std::vector<int32_t> label(static_cast<size_t>(n));
  {
    const auto perm = permutation(n, p.seed, kLabels);
    for (int64_t i = 0; i < n; ++i) label[perm[i]] = static_cast<int32_t>(i % k);
  }
  g.labels.assign(label.begin(), label.end());

  // Edges.
  {
    const auto w = degree_weights(p, sizes.edges, threads);
    std::vector<int32_t> all(static_cast<size_t>(n)), members(static_cast<size_t>(n));
    std::iota(all.begin(), all.end(), 0);
    std::vector<int64_t> class_off(static_cast<size_t>(k) + 1, 0);
    for (auto c : label) ++class_off[c + 1];
    for (int64_t c = 0; c < k; ++c) class_off[c + 1] += class_off[c];
    {
      std::vector<int64_t> fill(class_off.begin(), class_off.end() - 1);
      for (int64_t v = 0; v < n; ++v) members[fill[label[v]]++] = static_cast<int32_t>(v);
    }
    std::vector<AliasEntry> global(static_cast<size_t>(n)), by_class(static_cast<size_t>(n));
    build_alias(all.data(), w.data(), n, global.data());
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t c = 0; c < k; ++c)
      build_alias(members.data() + class_off[c], w.data(), class_off[c + 1] - class_off[c],
                  by_class.data() + class_off[c]);

    // Communities: every block's nodes, and its nodes of each class.
    const int64_t blocks = (n + sizes.community_size - 1) / sizes.community_size;
    const bool local = sizes.intra_local + sizes.inter_local > 0;
    std::vector<AliasEntry> by_community, by_cell;
    std::vector<int64_t> cell_off;
    if (local) {
      by_community.resize(static_cast<size_t>(n));
      by_cell.resize(static_cast<size_t>(n));
      cell_off.assign(static_cast<size_t>(blocks * k) + 1, 0);
      for (int64_t v = 0; v < n; ++v) ++cell_off[(v / sizes.community_size) * k + label[v] + 1];
      for (int64_t c = 0; c < blocks * k; ++c) cell_off[c + 1] += cell_off[c];
      std::vector<int32_t> cell_members(static_cast<size_t>(n));
      {
        std::vector<int64_t> fill(cell_off.begin(), cell_off.end() - 1);
        for (int64_t v = 0; v < n; ++v)
          cell_members[fill[(v / sizes.community_size) * k + label[v]]++] = static_cast<int32_t>(v);
      }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
      for (int64_t m = 0; m < blocks; ++m) {
        const int64_t first = m * sizes.community_size;
        build_alias(all.data() + first, w.data(), std::min(n, first + sizes.community_size) - first,
                    by_community.data() + first);
        for (int64_t c = m * k; c < (m + 1) * k; ++c)
          if (cell_off[c + 1] > cell_off[c])
            build_alias(cell_members.data() + cell_off[c], w.data(), cell_off[c + 1] - cell_off[c],
                        by_cell.data() + cell_off[c]);
      }
    }

    EdgeSampler s;
    s.n = n;
    s.community_size = sizes.community_size;
    s.classes = k;
    s.by_community = by_community.data();
    s.by_cell = by_cell.data();
    s.cell_off = cell_off.data();
    s.bits = bit_width(static_cast<uint64_t>(n - 1));
    s.seed = p.seed;
    s.threads = threads;
    s.label = label.data();
    s.global = global.data();
    s.by_class = by_class.data();
    s.class_off = class_off.data();
    // Local edges first; the rest are drawn anywhere, distinct from them.
    auto intra = s.sample(sizes.intra, EdgeKind::kIntra, group,
                          s.sample(sizes.intra_local, EdgeKind::kIntraLocal, group));
    auto inter = s.sample(sizes.inter, EdgeKind::kInter, group,
                          s.sample(sizes.inter_local, EdgeKind::kInterLocal, group));
    global = {};
    by_class = {};
    by_community = {};
    by_cell = {};
    // One process holds every key, sorted: the rows come out of a merge, without a sort.
    g.adj = group.size() == 1 ? symmetric_csr(n, s.bits, intra, inter)
                              : symmetric_rows(n, s.bits, std::move(intra), std::move(inter), group, threads);
  }

  // Features: x_v = mu_{y_v} + noise * N(0, I). Class means mu_c = z_c * separation / sqrt(2F)
  // with z_c ~ N(0, I_F): then E||mu_a - mu_b||^2 = separation^2, i.e. the root-mean-square
  // distance between two class means is `separation`, in the same units as the noise's std.
  // Row v comes from its own stream, so any rows can be made at any time, in any order.
  auto mu = std::make_shared<std::vector<double>>(static_cast<size_t>(k * f));
  const double scale = p.separation / std::sqrt(2.0 * static_cast<double>(f));
  for (int64_t c = 0; c < k; ++c) {
    Rng rng(stream_seed(p.seed, kMeans, static_cast<uint64_t>(c)));
    for (int64_t j = 0; j < f; j += 2) {
      double a, b;
      rng.gauss2(a, b);
      (*mu)[c * f + j] = a * scale;
      if (j + 1 < f) (*mu)[c * f + j + 1] = b * scale;
    }
  }
  g.features.rows = n;
  g.features.cols = f;
  g.features.sparse = false;
  auto labels = std::make_shared<std::vector<int32_t>>(std::move(label));
  const uint64_t seed = p.seed;
  const double noise = p.noise;
  DenseRowSource rows = [mu, labels, seed, noise, f, threads](int64_t first, int64_t count, float* x) {
#pragma omp parallel for schedule(static) num_threads(threads) if (!omp_in_parallel())
    for (int64_t v = first; v < first + count; ++v) {
      Rng rng(stream_seed(seed, kFeatures, static_cast<uint64_t>(v)));
      const double* m = mu->data() + (*labels)[v] * f;
      float* row = x + (v - first) * f;
      for (int64_t j = 0; j < f; j += 2) {
        double a, b;
        rng.gauss2(a, b);
        row[j] = static_cast<float>(m[j] + noise * a);
        if (j + 1 < f) row[j + 1] = static_cast<float>(m[j + 1] + noise * b);
      }
    }
  };

  // One random 60/20/20 split.
  SplitSet split;
  split.name = "random";
  split.count = 1;
  split.train.assign(static_cast<size_t>(n), 0);
  split.val.assign(static_cast<size_t>(n), 0);
  split.test.assign(static_cast<size_t>(n), 0);
  {
    const auto perm = permutation(n, p.seed, kSplits);
    const int64_t train = n * 6 / 10, val = n * 2 / 10;
    for (int64_t i = 0; i < n; ++i)
      (i < train ? split.train : i < train + val ? split.val : split.test)[perm[i]] = 1;
  }
  g.splits.push_back(std::move(split));
  return CsbmGraph{std::move(g), n * group.rank() / group.size(), std::move(rows)};
}

Graph generate_csbm(const CsbmParams& p) {
  LocalProcessGroup one;
  CsbmGraph c = generate_csbm_structure(p, one);
  Graph& g = c.graph;
  g.features.dense.resize(static_cast<size_t>(g.features.rows * g.features.cols));
  c.features(0, g.features.rows, g.features.dense.data());
  return std::move(g);
}

}  // namespace adgnn
