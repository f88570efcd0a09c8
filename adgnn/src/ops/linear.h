// The dense layers' products (internal): addmm with a fused ReLU and, on the GPU, cuBLASLt's
// epilogues, with backward passes that sum the bias gradient in one row-parallel pass.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "ops/dropout.h"

namespace adgnn::detail {

// A parameter in the type of the activations x it meets in a product (ModelConfig::precision
// bf16: a bfloat16 copy of the float32 parameter, through which autograd returns a float32
// gradient); p itself where they agree. The products below take their weights through it.
at::Tensor like(const at::Tensor& p, const at::Tensor& x);

// x [rows, C] -> [C]: x's column sums, in x's accumulation type (float32 for bfloat16); on the
// GPU by a row-parallel kernel in a fixed order (ATen's sum over rows takes several times the
// time to read them).
at::Tensor column_sums(const at::Tensor& x);
// The gradient through a ReLU (g where out > 0, else 0) and its column sums (as column_sums'); on
// the GPU in one pass.
// scale: g's factor where out > 0 (linear_relu_dropout's backward).
std::pair<at::Tensor, at::Tensor> relu_grad_column_sums(const at::Tensor& g, const at::Tensor& out, double scale = 1);
// addmm(b, x, w) (x [N, in], w [in, out], b [out]) whose backward sums b's gradient with
// column_sums: the dense layers' bias gradients (GCN's, three per depth-4 step).
// rows >= 0: of x's first `rows` rows only; x's gradient still has x's shape (zeros below them),
// the product written into it: a slice's backward would be a zero-filled copy of all of x.
// room >= 0: the output is built with that many rows of room after it (rows_with_room, halo.h).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t rows = -1,
                  int64_t room = -1);
// relu(addmm(b, x, w)): on the GPU the ReLU is cuBLASLt's epilogue of the product, and the
// backward masks the gradient and sums its columns in one pass.
at::Tensor linear_relu(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int64_t rows = -1,
                       int64_t room = -1);

// {dropped, out}: out = relu(addmm(b, x[:rows], w)) as linear_relu, dropped = out * mask (the
// next layer's input dropout, fused into this node). Only `dropped` carries a gradient; the
// backward needs no mask: an element's gradient is scale * grad where dropped > 0, else 0 (a
// dropped element and a non-positive one both have none), so the dropout needs no backward pass
// of its own over every row.
std::pair<at::Tensor, at::Tensor> linear_relu_dropout(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                                      int64_t rows, const DropoutMask& mask);
// x + b (b: one value per column) whose backward sums b's gradient with column_sums.
at::Tensor bias_add(const at::Tensor& x, const at::Tensor& b);

}  // namespace adgnn::detail
