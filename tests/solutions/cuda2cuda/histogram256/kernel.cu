// 256-bin histogram of bytes, privatised: each block counts its share of the data into a
// shared-memory histogram (shared atomics, fast and local to the SM), then adds each non-zero
// bin to the global counts with one atomic: 256 global atomics per block instead of one per
// byte. The data is read with 16-byte loads (two in flight per thread), grid-stride over a
// grid sized to fill the GPU; the bytes before the first 16-byte boundary and after the last
// one (< 16 each) are counted by block 0.
#include <cstdint>
#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSM = 8;

__device__ __forceinline__ void count_word(int* hist, uint32_t w) {
  atomicAdd(&hist[w & 0xffu], 1);
  atomicAdd(&hist[(w >> 8) & 0xffu], 1);
  atomicAdd(&hist[(w >> 16) & 0xffu], 1);
  atomicAdd(&hist[w >> 24], 1);
}

__device__ __forceinline__ void count_vec(int* hist, const uint4& v) {
  count_word(hist, v.x);
  count_word(hist, v.y);
  count_word(hist, v.z);
  count_word(hist, v.w);
}

__global__ void __launch_bounds__(kThreads) histogram_kernel(const uint8_t* __restrict__ data,
                                                             int* __restrict__ out, int64_t n) {
  __shared__ int hist[256];
  for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0;
  __syncthreads();

  const int64_t mis = static_cast<int64_t>(reinterpret_cast<uintptr_t>(data) & 15);
  const int64_t head = mis == 0 ? 0 : (16 - mis < n ? 16 - mis : n);
  const int64_t nvec = (n - head) / 16, tail_start = head + 16 * nvec;
  const uint4* dv = reinterpret_cast<const uint4*>(data + head);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  int64_t v = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (; v + stride < nvec; v += 2 * stride) {
    const uint4 a = dv[v], b = dv[v + stride];
    count_vec(hist, a);
    count_vec(hist, b);
  }
  if (v < nvec) count_vec(hist, dv[v]);
  if (blockIdx.x == 0) {  // head on threads 0..15, tail on threads 16..31
    const int64_t t = threadIdx.x;
    if (t < head) {
      atomicAdd(&hist[data[t]], 1);
    } else if (t >= 16 && t < 32 && tail_start + t - 16 < n) {
      atomicAdd(&hist[data[tail_start + t - 16]], 1);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += kThreads) {
    if (hist[i] != 0) atomicAdd(&out[i], hist[i]);
  }
}

}  // namespace

extern "C" int histogram256_u8(const void* data, void* out, int64_t n, cudaStream_t stream) {
  const cudaError_t cleared = cudaMemsetAsync(out, 0, 256 * sizeof(int), stream);
  if (cleared != cudaSuccess || n == 0) return static_cast<int>(cleared);
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    return static_cast<int>(cudaGetLastError());
  }
  const int64_t needed = (n / 16 + 2 * kThreads - 1) / (2 * kThreads);
  int64_t blocks = static_cast<int64_t>(sms) * kBlocksPerSM;
  if (needed < blocks) blocks = needed;
  if (blocks < 1) blocks = 1;
  histogram_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const uint8_t*>(data), static_cast<int*>(out), n);
  return static_cast<int>(cudaGetLastError());
}
