// CUDA fused causal attention against the CPU reference: y, lse and dqkv for several shapes
// (one query row; sizes that are no multiple of any tile; head dims 16, 24, 32, 64, 128 and 160,
// i.e. every tensor-core head-dim variant, the unaligned-load path and the SIMT fallback for
// 16-bit) in fp32, tf32, bf16 and fp16; the backward's determinism; then a timing printout (not a
// pass criterion; median device ms of 20 calls) of the char-small and char-gpt2 attention shapes.
// `test_cuda_attention --bench` runs only the timings and prints them as JSON lines (op, prec,
// B, H, T, hd, ms, tflops). Qt-free; exits 77 (skipped) where no CUDA device is usable.
//
// Error measure: max |cuda - cpu| / max |cpu| over a tensor (y, lse, dqkv; the dq, dk and dv
// thirds of dqkv are reported on their own, each against dqkv's scale). Tolerances (kPrecisions,
// but fp32 5e-5):
//  * fp32 5e-5, not the parity test's 1e-5: hd <= 128 runs 3xTF32 tensor-core products (operands
//    split into two tf32 parts, ~2^-21 relative per product) whose fp32 accumulation inside the
//    tensor core truncates rather than rounds; over 1024 keys (128 mma steps x 3 terms) that
//    drift reaches ~1.4e-5 of the scale (measured on the H200: dv at T = 1024), a wrong mask or
//    tile edge gives errors of order 1. hd 160 runs the SIMT path's plain fp32 FMAs.
//  * tf32 1e-3: q, k, v and dy rounded to tf32 as on the CPU; the tensor-core path also rounds P
//    and dS to tf32 (2^-11 relative per element, averaging out over the keys).
//  * bf16 / fp16 1e-2: both sides start from the same 16-bit inputs and accumulate in fp32; the
//    GPU also rounds P and dS to 16 bits before their tensor-core products (relative 2^-9 for bf16
//    per element, averaging out over the keys), and one rounding of each output to 16 bits may
//    land on the neighbouring value (2^-8 relative), so 1e-2 of the tensor's scale holds with
//    margin while a wrong mask, scale or tile edge gives errors of order 1.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "parity_support.h"
#include "util/error.h"

using namespace trainlab;

namespace {
using namespace trainlab::parity;

struct Shape4 {
  int64_t B, T, H, hd;
};

std::string shape_tag(const Shape4& s) {
  return "B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " H=" + std::to_string(s.H) +
         " hd=" + std::to_string(s.hd);
}

// max |a - b| over one third of dqkv, divided by `scale` (max |cpu dqkv| over the whole tensor):
// the parity measure of the dqkv tensor, reported per third. A third's own maximum would not do
// where its exact gradient is zero (dq and dk at T = 1: P = 1, so dP - D = dy.v - dy.y = 0) and
// both sides hold only rounding noise.
double part_err(const std::vector<float>& a, const std::vector<float>& b, double scale) {
  double num = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= num)) num = std::isnan(d) ? INFINITY : d;
  }
  return scale > 0 ? num / scale : num;
}

