// checkpointing: a stack of residual MLP blocks x + Linear(4d, d)(GELU(Linear(d, 4d)(x))), loss
// mean(x_L^2), one forward and backward in fp32 on the CPU backend, run twice:
//   full        every layer keeps what its backward reads (nn/linear.h: its output buffer, GELU's
//               pre-activation, the input handle) until the backward has passed it;
//   checkpoint  after each block's forward its layers' buffers are released and only the block's
//               input (and the last block's output, which the loss needs) is kept; the backward
//               runs each block's forward again just before that block's backward.
// The bytes are the MemoryLedger's Activations category of a fresh backend, so they are what the
// layers really allocated. The lab's own checkpointing (nn/transformer.h, CheckpointPolicy) is
// built into the character transformer; these blocks are made of nn's Linear layers, so the lesson
// does the recomputation itself with the same calls.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "lessons/lesson.h"
#include "nn/linear.h"

namespace trainlab {

namespace {

struct Block {
  std::unique_ptr<Linear> fc1, fc2;  // d -> 4d with GELU, 4d -> d
};

struct Run {
  int64_t kept_bytes = 0;  // Activations after the forward, before the loss's gradient
  int64_t peak_bytes = 0;  // the ledger's peak over forward and backward
  double loss = 0.0;
  double recompute_flops = 0.0;
  std::vector<float> grads;  // every parameter's gradient, in block order
  LessonSeries timeline;     // Activations (MiB) after each block's forward and backward
};

constexpr double kMiB = 1024.0 * 1024.0;

std::vector<Block> make_blocks(Backend& be, int64_t blocks, int64_t d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Block> out;
  for (int64_t l = 0; l < blocks; ++l) {
    Block b;
    b.fc1 = std::make_unique<Linear>(be, d, 4 * d, Activation::GELU, true, rng);
    b.fc2 = std::make_unique<Linear>(be, 4 * d, d, Activation::None, true, rng);
    out.push_back(std::move(b));
  }
  return out;
}

// x + fc2(fc1(x)) into a new activation tensor.
Tensor block_forward(Backend& be, Block& b, const Tensor& x) {
  Tensor h = b.fc1->forward(be, x, true);
  Tensor o = b.fc2->forward(be, h, true);
  Tensor out = be.empty(x.shape(), DType::F32, MemCategory::Activations);
  be.add(x, o, out);
  return out;
}

// dx_in = dx_out + (d fc1 o fc2)/dx, given dx_out (kept: linear_backward uses its dy as scratch).
Tensor block_backward(Backend& be, Block& b, const Tensor& dx_out) {
  Tensor dy = be.empty(dx_out.shape(), DType::F32, MemCategory::Activations);
  be.copy(dx_out, dy);
  Tensor dh = b.fc2->backward(be, dy, true, false);
  Tensor dx_branch = b.fc1->backward(be, dh, true, false);
  Tensor dx = be.empty(dx_out.shape(), DType::F32, MemCategory::Activations);
  be.add(dx_out, dx_branch, dx);
  return dx;
}

double block_forward_flops(int64_t batch, int64_t d) { return 2.0 * 2.0 * batch * d * 4.0 * d; }

Run run_blocks(int64_t blocks, int64_t d, int64_t batch, uint64_t seed, bool checkpoint) {
  auto be = create_backend("cpu");
  std::vector<Block> net = make_blocks(*be, blocks, d, seed);
  MemoryLedger& ledger = be->ledger();
  Run r;
  r.timeline.name = checkpoint ? "block inputs only" : "no checkpointing";
  auto mark = [&] {
    r.timeline.x.push_back(static_cast<double>(r.timeline.x.size()));
    r.timeline.y.push_back(ledger.current(MemCategory::Activations) / kMiB);
  };
  std::mt19937_64 rng(seed + 1);
  std::vector<float> x0(static_cast<size_t>(batch * d));
  for (auto& v : x0) v = static_cast<float>(lesson_normal(rng));
  std::vector<Tensor> xs{be->empty({batch, d}, DType::F32, MemCategory::Activations)};
  be->upload(xs[0], x0.data(), DType::F32);
  mark();
  for (auto& b : net) {
    xs.push_back(block_forward(*be, b, xs.back()));
    if (checkpoint) b.fc1->release_buffers(), b.fc2->release_buffers();
    mark();
  }
  r.kept_bytes = ledger.current(MemCategory::Activations);
  // loss = mean(x_L^2), dloss/dx_L = 2 x_L / numel (on the host: the backend has no such op).
  std::vector<float> out(x0.size());
  be->download(xs.back(), out.data(), DType::F32);
  double sum = 0.0;
  for (float v : out) sum += static_cast<double>(v) * v;
  r.loss = sum / static_cast<double>(out.size());
  for (auto& v : out) v = 2.0f * v / static_cast<float>(out.size());
  Tensor dx = be->empty({batch, d}, DType::F32, MemCategory::Activations);
  be->upload(dx, out.data(), DType::F32);
  for (int64_t l = blocks - 1; l >= 0; --l) {
    Block& b = net[static_cast<size_t>(l)];
    xs.pop_back();  // x_{l+1}: read by no backward
    if (checkpoint) {
      block_forward(*be, b, xs.back());  // the recomputation; its output equals x_{l+1} and is dropped
      r.recompute_flops += block_forward_flops(batch, d);
    }
    dx = block_backward(*be, b, dx);
    b.fc1->release_buffers();
    b.fc2->release_buffers();
    mark();
  }
  r.peak_bytes = ledger.peak(MemCategory::Activations);
  for (auto& b : net)
    for (Linear* layer : {b.fc1.get(), b.fc2.get()})
      for (Parameter* p : layer->parameters()) {
        std::vector<float> g(static_cast<size_t>(p->numel()));
        be->download(p->grad, g.data(), DType::F32);
        r.grads.insert(r.grads.end(), g.begin(), g.end());
      }
  return r;
}

LessonResult compute_checkpointing(const LessonValues& in) {
  const auto blocks = static_cast<int64_t>(in.at("blocks"));
  const auto d = static_cast<int64_t>(in.at("d"));
  const auto batch = static_cast<int64_t>(in.at("batch"));
  const auto seed = static_cast<uint64_t>(in.at("seed"));
  const Run full = run_blocks(blocks, d, batch, seed, false);
  const Run ckpt = run_blocks(blocks, d, batch, seed, true);
  double max_diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < full.grads.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(full.grads[i] - ckpt.grads[i])));
    norm += static_cast<double>(full.grads[i]) * full.grads[i];
  }
  // A step without checkpointing: forward + backward (two products per forward product) = 3 forwards.
  const double step_flops = 3.0 * blocks * block_forward_flops(batch, d);
  LessonResult r;
  r.figures = {
      {"full.kept_bytes", "no checkpointing: activation bytes kept for backward", static_cast<double>(full.kept_bytes)},
      {"ckpt.kept_bytes", "block inputs only: activation bytes kept for backward", static_cast<double>(ckpt.kept_bytes)},
      {"kept_ratio", "kept bytes, block inputs only / none", static_cast<double>(ckpt.kept_bytes) / full.kept_bytes},
      {"full.peak_bytes", "no checkpointing: peak activation bytes of the step", static_cast<double>(full.peak_bytes)},
      {"ckpt.peak_bytes", "block inputs only: peak activation bytes of the step", static_cast<double>(ckpt.peak_bytes)},
      {"loss", "loss mean(x^2)", full.loss},
      {"grad_norm", "gradient norm (no checkpointing)", std::sqrt(norm)},
      {"grad_max_abs_diff", "max |gradient difference| between the two", max_diff},
      {"step_flops", "FLOPs of a step without checkpointing (matrix products)", step_flops},
      {"recompute_flops", "extra FLOPs of the recomputation", ckpt.recompute_flops},
      {"recompute_fraction", "extra FLOPs / step FLOPs", ckpt.recompute_flops / step_flops},
  };
  r.plot = {"Activation bytes through the step (forward, then backward)", "after block (forward, then backward)",
            "activations (MiB)", false, false, {full.timeline, ckpt.timeline}};
  return r;
}

}  // namespace

Lesson checkpointing_lesson() {
  Lesson l;
  l.name = "checkpointing";
  l.title = "Activation checkpointing";
  l.text =
      "A stack of residual MLP blocks x + Linear(4d, d)(GELU(Linear(d, 4d)(x))) with loss mean(x^2), one fp32 "
      "step on the CPU. Without checkpointing every layer keeps its activations until its backward; keeping "
      "only each block's input and running the block's forward again during backward keeps far fewer bytes, "
      "gives the same gradients bit for bit, and costs one more forward (a third more FLOPs).";
  l.inputs = {{"blocks", "blocks", "residual MLP blocks", 8, 1, 16, true},
              {"d", "width d", "the model width (the hidden layer is 4d)", 256, 4, 512, true},
              {"batch", "batch", "rows of the batch", 64, 1, 128, true},
              {"seed", "seed", "weights and input", 1, 0, 1e9, true}};
  l.compute = compute_checkpointing;
  return l;
}

}  // namespace trainlab
