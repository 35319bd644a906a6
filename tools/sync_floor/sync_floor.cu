// tools/sync_floor/sync_floor.cu: what one dependent phase of a batch-1 decode step costs on this
// GPU before any work is done in it. A token at batch 1 is a chain of phases in which every block
// needs what the others wrote in the previous one (LayerNorm needs the whole residual stream, the
// projection every head, the out GEMV every fc channel). However the step is built, each link of
// that chain is one of the hand-offs timed here, with nothing else in the phase:
//   kernels   a CUDA graph of N kernels, plain or with programmatic dependent launch (the lab's
//             decoder: griddepcontrol.wait, then launch_dependents), every block reading another
//             block's word from the previous kernel and writing its own
//   grid      one persistent kernel, every block resident, N grid barriers: cooperative groups'
//             grid.sync(), and a counter barrier (red.release.gpu, polled with ld.acquire.gpu)
//   cluster   the same inside a thread-block cluster of 8 or 16 blocks (barrier.cluster, the
//             value read from a neighbour's shared memory): a hand-off that stays inside a GPC
//   pingpong  two blocks on different SMs handing one flag back and forth (st.release /
//             ld.acquire): the round trip through L2 that every cross-SM dependency includes
// Each result is microseconds a hand-off: (time of N2 hand-offs - time of N1) / (N2 - N1), so the
// launch itself is left out. Not part of the build (BENCHMARKS.md, "What the batch-1 targets
// require"); tools/decode_ab_check.sh builds and runs it:
//   nvcc -O3 -std=c++17 -arch=sm_90 tools/sync_floor/sync_floor.cu -o sync_floor && ./sync_floor
// Written in a session with no device time left (2026-12-07): compiled for sm_90 here, not yet
// run. Every spin waits for blocks that are resident at once (cooperative launch, or no more
// blocks than the occupancy allows), so on an idle GPU none of them can hang.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "../cuda_check.cuh"

namespace cg = cooperative_groups;

constexpr int kThreads = 256;

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void add_release(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The data dependency of phase k: block b reads what block (7b + 1) mod G wrote in phase k - 1.
__device__ __forceinline__ void hand_on(unsigned* buf, int k) {
  if (threadIdx.x != 0) return;
  const unsigned G = gridDim.x, b = blockIdx.x;
  const unsigned v = __ldcg(buf + ((k + 1) & 1) * G + (7 * b + 1) % G);
  __stcg(buf + (k & 1) * G + b, v + 1);
}

// One link of a chain of kernels.
__global__ void chain_kernel(unsigned* buf, int k) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  hand_on(buf, k);
}

// N phases in one persistent kernel, with cooperative groups' barrier (kind 0) or a counter one (1).
template <int kKind>
__global__ void grid_kernel(unsigned* buf, unsigned* counter, int phases) {
  for (int k = 1; k <= phases; ++k) {
    hand_on(buf, k);
    if constexpr (kKind == 0) {
      cg::this_grid().sync();
    } else {
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        add_release(counter, 1);
        const unsigned target = static_cast<unsigned>(k) * gridDim.x;
        while (load_acquire(counter) < target) {
        }
      }
      __syncthreads();
    }
  }
}

// N phases inside clusters: each block reads its neighbour's word out of that block's shared memory.
__global__ void cluster_kernel(unsigned* out, int phases) {
  __shared__ unsigned word[2];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), n = cluster.num_blocks();
  if (threadIdx.x == 0) word[0] = word[1] = rank;
  cluster.sync();
  for (int k = 1; k <= phases; ++k) {
    if (threadIdx.x == 0) {
      const unsigned* other = cluster.map_shared_rank(word, (rank + 1) % n);
      word[k & 1] = other[(k + 1) & 1] + 1;
    }
    cluster.sync();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = word[phases & 1];
}

// Blocks 0 and 1 hand a flag back and forth `trips` times (each trip: 0 -> 1 -> 0).
__global__ void pingpong_kernel(unsigned* flag, int trips) {
  if (threadIdx.x != 0 || blockIdx.x > 1) return;
  const unsigned me = blockIdx.x;
  for (int t = 0; t < trips; ++t) {
    const unsigned turn = 2 * t + me;  // block 0 moves on even turns, block 1 on odd ones
    while (load_acquire(flag) != turn) {
    }
    store_release(flag, turn + 1);
  }
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~Timer() { cudaEventDestroy(a), cudaEventDestroy(b); }
  // The median over `reps` of one call of fn, in microseconds.
  double time(const std::function<void()>& fn, cudaStream_t s = 0, int reps = 7) {
    fn();
    CK(cudaDeviceSynchronize());
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      CK(cudaEventRecord(a, s));
      fn();
      CK(cudaEventRecord(b, s));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms * 1e3);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

void report(const char* kind, const char* variant, int blocks, double us, int n) {
  std::printf("{\"case\": \"sync_floor\", \"kind\": \"%s\", \"variant\": \"%s\", \"blocks\": %d, \"us_per_handoff\": %.3f, "
              "\"n\": %d}\n",
              kind, variant, blocks, us, n);
  std::fflush(stdout);
}

// A graph of n chain kernels over `blocks` blocks, with or without programmatic dependent launch.
cudaGraphExec_t chain_graph(cudaStream_t s, unsigned* buf, int blocks, int n, bool pdl) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks), cfg.blockDim = dim3(kThreads), cfg.stream = s;
  cfg.attrs = pdl ? &attr : nullptr, cfg.numAttrs = pdl ? 1 : 0;
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 1; k <= n; ++k) CK(cudaLaunchKernelEx(&cfg, chain_kernel, buf, k));
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  CK(cudaGraphDestroy(g));
  return e;
}

