// CUDA against the CPU reference for the lean optimizers (optim/lean_optimizers.h): Lion (fp32 and
// bf16 momentum), 8-bit AdamW (blocks of 2048 and 256) and Adafactor (plain, beta1, relative step),
// five steps over 30 parameters of uneven shapes (matrices and vectors; two multi-tensor tables,
// partial last blocks), in fp32 and with bf16 weights and gradients.
// What must agree:
//   weights        relative error (max |cuda - cpu| / max |cpu|) <= 1e-5 (Lion fp32, adamw8bit
//                  absmax) or 1e-4 (adamw8bit weights, Lion bf16: a moment one code or one bf16
//                  step apart moves a weight by a fraction of lr); Lion's bf16 momentum 1e-2 (one
//                  bf16 step);
//   8-bit codes    within one quantization step (|code_cuda - code_cpu| <= 1): the block's absmax
//                  and the value divided by it may differ in the last bit (FMA contraction), which
//                  can move a value across the midpoint of two codes; the count of differing codes
//                  is printed. Identical codes are not required.
//   Adafactor      weights and state (row, column averages, v, m) 1e-5: its sums are float atomics
//                  on the GPU (another order) and double on the CPU.
// Qt-free; exits 77 (skipped) without a GPU.
#include <cstdio>

#include "nn/parameter.h"
#include "optim/lean_optimizers.h"
#include "parity_support.h"

using namespace trainlab;
using namespace trainlab::parity;

namespace {

struct Side {
  Backend& be;
  std::vector<Parameter> params;
  std::vector<Parameter*> list;
  std::unique_ptr<Optimizer> opt;
};

// Parameter i's shape: kShapes[i % 10] with i / 10 added to its first dimension.
Shape shape_of(int i) {
  static const Shape kShapes[] = {{3, 2053}, {256}, {7, 11}, {1}, {64, 64}, {300}, {2047}, {2049}, {513, 2}, {8, 8}};
  Shape s = kShapes[i % 10];
  s[0] += i / 10;
  return s;
}

Side make_side(Backend& be, const std::vector<std::vector<float>>& init, DType compute, const OptimizerOptions& o) {
  Side s{be, {}, {}, make_optimizer(o)};
  s.params.resize(init.size());
  for (size_t i = 0; i < init.size(); ++i) {
    Parameter& p = s.params[i];
    p.name = "p" + std::to_string(i);
    p.shape = shape_of(static_cast<int>(i));
    p.master = be.empty(p.shape, DType::F32, MemCategory::Weights);
    be.upload(p.master, init[i].data(), DType::F32);
    p.value = p.master;
    p.grad = be.empty(p.shape, DType::F32, MemCategory::Gradients);
    p.decay = i % 3 != 0;
    p.set_compute_dtype(be, compute);
  }
  for (Parameter& p : s.params) s.list.push_back(&p);
  return s;
}

std::vector<std::vector<float>> random_sets(std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<std::vector<float>> out;
  for (int i = 0; i < 30; ++i) {
    std::vector<float> v(static_cast<size_t>(shape_numel(shape_of(i))));
    for (float& x : v) x = u(rng);
    out.push_back(std::move(v));
  }
  return out;
}

void run_case(Pair& P, const std::string& tag, const OptimizerOptions& o, DType compute, double wtol) {
  std::mt19937 rng(7);
  const auto init = random_sets(rng, 1.0f);
  Side c = make_side(P.cpu, init, compute, o), g = make_side(P.gpu, init, compute, o);
  for (int t = 1; t <= 5; ++t) {
    const auto grads = random_sets(rng, 0.1f);
    for (size_t i = 0; i < grads.size(); ++i) {
      c.be.upload(c.params[i].grad, grads[i].data(), DType::F32);
      g.be.upload(g.params[i].grad, grads[i].data(), DType::F32);
    }
    StepScalars sc;
    sc.lr = 1e-3f;
    sc.step = static_cast<float>(t);
    c.be.set_step_scalars(sc);
    g.be.set_step_scalars(sc);
    c.opt->step(c.be, c.list);
    g.opt->step(g.be, g.list);
  }
  double werr = 0.0, verr = 0.0;
  for (size_t i = 0; i < c.params.size(); ++i) {
    werr = std::max(werr, rel_err(host(g.be, g.params[i].master), host(c.be, c.params[i].master)));
    verr = std::max(verr, rel_err(host(g.be, g.params[i].value), host(c.be, c.params[i].value)));
  }
  check(tag + " master weights", werr, wtol);
  check(tag + " compute copy", verr, compute == DType::F32 ? wtol : 1e-2);
  const auto sc = c.opt->save_state(c.be, c.list), sg = g.opt->save_state(g.be, g.list);
  for (const auto& [name, cv] : sc) {
    const std::vector<float>& gv = sg.at(name);
    if (name == "m_code" || name == "v_code") {
      double worst = 0.0;
      long differ = 0;
      for (size_t k = 0; k < cv.size(); ++k) {
        worst = std::max(worst, static_cast<double>(std::fabs(cv[k] - gv[k])));
        differ += cv[k] != gv[k];
      }
      std::printf("     %s %s: %ld of %zu codes differ\n", tag.c_str(), name.c_str(), differ, cv.size());
      check(tag + " " + name + " (codes apart)", worst, 1.0);
    } else {
      // Lion's bf16 momentum: an fp32 value one bit apart may round to the neighbouring bf16 value.
      const double tol = name != "m" ? 1e-5 : (o.lion_state == "bf16" ? 1e-2 : wtol);
      check(tag + " state " + name, rel_err(gv, cv), tol);
    }
  }
}

}  // namespace

int main() {
  std::unique_ptr<Backend> gpu = cuda_or_skip();
  if (!gpu) return 77;
  CpuBackend cpu;
  Pair P{cpu, *gpu};
  try {
    for (DType compute : {DType::F32, DType::BF16}) {
      const std::string fmt = compute == DType::F32 ? "fp32 " : "bf16 ";
      OptimizerOptions o;
      o.name = "lion";
      o.beta2 = 0.99;
      o.weight_decay = 0.1;
      run_case(P, fmt + "lion fp32-state", o, compute, 1e-5);
      o.lion_state = "bf16";
      run_case(P, fmt + "lion bf16-state", o, compute, 1e-4);
      o = OptimizerOptions{};
      o.name = "adamw8bit";
      for (long block : {2048L, 256L}) {
        o.block_size = block;
        run_case(P, fmt + "adamw8bit block " + std::to_string(block), o, compute, 1e-4);
      }
    }
    for (DType compute : {DType::F32, DType::BF16}) {
      const std::string fmt = compute == DType::F32 ? "fp32 " : "bf16 ";
      OptimizerOptions o;
      o.name = "adafactor";
      o.weight_decay = 0.1;
      run_case(P, fmt + "adafactor", o, compute, 1e-5);
      o.adafactor_beta1 = 0.9;
      run_case(P, fmt + "adafactor beta1", o, compute, 1e-5);
      o.adafactor_beta1 = 0.0;
      o.relative_step = true;
      run_case(P, fmt + "adafactor relative step", o, compute, 1e-5);
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    ++g_fail;
  }
  return finish();
}
