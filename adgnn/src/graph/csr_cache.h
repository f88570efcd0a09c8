// Values derived from a graph's CSR, built on first use and kept for the next calls (internal).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>

namespace adgnn::detail {

// Every CsrCache, so that clear_csr_caches (adgnn::release_graph_caches) can empty them all.
class CsrCacheBase {
 public:
  CsrCacheBase();
  virtual ~CsrCacheBase();
  CsrCacheBase(const CsrCacheBase&) = delete;
  CsrCacheBase& operator=(const CsrCacheBase&) = delete;
  virtual void clear() = 0;
};
// Empties every cache (their entries' CSR tensors and values are released).
void clear_csr_caches();

// A model aggregates the same few CSRs every layer and epoch, and a rank's forward pass reads the
// same halo bookkeeping every step. An entry holds the CSR tensors it was built from, so their
// storage, and hence the data pointers that identify them, cannot be reused by another graph
// while the entry lives; the oldest of 8 entries is dropped.
template <typename Value>
class CsrCache : public CsrCacheBase {
 public:
  void clear() override {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
  }
  template <typename Make>
  Value get(const at::Tensor& rowptr, const at::Tensor& col, int64_t num_src, Make make) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->rowptr.data_ptr() == rowptr.data_ptr() && it->col.data_ptr() == col.data_ptr() &&
          it->rowptr.numel() == rowptr.numel() && it->col.numel() == col.numel() &&
          it->num_src == num_src && it->rowptr.device() == rowptr.device()) {
        entries_.splice(entries_.begin(), entries_, it);
        return it->value;
      }
    }
    entries_.push_front({rowptr, col, num_src, make()});
    if (entries_.size() > kCapacity) entries_.pop_back();
    return entries_.front().value;
  }

 private:
  struct Entry {
    at::Tensor rowptr, col;
    int64_t num_src;
    Value value;
  };
  static constexpr size_t kCapacity = 8;
  std::mutex mu_;
  std::list<Entry> entries_;
};

}  // namespace adgnn::detail
