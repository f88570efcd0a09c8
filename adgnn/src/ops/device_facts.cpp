// What this build and device report (adgnn/ops.h): whether the CUDA kernels are built, and the
// current and peak memory of PyTorch's CUDA allocator.
#include <torch/torch.h>

#include "adgnn/ops.h"

#ifdef ADGNN_HAVE_CUDA_KERNELS
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace adgnn {

int64_t peak_device_memory(c10::Device device) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (device.is_cuda()) {
    const auto idx = device.has_index() ? device.index() : c10::cuda::current_device();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(idx);
    return stats.allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  }
#endif
  (void)device;
  return 0;
}

int64_t current_device_memory(c10::Device device) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (device.is_cuda()) {
    const auto idx = device.has_index() ? device.index() : c10::cuda::current_device();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(idx);
    return stats.allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)].current;
  }
#endif
  (void)device;
  return 0;
}

void reset_peak_device_memory(c10::Device device) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (device.is_cuda())
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.has_index() ? device.index() : c10::cuda::current_device());
#endif
  (void)device;
}

bool cuda_kernels_built() {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}


}  // namespace adgnn
