// bench_cuda_ops: device time of the character GPT's non-attention, non-product kernels (issue 4)
// at the bench cases' shapes, bf16 as the lab's bf16 step runs them. Not a test (not in CTest):
// the lead runs it on the GPU machine, `build-gpu/tests/bench_cuda_ops`.
//
// Each operation is launched directly (kernels/*.cuh), 3 warm-up launches, then 20 timed ones,
// each between two CUDA events with L2 flushed before it (a 256 MiB memset outside the events,
// so a tensor left in L2 by the previous launch does not flatter the number). Printed per op, one
// JSON line: the median ms, the bytes the op must move at least (reads + writes of its tensors,
// each once), GB/s = bytes / median, how often one training step calls it and the step's share.
// Exit 77 without a usable CUDA device (as the tests/gpu binaries).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common.cuh"
#include "optim.cuh"
#include "transformer_ops.cuh"
#include "util/error.h"

using namespace trainlab;
using namespace trainlab::kern;

namespace {

constexpr int kWarmup = 3, kReps = 20;
const int kBF16 = dcode(DType::BF16);

struct Case {
  const char* name;
  int64_t B, T, d, layers, vocab;
  int64_t rows() const { return B * T; }
};

// Device buffers freed at exit (the process is short-lived; no reuse needed).
struct Dev {
  std::vector<void*> all;
  ~Dev() {
    for (void* p : all) cudaFree(p);
  }
  void* alloc(int64_t bytes) {
    void* p = nullptr;
    TL_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(bytes)));
    all.push_back(p);
    return p;
  }
  // n bf16 values uniform in [-scale, scale] (positive: [0, scale]).
  void* bf16(int64_t n, std::mt19937& rng, float scale, bool positive = false) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    std::uniform_real_distribution<float> u(positive ? 0.0f : -1.0f, 1.0f);
    for (auto& x : h) {
      const float f = u(rng) * scale;
      uint32_t b;
      std::memcpy(&b, &f, 4);
      x = static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);  // round to nearest even
    }
    void* p = alloc(n * 2);
    TL_CUDA_CHECK(cudaMemcpy(p, h.data(), static_cast<size_t>(n * 2), cudaMemcpyHostToDevice));
    return p;
  }
  float* f32(int64_t n, std::mt19937& rng, float scale) {
    std::vector<float> h(static_cast<size_t>(n));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& x : h) x = u(rng) * scale;
    void* p = alloc(n * 4);
    TL_CUDA_CHECK(cudaMemcpy(p, h.data(), static_cast<size_t>(n * 4), cudaMemcpyHostToDevice));
    return static_cast<float*>(p);
  }
  float* zeros_f32(int64_t n) {
    void* p = alloc(n * 4);
    TL_CUDA_CHECK(cudaMemset(p, 0, static_cast<size_t>(n * 4)));
    return static_cast<float*>(p);
  }
};

