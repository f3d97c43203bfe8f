// LayerNorm with weight and bias, bf16 in and out, float32 statistics, one block per row.
// x is read from memory once and y written once: the row stays in registers (VPT 16-byte
// vectors per thread, up to 65536 elements) between the mean, the variance (two-pass, from the
// registers, so no E[x^2] - mean^2 cancellation) and the write. Every row is split at its first
// 16-byte boundary: vectors in the middle, a scalar head and tail (< 8 elements each) held by
// threads 0..7 and 8..15, so any N takes the vector path; weight and bias are read 8 at a time
// when N % 8 == 0 (every row aligned), else element by element (they stay in L1/L2). Rows
// longer than 65536 elements fall back to three reads of the row.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

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

// Makes the compiler forget what it derived from v, so that each pass over the register cache
// unpacks its 16-byte vectors again instead of keeping 8 floats per vector live (and spilling).
__device__ __forceinline__ void opaque(uint4& v) {
  asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w));
}

// Safe to call twice in a row: a second call writes `total` only after its first barrier,
// which every thread reaches after reading the first call's `total`.
template <int THREADS>
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[THREADS / 32];
  __shared__ float total;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < THREADS / 32 ? partial[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) total = v;
  }
  __syncthreads();
  return total;
}

// The row's layout: `head` scalars before its first 16-byte boundary, `nvec` vectors of 8,
// then a scalar tail. Thread t < head owns element t; thread 8 + k owns tail element k.
struct RowSplit {
  int64_t head, nvec, extra_col;  // extra_col: this thread's head/tail element, or -1
  __device__ RowSplit(const __nv_bfloat16* row, int64_t n) {
    const int64_t mis = static_cast<int64_t>((reinterpret_cast<uintptr_t>(row) & 15) >> 1);
    head = mis == 0 ? 0 : (8 - mis < n ? 8 - mis : n);
    nvec = (n - head) / 8;
    const int64_t t = threadIdx.x, tail_start = head + 8 * nvec;
    extra_col = t < head ? t : (t >= 8 && t < 16 && tail_start + t - 8 < n ? tail_start + t - 8 : -1);
  }
};

// weight[c .. c+7] and bias[c .. c+7] for the vector j of the row (c = head + 8 j).
template <bool kParamVec>
__device__ __forceinline__ void load_params(const __nv_bfloat16* __restrict__ weight,
                                            const __nv_bfloat16* __restrict__ bias, int64_t c,
                                            float (&w)[8], float (&b)[8]) {
  if constexpr (kParamVec) {
    unpack(*reinterpret_cast<const uint4*>(weight + c), w);
    unpack(*reinterpret_cast<const uint4*>(bias + c), b);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      w[i] = __bfloat162float(weight[c + i]);
      b[i] = __bfloat162float(bias[c + i]);
    }
  }
}

template <int THREADS, int VPT, bool kParamVec>
__global__ void __launch_bounds__(THREADS) layer_norm_cached(
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
    const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ out, int64_t n,
    float inv_n, float eps) {
  const __nv_bfloat16* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  __nv_bfloat16* yr = out + static_cast<int64_t>(blockIdx.x) * n;
  const RowSplit s(xr, n);
  const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);
  uint4* yv = reinterpret_cast<uint4*>(yr + s.head);

  uint4 cache[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(k) * THREADS;
    if (j < s.nvec) cache[k] = xv[j];
  }
  const bool has_extra = s.extra_col >= 0;
  const float extra = has_extra ? __bfloat162float(xr[s.extra_col]) : 0.f;

  float sum = extra;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (threadIdx.x + static_cast<int64_t>(k) * THREADS < s.nvec) {
      float f[8];
      unpack(cache[k], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += f[i];
    }
  }
  const float mean = block_sum<THREADS>(sum) * inv_n;
#pragma unroll
  for (int k = 0; k < VPT; ++k) opaque(cache[k]);

  float sq = has_extra ? (extra - mean) * (extra - mean) : 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (threadIdx.x + static_cast<int64_t>(k) * THREADS < s.nvec) {
      float f[8];
      unpack(cache[k], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) sq += (f[i] - mean) * (f[i] - mean);
    }
  }
  const float rstd = rsqrtf(block_sum<THREADS>(sq) * inv_n + eps);
#pragma unroll
  for (int k = 0; k < VPT; ++k) opaque(cache[k]);

#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(k) * THREADS;
    if (j < s.nvec) {
      float f[8], w[8], b[8];
      unpack(cache[k], f);
      load_params<kParamVec>(weight, bias, s.head + 8 * j, w, b);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = (f[i] - mean) * rstd * w[i] + b[i];
      yv[j] = pack(f);
    }
  }
  if (has_extra) {
    const int64_t c = s.extra_col;
    yr[c] = __float2bfloat16((extra - mean) * rstd * __bfloat162float(weight[c]) +
                             __bfloat162float(bias[c]));
  }
}

// Rows longer than the register cache: the row is read three times (mean, variance, write).
constexpr int kStreamThreads = 1024;

