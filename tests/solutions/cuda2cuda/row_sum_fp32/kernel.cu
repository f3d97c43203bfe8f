// Row sums of a float32 [M, N] matrix, one block of 256 threads per row: neighbouring threads
// read neighbouring 16-byte vectors (coalesced, 4 loads in flight per thread), then a
// warp-shuffle reduction and one shared-memory step. Each row is split at its first 16-byte
// boundary: float4 loads in the middle, a scalar head and tail (< 4 elements each) taken by
// threads 0..3 and 4..7, so any N takes the vector path.
#include <cstdint>
#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float hsum(const float4& v) { return (v.x + v.y) + (v.z + v.w); }

__global__ void __launch_bounds__(kThreads) row_sum_kernel(const float* __restrict__ x,
                                                           float* __restrict__ out, int64_t n) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  const int64_t mis = static_cast<int64_t>((reinterpret_cast<uintptr_t>(xr) & 15) >> 2);
  const int64_t head = mis == 0 ? 0 : (4 - mis < n ? 4 - mis : n);
  const int64_t nvec = (n - head) / 4, tail_start = head + 4 * nvec;
  const float4* xv = reinterpret_cast<const float4*>(xr + head);

  float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
  int64_t j = threadIdx.x;
  for (; j + 3 * kThreads < nvec; j += 4 * kThreads) {
    const float4 v0 = xv[j], v1 = xv[j + kThreads], v2 = xv[j + 2 * kThreads],
                 v3 = xv[j + 3 * kThreads];
    a0 += hsum(v0);
    a1 += hsum(v1);
    a2 += hsum(v2);
    a3 += hsum(v3);
  }
  for (; j < nvec; j += kThreads) a0 += hsum(xv[j]);
  const int64_t t = threadIdx.x;
  if (t < head) a1 += xr[t];
  if (t >= 4 && t < 8 && tail_start + t - 4 < n) a2 += xr[tail_start + t - 4];

  float sum = (a0 + a1) + (a2 + a3);
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  __shared__ float partial[kThreads / 32];
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    sum = threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
  }
}

}  // namespace

extern "C" int row_sum_fp32(const void* x, void* out, int64_t m, int64_t n, cudaStream_t stream) {
  if (m == 0) return 0;
  if (m > 0x7fffffff) return static_cast<int>(cudaErrorInvalidValue);  // grid.x holds the rows
  row_sum_kernel<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(
      static_cast<const float*>(x), static_cast<float*>(out), n);
  return static_cast<int>(cudaGetLastError());
}