// nowg: a second CUDA backend made with device.attention_wgmma off (the mma.sync kernels), on
// P.gpu's device: it reads and writes P.gpu's tensors, each side synchronized before the other
// reads (the two backends have streams of their own).
void attention_case(Pair& P, Backend& nowg, const Prec& pr, const Shape4& s) {
  const double tol = pr.dt == DType::F32 && !pr.tf32 ? 5e-5 : pr.tol;  // see the top of the file
  const MatmulMode mm = pr.mode();
  const DType dt = pr.dt;
  const int64_t d = s.H * s.hd, rows = s.B * s.T;
  const std::string tag = std::string("[") + pr.name + "] attention " + shape_tag(s) + " ";
  // Scores of spread about 1 (uniform [-1.5, 1.5] entries): neither near-uniform nor one-hot rows.
  auto [qkv0, qkv1] = P.rand({rows, 3 * d}, dt, 1.5f);
  auto [y0, y1] = P.rand({rows, d}, dt);  // garbage: must be overwritten
  auto [l0, l1] = P.rand({s.B, s.H, s.T}, DType::F32);
  P.cpu.attention_forward(qkv0, s.B, s.T, s.H, y0, l0, mm);
  P.gpu.attention_forward(qkv1, s.B, s.T, s.H, y1, l1, mm);
  P.compare(tag + "y", y0, y1, tol);
  P.compare(tag + "lse", l0, l1, tol);
  {  // The forward with the warpgroup-MMA kernel off (mma.sync; elsewhere the same kernel twice): bit-identical.
    auto [yc, y2] = P.zeros({rows, d}, dt);
    auto [lc, l2] = P.zeros({s.B, s.H, s.T}, DType::F32);
    P.gpu.synchronize();
    nowg.attention_forward(qkv1, s.B, s.T, s.H, y2, l2, mm);
    nowg.synchronize();
    const auto a = host(P.gpu, y1), b = host(P.gpu, y2), la = host(P.gpu, l1), lb = host(P.gpu, l2);
    const bool same = a == b && la == lb;
    check(tag + "forward: wgmma kernel = mma.sync kernel, bit for bit", same ? 0.0 : 1.0, 0.0);
  }

  auto [dy0, dy1] = P.rand({rows, d}, dt);
  auto [g0, g1] = P.rand({rows, 3 * d}, dt);  // garbage: dqkv is overwritten
  P.cpu.attention_backward(qkv0, y0, l0, dy0, s.B, s.T, s.H, g0, mm);
  P.gpu.attention_backward(qkv1, y1, l1, dy1, s.B, s.T, s.H, g1, mm);
  // Each part of dqkv on its own (a wrong dK hidden by a larger dQ would pass a joint measure).
  const std::vector<float> hc = host(P.cpu, g0), hg = host(P.gpu, g1);
  double scale = 0.0;
  for (float v : hc) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  const char* part[3] = {"dq", "dk", "dv"};
  for (int k = 0; k < 3; ++k) {
    std::vector<float> a, b;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < d; ++c) {
        a.push_back(hg[r * 3 * d + k * d + c]);
        b.push_back(hc[r * 3 * d + k * d + c]);
      }
    check(tag + part[k], part_err(a, b, scale), tol);
  }
  // Deterministic backward: a second run gives the same bits.
  auto [g2c, g2] = P.zeros({rows, 3 * d}, dt);
  P.gpu.attention_backward(qkv1, y1, l1, dy1, s.B, s.T, s.H, g2, mm);
  const std::vector<float> again = host(P.gpu, g2);
  check(tag + "backward bit-identical on rerun",
        std::memcmp(again.data(), hg.data(), hg.size() * sizeof(float)) == 0 ? 0.0 : 1.0, 0.0);
  // The backward with the warpgroup-MMA kernels off (mma.sync): bit-identical.
  P.gpu.synchronize();
  nowg.attention_backward(qkv1, y1, l1, dy1, s.B, s.T, s.H, g2, mm);
  nowg.synchronize();
  const std::vector<float> sync = host(P.gpu, g2);
  check(tag + "backward: wgmma kernels = mma.sync kernels, bit for bit",
        std::memcmp(sync.data(), hg.data(), hg.size() * sizeof(float)) == 0 ? 0.0 : 1.0, 0.0);
}

// Device time per call (the backend's kernel timing, cudaEvents around each call): the median of
// 20 calls after 3 warm-up pairs. Causal attention flops: forward 2 * B * H * T^2 * hd (half of
// the 4 B H T^2 hd of a full product pair), backward 2.5 times that.
struct Timing {
  double fwd_ms, bwd_ms, fwd_tflops, bwd_tflops;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The device ms of the one call `op` makes (kernel timing on, collected at once).
template <typename Op>
double time_call(Backend& gpu, const char* name, Op op) {
  gpu.reset_kernel_times();
  op();
  for (const KernelTime& k : gpu.kernel_times())
    if (k.name == name && k.calls == 1) return k.ms;
  throw Error(std::string("timing: no single timed call of ") + name);
}

Timing timing(Backend& gpu, DType dt, bool tf32, const Shape4& s) {
  const MatmulMode mm = tf32 ? MatmulMode::Tf32 : MatmulMode::Native;
  const int64_t d = s.H * s.hd, rows = s.B * s.T;
  Tensor qkv = gpu.empty({rows, 3 * d}, dt, MemCategory::Workspace);
  Tensor y = gpu.empty({rows, d}, dt, MemCategory::Workspace);
  Tensor dy = gpu.empty({rows, d}, dt, MemCategory::Workspace);
  Tensor dqkv = gpu.empty({rows, 3 * d}, dt, MemCategory::Workspace);
  Tensor lse = gpu.empty({s.B, s.H, s.T}, DType::F32, MemCategory::Workspace);
  std::vector<float> v(static_cast<size_t>(rows * 3 * d));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i % 9973));
  gpu.upload(qkv, v.data(), DType::F32);
  gpu.upload(dy, v.data(), DType::F32);
  for (int i = 0; i < 3; ++i) {
    gpu.attention_forward(qkv, s.B, s.T, s.H, y, lse, mm);
    gpu.attention_backward(qkv, y, lse, dy, s.B, s.T, s.H, dqkv, mm);
  }
  gpu.synchronize();
  gpu.set_kernel_timing(true);
  std::vector<double> fwd, bwd;
  for (int i = 0; i < 20; ++i) {
    fwd.push_back(time_call(gpu, "attention_forward", [&] { gpu.attention_forward(qkv, s.B, s.T, s.H, y, lse, mm); }));
    bwd.push_back(time_call(gpu, "attention_backward",
                            [&] { gpu.attention_backward(qkv, y, lse, dy, s.B, s.T, s.H, dqkv, mm); }));
  }
  gpu.set_kernel_timing(false);
  const double flops = 2.0 * static_cast<double>(s.B * s.H) * static_cast<double>(s.T * s.T) * static_cast<double>(s.hd);
  Timing t{median(fwd), median(bwd), 0.0, 0.0};
  t.fwd_tflops = t.fwd_ms > 0 ? flops / (t.fwd_ms * 1e9) : 0.0;
  t.bwd_tflops = t.bwd_ms > 0 ? 2.5 * flops / (t.bwd_ms * 1e9) : 0.0;
  return t;
}

