// Write the kernel and an extern "C" launcher here, for example:
//   extern "C" int layer_norm_bf16(const void* x, const void* weight, const void* bias,
//                                  void* out, int64_t m, int64_t n, float eps,
//                                  cudaStream_t stream);
// and call it from kernel.py: lib = aka_backend_cuda.load("kernel.cu"); lib.layer_norm_bf16(...)
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
