// Tensors with room for more rows after them in their buffer (ops/rows_with_room.h).
#include "ops/rows_with_room.h"

#include <torch/torch.h>

namespace adgnn::detail {

at::Tensor rows_with_room(int64_t rows, int64_t cols, int64_t room, const at::TensorOptions& options) {
  TORCH_CHECK(rows >= 0 && cols >= 0 && room >= 0, "rows_with_room: negative size");
  const at::Tensor buffer = torch::empty({rows + room, cols}, options);
  return torch::empty({0}, options).set_(buffer.storage(), 0, {rows, cols}, {cols, 1});
}

bool has_room(const at::Tensor& t, int64_t more) {
  if (t.dim() != 2 || !t.is_contiguous() || t.storage_offset() != 0 || more < 0 || !t.has_storage()) return false;
  return t.storage().nbytes() >= size_t((t.size(0) + more) * t.size(1)) * t.element_size();
}

at::Tensor grow_into_room(const at::Tensor& t, int64_t more) {
  if (!has_room(t, more)) return {};
  const int64_t cols = t.size(1);
  return torch::empty({0}, t.options()).set_(t.storage(), 0, {t.size(0) + more, cols}, {cols, 1});
}

}  // namespace adgnn::detail
