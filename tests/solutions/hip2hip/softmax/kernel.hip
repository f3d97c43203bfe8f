// Row-wise softmax of a bf16 [M, N] tensor, in HIP, for CDNA3 (gfx942, MI300X).
//
// Why this is faster than the baseline (three passes over the row from memory with 2-byte
// accesses and two shared-memory trees of 8 barriers each):
//  * the row is read from memory once and kept in registers (up to 16384 columns, or 4096 when
//    N % 8 != 0): the maximum, the sum and the output all come from the registers;
//  * longer rows (vocabulary-sized) take two passes instead of three: an online pass keeps a
//    running maximum and a sum rescaled whenever the maximum grows, then the output pass;
//  * 16-byte loads and stores (8 bf16 per global_load_dwordx4) when N % 8 == 0;
//  * each reduction is a 64-lane wavefront butterfly (__shfl_xor) plus one barrier.
//
// bf16 values are raw uint16_t bits (torch.bfloat16's layout) with explicit float conversions,
// so the code does not depend on a HIP version's bfloat16 header.
#include <hip/hip_runtime.h>
#include <math.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;
constexpr int kWave = 64;  // CDNA (gfx942) wavefronts have 64 lanes
constexpr int kWaves = kThreads / kWave;

typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));  // 16 bytes: 8 bf16

__device__ __forceinline__ float bf16_to_float(uint16_t bits) {
  return __builtin_bit_cast(float, static_cast<uint32_t>(bits) << 16);
}

// Round to nearest even, as torch does; NaN stays NaN.
__device__ __forceinline__ uint16_t float_to_bf16(float value) {
  uint32_t bits = __builtin_bit_cast(uint32_t, value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// W bf16 values moved with one memory instruction: W = 8 (16 bytes) or W = 1.
template <int W>
struct Pack;

template <>
struct Pack<8> {
  u32x4 raw;
  __device__ __forceinline__ float get(int i) const {
    const uint32_t word = raw[i >> 1];
    return __builtin_bit_cast(float, (i & 1) ? (word & 0xffff0000u) : (word << 16));
  }
  __device__ __forceinline__ void set(int i, float value) {
    const uint32_t half = float_to_bf16(value);
    const uint32_t word = raw[i >> 1];
    raw[i >> 1] = (i & 1) ? ((word & 0x0000ffffu) | (half << 16)) : ((word & 0xffff0000u) | half);
  }
  static __device__ __forceinline__ Pack load(const uint16_t* base, int64_t index) {
    return Pack{reinterpret_cast<const u32x4*>(base)[index]};
  }
  __device__ __forceinline__ void store(uint16_t* base, int64_t index) const {
    reinterpret_cast<u32x4*>(base)[index] = raw;
  }
};

template <>
struct Pack<1> {
  uint16_t raw;
  __device__ __forceinline__ float get(int) const { return bf16_to_float(raw); }
  __device__ __forceinline__ void set(int, float value) { raw = float_to_bf16(value); }
  static __device__ __forceinline__ Pack load(const uint16_t* base, int64_t index) {
    return Pack{base[index]};
  }
  __device__ __forceinline__ void store(uint16_t* base, int64_t index) const { base[index] = raw; }
};

// Block-wide max and sum, returned to every thread. Each call has its own `scratch` (kWaves
// floats), written before and read after one barrier, so consecutive reductions need no more.
__device__ __forceinline__ float block_max(float v, float* scratch) {
#pragma unroll
  for (int offset = kWave / 2; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor(v, offset, kWave));
  if ((threadIdx.x & (kWave - 1)) == 0) scratch[threadIdx.x / kWave] = v;
  __syncthreads();
  float result = scratch[0];
#pragma unroll
  for (int i = 1; i < kWaves; ++i) result = fmaxf(result, scratch[i]);
  return result;
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
#pragma unroll
  for (int offset = kWave / 2; offset > 0; offset >>= 1) v += __shfl_xor(v, offset, kWave);
  if ((threadIdx.x & (kWave - 1)) == 0) scratch[threadIdx.x / kWave] = v;
  __syncthreads();
  float result = 0.0f;
#pragma unroll
  for (int i = 0; i < kWaves; ++i) result += scratch[i];
  return result;
}

// One block per row; thread t holds packs t, t + 256, ... (VPT of them) in registers.
template <int W, int VPT>
__global__ void __launch_bounds__(kThreads)
softmax_cached(const uint16_t* __restrict__ x, uint16_t* __restrict__ y, int64_t n) {
  __shared__ float max_scratch[kWaves];
  __shared__ float sum_scratch[kWaves];
  const int64_t packs = n / W;
  const int64_t row = blockIdx.x;
  const uint16_t* x_row = x + row * n;
  uint16_t* y_row = y + row * n;

  Pack<W> v[VPT];
  float thread_max = -INFINITY;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t p = threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (p < packs) {
      v[k] = Pack<W>::load(x_row, p);
#pragma unroll
      for (int i = 0; i < W; ++i) thread_max = fmaxf(thread_max, v[k].get(i));
    }
  }
  const float row_max = block_max(thread_max, max_scratch);

  float thread_sum = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t p = threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (p < packs) {
#pragma unroll
      for (int i = 0; i < W; ++i) thread_sum += __expf(v[k].get(i) - row_max);
    }
  }
  const float inv_sum = 1.0f / block_sum(thread_sum, sum_scratch);

#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int64_t p = threadIdx.x + static_cast<int64_t>(k) * kThreads;
    if (p < packs) {
      Pack<W> out{};
#pragma unroll
      for (int i = 0; i < W; ++i) out.set(i, __expf(v[k].get(i) - row_max) * inv_sum);
      out.store(y_row, p);
    }
  }
}

