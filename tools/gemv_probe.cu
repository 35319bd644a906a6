// tools/gemv_probe.cu: times the decoder's one-sequence GEMV (kernels/decode_gemv.cuh) in several
// shapes of rows a warp (R) and loads in flight a lane (U) against the library's kernel and a
// plain read of the same bytes, at gpt2's and xl's matrix sizes, bf16 / int8 / int4, as the
// decoder runs them: launches back to back in a CUDA graph with programmatic dependent launch,
// over enough copies of the matrix that L2 holds none of them. Not part of the build: its
// numbers chose the decoder's rule (BENCHMARKS.md, decoding).
//   nvcc -O3 -std=c++20 -arch=sm_90 -Ikernels -Icore tools/gemv_probe.cu -Lbuild/core -ltrainlab_cuda -o gemv_probe
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda_check.cuh"
#include "decode.cuh"
#include "decode_gemv.cuh"

using namespace trainlab::kern;
using namespace trainlab::kern::decode_dev;

__global__ void fill_words(uint32_t* p, int64_t n, uint32_t seed, int format) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    if (format == kDecBF16) h &= 0xBEFFBEFFu;  // both halves finite, |v| < 2
    p[i] = h;
  }
}
__global__ void fill_f(float* p, int64_t n, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = scale * (static_cast<float>((i * 37) % 101) / 50.0f - 1.0f);
}
__global__ void fill_h(__half* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = __float2half(0.01f + 0.001f * static_cast<float>(i % 7));
}
// The ceiling: every 16-byte word of the matrix read once (8 loads in flight a thread), summed.
__global__ void read_kernel(const uint4* p, int64_t n, unsigned* sink) {
  wait_for_previous_grid();
  unsigned s = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  for (; i + 7 * stride < n; i += 8 * stride) {
    uint4 u[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) u[k] = load_stream(p + i + k * stride);
#pragma unroll
    for (int k = 0; k < 8; ++k) s ^= u[k].x ^ u[k].y ^ u[k].z ^ u[k].w;
  }
  for (; i < n; i += stride) s ^= load_stream(p + i).x;
  if (s == 0x12345678u) *sink = s;
}

// Launches as the decoder's: programmatic dependent launch on.
cudaLaunchConfig_t cfg_of(dim3 g, dim3 b, size_t sm, cudaStream_t s) { return launch_config(g, b, sm, s, true); }

int g_sms = 0;

template <int F, int R, int U, int P>
void launch_tile(const DecodeGemv& g, cudaStream_t s) {
  auto k = decode_gemv_tile_kernel<F, R, U, P>;
  constexpr int E = 4 * Fmt<F>::kPerWord, G = kTileThreads / 32 / P;
  const size_t smem = static_cast<size_t>(tile_smem_floats<E>(g.cols, g.ln_gamma != nullptr)) * 4;
  static int occ = -1;
  if (occ < 0) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
    CK(cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 50));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, kTileThreads, 64 * 1024));
    cudaFuncAttributes a{};
    CK(cudaFuncGetAttributes(&a, k));
    std::printf("#   tile<%d,%d,%d,%d>: %d registers, %d blocks an SM at 64 KB\n", F, R, U, P, a.numRegs, occ);
    occ = std::max(occ, 1);
  }
  const int64_t groups = (g.rows + R - 1) / R, want = (groups + G - 1) / G;
  const int64_t blocks = std::min<int64_t>(want, int64_t{g_sms} * occ);
  const cudaLaunchConfig_t c = cfg_of(dim3(static_cast<unsigned>(blocks)), dim3(kTileThreads), smem, s);
  CK(cudaLaunchKernelEx(&c, k, g));
}

struct Case {
  const char* name;
  int64_t rows, cols;
};

double time_graph(cudaStream_t s, int reps, const std::function<void(int)>& one) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  one(0);  // first launches (attributes, occupancy) outside the capture
  CK(cudaStreamSynchronize(s));
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < reps; ++i) one(i);
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaGraphLaunch(exec, s));
  CK(cudaEventRecord(a, s));
  constexpr int replays = 5;
  for (int i = 0; i < replays; ++i) CK(cudaGraphLaunch(exec, s));
  CK(cudaEventRecord(b, s));
  CK(cudaStreamSynchronize(s));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  return 1e3 * ms / (reps * replays);
}

