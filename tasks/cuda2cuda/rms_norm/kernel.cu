// RMSNorm, bf16 in and out, float32 math: one block of 256 threads per row.
// Pass 1 sums squares with a shared-memory tree reduction; pass 2 reads the row again and writes.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

constexpr int kThreads = 256;

__global__ void rms_norm_kernel(const __nv_bfloat16* __restrict__ x,
                                const __nv_bfloat16* __restrict__ weight,
                                __nv_bfloat16* __restrict__ out, int64_t n, float eps) {
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* xr = x + row * n;
  __nv_bfloat16* yr = out + row * n;

  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    float v = __bfloat162float(xr[j]);
    sum += v * v;
  }
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float rstd = rsqrtf(partial[0] / static_cast<float>(n) + eps);

  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    float v = __bfloat162float(xr[j]) * rstd * __bfloat162float(weight[j]);
    yr[j] = __float2bfloat16(v);
  }
}

extern "C" int rms_norm_bf16(const void* x, const void* weight, void* out, int64_t m, int64_t n,
                             float eps, cudaStream_t stream) {
  if (m == 0) return 0;
  rms_norm_kernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(weight),
      static_cast<__nv_bfloat16*>(out), n, eps);
  return static_cast<int>(cudaGetLastError());
}
