// Shared by the GPU parity tests (tests/gpu/test_*.cpp): the same random values on the CPU and
// CUDA backends, a relative error measure, PASS/FAIL lines and the pass/fail count, and the
// skip-without-a-GPU start. Error measure: max |cuda - cpu| / max |cpu| over a tensor.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "util/error.h"

namespace trainlab::parity {

inline int g_pass = 0, g_fail = 0;

inline std::vector<float> host(Backend& be, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  be.download(t, v.data(), DType::F32);
  return v;
}

inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= num)) num = std::isnan(d) ? INFINITY : d;
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

inline void check(const std::string& what, double err, double tol) {
  const bool ok = err <= tol;
  (ok ? g_pass : g_fail)++;
  std::printf("%s %-58s err %.3g (tol %.0e)\n", ok ? "PASS" : "FAIL", what.c_str(), err, tol);
}

struct Pair {
  Backend& cpu;
  Backend& gpu;
  std::mt19937 rng{42};
  // The same random values (rounded to dt) on both backends.
  std::pair<Tensor, Tensor> rand(const Shape& s, DType dt, float scale = 1.0f, bool positive = false) {
    std::vector<float> v(static_cast<size_t>(shape_numel(s)));
    std::uniform_real_distribution<float> u(positive ? 0.0f : -1.0f, 1.0f);
    for (auto& x : v) x = u(rng) * scale;
    Tensor a = cpu.empty(s, dt, MemCategory::Workspace), b = gpu.empty(s, dt, MemCategory::Workspace);
    cpu.upload(a, v.data(), DType::F32);
    gpu.upload(b, v.data(), DType::F32);
    return {a, b};
  }
  std::pair<Tensor, Tensor> zeros(const Shape& s, DType dt) {
    Tensor a = cpu.empty(s, dt, MemCategory::Workspace), b = gpu.empty(s, dt, MemCategory::Workspace);
    cpu.fill(a, 0.0f);
    gpu.fill(b, 0.0f);
    return {a, b};
  }
  void compare(const std::string& what, const Tensor& c, const Tensor& g, double tol) {
    check(what, rel_err(host(gpu, g), host(cpu, c)), tol);
  }
};

// C = alpha op(A) op(B) + beta C (alpha 0.5, beta 0.25) for the four transposes of an [m x k] by
// [k x n] product, on both backends; one line per case, "<tag><what> ta=<0|1> tb=<0|1>".
inline void gemm_cases(Pair& P, const std::string& tag, const std::string& what, DType dt, int64_t m, int64_t n,
                       int64_t k, double tol, MatmulMode mode) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      auto [a0, a1] = P.rand(ta ? Shape{k, m} : Shape{m, k}, dt);
      auto [b0, b1] = P.rand(tb ? Shape{n, k} : Shape{k, n}, dt);
      auto [c0, c1] = P.rand({m, n}, dt);
      P.cpu.gemm(a0, ta, b0, tb, c0, 0.5f, 0.25f, mode);
      P.gpu.gemm(a1, ta, b1, tb, c1, 0.5f, 0.25f, mode);
      P.compare(tag + what + " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb), c0, c1, tol);
    }
}

struct Prec {
  const char* name;
  DType dt;
  bool tf32;
  double tol;
  // The products' mode of this precision (an argument of every product; no backend state).
  MatmulMode mode() const { return tf32 ? MatmulMode::Tf32 : MatmulMode::Native; }
};


// The CUDA backend, or null after printing SKIP (the caller returns 77).
inline std::unique_ptr<Backend> cuda_or_skip() {
  try {
    std::string why;
    auto gpu = create_backend("cuda", &why);
    std::printf("device: %s\n", gpu->info().name.c_str());
    return gpu;
  } catch (const Error& e) {
    std::printf("SKIP: no usable CUDA device (%s)\n", e.what());
    return nullptr;
  }
}

// The precisions every parity test runs, with their tolerances: fp32 1e-5 (the same fp32 FMA
// products, summed in another order), tf32 1e-3, bf16 and fp16 1e-2 (one rounding of the output
// may land on the neighbouring 16-bit value).
inline const Prec kPrecisions[] = {{"fp32", DType::F32, false, 1e-5},
                                   {"tf32", DType::F32, true, 1e-3},
                                   {"bf16", DType::BF16, false, 1e-2},
                                   {"fp16", DType::F16, false, 1e-2}};

// Prints the count and gives main's exit code.
inline int finish() {
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}

}  // namespace trainlab::parity
