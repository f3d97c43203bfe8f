// Transpose of a 16-bit [M, N] tensor into a new [N, M] tensor, in HIP.
//
// Blocks of 64 x 4 threads: a wavefront reads 64 consecutive elements of a row of x (a
// coalesced 128-byte read) and writes each to a different row of y (64 separate writes).
#include <hip/hip_runtime.h>
#include <stdint.h>

namespace {

constexpr int kBlockX = 64;
constexpr int kBlockY = 4;
constexpr int64_t kMaxGridY = 65535;

__global__ void __launch_bounds__(kBlockX * kBlockY)
transpose_kernel(const uint16_t* x, uint16_t* y, int64_t m, int64_t n) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kBlockX + threadIdx.x;
  if (col >= n) return;
  const int64_t row_step = static_cast<int64_t>(gridDim.y) * kBlockY;
  for (int64_t row = static_cast<int64_t>(blockIdx.y) * kBlockY + threadIdx.y; row < m;
       row += row_step) {
    y[col * m + row] = x[row * n + col];
  }
}

}  // namespace

extern "C" int transpose_16bit(const void* x, void* y, int64_t m, int64_t n, hipStream_t stream) {
  if (m <= 0 || n <= 0) return 0;
  const int64_t blocks_y = (m + kBlockY - 1) / kBlockY;
  const dim3 grid(static_cast<unsigned>((n + kBlockX - 1) / kBlockX),
                  static_cast<unsigned>(blocks_y < kMaxGridY ? blocks_y : kMaxGridY));
  hipLaunchKernelGGL(transpose_kernel, grid, dim3(kBlockX, kBlockY), 0, stream,
                     static_cast<const uint16_t*>(x), static_cast<uint16_t*>(y), m, n);
  return static_cast<int>(hipGetLastError());
}
