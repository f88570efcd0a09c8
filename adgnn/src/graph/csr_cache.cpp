// The registry of CsrCaches (graph/csr_cache.h) and adgnn::release_graph_caches.
#include "graph/csr_cache.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "adgnn/ops.h"

namespace adgnn {

namespace detail {

namespace {
std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}
std::vector<CsrCacheBase*>& registry() {
  static std::vector<CsrCacheBase*> caches;
  return caches;
}
}  // namespace

CsrCacheBase::CsrCacheBase() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
}

CsrCacheBase::~CsrCacheBase() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

void clear_csr_caches() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (CsrCacheBase* c : registry()) c->clear();
}

}  // namespace detail

void release_graph_caches() { detail::clear_csr_caches(); }

}  // namespace adgnn