struct Timer {
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  void* flush = nullptr;
  size_t flush_bytes = size_t(256) << 20;
  Timer() {
    TL_CUDA_CHECK(cudaStreamCreate(&s));
    TL_CUDA_CHECK(cudaEventCreate(&a));
    TL_CUDA_CHECK(cudaEventCreate(&b));
    TL_CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
  }
  ~Timer() {
    cudaFree(flush);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaStreamDestroy(s);
  }
  // Median device ms of launch(s) over kReps launches, L2 flushed before each.
  template <class F>
  double median_ms(F&& launch) {
    for (int i = 0; i < kWarmup; ++i) launch(s);
    std::vector<double> t;
    for (int i = 0; i < kReps; ++i) {
      TL_CUDA_CHECK(cudaMemsetAsync(flush, i & 0xFF, flush_bytes, s));
      TL_CUDA_CHECK(cudaEventRecord(a, s));
      launch(s);
      TL_CUDA_CHECK(cudaEventRecord(b, s));
      TL_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0.0f;
      TL_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return 0.5 * (t[kReps / 2 - 1] + t[kReps / 2]);
  }
};

void report(const Case& c, const std::string& op, const std::string& shape, double ms, double bytes,
            int calls_per_step) {
  std::printf(
      "{\"op\": \"%s\", \"case\": \"%s\", \"shape\": \"%s\", \"ms\": %.4f, \"bytes\": %.0f, \"gbps\": %.1f, "
      "\"calls_per_step\": %d, \"ms_per_step\": %.4f}\n",
      op.c_str(), c.name, shape.c_str(), ms, bytes, bytes / (ms * 1e-3) / 1e9, calls_per_step, ms * calls_per_step);
}

// The parameter tensors of the case's model (sizes as core/nn/transformer.cpp builds them) and
// whether weight decay applies (matrices and embeddings yes, biases and LayerNorm no).
std::vector<std::pair<int64_t, bool>> param_sizes(const Case& c) {
  const int64_t d = c.d;
  std::vector<std::pair<int64_t, bool>> p = {{c.vocab * d, true}, {c.T * d, true}};
  for (int64_t l = 0; l < c.layers; ++l) {
    p.insert(p.end(), {{d, false}, {d, false}, {3 * d * d, true}, {3 * d, false}, {d * d, true}, {d, false},
                       {d, false}, {d, false}, {4 * d * d, true}, {4 * d, false}, {4 * d * d, true}, {d, false}});
  }
  p.insert(p.end(), {{d, false}, {d, false}});
  return p;
}

void bench_case(const Case& c, Timer& tm) {
  std::mt19937 rng(7);
  Dev dev;
  const int64_t N = c.rows(), d = c.d, L = c.layers, H = 4 * d;
  const std::string nd = std::to_string(N) + "x" + std::to_string(d) + " bf16";
  const std::string nh = std::to_string(N) + "x" + std::to_string(H) + " bf16";
  const cudaStream_t s = tm.s;

  // LayerNorm forward / backward (residual add fused: dx += ...), parameter gradients written
  // and accumulated (the step accumulates over micro-batches after the first).
  void* x = dev.bf16(N * d, rng, 2.0f);
  void* gamma = dev.bf16(d, rng, 1.0f, true);
  void* beta = dev.bf16(d, rng, 0.5f);
  void* y = dev.bf16(N * d, rng, 1.0f);
  float* mean = dev.zeros_f32(N);
  float* rstd = dev.zeros_f32(N);
  const double ln_f_bytes = 2.0 * N * d * 2 + N * 8.0;
  double ms = tm.median_ms([&](cudaStream_t st) {
    launch_layernorm_forward(x, kBF16, gamma, kBF16, beta, kBF16, 1e-5f, N, d, y, kBF16, mean, rstd, st);
  });
  report(c, "layernorm_forward", nd, ms, ln_f_bytes, static_cast<int>(2 * L + 1));

  void* dy = dev.bf16(N * d, rng, 1.0f);
  void* dx = dev.bf16(N * d, rng, 1.0f);
  void* dgamma = dev.bf16(d, rng, 1.0f);
  void* dbeta = dev.bf16(d, rng, 1.0f);
  float* partial = static_cast<float*>(dev.alloc(layernorm_backward_workspace(N, d) * 4));
  const double ln_b_bytes = 4.0 * N * d * 2 + N * 8.0;  // x, dy, dx read; dx written; mean, rstd
  for (int acc = 0; acc < 2; ++acc) {
    ms = tm.median_ms([&](cudaStream_t st) {
      launch_layernorm_backward(x, kBF16, gamma, kBF16, mean, rstd, dy, kBF16, N, d, dx, kBF16, true, dgamma, kBF16,
                                dbeta, kBF16, acc != 0, partial, st);
    });
    report(c, acc ? "layernorm_backward (+=params)" : "layernorm_backward", nd, ms, ln_b_bytes,
           acc ? 0 : static_cast<int>(2 * L + 1));
  }

  // add (the residual stream), copy (dx -> the products' scratch), as the block does.
  ms = tm.median_ms([&](cudaStream_t st) { launch_add(x, kBF16, dy, kBF16, y, kBF16, N * d, st); });
  report(c, "add", nd, ms, 3.0 * N * d * 2, static_cast<int>(2 * L));
  ms = tm.median_ms([&](cudaStream_t st) {
    TL_CUDA_CHECK(cudaMemcpyAsync(y, dx, static_cast<size_t>(N * d * 2), cudaMemcpyDeviceToDevice, st));
  });
  report(c, "copy (cudaMemcpyAsync)", nd, ms, 2.0 * N * d * 2, static_cast<int>(2 * L));

  // GELU forward (pre -> f) and backward in place (df = gelu'(pre) * df), the MLP's hidden width.
  void* pre = dev.bf16(N * H, rng, 3.0f);
  void* f = dev.bf16(N * H, rng, 1.0f);
  ms = tm.median_ms([&](cudaStream_t st) { launch_gelu_forward(pre, kBF16, f, kBF16, N * H, st); });
  report(c, "gelu_forward", nh, ms, 2.0 * N * H * 2, static_cast<int>(L));
  ms = tm.median_ms([&](cudaStream_t st) { launch_gelu_backward(pre, kBF16, f, kBF16, f, kBF16, N * H, st); });
  report(c, "gelu_backward", nh, ms, 3.0 * N * H * 2, static_cast<int>(L));

  // Embedding forward / backward (token rows of a 65-character vocabulary, positions 0..T-1).
  std::vector<int32_t> hidx(static_cast<size_t>(N));
  for (auto& v : hidx) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(c.vocab));
  auto* idx = static_cast<int32_t*>(dev.alloc(N * 4));
  TL_CUDA_CHECK(cudaMemcpy(idx, hidx.data(), static_cast<size_t>(N * 4), cudaMemcpyHostToDevice));
  void* tok = dev.bf16(c.vocab * d, rng, 1.0f);
  void* pos = dev.bf16(c.T * d, rng, 1.0f);
  ms = tm.median_ms([&](cudaStream_t st) {
    launch_embedding_forward(tok, kBF16, c.vocab, pos, kBF16, idx, N, c.T, d, y, kBF16, st);
  });
  report(c, "embedding_forward", nd, ms, N * d * 2.0 + N * 4.0, 1);
  float* epartial = static_cast<float*>(dev.alloc(embedding_backward_workspace(N, c.vocab, d) * 4));
  ms = tm.median_ms([&](cudaStream_t st) {
    launch_embedding_backward(dy, kBF16, idx, N, c.T, d, tok, kBF16, c.vocab, pos, kBF16, c.T, false, epartial, st);
  });
  report(c, "embedding_backward", nd, ms, N * d * 2.0 + N * 4.0 + (c.vocab + c.T) * d * 2.0, 1);

