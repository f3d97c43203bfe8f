// A CPU emulation of the subset of HIP that the repository's HIP task kernels use, so that their
// logic can be tested on a host without an AMD GPU. emulate.py compiles a kernel.hip against this
// header with g++ (C++20) after rewriting `kernel<<<grid, block, shmem, stream>>>(args)` into
// `emu_launch(kernel, emu_cfg(grid, block, shmem, stream), args)`.
//
// What is emulated:
//  * Every GPU thread of a block is a std::thread of its own (a launch starts one per thread of
//    a block, and each plays its thread in every block in turn). Blocks run one after another,
//    in x, then y, then z order, never two at once. threadIdx, blockIdx, blockDim and gridDim
//    are thread-local variables. A launch returns when all its blocks have finished (launches
//    are synchronous and serialised; the stream argument is ignored).
//  * __shared__ variables are static variables: one instance per kernel (per template
//    instantiation), shared by the threads of the block that runs, and kept from one block to
//    the next (real LDS starts undefined: a kernel that relies on its contents is wrong either
//    way, but the emulator will not show it).
//  * __syncthreads() is a std::barrier over the block's threads; a thread that returns from the
//    kernel drops out of it (as an exited wavefront no longer takes part on the GPU).
//  * Wavefronts are 64 lanes (wave64, as on CDNA / gfx9): threads 64k .. 64k + 63 of a block (in
//    x-fastest order) form wavefront k. __shfl, __shfl_xor, __shfl_up and __shfl_down (with
//    HIP's `width` rules) exchange values through a per-wavefront buffer between two barriers of
//    that wavefront's threads. Reading a lane that has already returned is reported as an error.
//  * Launch configurations are checked: an empty grid or block, more than 1024 threads per block,
//    or a dimension whose grid * block size does not fit in 32 bits (the hardware's dispatch
//    limit) fails the launch, which hipGetLastError() then returns.
//  * A few device functions: fast-math intrinsics (__expf, __logf, __fdividef, rsqrtf, ...),
//    atomicAdd/atomicMax/atomicMin on int, unsigned and float (std::atomic_ref), memory fences.
//
// What is NOT emulated (so passing here is a check of the kernels' logic, namely index math,
// bounds, barriers and reductions, not a run on an AMD GPU):
//  * No GPU memory model: the only ordering is what std::thread, std::barrier and std::atomic
//    give on the host (sequentially consistent at barriers). A missing __syncthreads is a data
//    race that may or may not change the result here.
//  * No timing, no occupancy, no register or LDS limits, no LDS bank behaviour, no coalescing:
//    nothing here says whether a kernel is fast, or even whether it fits on the GPU (the
//    compile-only build for gfx942 checks that).
//  * Wave64 only: no wave32 (RDNA), no lockstep execution: lanes of a wavefront only meet at
//    shuffles and barriers. No __ballot, __any, __all, no cooperative groups, no dynamic
//    (extern) shared memory, no textures, no streams or events, no device memory API
//    (hipMalloc, hipMemcpy): kernels get host pointers. Anything else fails to compile.
//  * Floating point is the host's (IEEE binary32 on x86-64, no FMA contraction, glibc's expf):
//    results can differ from the GPU's in the last bits, which the tasks' tolerances absorb.
//  * A barrier or shuffle that not every thread of the block (or wavefront) reaches in the same
//    order deadlocks; a watchdog then aborts the process with a message (after
//    AKA_HIP_EMU_TIMEOUT seconds, 120 by default).
#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static

// --------------------------------------------------------------------------- types and errors

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

struct emu_index3 {
  unsigned x = 0, y = 0, z = 0;
};

inline thread_local emu_index3 threadIdx, blockIdx, blockDim, gridDim;

typedef struct emu_stream* hipStream_t;

enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidConfiguration = 9,
  hipErrorLaunchFailure = 719,
};

constexpr int warpSize = 64;

namespace emu {

constexpr int kWave = 64;

struct State {
  std::mutex mutex;
  hipError_t error = hipSuccess;
  std::string message;  // the first error's description, kept until read
};

inline State& state() {
  static State s;
  return s;
}

inline void fail(hipError_t code, const std::string& message) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.error == hipSuccess) {
    s.error = code;
    s.message = message;
  }
}

// The threads of one wavefront: a barrier over its live lanes and a buffer for shuffles.
struct Wave {
  std::unique_ptr<std::barrier<>> barrier;
  uint64_t buffer[kWave] = {};
  std::atomic<bool> live[kWave] = {};
  int lanes = 0;
};

struct ThreadContext {
  std::barrier<>* block_barrier = nullptr;
  Wave* wave = nullptr;
  int lane = 0;
};

inline thread_local ThreadContext context;

