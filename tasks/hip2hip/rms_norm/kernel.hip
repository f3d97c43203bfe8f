// RMSNorm with weight over the rows of a bf16 [M, N] tensor, in HIP.
//
// One block of 256 threads per row. A first loop over the row accumulates the sum of squares
// (one bf16 per thread and step), a shared-memory tree reduces it, and a second loop re-reads
// the row, scales it and multiplies by the weight.
//
// bf16 values are handled as raw uint16_t bits (torch.bfloat16's layout) with explicit float
// conversions, so the code does not depend on a HIP version's bfloat16 header.
#include <hip/hip_runtime.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float bf16_to_float(uint16_t bits) {
  return __builtin_bit_cast(float, static_cast<uint32_t>(bits) << 16);
}

// Round to nearest even, as torch does; NaN stays NaN.
__device__ __forceinline__ uint16_t float_to_bf16(float value) {
  uint32_t bits = __builtin_bit_cast(uint32_t, value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

__global__ void __launch_bounds__(kThreads)
rms_norm_kernel(const uint16_t* x, const uint16_t* weight, uint16_t* y, int64_t n, float eps) {
  __shared__ float partial[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x;
  const uint16_t* x_row = x + row * n;
  uint16_t* y_row = y + row * n;

  float sum_sq = 0.0f;
  for (int64_t col = tid; col < n; col += kThreads) {
    const float v = bf16_to_float(x_row[col]);
    sum_sq += v * v;
  }
  partial[tid] = sum_sq;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  const float rstd = 1.0f / sqrtf(partial[0] / static_cast<float>(n) + eps);

  for (int64_t col = tid; col < n; col += kThreads) {
    const float v = bf16_to_float(x_row[col]) * rstd;
    y_row[col] = float_to_bf16(v * bf16_to_float(weight[col]));
  }
}

}  // namespace

extern "C" int rms_norm_bf16(const void* x, const void* weight, void* y, int64_t m, int64_t n,
                             float eps, hipStream_t stream) {
  if (m <= 0 || n <= 0) return 0;
  hipLaunchKernelGGL(rms_norm_kernel, dim3(static_cast<unsigned>(m)), dim3(kThreads), 0, stream,
                     static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(weight),
                     static_cast<uint16_t*>(y), n, eps);
  return static_cast<int>(hipGetLastError());
}
