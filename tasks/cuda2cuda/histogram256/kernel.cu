// 256-bin histogram of bytes: one thread per byte, each a global atomicAdd on its bin. All the
// updates land on 256 counters (a few cache lines) shared by the whole GPU.
#include <cstdint>
#include <cuda_runtime.h>

__global__ void histogram_kernel(const uint8_t* __restrict__ data, int* __restrict__ out,
                                 int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&out[data[i]], 1);
}

extern "C" int histogram256_u8(const void* data, void* out, int64_t n, cudaStream_t stream) {
  const cudaError_t cleared = cudaMemsetAsync(out, 0, 256 * sizeof(int), stream);
  if (cleared != cudaSuccess || n == 0) return static_cast<int>(cleared);
  constexpr int kThreads = 256;
  histogram_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      static_cast<const uint8_t*>(data), static_cast<int*>(out), n);
  return static_cast<int>(cudaGetLastError());
}