  // AdamW over every parameter: fp32 master, m, v; bf16 gradient and value (as the bf16 step).
  const auto sizes = param_sizes(c);
  int64_t total = 0;
  for (const auto& p : sizes) total += (p.first + 63) / 64 * 64;  // each tensor 256-byte aligned
  float* master = dev.f32(total, rng, 0.05f);
  float* m = dev.zeros_f32(total);
  float* v = dev.zeros_f32(total);
  void* grad = dev.bf16(total, rng, 0.01f);
  void* value = dev.bf16(total, rng, 0.05f);
  std::vector<OptTensor> t;
  int64_t off = 0, n_params = 0;
  for (const auto& p : sizes) {
    OptTensor o;
    o.master = master + off;
    o.m = m + off;
    o.v = v + off;
    o.grad = static_cast<uint16_t*>(grad) + off;
    o.grad_dt = kBF16;
    o.value = static_cast<uint16_t*>(value) + off;
    o.value_dt = kBF16;
    o.n = p.first;
    o.decay = p.second ? 1.0f : 0.0f;
    t.push_back(o);
    off += (p.first + 63) / 64 * 64;
    n_params += p.first;
  }
  auto* sc = static_cast<DevScalars*>(dev.alloc(sizeof(DevScalars)));
  launch_set_scalars(sc, DevScalars{1e-4f, 1.0f, 1.0f, 1.0f}, s);
  const OptHyper hyper{0.9f, 0.95f, 1e-8f, 0.1f, false};
  ms = tm.median_ms([&](cudaStream_t st) { launch_adamw(t.data(), static_cast<int>(t.size()), hyper, sc, st); });
  // read master, m, v (fp32) and grad (bf16); write master, m, v and value (bf16)
  report(c, "adamw", std::to_string(n_params) + " params in " + std::to_string(t.size()) + " tensors", ms,
         n_params * (6.0 * 4 + 2 * 2), 1);
  TL_CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("SKIP: no usable CUDA device\n");
    return 77;
  }
  try {
    cudaDeviceProp prop{};
    TL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    Timer tm;
    const Case cases[] = {{"char-gpt2", 16, 1024, 768, 12, 65}, {"char-small", 64, 256, 384, 6, 65}};
    for (const Case& c : cases) bench_case(c, tm);
  } catch (const Error& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