template <int F>
void run_format(const char* fname, int group_kind, const std::vector<Case>& cases, cudaStream_t s, float* x, float* y,
                float* gamma, float* beta, unsigned* sink) {
  for (const Case& c : cases) {
    const int64_t E = decode_weights_per_load(F);
    const int64_t group = group_kind == 0 ? 0 : group_kind == 1 ? c.cols : 32;
    const int64_t bytes = F == kDecBF16 ? 2 * c.rows * c.cols : F == kDecI8 ? c.rows * c.cols : c.rows * c.cols / 2;
    const int64_t sbytes = group ? 2 * (c.rows * c.cols / group) : 0;
    const int copies = static_cast<int>(std::max<int64_t>(2, (160 << 20) / bytes + 1));
    std::vector<void*> w(copies), sc(copies);
    for (int i = 0; i < copies; ++i) {
      CK(cudaMalloc(&w[i], bytes));
      fill_words<<<1024, 256>>>(static_cast<uint32_t*>(w[i]), bytes / 4, 77u * i + 1, F);
      sc[i] = nullptr;
      if (group) {
        CK(cudaMalloc(&sc[i], sbytes));
        fill_h<<<256, 256>>>(static_cast<__half*>(sc[i]), sbytes / 2);
      }
    }
    CK(cudaDeviceSynchronize());
    auto gemv = [&](int i) {
      DecodeGemv g;
      g.format = F, g.w = w[i % copies], g.scales = sc[i % copies], g.rows = c.rows, g.cols = c.cols, g.group = group;
      g.x = x, g.y = y, g.epilogue = kStore;
      return g;
    };
    const double mb = static_cast<double>(bytes + sbytes) / 1e6;
    auto report = [&](const std::string& v, double us) {
      std::printf("{\"format\":\"%s\",\"case\":\"%s\",\"rows\":%lld,\"cols\":%lld,\"variant\":\"%s\",\"us\":%.3f,\"GBps\":%.0f}\n",
                  fname, c.name, static_cast<long long>(c.rows), static_cast<long long>(c.cols), v.c_str(), us, mb * 1e3 / us);
      std::fflush(stdout);
    };
    const int reps = 40;
    report("read", time_graph(s, reps, [&](int i) {
             const cudaLaunchConfig_t cf = cfg_of(dim3(g_sms * 4), dim3(512), 0, s);
             CK(cudaLaunchKernelEx(&cf, read_kernel, static_cast<const uint4*>(w[i % copies]), bytes / 16, sink));
           }));
    report("lib", time_graph(s, reps, [&](int i) { launch_decode_gemv_batch(gemv(i), g_sms, true, s); }));
    if (c.cols <= 3072)
      report("lib+ln", time_graph(s, reps, [&](int i) {
             DecodeBatchNorm n;
             n.x = x, n.h = x + 16384, n.gamma = gamma, n.beta = beta, n.dim = c.cols;
             n.state = reinterpret_cast<const int32_t*>(sink + 16);
             launch_decode_batch_norm(n, true, s);
             DecodeGemv g = gemv(i);
             g.x = x + 16384;
             launch_decode_gemv_batch(g, g_sms, true, s);
           }));
#define TILE(R, U, P) report("t" #R "x" #U "p" #P, time_graph(s, reps, [&](int i) { launch_tile<F, R, U, P>(gemv(i), s); }))
    TILE(1, 8, 1);
    TILE(2, 4, 1);
    TILE(4, 2, 1);
    TILE(4, 4, 1);
    TILE(8, 2, 1);
    TILE(2, 4, 2);
    TILE(4, 2, 2);
    TILE(4, 2, 4);
    TILE(2, 4, 4);
    TILE(1, 8, 4);
    if (c.cols <= 3072) {
      report("t4x2p1+ln", time_graph(s, reps, [&](int i) {
               DecodeGemv g = gemv(i);
               g.ln_gamma = gamma, g.ln_beta = beta;
               launch_tile<F, 4, 2, 1>(g, s);
             }));
    }
    for (int i = 0; i < copies; ++i) {
      CK(cudaFree(w[i]));
      CK(cudaFree(sc[i]));
    }
  }
}