// Every lane stores its value, then reads lane `source` (or its own when the rules say so).
template <typename T>
T shuffle(T value, int source) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  Wave& w = *context.wave;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  w.buffer[context.lane] = bits;
  w.barrier->arrive_and_wait();
  source &= kWave - 1;
  if (source >= w.lanes || !w.live[source].load()) {
    fail(hipErrorLaunchFailure, "a shuffle read lane " + std::to_string(source) +
                                    ", which has returned or does not exist (block " +
                                    std::to_string(blockIdx.x) + ", thread " +
                                    std::to_string(threadIdx.x) + ")");
    source = context.lane;
  }
  bits = w.buffer[source];
  w.barrier->arrive_and_wait();  // nobody overwrites the buffer before everyone has read it
  T result;
  std::memcpy(&result, &bits, sizeof(T));
  return result;
}

inline double watchdog_seconds() {
  const char* text = getenv("AKA_HIP_EMU_TIMEOUT");
  const double seconds = text ? atof(text) : 0.0;
  return seconds > 0.0 ? seconds : 120.0;
}

struct LaunchConfig {
  dim3 grid, block;
};

}  // namespace emu

inline hipError_t hipGetLastError() {
  emu::State& s = emu::state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const hipError_t error = s.error;
  s.error = hipSuccess;
  return error;
}

inline hipError_t hipPeekAtLastError() {
  emu::State& s = emu::state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.error;
}

inline const char* hipGetErrorString(hipError_t error) {
  switch (error) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidConfiguration: return "hipErrorInvalidConfiguration";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
  }
  return "unknown HIP error";
}

// The description of the last launch error, for the Python side (weak: one definition even when
// several sources of a library include this header). Reading it clears the error.
extern "C" __attribute__((weak, visibility("default"))) const char* aka_hip_emu_last_message() {
  static thread_local std::string copy;
  emu::State& s = emu::state();
  std::lock_guard<std::mutex> lock(s.mutex);
  copy = s.message;
  s.error = hipSuccess;
  s.message.clear();
  return copy.c_str();
}

// --------------------------------------------------------------------------- device functions

inline void __syncthreads() { emu::context.block_barrier->arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned __lane_id() { return static_cast<unsigned>(emu::context.lane); }

// HIP's rules (amd_warp_functions.h): `width` is a power of two up to 64 that splits the
// wavefront into independent segments.
template <typename T>
T __shfl(T var, int src_lane, int width = warpSize) {
  const int self = emu::context.lane;
  return emu::shuffle(var, src_lane + (self & ~(width - 1)));
}

template <typename T>
T __shfl_xor(T var, int lane_mask, int width = warpSize) {
  const int self = emu::context.lane;
  int index = self ^ lane_mask;
  if (index >= ((self + width) & ~(width - 1))) index = self;
  return emu::shuffle(var, index);
}

template <typename T>
T __shfl_up(T var, unsigned lane_delta, int width = warpSize) {
  const int self = emu::context.lane;
  int index = self - static_cast<int>(lane_delta);
  if (index < (self & ~(width - 1))) index = self;
  return emu::shuffle(var, index);
}

template <typename T>
T __shfl_down(T var, unsigned lane_delta, int width = warpSize) {
  const int self = emu::context.lane;
  int index = self + static_cast<int>(lane_delta);
  if ((self & (width - 1)) + static_cast<int>(lane_delta) >= width) index = self;
  return emu::shuffle(var, index);
}

inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }

template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}

template <typename T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (old < value && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}

template <typename T>
T atomicMin(T* address, T value) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load();
  while (value < old && !ref.compare_exchange_weak(old, value)) {
  }
  return old;
}

// --------------------------------------------------------------------------- launches

inline emu::LaunchConfig emu_cfg(dim3 grid, dim3 block, size_t shared_bytes = 0,
                                 hipStream_t stream = nullptr) {
  (void)stream;
  if (shared_bytes != 0) {
    emu::fail(hipErrorInvalidConfiguration,
              "dynamic shared memory (extern __shared__) is not emulated");
    return {dim3(0), block};
  }
  return {grid, block};
}

namespace emu {

inline bool valid(const LaunchConfig& cfg) {
  const dim3& g = cfg.grid;
  const dim3& b = cfg.block;
  const auto fits = [](unsigned blocks, unsigned threads) {
    return static_cast<uint64_t>(blocks) * threads <= UINT32_MAX;
  };
  std::string why;
  if (!g.x || !g.y || !g.z || !b.x || !b.y || !b.z) {
    why = "an empty grid or block";
  } else if (static_cast<uint64_t>(b.x) * b.y * b.z > 1024) {
    why = "more than 1024 threads per block";
  } else if (!fits(g.x, b.x) || !fits(g.y, b.y) || !fits(g.z, b.z)) {
    why = "a grid dimension of more than 2^32 - 1 threads";
  } else {
    return true;
  }
  fail(hipErrorInvalidConfiguration,
       "invalid launch: grid (" + std::to_string(g.x) + ", " + std::to_string(g.y) + ", " +
           std::to_string(g.z) + "), block (" + std::to_string(b.x) + ", " + std::to_string(b.y) +
           ", " + std::to_string(b.z) + "): " + why);
  return false;
}

// The threads of the block being run: a barrier over all of them and one Wave per wavefront.
struct Block {
  std::unique_ptr<std::barrier<>> barrier;
  std::vector<Wave> waves;