void kernels(unsigned* buf, int blocks) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Timer t;
  constexpr int kN1 = 20, kN2 = 220;
  for (bool pdl : {false, true}) {
    cudaGraphExec_t g1 = chain_graph(s, buf, blocks, kN1, pdl), g2 = chain_graph(s, buf, blocks, kN2, pdl);
    const auto run = [&](cudaGraphExec_t g) {
      return t.time([&] { CK(cudaGraphLaunch(g, s)); }, s);
    };
    const double us = (run(g2) - run(g1)) / (kN2 - kN1);
    report("kernels", pdl ? "graph+pdl" : "graph", blocks, us, kN2 - kN1);
    CK(cudaGraphExecDestroy(g1));
    CK(cudaGraphExecDestroy(g2));
  }
  CK(cudaStreamDestroy(s));
}

template <int kKind>
void grid(unsigned* buf, unsigned* counter, int blocks) {
  Timer t;
  constexpr int kN1 = 100, kN2 = 2100;
  const auto run = [&](int phases) {
    return t.time([&] {
      CK(cudaMemsetAsync(counter, 0, sizeof(unsigned)));
      if constexpr (kKind == 0) {
        void* args[] = {&buf, &counter, &phases};
        CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(grid_kernel<0>), dim3(blocks), dim3(kThreads), args));
      } else {
        grid_kernel<1><<<blocks, kThreads>>>(buf, counter, phases);
        CK(cudaGetLastError());
      }
    });
  };
  const double us = (run(kN2) - run(kN1)) / (kN2 - kN1);
  report("grid", kKind == 0 ? "cg.grid.sync" : "counter", blocks, us, kN2 - kN1);
}

void cluster(unsigned* out, int size, int sms) {
  if (size > 8 && cudaFuncSetAttribute(cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    cudaGetLastError();
    std::printf("{\"case\": \"sync_floor\", \"kind\": \"cluster\", \"variant\": \"%d\", \"error\": \"non-portable size refused\"}\n", size);
    return;
  }
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = size, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg{};
  cfg.blockDim = dim3(kThreads), cfg.attrs = &attr, cfg.numAttrs = 1;
  int clusters = 0;
  cfg.gridDim = dim3(size);
  if (cudaOccupancyMaxActiveClusters(&clusters, cluster_kernel, &cfg) != cudaSuccess || clusters == 0) {
    cudaGetLastError();
    std::printf("{\"case\": \"sync_floor\", \"kind\": \"cluster\", \"variant\": \"%d\", \"error\": \"no cluster fits\"}\n", size);
    return;
  }
  clusters = std::min(clusters, sms / size);
  cfg.gridDim = dim3(clusters * size);
  Timer t;
  constexpr int kN1 = 100, kN2 = 4100;
  const auto run = [&](int phases) {
    return t.time([&] { CK(cudaLaunchKernelEx(&cfg, cluster_kernel, out, phases)); });
  };
  const double us = (run(kN2) - run(kN1)) / (kN2 - kN1);
  char v[32];
  std::snprintf(v, sizeof v, "size %d", size);
  report("cluster", v, clusters * size, us, kN2 - kN1);
}

void pingpong(unsigned* flag) {
  Timer t;
  constexpr int kN1 = 100, kN2 = 4100;
  // Blocks 0 and 1 land on different SMs: as many blocks as SMs, each with the whole shared memory.
  const auto run = [&](int trips) {
    return t.time([&] {
      CK(cudaMemsetAsync(flag, 0, sizeof(unsigned)));
      pingpong_kernel<<<2, kThreads, 120 * 1024>>>(flag, trips);
      CK(cudaGetLastError());
    });
  };
  CK(cudaFuncSetAttribute(pingpong_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 120 * 1024));
  const double us = (run(kN2) - run(kN1)) / (2.0 * (kN2 - kN1));
  report("pingpong", "one way", 2, us, 2 * (kN2 - kN1));
}

int main() {
  cudaDeviceProp p{};
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("# %s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
  const int sms = p.multiProcessorCount;
  unsigned *buf = nullptr, *counter = nullptr;
  CK(cudaMalloc(&buf, 2 * 4 * sms * sizeof(unsigned)));
  CK(cudaMalloc(&counter, 64));
  CK(cudaMemset(buf, 0, 2 * 4 * sms * sizeof(unsigned)));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_kernel<0>, kThreads, 0));
  for (int blocks : {sms, 2 * sms}) {
    kernels(buf, blocks);
    if (blocks <= per_sm * sms) grid<0>(buf, counter, blocks), grid<1>(buf, counter, blocks);
  }
  cluster(buf, 8, sms);
  cluster(buf, 16, sms);
  pingpong(counter);
  CK(cudaDeviceSynchronize());
  return 0;
}
