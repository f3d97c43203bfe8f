// Write the kernel and an extern "C" launcher here, for example:
//   extern "C" int silu_and_mul_bf16(const void* x, void* out, int64_t m, int64_t n,
//                                    hipStream_t stream);
// and call it from kernel.py:
//   lib = aka_backend_hip.load("kernel.hip", functions=["silu_and_mul_bf16"])
//   lib.silu_and_mul_bf16(x, out, M, N)
#include <hip/hip_runtime.h>
#include <stdint.h>
