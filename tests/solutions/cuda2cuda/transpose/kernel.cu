// Transpose, bf16, through a 64x64 tile in shared memory so that both the reads and the writes
// are coalesced: a warp reads 64 consecutive elements of a row of x (two per thread, 128 bytes)
// and writes 64 consecutive elements of a row of y. The tile is stored as 32-bit words of two
// bf16 with one word of padding per row to spread the column reads over the banks.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

constexpr int kTile = 64;
constexpr int kRowsPerStep = 8;  // block (32, 8): each thread moves 2 x 8 elements per step

__global__ void __launch_bounds__(256) transpose_tiled(const uint16_t* __restrict__ x,
                                                       uint16_t* __restrict__ out, int64_t m,
                                                       int64_t n) {
  __shared__ uint16_t tile[kTile][kTile + 2];
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile;  // rows of x
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;  // columns of x
  const int tx = threadIdx.x, ty = threadIdx.y;

  // Load: thread (tx, ty) reads columns col0 + 2tx, col0 + 2tx + 1 of rows row0 + ty + 8k.
  const int64_t c = col0 + 2 * tx;
  const bool pair = c + 1 < n && ((row0 * n + c) % 2 == 0) && (n % 2 == 0);
#pragma unroll
  for (int k = 0; k < kTile; k += kRowsPerStep) {
    const int64_t r = row0 + ty + k;
    if (r < m) {
      if (pair) {
        const uint32_t two = *reinterpret_cast<const uint32_t*>(x + r * n + c);
        tile[ty + k][2 * tx] = static_cast<uint16_t>(two & 0xffffu);
        tile[ty + k][2 * tx + 1] = static_cast<uint16_t>(two >> 16);
      } else {
        if (c < n) tile[ty + k][2 * tx] = x[r * n + c];
        if (c + 1 < n) tile[ty + k][2 * tx + 1] = x[r * n + c + 1];
      }
    }
  }
  __syncthreads();

  // Store: y has n rows of m elements; thread (tx, ty) writes y[col0 + ty + 8k][row0 + 2tx (+1)].
  const int64_t yc = row0 + 2 * tx;
  const bool ypair = yc + 1 < m && (m % 2 == 0);
#pragma unroll
  for (int k = 0; k < kTile; k += kRowsPerStep) {
    const int64_t yr = col0 + ty + k;
    if (yr < n) {
      const uint16_t lo = tile[2 * tx][ty + k];
      const uint16_t hi = tile[2 * tx + 1][ty + k];
      if (ypair) {
        *reinterpret_cast<uint32_t*>(out + yr * m + yc) =
            static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
      } else {
        if (yc < m) out[yr * m + yc] = lo;
        if (yc + 1 < m) out[yr * m + yc + 1] = hi;
      }
    }
  }
}

}  // namespace

extern "C" int transpose_bf16(const void* x, void* out, int64_t m, int64_t n,
                              cudaStream_t stream) {
  if (m == 0 || n == 0) return 0;
  const dim3 block(32, kRowsPerStep);
  const dim3 grid(static_cast<unsigned>((n + kTile - 1) / kTile),
                  static_cast<unsigned>((m + kTile - 1) / kTile));
  transpose_tiled<<<grid, block, 0, stream>>>(static_cast<const uint16_t*>(x),
                                              static_cast<uint16_t*>(out), m, n);
  return static_cast<int>(cudaGetLastError());
}
