// Tensors to and from the named arrays of our HDF5 files (checkpoints, predictions), and a
// model's parameters and buffers from a checkpoint's arrays (the trainer's resume, `adgnn predict`).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "adgnn/loaders.h"
#include "adgnn/model.h"

namespace adgnn::detail {

// A CPU copy of t as an array (float32, float64, int64 or uint8).
H5Array to_array(const at::Tensor& t);
// Copies a into t (its dtype and shape must match: InputError naming `where` otherwise).
void from_array(const H5Array& a, at::Tensor& t, const std::string& where);
// The model's parameters ("param/<name>") and buffers ("buffer/<name>") from a checkpoint's
// arrays (path: for the errors).
void load_model_state(const std::string& path, const std::map<std::string, H5Array>& arrays, Model& model);

}  // namespace adgnn::detail
