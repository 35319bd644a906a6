// CPU vs CUDA parity of the compression operations (issue 5): fake_quantize bit for bit (bits 2..8,
// per tensor / per channel / per group, odd sizes, fp32 and bf16 inputs), quantize_i8 bit for bit,
// gemm_i8 exactly (int32, odd and unaligned sizes), int8_linear (one rescale; exact without GELU)
// and distill_backward (fp32 softmaxes summed in another order: 1e-5).
#include <cstring>

#include "parity_support.h"

using namespace trainlab;
using namespace trainlab::parity;

namespace {

// Values of very different magnitudes per row (one row 1000x larger), so that per-tensor and
// per-channel scales differ, with a few exact zeros (zero groups give s = 0).
std::vector<float> weights(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float x = u(rng) * (r == rows / 2 ? 1000.0f : 1.0f) * std::exp(u(rng) * 3.0f);
      if ((r * 7 + c) % 29 == 0) x = 0.0f;
      v[static_cast<size_t>(r * cols + c)] = x;
    }
  if (rows > 2)
    for (int64_t c = 0; c < cols; ++c) v[static_cast<size_t>(cols + c)] = 0.0f;  // an all-zero row
  return v;
}

std::pair<Tensor, Tensor> both(Pair& P, const Shape& s, DType dt, const void* src, DType src_dt) {
  Tensor a = P.cpu.empty(s, dt, MemCategory::Workspace), b = P.gpu.empty(s, dt, MemCategory::Workspace);
  P.cpu.upload(a, src, src_dt);
  P.gpu.upload(b, src, src_dt);
  return {a, b};
}

// Counts the elements that differ in their bits (0 = bit-identical).
double bit_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return static_cast<double>(bad);
}

void fake_quantize_tests(Pair& P) {
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {3, 7}, {7, 13}, {33, 130}, {64, 96}, {130, 256}, {512, 1024}};
  for (const auto& [rows, cols] : shapes) {
    const std::vector<float> w = weights(rows, cols, P.rng);
    for (DType dt : {DType::F32, DType::BF16}) {
      auto [wc, wg] = both(P, {rows, cols}, dt, w.data(), DType::F32);
      std::vector<int64_t> groups{rows * cols, cols};  // per tensor, per channel
      for (int64_t g : {32, 64, 128})
        if (cols % g == 0) groups.push_back(g);
      if (rows * cols > 5) groups.push_back(5);  // groups straddling rows, a short last one
      for (int bits = 2; bits <= 8; ++bits)
        for (int64_t g : groups) {
          Tensor oc = P.cpu.empty({rows, cols}, dt, MemCategory::Workspace);
          Tensor og = P.gpu.empty({rows, cols}, dt, MemCategory::Workspace);
          P.cpu.fake_quantize(wc, oc, bits, g);
          P.gpu.fake_quantize(wg, og, bits, g);
          const std::string gname = g == rows * cols ? "tensor" : g == cols ? "channel" : "group " + std::to_string(g);
          check("fake_quantize " + std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                    " bits " + std::to_string(bits) + " " + gname + " (differing elements)",
                bit_mismatches(host(P.gpu, og), host(P.cpu, oc)), 0.0);
        }
    }
  }
  // fp32 in, bf16 out: the rounding of the output too.
  const std::vector<float> w = weights(9, 64, P.rng);
  auto [wc, wg] = both(P, {9, 64}, DType::F32, w.data(), DType::F32);
  Tensor oc = P.cpu.empty({9, 64}, DType::BF16, MemCategory::Workspace);
  Tensor og = P.gpu.empty({9, 64}, DType::BF16, MemCategory::Workspace);
  P.cpu.fake_quantize(wc, oc, 4, 32);
  P.gpu.fake_quantize(wg, og, 4, 32);
  check("fake_quantize fp32 -> bf16 9x64 int4 group 32 (differing elements)", bit_mismatches(host(P.gpu, og), host(P.cpu, oc)), 0.0);
}