struct TimedPrec {
  const char* name;
  DType dt;
  bool tf32;
};
const TimedPrec kTimed[] = {
    {"bf16", DType::BF16, false}, {"fp16", DType::F16, false}, {"fp32", DType::F32, false}, {"tf32", DType::F32, true}};
const Shape4 kCharSmall{64, 256, 6, 64}, kCharGpt2{16, 1024, 12, 64};

// --bench: one JSON line per (shape, precision, direction), nothing else on stdout.
int bench(Backend& gpu) {
  for (const Shape4& s : {kCharGpt2, kCharSmall})
    for (const TimedPrec& p : kTimed) {
      const Timing t = timing(gpu, p.dt, p.tf32, s);
      for (int dir = 0; dir < 2; ++dir)
        std::printf("{\"op\":\"attention_%s\",\"prec\":\"%s\",\"B\":%lld,\"H\":%lld,\"T\":%lld,\"hd\":%lld,"
                    "\"ms\":%.5f,\"tflops\":%.1f}\n",
                    dir ? "backward" : "forward", p.name, static_cast<long long>(s.B), static_cast<long long>(s.H),
                    static_cast<long long>(s.T), static_cast<long long>(s.hd), dir ? t.bwd_ms : t.fwd_ms,
                    dir ? t.bwd_tflops : t.fwd_tflops);
    }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<Backend> gpu = cuda_or_skip();
  if (!gpu) return 77;
  if (argc > 1 && std::strcmp(argv[1], "--bench") == 0) {
    try {
      return bench(*gpu);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench failed: %s\n", e.what());
      return 1;
    }
  }
  CpuBackend cpu;
  Pair P{cpu, *gpu};
  DeviceOptions no_wgmma;
  no_wgmma.attention_wgmma = false;
  std::unique_ptr<Backend> nowg = create_backend(gpu->info().id(), no_wgmma);
  const Shape4 shapes[] = {{2, 1, 1, 16},  {2, 37, 3, 32},  {1, 256, 6, 64}, {1, 1024, 2, 64},
                           {2, 200, 2, 128}, {2, 45, 2, 24}, {1, 70, 2, 160},
                           // hd 64 with T off the 64- and 128-row tiles (the bf16 wgmma forward's edges)
                           {3, 77, 2, 64},   {2, 1, 3, 64},  {2, 200, 2, 64}};
  try {
    for (const auto& pr : kPrecisions)
      for (const auto& s : shapes) attention_case(P, *nowg, pr, s);
    for (const Shape4& s : {kCharSmall, kCharGpt2})
      for (const TimedPrec& p : kTimed) {
        const Timing t = timing(*gpu, p.dt, p.tf32, s);
        std::printf("TIME [%s] %-34s fwd %8.4f ms (%6.1f TFLOP/s)  bwd %8.4f ms (%6.1f TFLOP/s)\n", p.name,
                    shape_tag(s).c_str(), t.fwd_ms, t.fwd_tflops, t.bwd_ms, t.bwd_tflops);
      }
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    ++g_fail;
  }
  return finish();
}
