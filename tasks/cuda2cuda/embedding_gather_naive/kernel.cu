// Embedding lookup, bf16: one thread per output element. Each thread finds its row and column
// with a 64-bit division and remainder and copies one 2-byte element.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

constexpr int kThreads = 256;

__global__ void embedding_gather_kernel(const __nv_bfloat16* __restrict__ table,
                                        const int64_t* __restrict__ idx,
                                        __nv_bfloat16* __restrict__ out, int64_t total, int64_t d) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (t >= total) return;
  const int64_t i = t / d, j = t % d;
  out[t] = table[idx[i] * d + j];
}

extern "C" int embedding_gather_bf16(const void* table, const void* idx, void* out, int64_t n,
                                     int64_t d, cudaStream_t stream) {
  const int64_t total = n * d;
  if (total == 0) return 0;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > 0x7fffffff) return static_cast<int>(cudaErrorInvalidValue);
  embedding_gather_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(table), static_cast<const int64_t*>(idx),
      static_cast<__nv_bfloat16*>(out), total, d);
  return static_cast<int>(cudaGetLastError());
}
