// y = A x for a bf16 [M, K] row-major A and a bf16 [K] x, float32 accumulation: one thread per
// output row, looping over the row in order. Neighbouring threads read addresses K elements
// apart, so no load of A is coalesced, and only M threads run.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void gemv_kernel(const __nv_bfloat16* __restrict__ a,
                            const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                            int64_t m, int64_t k) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= m) return;
  const __nv_bfloat16* ar = a + row * k;
  float sum = 0.f;
  for (int64_t j = 0; j < k; ++j) sum += __bfloat162float(ar[j]) * __bfloat162float(x[j]);
  y[row] = __float2bfloat16(sum);
}

extern "C" int gemv_bf16(const void* a, const void* x, void* y, int64_t m, int64_t k,
                         cudaStream_t stream) {
  if (m == 0) return 0;
  constexpr int kThreads = 128;
  gemv_kernel<<<static_cast<unsigned>((m + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(a), static_cast<const __nv_bfloat16*>(x),
      static_cast<__nv_bfloat16*>(y), m, k);
  return static_cast<int>(cudaGetLastError());
}
