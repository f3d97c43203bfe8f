// Write the kernel and an extern "C" launcher here, for example:
//   extern "C" int fused_add_layer_norm_bf16(const void* x, const void* residual,
//                                            const void* weight, const void* bias, void* y,
//                                            void* r, int64_t m, int64_t n, float eps,
//                                            hipStream_t stream);
// and call it from kernel.py:
//   lib = aka_backend_hip.load("kernel.hip", functions=["fused_add_layer_norm_bf16"])
//   lib.fused_add_layer_norm_bf16(x, residual, weight, bias, y, r, M, N, float(eps))
#include <hip/hip_runtime.h>
#include <stdint.h>