// Running softmax statistics: the maximum so far and the sum of exp(v - max) over it.
struct Online {
  float max;
  float sum;
};

// Merge two partial statistics; rows of -inf only stay (-inf, 0) without producing NaN.
__device__ __forceinline__ Online merge(Online a, Online b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return Online{m, 0.0f};
  return Online{m, a.sum * __expf(a.max - m) + b.sum * __expf(b.max - m)};
}

// Add one pack: one rescale of the running sum per pack, one exponential per element.
template <int W>
__device__ __forceinline__ Online add_pack(Online acc, const Pack<W>& v) {
  float pack_max = v.get(0);
#pragma unroll
  for (int i = 1; i < W; ++i) pack_max = fmaxf(pack_max, v.get(i));
  const float m = fmaxf(acc.max, pack_max);
  if (m == -INFINITY) return acc;  // only -inf so far: nothing to add
  float added = 0.0f;
#pragma unroll
  for (int i = 0; i < W; ++i) added += __expf(v.get(i) - m);
  return Online{m, acc.sum * __expf(acc.max - m) + added};
}

// The statistics of the whole row, returned to every thread (one barrier; own scratch).
__device__ __forceinline__ Online block_online(Online v, float* max_scratch, float* sum_scratch) {
#pragma unroll
  for (int offset = kWave / 2; offset > 0; offset >>= 1) {
    v = merge(v, Online{__shfl_xor(v.max, offset, kWave), __shfl_xor(v.sum, offset, kWave)});
  }
  if ((threadIdx.x & (kWave - 1)) == 0) {
    max_scratch[threadIdx.x / kWave] = v.max;
    sum_scratch[threadIdx.x / kWave] = v.sum;
  }
  __syncthreads();
  Online total{max_scratch[0], sum_scratch[0]};
#pragma unroll
  for (int i = 1; i < kWaves; ++i) total = merge(total, Online{max_scratch[i], sum_scratch[i]});
  return total;
}

// Rows too long for the register cache: an online pass for the statistics, then the output.
template <int W>
__global__ void __launch_bounds__(kThreads)
softmax_looped(const uint16_t* __restrict__ x, uint16_t* __restrict__ y, int64_t n) {
  __shared__ float max_scratch[kWaves];
  __shared__ float sum_scratch[kWaves];
  const int64_t packs = n / W;
  const int64_t row = blockIdx.x;
  const uint16_t* x_row = x + row * n;
  uint16_t* y_row = y + row * n;

  Online acc{-INFINITY, 0.0f};
  for (int64_t p = threadIdx.x; p < packs; p += kThreads) acc = add_pack(acc, Pack<W>::load(x_row, p));
  const Online row_stats = block_online(acc, max_scratch, sum_scratch);
  const float inv_sum = 1.0f / row_stats.sum;

  for (int64_t p = threadIdx.x; p < packs; p += kThreads) {
    const Pack<W> v = Pack<W>::load(x_row, p);
    Pack<W> out{};
#pragma unroll
    for (int i = 0; i < W; ++i) out.set(i, __expf(v.get(i) - row_stats.max) * inv_sum);
    out.store(y_row, p);
  }
}

template <int W>
void launch(const uint16_t* x, uint16_t* y, int64_t m, int64_t n, hipStream_t stream) {
  const dim3 grid(static_cast<unsigned>(m));
  const dim3 block(kThreads);
  const int64_t per_thread = (n / W + kThreads - 1) / kThreads;
  if (per_thread <= 1) {
    softmax_cached<W, 1><<<grid, block, 0, stream>>>(x, y, n);
  } else if (per_thread <= 2) {
    softmax_cached<W, 2><<<grid, block, 0, stream>>>(x, y, n);
  } else if (per_thread <= 4) {
    softmax_cached<W, 4><<<grid, block, 0, stream>>>(x, y, n);
  } else if (per_thread <= 8) {
    softmax_cached<W, 8><<<grid, block, 0, stream>>>(x, y, n);
  } else if (W == 1 && per_thread <= 16) {  // 16-byte packs stop at 8 per thread (registers)
    softmax_cached<1, 16><<<grid, block, 0, stream>>>(x, y, n);
  } else {
    softmax_looped<W><<<grid, block, 0, stream>>>(x, y, n);
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

extern "C" int softmax_bf16(const void* x, void* y, int64_t m, int64_t n, hipStream_t stream) {
  if (m <= 0 || n <= 0) return 0;
  const auto* xs = static_cast<const uint16_t*>(x);
  auto* ys = static_cast<uint16_t*>(y);
  if (n % 8 == 0 && aligned16(x) && aligned16(y)) {
    launch<8>(xs, ys, m, n, stream);
  } else {
    launch<1>(xs, ys, m, n, stream);
  }
  return static_cast<int>(hipGetLastError());
}
