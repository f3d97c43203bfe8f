// Row-wise softmax of a bf16 [M, N] tensor, in HIP.
//
// One block of 256 threads per row and three passes over the row, each reading it from memory
// (one bf16 per thread and step): the row's maximum, the sum of exp(x - max), then the output.
// Both reductions are shared-memory trees.
//
// bf16 values are handled as raw uint16_t bits (torch.bfloat16's layout) with explicit float
// conversions, so the code does not depend on a HIP version's bfloat16 header.
#include <hip/hip_runtime.h>
#include <math.h>
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
softmax_kernel(const uint16_t* x, uint16_t* y, int64_t n) {
  __shared__ float partial[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = blockIdx.x;
  const uint16_t* x_row = x + row * n;
  uint16_t* y_row = y + row * n;

  float row_max = -INFINITY;
  for (int64_t col = tid; col < n; col += kThreads) row_max = fmaxf(row_max, bf16_to_float(x_row[col]));
  partial[tid] = row_max;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (tid < stride) partial[tid] = fmaxf(partial[tid], partial[tid + stride]);
    __syncthreads();
  }
  row_max = partial[0];
  __syncthreads();  // everyone has read partial[0] before it is reused

  float sum = 0.0f;
  for (int64_t col = tid; col < n; col += kThreads) sum += expf(bf16_to_float(x_row[col]) - row_max);
  partial[tid] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  const float inv_sum = 1.0f / partial[0];

  for (int64_t col = tid; col < n; col += kThreads) {
    y_row[col] = float_to_bf16(expf(bf16_to_float(x_row[col]) - row_max) * inv_sum);
  }
}

}  // namespace

extern "C" int softmax_bf16(const void* x, void* y, int64_t m, int64_t n, hipStream_t stream) {
  if (m <= 0 || n <= 0) return 0;
  hipLaunchKernelGGL(softmax_kernel, dim3(static_cast<unsigned>(m)), dim3(kThreads), 0, stream,
                     static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), n);
  return static_cast<int>(hipGetLastError());
}
