// The character transformer on CUDA against the CPU reference (issue 4). Qt-free; exits 77
// (skipped) where no CUDA device is usable.
//   1. per operation, every precision: embedding forward/backward, LayerNorm forward/backward
//      (residual add fused, parameter gradients accumulated or not), add, GELU, dropout (the
//      same mask as the CPU: exact in fp32), on a vector-friendly width (384) and an odd one (50);
//      the column reductions give bit-identical results when repeated; LayerNorm on 2048-wide rows;
//   2. the large products that go to cuBLASLt: gemm (all transposes, beta), linear forward with
//      and without bias, linear backward (accumulate or not, with and without dx);
//   3. a small CharGpt (2 layers, 2 heads, dim 64, context 32, batch 4, vocabulary 65) through
//      TrainingStep: loss and every parameter gradient after one step per precision; on the GPU,
//      checkpointing every block and selective give bit-identical gradients to none; three AdamW
//      steps (captured as a CUDA graph from the second) move the parameters as the CPU does; with
//      dropout 0.1 (fp32) the same masks as the CPU, and steps run eagerly (seeds change per step).
// Error measure and per-op tolerances: parity_support.h (max |cuda - cpu| / max |cpu|).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu_backend.h"
#include "nn/transformer.h"
#include "optim/optimizer.h"
#include "parity_support.h"
#include "train/training_step.h"
#include "util/error.h"

using namespace trainlab;

