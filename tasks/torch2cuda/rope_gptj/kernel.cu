// Write the kernel and an extern "C" launcher here, for example:
//   extern "C" int rope_gptj_bf16(const void* q, const void* k, const void* cos, const void* sin,
//                                 void* q_out, void* k_out, int64_t t, int64_t hq, int64_t hk,
//                                 cudaStream_t stream);
// and call it from kernel.py: lib = aka_backend_cuda.load("kernel.cu"); lib.rope_gptj_bf16(...)
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
