// y = A x, bf16 A [M, K] row-major and x [K], float32 accumulation. One warp per row (each
// warp takes kRowsPerWarp rows in turn, 8 warps per block): the 32 lanes read consecutive
// 16-byte vectors of the row (coalesced, 4 loads in flight per lane), then a shuffle reduction.
// x is staged once per block in shared memory, zero-padded. Each row of A is split at its first
// 16-byte boundary: vectors in the middle, a scalar head and tail (< 8 elements each) on lanes
// 0..7 and 8..15, so any K takes the vector path. When K % 8 != 0 a row's vectors start at an
// element `head` that is not a multiple of 8: the matching 8 elements of x are cut out of two
// aligned shared-memory vectors with funnel shifts. Rows too long for shared memory (K > 24000)
// take a plain kernel reading x from global memory.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;
constexpr int64_t kMaxSharedK = 24000;  // (K + 16) * 2 bytes stay under the 48 KB default

__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(a2[i]), fb = __bfloat1622float2(b2[i]);
    acc = fmaf(fa.x, fb.x, acc);
    acc = fmaf(fa.y, fb.y, acc);
  }
  return acc;
}

// Elements head .. head + 7 of the 16 elements in (lo, hi); head in 0..7, the same on all lanes.
__device__ __forceinline__ uint4 window(const uint4& lo, const uint4& hi, int head) {
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const int q = head >> 1;
  uint32_t r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // selects on a warp-uniform q: no local-memory indexing
    const uint32_t a = q == 0 ? w[i] : q == 1 ? w[i + 1] : q == 2 ? w[i + 2] : w[i + 3];
    const uint32_t b = q == 0 ? w[i + 1] : q == 1 ? w[i + 2] : q == 2 ? w[i + 3] : w[i + 4];
    r[i] = (head & 1) ? __funnelshift_r(a, b, 16) : a;
  }
  return make_uint4(r[0], r[1], r[2], r[3]);
}

// x[head + 8 v .. head + 8 v + 7] from the staged copy.
template <bool kShifted>
__device__ __forceinline__ uint4 xwin(const uint4* xs_vec, int64_t v, int head) {
  if constexpr (kShifted) return window(xs_vec[v], xs_vec[v + 1], head);
  return xs_vec[v];
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// kShifted: K % 8 != 0 (or A not 16-byte aligned), so rows start at varying offsets.
template <bool kShifted>
__global__ void __launch_bounds__(kThreads) gemv_shared(const __nv_bfloat16* __restrict__ a,
                                                        const __nv_bfloat16* __restrict__ x,
                                                        __nv_bfloat16* __restrict__ y,
                                                        int64_t m, int64_t k) {
  extern __shared__ uint4 xs_vec[];  // (k + 7) / 8 + 1 vectors: x, then zeros
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(xs_vec);
  const int64_t padded = ((k + 7) / 8 + 1) * 8;
  if (!kShifted) {  // x is 16-byte aligned and k % 8 == 0
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    for (int64_t i = threadIdx.x; i < k / 8; i += kThreads) xs_vec[i] = xv[i];
    for (int64_t i = k + threadIdx.x; i < padded; i += kThreads) xs[i] = __float2bfloat16(0.f);
  } else {
    for (int64_t i = threadIdx.x; i < padded; i += kThreads) {
      xs[i] = i < k ? x[i] : __float2bfloat16(0.f);
    }
  }
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp * kRowsPerWarp + r;
    if (row >= m) break;
    const __nv_bfloat16* ar = a + row * k;
    int head = 0;
    if (kShifted) {
      const int mis = static_cast<int>((reinterpret_cast<uintptr_t>(ar) & 15) >> 1);
      head = mis == 0 ? 0 : static_cast<int>(8 - mis < k ? 8 - mis : k);
    }
    const int64_t nvec = (k - head) / 8, tail_start = head + 8 * nvec;
    const uint4* av = reinterpret_cast<const uint4*>(ar + head);
    float acc0 = 0.f, acc1 = 0.f, acc2 = 0.f, acc3 = 0.f;
    int64_t v = lane;
    for (; v + 96 < nvec; v += 128) {
      const uint4 a0 = av[v], a1 = av[v + 32], a2 = av[v + 64], a3 = av[v + 96];
      acc0 = dot8(a0, xwin<kShifted>(xs_vec, v, head), acc0);
      acc1 = dot8(a1, xwin<kShifted>(xs_vec, v + 32, head), acc1);
      acc2 = dot8(a2, xwin<kShifted>(xs_vec, v + 64, head), acc2);
      acc3 = dot8(a3, xwin<kShifted>(xs_vec, v + 96, head), acc3);
    }
    for (; v < nvec; v += 32) acc0 = dot8(av[v], xwin<kShifted>(xs_vec, v, head), acc0);
    if (lane < head) {
      acc1 = fmaf(__bfloat162float(ar[lane]), __bfloat162float(xs[lane]), acc1);
    } else if (lane >= 8 && lane < 16 && tail_start + lane - 8 < k) {
      const int64_t c = tail_start + lane - 8;
      acc2 = fmaf(__bfloat162float(ar[c]), __bfloat162float(xs[c]), acc2);
    }
    const float sum = warp_sum((acc0 + acc1) + (acc2 + acc3));
    if (lane == 0) y[row] = __float2bfloat16(sum);
  }
}

// Very long rows: one warp per row, scalar but coalesced loads of A, x from global memory.
__global__ void __launch_bounds__(kThreads) gemv_long(const __nv_bfloat16* __restrict__ a,
                                                      const __nv_bfloat16* __restrict__ x,
                                                      __nv_bfloat16* __restrict__ y, int64_t m,
                                                      int64_t k) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= m) return;
  const __nv_bfloat16* ar = a + row * k;
  float acc = 0.f;
  for (int64_t j = lane; j < k; j += 32) acc = fmaf(__bfloat162float(ar[j]), __bfloat162float(x[j]), acc);
  acc = warp_sum(acc);
  if (lane == 0) y[row] = __float2bfloat16(acc);
}

}  // namespace

extern "C" int gemv_bf16(const void* a, const void* x, void* y, int64_t m, int64_t k,
                         cudaStream_t stream) {
  if (m == 0) return 0;
  const auto* ap = static_cast<const __nv_bfloat16*>(a);
  const auto* xp = static_cast<const __nv_bfloat16*>(x);
  auto* yp = static_cast<__nv_bfloat16*>(y);
  if (k > kMaxSharedK) {
    gemv_long<<<static_cast<unsigned>((m + kWarps - 1) / kWarps), kThreads, 0, stream>>>(
        ap, xp, yp, m, k);
    return static_cast<int>(cudaGetLastError());
  }
  const size_t smem = static_cast<size_t>((k + 7) / 8 + 1) * sizeof(uint4);
  const unsigned blocks = static_cast<unsigned>((m + kRowsPerBlock - 1) / kRowsPerBlock);
  const bool aligned = k % 8 == 0 && reinterpret_cast<uintptr_t>(a) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if (aligned) {
    gemv_shared<false><<<blocks, kThreads, smem, stream>>>(ap, xp, yp, m, k);
  } else {
    gemv_shared<true><<<blocks, kThreads, smem, stream>>>(ap, xp, yp, m, k);
  }
  return static_cast<int>(cudaGetLastError());
}
