// gelu_tanh(x + bias), fused: x is read once and y written once (PyTorch eager writes x + bias
// to memory and reads it back). Each row is split at its first 16-byte boundary: 16-byte loads
// and stores of 8 bf16 in the middle, a scalar head and tail (< 8 elements each) otherwise, so
// rows of any length N take the vector path. bias is read 8 at a time with one 16-byte load when
// N % 8 == 0 (then every row starts aligned), else element by element (it stays in L1/L2).
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256;

// 0.5 * v * (1 + tanh(u)) == v * sigmoid(2u) == v / (1 + exp(-2u)): no cancellation for v < 0,
// and exp(-2u) = inf for very negative v gives -0, the limit.
__device__ __forceinline__ float gelu_tanh(float v) {
  const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
  return __fdividef(v, 1.f + __expf(-2.f * u));
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

// x and out have the same offset from a 16-byte boundary (checked by the launcher), so one
// head length serves both. kBiasVec: N % 8 == 0 and every base 16-byte aligned (head == 0).
template <bool kBiasVec>
__global__ void __launch_bounds__(kThreads) gelu_bias_vec(const __nv_bfloat16* __restrict__ x,
                                                          const __nv_bfloat16* __restrict__ bias,
                                                          __nv_bfloat16* __restrict__ out,
                                                          int64_t m, int64_t n) {
  for (int64_t row = blockIdx.y; row < m; row += gridDim.y) {
    const __nv_bfloat16* xr = x + row * n;
    __nv_bfloat16* yr = out + row * n;
    const int64_t mis = static_cast<int64_t>((reinterpret_cast<uintptr_t>(xr) & 15) >> 1);
    const int64_t head = kBiasVec ? 0 : (mis == 0 ? 0 : (8 - mis < n ? 8 - mis : n));
    const int64_t nvec = (n - head) / 8;
    const uint4* xv = reinterpret_cast<const uint4*>(xr + head);
    uint4* yv = reinterpret_cast<uint4*>(yr + head);
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; j < nvec;
         j += static_cast<int64_t>(gridDim.x) * kThreads) {
      float v[8], b[8];
      unpack(xv[j], v);
      if constexpr (kBiasVec) {
        unpack(reinterpret_cast<const uint4*>(bias)[j], b);
      } else {
        const __nv_bfloat16* bj = bias + head + 8 * j;
#pragma unroll
        for (int i = 0; i < 8; ++i) b[i] = __bfloat162float(bj[i]);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = gelu_tanh(v[i] + b[i]);
      yv[j] = pack(v);
    }
    if (blockIdx.x == 0) {  // the head (threads 0..7) and the tail (threads 8..15)
      const int64_t t = threadIdx.x, tail_start = head + 8 * nvec;
      int64_t col = -1;
      if (t < head) {
        col = t;
      } else if (t >= 8 && t < 16 && tail_start + t - 8 < n) {
        col = tail_start + t - 8;
      }
      if (col >= 0) {
        yr[col] = __float2bfloat16(gelu_tanh(__bfloat162float(xr[col]) + __bfloat162float(bias[col])));
      }
    }
  }
}

// x and out misaligned relative to each other (never for fresh tensors): plain scalar code.
__global__ void __launch_bounds__(kThreads) gelu_bias_scalar(const __nv_bfloat16* __restrict__ x,
                                                             const __nv_bfloat16* __restrict__ bias,
                                                             __nv_bfloat16* __restrict__ out,
                                                             int64_t m, int64_t n) {
  for (int64_t row = blockIdx.y; row < m; row += gridDim.y) {
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; j < n;
         j += static_cast<int64_t>(gridDim.x) * kThreads) {
      const float v = __bfloat162float(x[row * n + j]) + __bfloat162float(bias[j]);
      out[row * n + j] = __float2bfloat16(gelu_tanh(v));
    }
  }
}

}  // namespace

extern "C" int gelu_tanh_bias_bf16(const void* x, const void* bias, void* out, int64_t m,
                                   int64_t n, cudaStream_t stream) {
  if (m == 0 || n == 0) return 0;
  const uintptr_t xa = reinterpret_cast<uintptr_t>(x), ba = reinterpret_cast<uintptr_t>(bias),
                  oa = reinterpret_cast<uintptr_t>(out);
  const auto* xp = static_cast<const __nv_bfloat16*>(x);
  const auto* bp = static_cast<const __nv_bfloat16*>(bias);
  auto* op = static_cast<__nv_bfloat16*>(out);
  const unsigned rows = static_cast<unsigned>(m < 65535 ? m : 65535);  // grid.y, looped
  if (xa % 16 != oa % 16) {
    const dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads), rows);
    gelu_bias_scalar<<<grid, kThreads, 0, stream>>>(xp, bp, op, m, n);
    return static_cast<int>(cudaGetLastError());
  }
  const int64_t per_row = (n + 7) / 8;
  const dim3 grid(static_cast<unsigned>((per_row + kThreads - 1) / kThreads), rows);
  if (n % 8 == 0 && xa % 16 == 0 && ba % 16 == 0) {
    gelu_bias_vec<true><<<grid, kThreads, 0, stream>>>(xp, bp, op, m, n);
  } else {
    gelu_bias_vec<false><<<grid, kThreads, 0, stream>>>(xp, bp, op, m, n);
  }
  return static_cast<int>(cudaGetLastError());
}