void quantize_i8_tests(Pair& P) {
  for (int64_t n : {1, 31, 1000, 65537}) {
    const std::vector<float> x = weights(1, n, P.rng);
    for (float scale : {0.0f, 0.013f, 1.0f, 7.5f}) {
      auto [xc, xg] = both(P, {n}, DType::F32, x.data(), DType::F32);
      Tensor qc = P.cpu.empty({n}, DType::I8, MemCategory::Workspace), qg = P.gpu.empty({n}, DType::I8, MemCategory::Workspace);
      P.cpu.quantize_i8(xc, scale, qc);
      P.gpu.quantize_i8(xg, scale, qg);
      std::vector<int8_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      P.cpu.download(qc, a.data(), DType::I8);
      P.gpu.download(qg, b.data(), DType::I8);
      int64_t bad = 0;
      for (size_t i = 0; i < a.size(); ++i) bad += a[i] != b[i];
      check("quantize_i8 n " + std::to_string(n) + " scale " + std::to_string(scale) + " (differing codes)",
            static_cast<double>(bad), 0.0);
    }
  }
}

std::vector<int8_t> random_i8(int64_t n, std::mt19937& rng, int lo = -128) {
  std::uniform_int_distribution<int> u(lo, 127);
  std::vector<int8_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<int8_t>(u(rng));
  return v;
}

void gemm_i8_tests(Pair& P) {
  const int64_t shapes[][3] = {{1, 1, 1},    {3, 5, 7},     {17, 33, 65},  {64, 64, 64},
                               {65, 63, 129}, {100, 257, 1000}, {128, 128, 4096}, {1, 384, 1536}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    const std::vector<int8_t> a = random_i8(m * k, P.rng), b = random_i8(n * k, P.rng);
    auto [ac, ag] = both(P, {m, k}, DType::I8, a.data(), DType::I8);
    auto [bc, bg] = both(P, {n, k}, DType::I8, b.data(), DType::I8);
    Tensor cc = P.cpu.empty({m, n}, DType::I32, MemCategory::Workspace), cg = P.gpu.empty({m, n}, DType::I32, MemCategory::Workspace);
    P.cpu.gemm_i8(ac, bc, cc);
    P.gpu.gemm_i8(ag, bg, cg);
    std::vector<int32_t> x(static_cast<size_t>(m * n)), y(static_cast<size_t>(m * n));
    P.cpu.download(cc, x.data(), DType::I32);
    P.gpu.download(cg, y.data(), DType::I32);
    int64_t bad = 0;
    for (size_t i = 0; i < x.size(); ++i) bad += x[i] != y[i];
    // The extreme case: every product -128 * -128, K = 4096 -> 67108864, beyond fp32's exact range.
    check("gemm_i8 " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " (differing int32)",
          static_cast<double>(bad), 0.0);
  }
  const int64_t m = 5, n = 6, k = 4096;
  const std::vector<int8_t> a(static_cast<size_t>(m * k), -128);
  auto [ac, ag] = both(P, {m, k}, DType::I8, a.data(), DType::I8);
  Tensor cg = P.gpu.empty({m, m}, DType::I32, MemCategory::Workspace);
  P.gpu.gemm_i8(ag, ag, cg);
  std::vector<int32_t> y(static_cast<size_t>(m * m));
  P.gpu.download(cg, y.data(), DType::I32);
  int64_t bad = 0;
  for (int32_t v : y) bad += v != 128 * 128 * 4096;
  check("gemm_i8 all -128, K 4096 = 67108864 exactly (differing)", static_cast<double>(bad), 0.0);
  (void)n;
}

