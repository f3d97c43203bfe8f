// GPT-J (interleaved) rotary embedding of q and k, bf16 in and out, float32 math, one kernel:
// one block per token rotates all Hq + Hk heads of that token. A thread owns a fixed group of
// pairs within the head (the block stride is a multiple of the groups per head), so it loads
// its cos/sin values once per token and then only streams q and k: 16-byte loads and stores
// (4 pairs) when every pointer is 16-byte aligned, one pair at a time otherwise.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

constexpr int kHeadDim = 128, kHalf = kHeadDim / 2;
constexpr int kThreads = 128;

struct Pairs4 {  // 4 pairs: 8 bf16 in 16 bytes
  static constexpr int kPairs = 4;
};
struct Pairs1 {  // 1 pair, two 2-byte loads (any alignment)
  static constexpr int kPairs = 1;
};

__device__ __forceinline__ void load_pairs(const __nv_bfloat16* p, float (&f)[8], Pairs4) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

__device__ __forceinline__ void store_pairs(__nv_bfloat16* p, const float (&f)[8], Pairs4) {
  uint4 raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = raw;
}

__device__ __forceinline__ void load_pairs(const __nv_bfloat16* p, float (&f)[8], Pairs1) {
  f[0] = __bfloat162float(p[0]);
  f[1] = __bfloat162float(p[1]);
}

__device__ __forceinline__ void store_pairs(__nv_bfloat16* p, const float (&f)[8], Pairs1) {
  p[0] = __float2bfloat16(f[0]);
  p[1] = __float2bfloat16(f[1]);
}

template <typename G>
__global__ void __launch_bounds__(kThreads) rope_kernel(
    const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
    const float* __restrict__ cos, const float* __restrict__ sin,
    __nv_bfloat16* __restrict__ q_out, __nv_bfloat16* __restrict__ k_out, int64_t hq, int64_t hk) {
  constexpr int P = G::kPairs;
  constexpr int kGroupsPerHead = kHalf / P;
  static_assert(kThreads % kGroupsPerHead == 0, "a thread must keep its group within the head");
  const int64_t t = blockIdx.x;
  const int group = threadIdx.x % kGroupsPerHead;

  float c[P], s[P];
#pragma unroll
  for (int i = 0; i < P; ++i) {  // once per token and thread: negligible traffic
    c[i] = cos[t * kHalf + group * P + i];
    s[i] = sin[t * kHalf + group * P + i];
  }

  const int64_t units_q = hq * kGroupsPerHead, units = (hq + hk) * kGroupsPerHead;
  const __nv_bfloat16* qt = q + t * hq * kHeadDim;
  const __nv_bfloat16* kt = k + t * hk * kHeadDim;
  __nv_bfloat16* qot = q_out + t * hq * kHeadDim;
  __nv_bfloat16* kot = k_out + t * hk * kHeadDim;
#pragma unroll 2
  for (int64_t u = threadIdx.x; u < units; u += kThreads) {
    const bool is_q = u < units_q;
    const int64_t off = (is_q ? u : u - units_q) * (2 * P);
    const __nv_bfloat16* src = (is_q ? qt : kt) + off;
    __nv_bfloat16* dst = (is_q ? qot : kot) + off;
    float f[8], y[8];
    load_pairs(src, f, G{});
#pragma unroll
    for (int i = 0; i < P; ++i) {
      y[2 * i] = f[2 * i] * c[i] - f[2 * i + 1] * s[i];
      y[2 * i + 1] = f[2 * i + 1] * c[i] + f[2 * i] * s[i];
    }
    store_pairs(dst, y, G{});
  }
}

template <typename G>
int launch(const void* q, const void* k, const void* cos, const void* sin, void* q_out, void* k_out,
           int64_t t, int64_t hq, int64_t hk, cudaStream_t stream) {
  rope_kernel<G><<<static_cast<unsigned>(t), kThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k),
      static_cast<const float*>(cos), static_cast<const float*>(sin),
      static_cast<__nv_bfloat16*>(q_out), static_cast<__nv_bfloat16*>(k_out), hq, hk);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

extern "C" int rope_gptj_bf16(const void* q, const void* k, const void* cos, const void* sin,
                              void* q_out, void* k_out, int64_t t, int64_t hq, int64_t hk,
                              cudaStream_t stream) {
  if (t == 0 || hq + hk == 0) return 0;
  if (t > 0x7fffffff) return static_cast<int>(cudaErrorInvalidValue);  // grid.x holds the tokens
  // Rows are 256 bytes (q, k) and 256 bytes (cos, sin): aligned bases align every group.
  const uintptr_t base = reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(k) |
                         reinterpret_cast<uintptr_t>(cos) | reinterpret_cast<uintptr_t>(sin) |
                         reinterpret_cast<uintptr_t>(q_out) | reinterpret_cast<uintptr_t>(k_out);
  if (base % 16 == 0) return launch<Pairs4>(q, k, cos, sin, q_out, k_out, t, hq, hk, stream);
  return launch<Pairs1>(q, k, cos, sin, q_out, k_out, t, hq, hk, stream);
}