// Attention alone (the library's kernel) at a few lengths and splits, gpt2's and xl's heads.
void run_attention(cudaStream_t s) {
  struct A { const char* name; int64_t heads, dim; };
  for (const A m : {A{"gpt2", 12, 768}, A{"xl", 16, 2048}}) {
    const int64_t context = 1024;
    float *kc, *vc, *q, *y, *scratch;
    unsigned* tickets;
    int32_t* state;
    CK(cudaMalloc(&kc, context * m.dim * 4));
    CK(cudaMalloc(&vc, context * m.dim * 4));
    CK(cudaMalloc(&q, m.dim * 4));
    CK(cudaMalloc(&y, m.dim * 4));
    CK(cudaMalloc(&scratch, 64 * (m.dim + 2 * m.heads) * 4));
    CK(cudaMalloc(&tickets, m.heads * 4));
    CK(cudaMalloc(&state, 16));
    CK(cudaMemset(tickets, 0, m.heads * 4));
    fill_f<<<256, 256>>>(kc, context * m.dim, 0.5f);
    fill_f<<<256, 256>>>(vc, context * m.dim, 1.0f);
    fill_f<<<16, 256>>>(q, m.dim, 0.3f);
    for (const int len : {16, 64, 128, 512, 1024}) {
      const int32_t st[2] = {0, len - 1};
      CK(cudaMemcpy(state, st, 8, cudaMemcpyHostToDevice));
      for (const int splits : {32}) {  // the scratch's stride: the kernel splits by length
        DecodeAttention a;
        a.q = q, a.k = kc, a.v = vc, a.state = state, a.heads = m.heads, a.dim = m.dim, a.context = context;
        a.scale = 0.125f, a.splits = splits, a.part = scratch, a.stats = scratch + splits * m.dim, a.tickets = tickets, a.y = y;
        const double us = time_graph(s, 40, [&](int) { launch_decode_attention(a, true, s); });
        std::printf("{\"attention\":\"%s\",\"len\":%d,\"splits\":%d,\"us\":%.3f}\n", m.name, len, splits, us);
        std::fflush(stdout);
      }
    }
    CK(cudaFree(kc));
    CK(cudaFree(vc));
    CK(cudaFree(q));
    CK(cudaFree(y));
    CK(cudaFree(scratch));
    CK(cudaFree(tickets));
    CK(cudaFree(state));
  }
}

int main(int argc, char** argv) {
  CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
  prepare_decode_kernels();
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *x, *y, *gamma, *beta;
  unsigned* sink;
  CK(cudaMalloc(&x, 32768 * 4));
  CK(cudaMalloc(&y, 65536 * 4));
  CK(cudaMalloc(&gamma, 16384 * 4));
  CK(cudaMalloc(&beta, 16384 * 4));
  CK(cudaMalloc(&sink, 1024));
  CK(cudaMemset(sink, 0, 1024));
  fill_f<<<64, 256>>>(x, 32768, 1.0f);
  fill_f<<<64, 256>>>(gamma, 16384, 1.0f);
  fill_f<<<64, 256>>>(beta, 16384, 0.1f);
  const std::vector<Case> cases = {{"gpt2-qkv", 2304, 768},  {"gpt2-proj", 768, 768}, {"gpt2-fc", 3072, 768},
                                   {"gpt2-out", 768, 3072},  {"xl-qkv", 6144, 2048},  {"xl-proj", 2048, 2048},
                                   {"xl-fc", 8192, 2048},    {"xl-out", 2048, 8192},  {"gpt2-head", 50304, 768}};
  if (argc > 1 && std::string(argv[1]) == "ncu") {  // xl's qkv, t4x2p1, each format three plain launches
    for (int f = 1; f <= 3; ++f) {
      void *w, *sc;
      const int64_t rows = 6144, cols = 2048, bytes = rows * cols * (f == 1 ? 2 : 1) / (f == 3 ? 2 : 1);
      CK(cudaMalloc(&w, bytes));
      CK(cudaMalloc(&sc, rows * cols / 16));
      fill_words<<<1024, 256>>>(static_cast<uint32_t*>(w), bytes / 4, 5u, f);
      fill_h<<<256, 256>>>(static_cast<__half*>(sc), rows * cols / 32);
      DecodeGemv g;
      g.format = f, g.w = w, g.scales = f == 1 ? nullptr : sc, g.rows = rows, g.cols = cols, g.group = f == 2 ? cols : f == 3 ? 32 : 0;
      g.x = x, g.y = y, g.epilogue = kStore;
      for (int i = 0; i < 3; ++i) {
        if (f == 1) launch_tile<kDecBF16, 4, 2, 1>(g, s);
        if (f == 2) launch_tile<kDecI8, 4, 2, 1>(g, s);
        if (f == 3) launch_tile<kDecI4, 4, 2, 1>(g, s);
      }
      CK(cudaStreamSynchronize(s));
      CK(cudaFree(w));
      CK(cudaFree(sc));
    }
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "attention") {
    run_attention(s);
    return 0;
  }
  run_format<kDecBF16>("bf16", 0, cases, s, x, y, gamma, beta, sink);
  run_format<kDecI8>("int8", 1, cases, s, x, y, gamma, beta, sink);
  run_format<kDecI4>("int4", 2, cases, s, x, y, gamma, beta, sink);
  return 0;
}