void int8_linear_tests(Pair& P) {
  const int64_t shapes[][3] = {{1, 10, 64}, {7, 33, 129}, {64, 100, 784}, {128, 256, 512}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    const std::vector<int8_t> xq = random_i8(m * k, P.rng, -127), wq = random_i8(n * k, P.rng, -127);
    auto [xc, xg] = both(P, {m, k}, DType::I8, xq.data(), DType::I8);
    auto [wc, wg] = both(P, {n, k}, DType::I8, wq.data(), DType::I8);
    for (bool per_channel : {true, false})
      for (bool with_bias : {true, false})
        for (Activation act : {Activation::None, Activation::ReLU, Activation::GELU})
          for (DType ydt : {DType::F32, DType::BF16}) {
            auto [sc, sg] = P.rand({per_channel ? n : 1}, DType::F32, 0.01f, true);
            auto [bc, bg] = P.rand({n}, DType::F32, 1.0f);
            Tensor yc = P.cpu.empty({m, n}, ydt, MemCategory::Workspace), yg = P.gpu.empty({m, n}, ydt, MemCategory::Workspace);
            P.cpu.int8_linear(xc, 0.02f, wc, sc, with_bias ? &bc : nullptr, act, yc);
            P.gpu.int8_linear(xg, 0.02f, wg, sg, with_bias ? &bg : nullptr, act, yg);
            // Exact but for erf's last bit (and the bf16 rounding that bit may flip).
            const double tol = ydt == DType::BF16 ? 1e-2 : act == Activation::GELU ? 1e-6 : 0.0;
            P.compare("int8_linear " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                          (per_channel ? " per-channel" : " one scale") + (with_bias ? " bias" : "") + " " +
                          activation_name(act) + " -> " + dtype_name(ydt),
                      yc, yg, tol);
          }
  }
}

void distill_tests(Pair& P) {
  StepScalars sc;
  sc.loss_scale = 8.0f;
  P.cpu.set_step_scalars(sc);
  P.gpu.set_step_scalars(sc);
  const int64_t shapes[][2] = {{1, 10}, {37, 65}, {128, 10}, {64, 1000}};
  for (const auto& s : shapes)
    for (float T : {1.0f, 2.0f, 4.0f})
      for (float alpha : {0.0f, 0.5f, 1.0f}) {
        const int64_t b = s[0], c = s[1];
        auto [zs_c, zs_g] = P.rand({b, c}, DType::F32, 5.0f);
        auto [zt_c, zt_g] = P.rand({b, c}, DType::F32, 5.0f);
        auto [dc, dg] = P.rand({b, c}, DType::F32, 0.1f);
        auto [kc, kg] = P.rand({1}, DType::F32, 1.0f);
        P.cpu.distill_backward(zs_c, zt_c, T, alpha, 0.5f, dc, &kc, true);
        P.gpu.distill_backward(zs_g, zt_g, T, alpha, 0.5f, dg, &kg, true);
        const std::string what = "distill_backward " + std::to_string(b) + "x" + std::to_string(c) + " T " +
                                 std::to_string(T).substr(0, 3) + " alpha " + std::to_string(alpha).substr(0, 3);
        P.compare(what + " dlogits", dc, dg, 1e-5);
        P.compare(what + " kl_sum (accumulated)", kc, kg, 1e-5);
      }
  // bf16 logits and gradient.
  auto [zs_c, zs_g] = P.rand({16, 65}, DType::BF16, 4.0f);
  auto [zt_c, zt_g] = P.rand({16, 65}, DType::BF16, 4.0f);
  auto [dc, dg] = P.zeros({16, 65}, DType::BF16);
  P.cpu.distill_backward(zs_c, zt_c, 2.0f, 0.7f, 1.0f, dc, nullptr, false);
  P.gpu.distill_backward(zs_g, zt_g, 2.0f, 0.7f, 1.0f, dg, nullptr, false);
  P.compare("distill_backward bf16 16x65 dlogits", dc, dg, 1e-2);
  sc.loss_scale = 1.0f;
  P.cpu.set_step_scalars(sc);
  P.gpu.set_step_scalars(sc);
}

}  // namespace

int main() {
  std::unique_ptr<Backend> gpu = cuda_or_skip();
  if (!gpu) return 77;
  CpuBackend cpu;
  Pair P{cpu, *gpu};
  const std::pair<const char*, void (*)(Pair&)> suites[] = {{"fake_quantize", fake_quantize_tests},
                                                           {"quantize_i8", quantize_i8_tests},
                                                           {"gemm_i8", gemm_i8_tests},
                                                           {"int8_linear", int8_linear_tests},
                                                           {"distill_backward", distill_tests}};
  for (const auto& [name, fn] : suites) {
    try {
      fn(P);
    } catch (const std::exception& e) {
      std::printf("FAIL: %s: exception: %s\n", name, e.what());
      ++g_fail;
    }
  }
  return finish();
}
