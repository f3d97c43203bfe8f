// Row softmax, bf16 in and out, float32 math, one block per row. x is read from memory once and
// y written once: the row stays in registers (VPT 16-byte vectors per thread, up to 65536
// elements) between the max, the sum of exponentials and the write. Every row is split at its
// first 16-byte boundary: vectors in the middle, a scalar head and tail (< 8 elements each) held
// by threads 0..7 and 8..15, so any N takes the vector path. Rows longer than 65536 elements
// fall back to an online max/sum pass and a second read.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

constexpr float kLog2e = 1.4426950408889634f;

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

template <int THREADS>
__device__ __forceinline__ float block_max(float v) {
  __shared__ float partial[THREADS / 32];
  __shared__ float total;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < THREADS / 32 ? partial[threadIdx.x] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0) total = v;
  }
  __syncthreads();
  return total;
}

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

template <int THREADS, int VPT>
__global__ void __launch_bounds__(THREADS) softmax_cached(const __nv_bfloat16* __restrict__ x,
                                                          __nv_bfloat16* __restrict__ out,
                                                          int64_t n) {
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
  const float extra = s.extra_col >= 0 ? __bfloat162float(xr[s.extra_col]) : -INFINITY;

  float mx = extra;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (threadIdx.x + static_cast<int64_t>(k) * THREADS < s.nvec) {
      float f[8];
      unpack(cache[k], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) mx = fmaxf(mx, f[i]);
    }
  }
  const float shift = block_max<THREADS>(mx) * kLog2e;  // exp(v - max) = exp2(v log2e - shift)
#pragma unroll
  for (int k = 0; k < VPT; ++k) opaque(cache[k]);

  float sum = s.extra_col >= 0 ? exp2f(fmaf(extra, kLog2e, -shift)) : 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (threadIdx.x + static_cast<int64_t>(k) * THREADS < s.nvec) {
      float f[8];
      unpack(cache[k], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum += exp2f(fmaf(f[i], kLog2e, -shift));
    }
  }
  // y = exp2(v log2e - shift - log2(sum)): the division folded into the exponent. (Reusing the
  // sum pass's exponentials would keep 8 * VPT floats live across the reduction and spill.)
  const float norm = shift + __log2f(block_sum<THREADS>(sum));
#pragma unroll
  for (int k = 0; k < VPT; ++k) opaque(cache[k]);

#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(k) * THREADS;
    if (j < s.nvec) {
      float f[8];
      unpack(cache[k], f);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = exp2f(fmaf(f[i], kLog2e, -norm));
      yv[j] = pack(f);
    }
  }
  if (s.extra_col >= 0) yr[s.extra_col] = __float2bfloat16(exp2f(fmaf(extra, kLog2e, -norm)));
}

// Rows longer than the register cache: an online (max, sum) pass, then a second read to write.
constexpr int kStreamThreads = 1024;

__device__ __forceinline__ void online_add(float& m, float& s, float v) {  // log2 domain
  if (v > m) {
    s = s * exp2f(m - v) + 1.f;
    m = v;
  } else {
    s += exp2f(v - m);
  }
}

__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;
  s = s * exp2f(m - mm) + s2 * exp2f(m2 - mm);
  m = mm;
}

__global__ void __launch_bounds__(kStreamThreads) softmax_stream(
    const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ out, int64_t n) {
  const __nv_bfloat16* xr = x + static_cast<int64_t>(blockIdx.x) * n;
  __nv_bfloat16* yr = out + static_cast<int64_t>(blockIdx.x) * n;
  const RowSplit s(xr, n);
  const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);
  uint4* yv = reinterpret_cast<uint4*>(yr + s.head);

  float m = -INFINITY, sum = 0.f;
  if (s.extra_col >= 0) online_add(m, sum, __bfloat162float(xr[s.extra_col]) * kLog2e);
  for (int64_t j = threadIdx.x; j < s.nvec; j += kStreamThreads) {
    float f[8];
    unpack(xv[j], f);
    float cm = f[0];
#pragma unroll
    for (int i = 1; i < 8; ++i) cm = fmaxf(cm, f[i]);
    cm *= kLog2e;
    float cs = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) cs += exp2f(fmaf(f[i], kLog2e, -cm));
    online_merge(m, sum, cm, cs);
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, sum, o);
    online_merge(m, sum, m2, s2);
  }
  __shared__ float pm[kStreamThreads / 32], ps[kStreamThreads / 32];
  __shared__ float shift_total, inv_total;
  if ((threadIdx.x & 31) == 0) {
    pm[threadIdx.x >> 5] = m;
    ps[threadIdx.x >> 5] = sum;
  }
  __syncthreads();
  if (threadIdx.x < 32) {
    m = pm[threadIdx.x];  // kStreamThreads / 32 == 32 partials
    sum = ps[threadIdx.x];
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, sum, o);
      online_merge(m, sum, m2, s2);
    }
    if (threadIdx.x == 0) {
      shift_total = m;
      inv_total = 1.f / sum;
    }
  }
  __syncthreads();
  const float shift = shift_total, inv = inv_total;
  for (int64_t j = threadIdx.x; j < s.nvec; j += kStreamThreads) {
    float f[8];
    unpack(xv[j], f);
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = exp2f(fmaf(f[i], kLog2e, -shift)) * inv;
    yv[j] = pack(f);
  }
  if (s.extra_col >= 0) {
    yr[s.extra_col] = __float2bfloat16(exp2f(fmaf(__bfloat162float(xr[s.extra_col]), kLog2e, -shift)) * inv);
  }
}

template <int THREADS, int VPT>
void launch_cached(const void* x, void* out, int64_t m, int64_t n, cudaStream_t stream) {
  softmax_cached<THREADS, VPT><<<static_cast<unsigned>(m), THREADS, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(out), n);
}

}  // namespace

extern "C" int softmax_rows_bf16(const void* x, void* out, int64_t m, int64_t n,
                                 cudaStream_t stream) {
  if (m == 0 || n == 0) return 0;
  if (m > 0x7fffffff) return static_cast<int>(cudaErrorInvalidValue);  // grid.x holds the rows
  // One head length serves x and y only if both bases sit at the same 16-byte offset.
  if (reinterpret_cast<uintptr_t>(x) % 16 != reinterpret_cast<uintptr_t>(out) % 16) {
    return static_cast<int>(cudaErrorMisalignedAddress);
  }
  const int64_t vectors = (n + 7) / 8;  // an upper bound on any row's nvec
  if (vectors <= 128 * 2) {
    launch_cached<128, 2>(x, out, m, n, stream);
  } else if (vectors <= 256 * 2) {
    launch_cached<256, 2>(x, out, m, n, stream);
  } else if (vectors <= 256 * 4) {
    launch_cached<256, 4>(x, out, m, n, stream);
  } else if (vectors <= 512 * 4) {
    launch_cached<512, 4>(x, out, m, n, stream);
  } else if (vectors <= 512 * 8) {
    launch_cached<512, 8>(x, out, m, n, stream);
  } else if (vectors <= 1024 * 8) {
    launch_cached<1024, 8>(x, out, m, n, stream);
  } else {
    softmax_stream<<<static_cast<unsigned>(m), kStreamThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(out), n);
  }
  return static_cast<int>(cudaGetLastError());
}
