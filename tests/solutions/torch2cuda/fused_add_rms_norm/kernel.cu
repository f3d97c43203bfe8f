// Residual add + RMSNorm in one kernel: x and residual are read once, r and y written once
// (PyTorch eager makes seven passes). One block per row; 16-byte loads/stores of 8 bf16 with
// the rounded sum r kept in registers when N % 8 == 0 and the row fits; scalar path otherwise.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;
constexpr int kMaxVectorsPerThread = 8;

__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[kThreads / 32];
  __shared__ float total;
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_sums[lane] : 0.f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

__device__ __forceinline__ void unpack(const uint4& raw, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

__device__ __forceinline__ uint4 pack(const float (&f)[8]) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return raw;
}

// r = x + residual rounded to bf16 (stored, and kept in registers); returns its sum of squares.
__device__ __forceinline__ float add_round(const uint4& xv, const uint4& rv, uint4& out) {
  float a[8], b[8];
  unpack(xv, a);
  unpack(rv, b);
#pragma unroll
  for (int i = 0; i < 8; ++i) a[i] += b[i];
  out = pack(a);
  unpack(out, a);  // square what is stored: y is computed from the rounded r
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) sum += a[i] * a[i];
  return sum;
}

template <int VPT>
__global__ void __launch_bounds__(kThreads) fused_cached(
    const uint4* __restrict__ x, const uint4* __restrict__ res, const uint4* __restrict__ weight,
    uint4* __restrict__ y, uint4* __restrict__ r, int64_t nvec, float inv_n, float eps) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * nvec;
  uint4 cache[VPT];
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (j < nvec) {
      sum += add_round(x[base + j], res[base + j], cache[k]);
      r[base + j] = cache[k];
    }
  }
  const float rstd = rsqrtf(block_sum(sum) * inv_n + eps);
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (j < nvec) {
      float f[8], w[8];
      unpack(cache[k], f);
      unpack(weight[j], w);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = f[i] * rstd * w[i];
      y[base + j] = pack(f);
    }
  }
}

// Any N (or rows too long for registers): scalar, r written then read back for y.
__global__ void __launch_bounds__(kThreads) fused_scalar(
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ res,
    const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ y,
    __nv_bfloat16* __restrict__ r, int64_t n, float eps) {
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n;
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const __nv_bfloat16 v = __float2bfloat16(__bfloat162float(x[base + j]) +
                                             __bfloat162float(res[base + j]));
    r[base + j] = v;
    const float f = __bfloat162float(v);
    sum += f * f;
  }
  const float rstd = rsqrtf(block_sum(sum) / static_cast<float>(n) + eps);
  // Each thread reads back only the elements it wrote itself: no barrier needed for r.
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    y[base + j] = __float2bfloat16(__bfloat162float(r[base + j]) * rstd *
                                   __bfloat162float(weight[j]));
  }
}

template <int VPT>
void launch_cached(const void* x, const void* res, const void* w, void* y, void* r, int64_t m,
                   int64_t nvec, float inv_n, float eps, cudaStream_t stream) {
  fused_cached<VPT><<<static_cast<unsigned>(m), kThreads, 0, stream>>>(
      static_cast<const uint4*>(x), static_cast<const uint4*>(res), static_cast<const uint4*>(w),
      static_cast<uint4*>(y), static_cast<uint4*>(r), nvec, inv_n, eps);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

extern "C" int fused_add_rms_norm_bf16(const void* x, const void* residual, const void* weight,
                                       void* y, void* r, int64_t m, int64_t n, float eps,
                                       cudaStream_t stream) {
  if (m == 0) return 0;
  const int64_t nvec = n / 8;
  const int64_t per_thread = (nvec + kThreads - 1) / kThreads;
  const bool vec = n % 8 == 0 && aligned16(x) && aligned16(residual) && aligned16(weight) &&
                   aligned16(y) && aligned16(r) && per_thread <= kMaxVectorsPerThread;
  const float inv_n = 1.f / static_cast<float>(n);
  if (!vec) {
    fused_scalar<<<static_cast<unsigned>(m), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(residual),
        static_cast<const __nv_bfloat16*>(weight), static_cast<__nv_bfloat16*>(y),
        static_cast<__nv_bfloat16*>(r), n, eps);
  } else if (per_thread <= 1) {
    launch_cached<1>(x, residual, weight, y, r, m, nvec, inv_n, eps, stream);
  } else if (per_thread <= 2) {
    launch_cached<2>(x, residual, weight, y, r, m, nvec, inv_n, eps, stream);
  } else if (per_thread <= 4) {
    launch_cached<4>(x, residual, weight, y, r, m, nvec, inv_n, eps, stream);
  } else {
    launch_cached<kMaxVectorsPerThread>(x, residual, weight, y, r, m, nvec, inv_n, eps, stream);
  }
  return static_cast<int>(cudaGetLastError());
}