__global__ void __launch_bounds__(kStreamThreads) layer_norm_stream(
    const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
    const __nv_bfloat16* __restrict__ bias, __nv_bfloat16* __restrict__ out, int64_t n,
    float inv_n, float eps) {
  const __nv_bfloat16* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  __nv_bfloat16* yr = out + static_cast<int64_t>(blockIdx.x) * n;
  const RowSplit s(xr, n);
  const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);
  uint4* yv = reinterpret_cast<uint4*>(yr + s.head);
  const bool has_extra = s.extra_col >= 0;
  const float extra = has_extra ? __bfloat162float(xr[s.extra_col]) : 0.f;

  float sum = extra;
  for (int64_t j = threadIdx.x; j < s.nvec; j += kStreamThreads) {
    float f[8];
    unpack(xv[j], f);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += f[i];
  }
  const float mean = block_sum<kStreamThreads>(sum) * inv_n;
  float sq = has_extra ? (extra - mean) * (extra - mean) : 0.f;
  for (int64_t j = threadIdx.x; j < s.nvec; j += kStreamThreads) {
    float f[8];
    unpack(xv[j], f);
#pragma unroll
    for (int i = 0; i < 8; ++i) sq += (f[i] - mean) * (f[i] - mean);
  }
  const float rstd = rsqrtf(block_sum<kStreamThreads>(sq) * inv_n + eps);
  for (int64_t j = threadIdx.x; j < s.nvec; j += kStreamThreads) {
    float f[8], w[8], b[8];
    unpack(xv[j], f);
    load_params<false>(weight, bias, s.head + 8 * j, w, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = (f[i] - mean) * rstd * w[i] + b[i];
    yv[j] = pack(f);
  }
  if (has_extra) {
    const int64_t c = s.extra_col;
    yr[c] = __float2bfloat16((extra - mean) * rstd * __bfloat162float(weight[c]) +
                             __bfloat162float(bias[c]));
  }
}

template <int THREADS, int VPT>
void launch_cached(bool param_vec, const void* x, const void* w, const void* b, void* out,
                   int64_t m, int64_t n, float inv_n, float eps, cudaStream_t stream) {
  const auto* xp = static_cast<const __nv_bfloat16*>(x);
  const auto* wp = static_cast<const __nv_bfloat16*>(w);
  const auto* bp = static_cast<const __nv_bfloat16*>(b);
  auto* op = static_cast<__nv_bfloat16*>(out);
  if (param_vec) {
    layer_norm_cached<THREADS, VPT, true><<<static_cast<unsigned>(m), THREADS, 0, stream>>>(
        xp, wp, bp, op, n, inv_n, eps);
  } else {
    layer_norm_cached<THREADS, VPT, false><<<static_cast<unsigned>(m), THREADS, 0, stream>>>(
        xp, wp, bp, op, n, inv_n, eps);
  }
}

}  // namespace

extern "C" int layer_norm_bf16(const void* x, const void* weight, const void* bias, void* out,
                               int64_t m, int64_t n, float eps, cudaStream_t stream) {
  if (m == 0 || n == 0) return 0;
  if (m > 0x7fffffff) return static_cast<int>(cudaErrorInvalidValue);  // grid.x holds the rows
  const uintptr_t xa = reinterpret_cast<uintptr_t>(x), oa = reinterpret_cast<uintptr_t>(out);
  // One head length serves x and y only if both bases sit at the same 16-byte offset.
  if (xa % 16 != oa % 16) return static_cast<int>(cudaErrorMisalignedAddress);
  const bool param_vec = n % 8 == 0 && xa % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(weight) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(bias) % 16 == 0;
  const float inv_n = 1.f / static_cast<float>(n);
  const int64_t vectors = (n + 7) / 8;  // an upper bound on any row's nvec
  if (vectors <= 128 * 2) {
    launch_cached<128, 2>(param_vec, x, weight, bias, out, m, n, inv_n, eps, stream);
  } else if (vectors <= 256 * 2) {
    launch_cached<256, 2>(param_vec, x, weight, bias, out, m, n, inv_n, eps, stream);
  } else if (vectors <= 256 * 4) {
    launch_cached<256, 4>(param_vec, x, weight, bias, out, m, n, inv_n, eps, stream);
  } else if (vectors <= 512 * 4) {
    launch_cached<512, 4>(param_vec, x, weight, bias, out, m, n, inv_n, eps, stream);
  } else if (vectors <= 512 * 8) {
    launch_cached<512, 8>(param_vec, x, weight, bias, out, m, n, inv_n, eps, stream);
  } else if (vectors <= 1024 * 8) {
    launch_cached<1024, 8>(param_vec, x, weight, bias, out, m, n, inv_n, eps, stream);
  } else {
    layer_norm_stream<<<static_cast<unsigned>(m), kStreamThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(weight),
        static_cast<const __nv_bfloat16*>(bias), static_cast<__nv_bfloat16*>(out), n, inv_n,
        eps);
  }
  return static_cast<int>(cudaGetLastError());
}