  explicit Block(unsigned threads) : waves((threads + kWave - 1) / kWave) { reset(threads); }

  void reset(unsigned threads) {
    barrier = std::make_unique<std::barrier<>>(threads);
    for (unsigned w = 0; w < waves.size(); ++w) {
      waves[w].lanes = static_cast<int>(std::min<unsigned>(kWave, threads - w * kWave));
      waves[w].barrier = std::make_unique<std::barrier<>>(waves[w].lanes);
      for (int lane = 0; lane < waves[w].lanes; ++lane) waves[w].live[lane] = true;
    }
  }
};

// Run a launch: one std::thread per GPU thread of a block, each playing that thread in every
// block in turn; all of them meet between two blocks, where the barriers are renewed (a thread
// that returned dropped out of the last block's). `body` is the kernel call.
template <typename Body>
void run_grid(const LaunchConfig& cfg, const Body& body) {
  const unsigned threads = cfg.block.x * cfg.block.y * cfg.block.z;
  const uint64_t blocks = static_cast<uint64_t>(cfg.grid.x) * cfg.grid.y * cfg.grid.z;
  Block block(threads);
  std::atomic<uint64_t> blocks_done{0};
  auto next_block = [&]() noexcept {
    block.reset(threads);
    blocks_done.fetch_add(1);
  };
  std::barrier between_blocks(threads, next_block);

  std::mutex done_mutex;
  std::condition_variable done_cv;
  unsigned finished = 0;
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      threadIdx = {t % cfg.block.x, (t / cfg.block.x) % cfg.block.y,
                   t / (cfg.block.x * cfg.block.y)};
      blockDim = {cfg.block.x, cfg.block.y, cfg.block.z};
      gridDim = {cfg.grid.x, cfg.grid.y, cfg.grid.z};
      for (uint64_t b = 0; b < blocks; ++b) {
        blockIdx = {static_cast<unsigned>(b % cfg.grid.x),
                    static_cast<unsigned>(b / cfg.grid.x % cfg.grid.y),
                    static_cast<unsigned>(b / (static_cast<uint64_t>(cfg.grid.x) * cfg.grid.y))};
        Wave& wave = block.waves[t / kWave];
        context = {block.barrier.get(), &wave, static_cast<int>(t % kWave)};
        body();
        wave.live[context.lane] = false;
        wave.barrier->arrive_and_drop();
        block.barrier->arrive_and_drop();
        between_blocks.arrive_and_wait();
      }
      context = {};
      std::lock_guard<std::mutex> lock(done_mutex);
      ++finished;
      done_cv.notify_one();
    });
  }

  {
    // The watchdog: a launch must finish a block every `limit` seconds.
    std::unique_lock<std::mutex> lock(done_mutex);
    const auto limit = std::chrono::duration<double>(watchdog_seconds());
    uint64_t seen = 0;
    while (!done_cv.wait_for(lock, limit, [&] { return finished == threads; })) {
      const uint64_t now = blocks_done.load();
      if (now != seen) {
        seen = now;
        continue;
      }
      fprintf(stderr,
              "aka hip emulation: block %llu of %llu (blocks in x, then y, then z order) did not "
              "finish within %.0f s. A __syncthreads or shuffle that not every thread of the block "
              "or wavefront reaches deadlocks. Aborting.\n",
              static_cast<unsigned long long>(now), static_cast<unsigned long long>(blocks),
              limit.count());
      fflush(stderr);
      abort();
    }
  }
  for (auto& thread : pool) thread.join();
}

inline std::mutex& launch_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace emu

// `kernel<<<cfg>>>(args...)` after emulate.py's rewrite. Arguments convert to the kernel's
// parameter types at the call, as they would in a real launch.
template <typename... Params, typename... Args>
void emu_launch(void (*kernel)(Params...), emu::LaunchConfig cfg, Args... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
  if (!emu::valid(cfg)) return;
  std::lock_guard<std::mutex> lock(emu::launch_mutex());  // one launch at a time: __shared__
  emu::run_grid(cfg, [&] { kernel(static_cast<Params>(args)...); });
}

#define hipLaunchKernelGGL(kernel, grid, block, shared_bytes, stream, ...) \
  emu_launch(kernel, emu_cfg(grid, block, shared_bytes, stream) __VA_OPT__(, ) __VA_ARGS__)