namespace {
using namespace trainlab::parity;

std::vector<uint8_t> bytes_of(Backend& be, const Tensor& t) {
  std::vector<uint8_t> b(t.bytes());
  be.download(t, b.data(), t.dtype());
  return b;
}

std::pair<Tensor, Tensor> indices(Pair& P, const std::vector<int32_t>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  Tensor a = P.cpu.empty({n}, DType::I32, MemCategory::Workspace), b = P.gpu.empty({n}, DType::I32, MemCategory::Workspace);
  P.cpu.upload(a, v.data(), DType::I32);
  P.gpu.upload(b, v.data(), DType::I32);
  return {a, b};
}

void op_tests(Pair& P, const Prec& pr, int64_t D) {
  const std::string tag = std::string("[") + pr.name + " d=" + std::to_string(D) + "] ";
  const DType dt = pr.dt;
  const int64_t V = 65, T = 24, B = 40, N = B * T;  // N = 960 rows: several reduction segments
  // embedding
  {
    std::vector<int32_t> ix(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) ix[static_cast<size_t>(i)] = static_cast<int32_t>((i * i * 7 + i * 3) % V);
    auto [i0, i1] = indices(P, ix);
    auto [tok0, tok1] = P.rand({V, D}, dt);
    auto [pos0, pos1] = P.rand({T + 8, D}, dt);
    auto [o0, o1] = P.zeros({N, D}, dt);
    P.cpu.embedding_forward(tok0, pos0, i0, T, o0);
    P.gpu.embedding_forward(tok1, pos1, i1, T, o1);
    P.compare(tag + "embedding_forward", o0, o1, dt == DType::F32 ? 0.0 : pr.tol);
    auto [g0, g1] = P.rand({N, D}, dt);
    for (int acc = 0; acc < 2; ++acc) {
      auto [dt0, dt1] = P.rand({V, D}, dt);
      auto [dp0, dp1] = P.rand({T + 8, D}, dt);
      P.cpu.embedding_backward(g0, i0, T, dt0, dp0, acc);
      P.gpu.embedding_backward(g1, i1, T, dt1, dp1, acc);
      const std::string a = acc ? " accumulate" : "";
      P.compare(tag + "embedding_backward dtok" + a, dt0, dt1, pr.tol);
      P.compare(tag + "embedding_backward dpos" + a, dp0, dp1, pr.tol);
      if (acc == 0) {  // deterministic: the same call again gives the same bits
        const auto first = bytes_of(P.gpu, dt1);
        P.gpu.embedding_backward(g1, i1, T, dt1, dp1, false);
        check(tag + "embedding_backward repeats bit-identically", first == bytes_of(P.gpu, dt1) ? 0.0 : 1.0, 0.0);
      }
    }
  }
  // LayerNorm (inputs with an offset, as a residual stream has)
  {
    auto [x0, x1] = P.rand({N, D}, dt, 2.0f);
    auto [ga0, ga1] = P.rand({D}, dt, 1.0f, true);
    auto [be0, be1] = P.rand({D}, dt, 0.5f);
    auto [y0, y1] = P.zeros({N, D}, dt);
    auto [m0, m1] = P.zeros({N}, DType::F32);
    auto [r0, r1] = P.zeros({N}, DType::F32);
    P.cpu.layernorm_forward(x0, ga0, be0, 1e-5f, y0, m0, r0);
    P.gpu.layernorm_forward(x1, ga1, be1, 1e-5f, y1, m1, r1);
    P.compare(tag + "layernorm_forward y", y0, y1, pr.tol);
    P.compare(tag + "layernorm_forward mean", m0, m1, 1e-5);
    P.compare(tag + "layernorm_forward rstd", r0, r1, 1e-5);
    auto [dy0, dy1] = P.rand({N, D}, dt);
    for (int mode = 0; mode < 3; ++mode) {
      const bool acc_dx = mode >= 1, acc_p = mode == 2;
      auto [dx0, dx1] = P.rand({N, D}, dt);
      auto [dg0, dg1] = P.rand({D}, dt);
      auto [db0, db1] = P.rand({D}, dt);
      P.cpu.layernorm_backward(x0, ga0, m0, r0, dy0, dx0, dg0, db0, acc_dx, acc_p);
      P.gpu.layernorm_backward(x1, ga1, m1, r1, dy1, dx1, dg1, db1, acc_dx, acc_p);
      const std::string w = std::string(acc_dx ? " +=dx" : "") + (acc_p ? " +=params" : "");
      P.compare(tag + "layernorm_backward dx" + w, dx0, dx1, pr.tol);
      P.compare(tag + "layernorm_backward dgamma" + w, dg0, dg1, pr.tol);
      P.compare(tag + "layernorm_backward dbeta" + w, db0, db1, pr.tol);
      if (mode == 0) {
        const auto first = bytes_of(P.gpu, dg1);
        P.gpu.layernorm_backward(x1, ga1, m1, r1, dy1, dx1, dg1, db1, false, false);
        check(tag + "layernorm_backward dgamma repeats bit-identically", first == bytes_of(P.gpu, dg1) ? 0.0 : 1.0, 0.0);
      }
      // The column sums of dx as stored (a linear layer's bias gradient), accumulated as the parameters.
      auto [s0, s1] = P.rand({D}, dt);
      P.cpu.layernorm_backward(x0, ga0, m0, r0, dy0, dx0, dg0, db0, acc_dx, acc_p, &s0);
      P.gpu.layernorm_backward(x1, ga1, m1, r1, dy1, dx1, dg1, db1, acc_dx, acc_p, &s1);
      P.compare(tag + "layernorm_backward dx column sums" + w, s0, s1, pr.tol);
      P.compare(tag + "layernorm_backward dx (with its sums)" + w, dx0, dx1, pr.tol);
    }
  }
  // add, GELU, dropout (odd total sizes: the vector loop's scalar tail)
  {
    const int64_t n = N * D + 5;
    auto [a0, a1] = P.rand({n}, dt, 3.0f);
    auto [b0, b1] = P.rand({n}, dt);
    auto [o0, o1] = P.zeros({n}, dt);
    P.cpu.add(a0, b0, o0);
    P.gpu.add(a1, b1, o1);
    P.compare(tag + "add", o0, o1, dt == DType::F32 ? 0.0 : pr.tol);
    P.cpu.gelu_forward(a0, o0);
    P.gpu.gelu_forward(a1, o1);
    P.compare(tag + "gelu_forward", o0, o1, pr.tol);
    P.cpu.gelu_backward(a0, b0, o0);
    P.gpu.gelu_backward(a1, b1, o1);
    P.compare(tag + "gelu_backward", o0, o1, pr.tol);
    for (float p : {0.0f, 0.1f, 0.5f}) {
      P.cpu.dropout(a0, p, 1234567, o0);
      P.gpu.dropout(a1, p, 1234567, o1);
      P.compare(tag + "dropout p=" + std::to_string(p).substr(0, 3), o0, o1, 0.0);  // same mask, same product
      if (p == 0.5f) {
        const auto v = host(P.gpu, o1), x = host(P.gpu, a1);
        int64_t dropped = 0, nonzero = 0;
        for (size_t i = 0; i < v.size(); ++i) nonzero += x[i] != 0.0f, dropped += x[i] != 0.0f && v[i] == 0.0f;
        const double rate = static_cast<double>(dropped) / static_cast<double>(nonzero);
        check(tag + "dropout p=0.5 drops about half", std::fabs(rate - 0.5), 0.01);
      }
    }
    P.gpu.dropout(a1, 0.3f, 99, o1);  // out of place, then in place on a copy: the same mask
    auto [c0, c1] = P.zeros({n}, dt);
    P.gpu.copy(a1, c1);
    P.gpu.dropout(c1, 0.3f, 99, c1);
    // Both tensors live on the GPU: download both through it.
    check(tag + "dropout in place = out of place (same seed)", rel_err(host(P.gpu, c1), host(P.gpu, o1)), 0.0);
  }
}

// LayerNorm on rows wider than a lane keeps in registers (2048 columns: the kernels re-read the
// vectors past the cached ones; the backward's block has fewer warps and more than 48 KiB of
// shared memory), 300 rows (several reduction segments, the last one short).
void layernorm_wide(Pair& P, const Prec& pr) {
  const std::string tag = std::string("[") + pr.name + " d=2048] ";
  const DType dt = pr.dt;
  const int64_t N = 300, D = 2048;
  auto [x0, x1] = P.rand({N, D}, dt, 2.0f);
  auto [ga0, ga1] = P.rand({D}, dt, 1.0f, true);
  auto [be0, be1] = P.rand({D}, dt, 0.5f);
  auto [y0, y1] = P.zeros({N, D}, dt);
  auto [m0, m1] = P.zeros({N}, DType::F32);
  auto [r0, r1] = P.zeros({N}, DType::F32);
  P.cpu.layernorm_forward(x0, ga0, be0, 1e-5f, y0, m0, r0);
  P.gpu.layernorm_forward(x1, ga1, be1, 1e-5f, y1, m1, r1);
  P.compare(tag + "layernorm_forward y", y0, y1, pr.tol);
  P.compare(tag + "layernorm_forward rstd", r0, r1, 1e-5);
  auto [dy0, dy1] = P.rand({N, D}, dt);
  auto [dx0, dx1] = P.rand({N, D}, dt);
  auto [dg0, dg1] = P.rand({D}, dt);
  auto [db0, db1] = P.rand({D}, dt);
  P.cpu.layernorm_backward(x0, ga0, m0, r0, dy0, dx0, dg0, db0, true, true);
  P.gpu.layernorm_backward(x1, ga1, m1, r1, dy1, dx1, dg1, db1, true, true);
  P.compare(tag + "layernorm_backward dx +=dx +=params", dx0, dx1, pr.tol);
  P.compare(tag + "layernorm_backward dgamma +=dx +=params", dg0, dg1, pr.tol);
  P.compare(tag + "layernorm_backward dbeta +=dx +=params", db0, db1, pr.tol);
  auto [s0, s1] = P.rand({D}, dt);
  P.cpu.layernorm_backward(x0, ga0, m0, r0, dy0, dx0, dg0, db0, true, false, &s0);
  P.gpu.layernorm_backward(x1, ga1, m1, r1, dy1, dx1, dg1, db1, true, false, &s1);
  P.compare(tag + "layernorm_backward dx column sums +=dx", s0, s1, pr.tol);
}

// Fused softmax + cross-entropy over the character model's many rows (B*T of them, over the
// multi-block path: block sums added in block order), stats accumulated or not.
void softmax_many_rows(Pair& P, const Prec& pr) {
  const std::string tag = std::string("[") + pr.name + "] ";
  const int64_t b = 5000, c = 65;
  auto [z0, z1] = P.rand({b, c}, pr.dt, 4.0f);
  std::vector<int32_t> lab(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) lab[static_cast<size_t>(i)] = static_cast<int32_t>((i * 11) % c);
  auto [l0, l1] = indices(P, lab);
  auto [d0, d1] = P.zeros({b, c}, pr.dt);
  auto [s0, s1] = P.zeros({2}, DType::F32);
  StepScalars sc;
  P.cpu.set_step_scalars(sc);
  P.gpu.set_step_scalars(sc);
  P.cpu.softmax_xent(z0, l0, &d0, 1.0f / b, s0, false);
  P.gpu.softmax_xent(z1, l1, &d1, 1.0f / b, s1, false);
  P.compare(tag + "softmax_xent 5000 x 65 dlogits", d0, d1, pr.tol);
  P.compare(tag + "softmax_xent 5000 x 65 stats", s0, s1, 1e-5);
  P.cpu.softmax_xent(z0, l0, nullptr, 1.0f, s0, true);
  P.gpu.softmax_xent(z1, l1, nullptr, 1.0f, s1, true);
  P.compare(tag + "softmax_xent 5000 x 65 stats (accumulated)", s0, s1, 1e-5);
}

// The products the backend sends to cuBLASLt (m * n * k >= 2^24).
void large_product_tests(Pair& P, const Prec& pr) {
  const MatmulMode mm = pr.mode();
  const std::string tag = std::string("[") + pr.name + " large] ";
  const DType dt = pr.dt;
  // tf32: cuBLASLt's tensor-core kernels may truncate fp32 inputs to tf32 where the CPU reference
  // rounds them to nearest (both within 2^-10 relative per operand, the truncation biased), so the
  // two differ by up to about 1e-3 of the largest output: 2e-3 here.
  const double tol = pr.tf32 ? 2e-3 : pr.tol;
  gemm_cases(P, tag, "gemm 512x1152x384", dt, 512, 1152, 384, tol, mm);
  {
    const int64_t m = 1024, k = 384, n = 1536;  // fc-like: [1024 x 384] x [384 x 1536]
    auto [x0, x1] = P.rand({m, k}, dt);
    auto [w0, w1] = P.rand({n, k}, dt, 0.05f);
    auto [b0, b1] = P.rand({n}, dt, 0.1f);
    for (int with_bias = 0; with_bias < 2; ++with_bias) {
      auto [y0, y1] = P.zeros({m, n}, dt);
      P.cpu.linear_forward(x0, w0, with_bias ? &b0 : nullptr, Activation::None, y0, nullptr, mm);
      P.gpu.linear_forward(x1, w1, with_bias ? &b1 : nullptr, Activation::None, y1, nullptr, mm);
      P.compare(tag + "linear_forward 1024x384 -> 1536" + (with_bias ? " bias" : ""), y0, y1, tol);
      // The residual in the epilogue (cuBLASLt's C, D != C), then in place (residual = y).
      auto [r0, r1] = P.rand({m, n}, dt, 2.0f);
      P.cpu.linear_forward_residual(x0, w0, with_bias ? &b0 : nullptr, r0, y0, mm);
      P.gpu.linear_forward_residual(x1, w1, with_bias ? &b1 : nullptr, r1, y1, mm);
      P.compare(tag + "linear_forward_residual 1024x384 -> 1536" + (with_bias ? " bias" : ""), y0, y1, tol);
      P.cpu.linear_forward_residual(x0, w0, with_bias ? &b0 : nullptr, y0, y0, mm);
      P.gpu.linear_forward_residual(x1, w1, with_bias ? &b1 : nullptr, y1, y1, mm);
      P.compare(tag + "linear_forward_residual in place" + (with_bias ? " bias" : ""), y0, y1, 2 * tol);
    }
    for (int variant = 0; variant < 3; ++variant) {
      const bool accumulate = variant == 1, with_dx = variant != 2;
      auto [dy0, dy1] = P.rand({m, n}, dt);
      auto [dw0, dw1] = P.rand({n, k}, dt, 0.1f);
      auto [db0, db1] = P.rand({n}, dt, 0.1f);
      auto [dx0, dx1] = P.zeros({m, k}, dt);
      P.cpu.linear_backward(x0, w0, dy0, Activation::None, nullptr, dw0, &db0, with_dx ? &dx0 : nullptr, accumulate, mm);
      P.gpu.linear_backward(x1, w1, dy1, Activation::None, nullptr, dw1, &db1, with_dx ? &dx1 : nullptr, accumulate, mm);
      const std::string w = accumulate ? " accumulate" : with_dx ? "" : " (no dx)";
      P.compare(tag + "linear_backward dw" + w, dw0, dw1, tol);
      P.compare(tag + "linear_backward dbias" + w, db0, db1, tol);
      if (with_dx) P.compare(tag + "linear_backward dx" + w, dx0, dx1, tol);
    }
  }
  {
    // The head of the character model: 65 output columns (rows of 130 bytes in 16-bit formats, so
    // cuBLASLt must be asked for algorithms of a smaller alignment), no bias.
    const int64_t m = 2048, k = 384, n = 65;
    auto [x0, x1] = P.rand({m, k}, dt);
    auto [w0, w1] = P.rand({n, k}, dt, 0.05f);
    auto [y0, y1] = P.zeros({m, n}, dt);
    P.cpu.linear_forward(x0, w0, nullptr, Activation::None, y0, nullptr, mm);
    P.gpu.linear_forward(x1, w1, nullptr, Activation::None, y1, nullptr, mm);
    P.compare(tag + "linear_forward 2048x384 -> 65 (head)", y0, y1, tol);
    auto [dy0, dy1] = P.rand({m, n}, dt);
    auto [dw0, dw1] = P.zeros({n, k}, dt);
    auto [dx0, dx1] = P.zeros({m, k}, dt);
    P.cpu.linear_backward(x0, w0, dy0, Activation::None, nullptr, dw0, nullptr, &dx0, false, mm);
    P.gpu.linear_backward(x1, w1, dy1, Activation::None, nullptr, dw1, nullptr, &dx1, false, mm);
    P.compare(tag + "linear_backward dw (head)", dw0, dw1, tol);
    P.compare(tag + "linear_backward dx (head)", dx0, dx1, tol);
  }
}

// --- the whole model ---------------------------------------------------------------------------
constexpr int64_t kB = 4, kT = 32;

CharGptConfig model_cfg(double dropout = 0.0) {
  CharGptConfig c;
  c.vocab = 65;
  c.layers = 2, c.heads = 2, c.dim = 64, c.context = 32;
  c.dropout = dropout;
  return c;
}

std::vector<int32_t> corpus() {
  std::mt19937 g(3);
  std::vector<int32_t> v(4000);
  for (auto& x : v) x = static_cast<int32_t>(g() % 65);
  return v;
}

struct ModelResult {
  double loss = 0;
  std::vector<std::vector<float>> grads, params, init;
  std::vector<std::vector<uint8_t>> grad_bytes;
};

// One forward/backward (steps == 0) or `steps` AdamW steps through run_step (captured on the GPU
// from the second step).
ModelResult run_model(Backend& be, DType dt, bool tf32, CheckpointPolicy policy, int steps, double dropout = 0.0) {
  const auto data = corpus();
  Tensor toks = be.empty({static_cast<int64_t>(data.size())}, DType::I32, MemCategory::Workspace);
  be.upload(toks, data.data(), DType::I32);
  CharGpt model(be, model_cfg(dropout), 21);
  model.set_compute_dtype(be, dt);
  model.set_matmul_mode(tf32 ? MatmulMode::Tf32 : MatmulMode::Native);
  model.set_checkpointing(policy, 1);
  AdamW opt(AdamWHyper{});
  TrainingStep step(be, model, opt, toks, kB, kT, 1);
  ModelResult r;
  for (Parameter* p : model.parameters()) r.init.push_back(host(be, p->master));
  auto set_batch = [&](int t) {
    std::vector<int32_t> idx;
    for (int64_t b = 0; b < kB; ++b)
      for (int64_t i = 0; i < kT; ++i) idx.push_back(static_cast<int32_t>((t * 577 + b * 911) % 3900 + i));
    step.set_indices(idx);
  };
  if (steps == 0) {
    set_batch(0);
    step.forward_backward();
    float st[2];
    be.download(step.stats(), st, DType::F32);
    r.loss = st[0];
    for (Parameter* p : model.parameters()) {
      r.grads.push_back(host(be, p->grad));
      r.grad_bytes.push_back(bytes_of(be, p->grad));
    }
  } else {
    for (int t = 0; t < steps; ++t) {
      set_batch(t);
      StepScalars sc;
      sc.lr = 1e-3f * (1.0f + 0.5f * t);
      sc.step = static_cast<float>(t + 1);
      be.set_step_scalars(sc);
      be.run_step("char_parity", [&] { step.full_step(); });
    }
    for (Parameter* p : model.parameters()) r.params.push_back(host(be, p->master));
    be.invalidate_captures();
  }
  return r;
}

void model_tests(Pair& P, const Prec& pr, double grad_tol, double dropout = 0.0) {
  const std::string tag = std::string("[") + pr.name + " char-gpt" + (dropout > 0 ? " dropout 0.1" : "") + "] ";
  const ModelResult c = run_model(P.cpu, pr.dt, pr.tf32, CheckpointPolicy::Off, 0, dropout);
  const ModelResult g = run_model(P.gpu, pr.dt, pr.tf32, CheckpointPolicy::Off, 0, dropout);
  const double loss_tol = pr.dt != DType::F32 ? 1e-2 : pr.tf32 ? 1e-3 : 1e-5;
  check(tag + "loss after one step", std::fabs(g.loss - c.loss) / std::fabs(c.loss), loss_tol);
  CharGpt names(P.cpu, model_cfg(), 21);
  const auto params = names.parameters();
  double worst = 0.0;
  std::string worst_name;
  for (size_t i = 0; i < c.grads.size(); ++i) {
    const double e = rel_err(g.grads[i], c.grads[i]);
    if (!(e <= worst)) worst = e, worst_name = params[i]->name;
  }
  check(tag + "every parameter gradient (worst: " + worst_name + ")", worst, grad_tol);
  // Checkpointing on the GPU: bit-identical gradients.
  for (CheckpointPolicy pol : {CheckpointPolicy::EveryBlock, CheckpointPolicy::Selective}) {
    const ModelResult k = run_model(P.gpu, pr.dt, pr.tf32, pol, 0, dropout);
    bool same = k.loss == g.loss && k.grad_bytes.size() == g.grad_bytes.size();
    for (size_t i = 0; same && i < k.grad_bytes.size(); ++i) same = k.grad_bytes[i] == g.grad_bytes[i];
    check(tag + "checkpointing " + checkpoint_policy_name(pol) + " gives bit-identical gradients on CUDA", same ? 0.0 : 1.0,
          0.0);
  }
}

// Three AdamW steps: the relative error of the parameters' change over all parameters together,
// ||w_cuda - w_cpu|| / ||w_cpu - w_init|| (the worst single tensor is printed for information).
// Left out: the key third of each qkv bias. Its exact gradient is zero (softmax ignores a constant
// added to one query's scores), so the computed one is rounding noise, which Adam normalises into
// steps of +-lr with the noise's sign: different on two devices by design, not by error.
void adamw_tests(Pair& P, const Prec& pr, double tol, double dropout = 0.0) {
  const ModelResult c = run_model(P.cpu, pr.dt, pr.tf32, CheckpointPolicy::Off, 3, dropout);
  const ModelResult g = run_model(P.gpu, pr.dt, pr.tf32, CheckpointPolicy::Off, 3, dropout);
  CharGpt names(P.cpu, model_cfg(), 21);
  const auto params = names.parameters();
  const int64_t D = model_cfg().dim;
  double num_all = 0.0, den_all = 0.0, worst = 0.0;
  std::string worst_name;
  for (size_t i = 0; i < c.params.size(); ++i) {
    const std::string& name = params[i]->name;
    const bool qkv_bias = name.size() > 8 && name.compare(name.size() - 8, 8, "qkv.bias") == 0;
    double num = 0.0, den = 0.0;
    for (size_t j = 0; j < c.params[i].size(); ++j) {
      if (qkv_bias && static_cast<int64_t>(j) >= D && static_cast<int64_t>(j) < 2 * D) continue;
      const double d = static_cast<double>(g.params[i][j]) - c.params[i][j];
      const double u = static_cast<double>(c.params[i][j]) - c.init[i][j];
      num += d * d;
      den += u * u;
    }
    num_all += num;
    den_all += den;
    const double e = std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-30)) : INFINITY;
    if (!(e <= worst)) worst = e, worst_name = name;
  }
  std::printf("     (worst single tensor: %s, %.3g)\n", worst_name.c_str(), worst);
  const double err = std::isfinite(num_all) ? std::sqrt(num_all / std::max(den_all, 1e-30)) : INFINITY;
  check(std::string("[") + pr.name + " char-gpt" + (dropout > 0 ? " dropout 0.1] 3 AdamW steps (eager: per-step masks)"
                                                                 : "] 3 AdamW steps (graph replay)") +
            ": parameter change",
        err, tol);
}
}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // every line reaches the log even if the process dies
  std::unique_ptr<Backend> gpu = cuda_or_skip();
  if (!gpu) return 77;
  CpuBackend cpu;
  Pair P{cpu, *gpu};
  auto guarded = [](const char* what, auto&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      std::printf("FAIL: %s: exception: %s\n", what, e.what());
      ++g_fail;
    }
  };
  for (const auto& pr : kPrecisions) {
    guarded("operations", [&] {
      op_tests(P, pr, 384);
      op_tests(P, pr, 50);
      layernorm_wide(P, pr);
    });
    guarded("large products", [&] { large_product_tests(P, pr); });
    guarded("softmax_xent, many rows", [&] { softmax_many_rows(P, pr); });
  }
  // Whole-model tolerances: gradients pass through ~20 operations; fp32 1e-4, tf32 and the 16-bit
  // formats 5e-2 (a rounding flip in one product moves a 16-bit gradient by one unit). AdamW's
  // parameter change as in test_cuda_parity: fp32 1e-3, others 5e-2.
  const double grad_tol[] = {1e-4, 5e-2, 5e-2, 5e-2};
  const double adam_tol[] = {1e-3, 5e-2, 5e-2, 5e-2};
  for (size_t i = 0; i < std::size(kPrecisions); ++i) {
    guarded("char-gpt gradients", [&] { model_tests(P, kPrecisions[i], grad_tol[i]); });
    guarded("char-gpt AdamW", [&] { adamw_tests(P, kPrecisions[i], adam_tol[i]); });
  }
  // Dropout: the GPU draws the CPU's masks from the same per-forward seeds, and run_step does not
  // capture (freeze) them: gradients and three steps match as without dropout.
  guarded("char-gpt dropout gradients", [&] { model_tests(P, kPrecisions[0], grad_tol[0], 0.1); });
  guarded("char-gpt dropout AdamW", [&] { adamw_tests(P, kPrecisions[0], adam_tol[0], 0.1); });
  return finish();
}
