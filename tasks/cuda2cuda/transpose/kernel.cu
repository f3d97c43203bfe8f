// Transpose, bf16: one thread per element. Reads are coalesced (neighbouring threads read
// neighbouring columns of a row); writes are not (neighbouring threads write M elements apart).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

__global__ void transpose_kernel(const __nv_bfloat16* __restrict__ x,
                                 __nv_bfloat16* __restrict__ out, int64_t m, int64_t n) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (row < m && col < n) out[col * m + row] = x[row * n + col];
}

extern "C" int transpose_bf16(const void* x, void* out, int64_t m, int64_t n,
                              cudaStream_t stream) {
  if (m == 0 || n == 0) return 0;
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((n + 31) / 32), static_cast<unsigned>((m + 7) / 8));
  transpose_kernel<<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(x),
                                               static_cast<__nv_bfloat16*>(out), m, n);
  return static_cast<int>(cudaGetLastError());
}
