// Row softmax, bf16 in and out, float32 math: one thread per row, three passes over the row in
// global memory (max, sum of exponentials, write). Straightforward and slow: the 32 threads of a
// warp read 32 different rows (no coalescing), and only M threads exist.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

constexpr int kThreads = 128;

__global__ void softmax_rows_kernel(const __nv_bfloat16* __restrict__ x,
                                    __nv_bfloat16* __restrict__ out, int64_t m, int64_t n) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (row >= m) return;
  const __nv_bfloat16* xr = x + row * n;
  __nv_bfloat16* yr = out + row * n;

  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = fmaxf(mx, __bfloat162float(xr[j]));
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) sum += expf(__bfloat162float(xr[j]) - mx);
  const float inv = 1.f / sum;
  for (int64_t j = 0; j < n; ++j) yr[j] = __float2bfloat16(expf(__bfloat162float(xr[j]) - mx) * inv);
}

extern "C" int softmax_rows_bf16(const void* x, void* out, int64_t m, int64_t n,
                                 cudaStream_t stream) {
  if (m == 0 || n == 0) return 0;
  const int64_t blocks = (m + kThreads - 1) / kThreads;
  softmax_rows_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(out), m, n);
  return static_cast<int>(cudaGetLastError());
}
