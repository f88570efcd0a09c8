// What this build and device report (adgnn/ops.h): whether the CUDA kernels are built, and the
// current and peak memory of PyTorch's CUDA allocator.
#include <torch/torch.h>

#include "adgnn/ops.h"

#ifdef ADGNN_HAVE_CUDA_KERNELS
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace adgnn {

namespace {

// Bytes allocated by the CUDA allocator on `device`: the peak since the last reset, or now.
int64_t allocated_bytes(c10::Device device, bool peak) {
#ifdef ADGNN_HAVE_CUDA_KERNELS
  if (device.is_cuda()) {
    const auto idx = device.has_index() ? device.index() : c10::cuda::current_device();
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(idx);
    const auto& stat = stats.allocated_bytes[size_t(c10::CachingAllocator::StatType::AGGREGATE)];
    return peak ? stat.peak : stat.current;
  }
#endif
  (void)device;
  (void)peak;
  return 0;
}

}  // namespace

int64_t peak_device_memory(c10::Device device) { return allocated_bytes(device, true); }
int64_t current_device_memory(c10::Device device) { return allocated_bytes(device, false); }

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
